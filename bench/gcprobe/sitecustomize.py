"""Loaded by a server started with this directory on PYTHONPATH (`bench/tail.py`): records
every garbage collection's generation and pause, and how late a 1 ms timer on the event
loop fires (loop stalls), and writes them as JSON to $LOOM_GC_PROBE on SIGUSR2.
Measurement only; never part of a deployment."""

import gc
import json
import os
import signal
import time

_OUT = os.environ.get("LOOM_GC_PROBE")
if _OUT:
    pauses: list[tuple[int, float]] = []
    lags: list[float] = []
    _start = [0.0]

    def _gc(phase: str, info: dict) -> None:
        if phase == "start":
            _start[0] = time.perf_counter()
        else:
            pauses.append((info["generation"], time.perf_counter() - _start[0]))

    gc.callbacks.append(_gc)

    def _dump(*_: object) -> None:
        with open(_OUT + ".tmp", "w") as f:
            json.dump(
                {
                    "pauses": pauses,
                    "lags": lags,
                    "threshold": gc.get_threshold(),
                    "frozen": gc.get_freeze_count(),
                },
                f,
            )
        os.replace(_OUT + ".tmp", _OUT)  # whole, for the reader waiting for it
        pauses.clear()
        lags.clear()

    signal.signal(signal.SIGUSR2, _dump)

    import asyncio

    import uvicorn.server

    _orig_startup = uvicorn.server.Server.startup

    async def _startup(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        loop = asyncio.get_running_loop()

        def tick(expected: float) -> None:
            now = loop.time()
            lags.append(now - expected)
            loop.call_at(now + 0.001, tick, now + 0.001)

        loop.call_soon(tick, loop.time())
        return await _orig_startup(self, *args, **kwargs)

    uvicorn.server.Server.startup = _startup  # type: ignore[method-assign]
