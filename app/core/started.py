"""Where a started app keeps its state: `app.state.loom`, set by the lifespan (`app.main`).

`app.state.AppState` sits above every domain (it holds their hooks), so code in `app.core`
never imports it: a core dependency reads what it needs through `started_state` and a
protocol of its own (`app.core.db.get_db`); `app.state.app_state` is the typed accessor for
everything above core.
"""

from typing import Any

STATE_ATTR = "loom"


def started_state(app: Any) -> Any:
    """The state of a started app (its lifespan is running)."""
    state = getattr(app.state, STATE_ATTR, None)
    if state is None:
        raise RuntimeError("the app is not started (its lifespan has not run)")
    return state
