"""A LangGraph graph whose long-term memory is Loom's shared memory (`LoomStore`; no LLM key).

Each turn the graph stores what the user said under ("memories", user), searches the
user's memories for the words of the new message, and a stand-in model answers from what
it found. A real graph calls its model in `respond`; the store is the same.

    export LOOM_URL=http://127.0.0.1:8420 LOOM_KEY=<service key>
    .venv/bin/python examples/langgraph_store.py

Needs the client with its LangGraph extra: pip install -e "./clients/python[langgraph]"
(./scripts/test installs it).
"""

import os
import sys
from typing import Any, NoReturn, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from loom_client import BadRequest, Forbidden, LoomClient, LoomConnectionError, Unauthorized
from loom_client.adapters.langgraph import LoomStore

URL = os.environ.get("LOOM_URL", "http://127.0.0.1:8420")
KEY = os.environ.get("LOOM_KEY", "")
AGENT = "langgraph-example"
HOW_TO_GET_A_KEY = """\
Set LOOM_KEY to a service key of a tenant, e.g. (with ./scripts/serve running):

    export LOOM_KEY=$(.venv/bin/loom-memory create-key --role service --tenant-name demo \\
        | python3 -c 'import sys,json; print(json.load(sys.stdin)["secret"])')

(README, "Tenants and keys", makes one over HTTP.) LOOM_URL is {url}."""
TURNS = [
    ("ann", "I live in Lisbon and cycle to work"),
    ("ann", "My sister lives in Porto"),
    ("bob", "I cycle on weekends"),
    ("ann", "Where does my sister live?"),
    ("ann", "Do I cycle?"),
]


def fail(message: str) -> NoReturn:
    print(message, file=sys.stderr)
    sys.exit(2)


def check_setup(loom: LoomClient) -> None:
    """Exit 2 with what to do, not a traceback, when the key or the server is missing."""
    if not KEY:
        fail(HOW_TO_GET_A_KEY.format(url=URL))
    try:
        loom.list_sessions(limit=1)
    except LoomConnectionError as exc:
        fail(f"Cannot reach Loom Memory at {URL} ({exc}): start it with ./scripts/serve, "
             "or set LOOM_URL.")
    except (Unauthorized, Forbidden, BadRequest) as exc:  # 400: an admin key, no tenant
        fail(f"{URL} refused LOOM_KEY ({exc.status}: {exc.message})\n"
             + HOW_TO_GET_A_KEY.format(url=URL))


class Turn(TypedDict):
    user: str
    message: str
    n: int
    recalled: list[str]
    answer: str


def recall(state: Turn, runtime: Runtime) -> dict[str, Any]:
    """Search this user's memories for the message's words (before storing it)."""
    assert runtime.store is not None
    hits = runtime.store.search(("memories", state["user"]), query=state["message"], limit=3)
    return {"recalled": [f"{h.value['text']} ({h.score:.2f})" for h in hits]}


def remember(state: Turn, runtime: Runtime) -> dict[str, Any]:
    assert runtime.store is not None
    runtime.store.put(("memories", state["user"]), f"m{state['n']}",
                      {"text": state["message"], "turn": state["n"]})
    return {}


def respond(state: Turn) -> dict[str, Any]:
    """Stand-in for the model: answers from what recall found."""
    found = state["recalled"]
    return {"answer": f"I remember: {found[0]}" if found else "Noted."}


def build_graph(store: LoomStore) -> Any:
    builder = StateGraph(Turn)
    builder.add_node("recall", recall)
    builder.add_node("remember", remember)
    builder.add_node("respond", respond)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "remember")
    builder.add_edge("remember", "respond")
    builder.add_edge("respond", END)
    return builder.compile(store=store)


def main() -> None:
    with LoomClient(URL, KEY, agent_id=AGENT) as loom:
        check_setup(loom)
        store = LoomStore(loom)  # the tenant's `global` namespace, keys under langgraph/
        graph = build_graph(store)
        for n, (user, message) in enumerate(TURNS):
            out = graph.invoke({"user": user, "message": message, "n": n, "recalled": [],
                                "answer": ""})
            print(f"{user}: {message!r} -> {out['answer']}")
        print("namespaces:", store.list_namespaces(prefix=("memories",)))
        cyclists = store.search(("memories",), filter={"turn": {"$lte": 2}}, query="cycle")
        print("who cycles (turns 0-2):", [(h.namespace[-1], h.key) for h in cyclists])
        keys = [k.key for k in loom.iter_shared_memory_keys("global", prefix="langgraph/")]
        print(f"{len(keys)} entries in shared memory `global`: {keys}")


if __name__ == "__main__":
    main()
