"""Watch streams without HTTP: slow consumers are dropped with a final event."""

import asyncio
import json

from app.shared_memory.watch import Watcher, stream


def _event(i: int) -> dict:
    return {"op": "put", "ns": "global", "sk": f"k{i}", "v": i}


async def _never_disconnected() -> bool:
    return False


async def test_slow_consumer_is_dropped_with_a_final_event():
    w = Watcher("", maxsize=3)
    for i in range(10):
        w.offer(_event(i))  # never blocks the writer
    assert w.closed_reason == "slow_consumer"
    frames = [f async for f in stream(w, [], lambda e: b"x", 5, _never_disconnected)]
    assert frames[0].startswith(b"event: ready")
    last = frames[-1].decode()
    assert last.startswith("event: dropped")
    assert json.loads(last.split("data: ", 1)[1])["reason"] == "slow_consumer"
    assert len(frames) == 2  # the backlog is discarded, the final event gets through


async def test_heartbeats_and_events_flow():
    w = Watcher("", maxsize=10)
    out = []

    async def consume():
        async for f in stream(
            w, [b"initial\n\n"], lambda e: json.dumps(e).encode(), 0.05, _never_disconnected
        ):
            out.append(f)
            if len(out) == 5:
                w.close("shutdown")

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.12)
    w.offer(_event(1))
    await asyncio.wait_for(task, 5)
    assert out[1] == b"initial\n\n"
    assert any(f.startswith(b"event: heartbeat") for f in out)
    assert out[-1].startswith(b"event: closed")
