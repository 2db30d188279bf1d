"""In-process timings of the per-request costs issue 29 names, for one source tree.

    .venv/bin/python -m bench.micro                    # this tree
    cd /path/to/other/checkout && /this/.venv/bin/python -m bench.micro   # another one

No server, no database: each figure calls the code directly, best of 5 repetitions, in
CPU microseconds of the process (so a busy machine slows it less than wall time would):

* `healthz_stack`: `GET /healthz` through the whole ASGI app (every middleware: request id,
  metrics, limits; FastAPI routing), with and without a multi-process metrics directory
  (as `serve` runs it), next to a bare FastAPI app with the same route (item 1);
* `append_count_20`: the text and token count of a batch of 20 messages of 150 words, as
  the append computes them (item 4);
* `json_decode_57k`: the hot paths' JSON decoding of a 57 KiB L1 (non-ASCII text), from the
  bytes PostgreSQL sends: before, asyncpg's UTF-8 decoding to a str then `pg.loads`; after,
  `pg.loads` on the bytes (item 5).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import tempfile
import time
import timeit
from typing import Any

WORDS = (
    "the otter swam upstream past the old mill and the café near bridge 17 where "
    "naïve herons über alles wait for 2024 fish"
).split()


def best(fn: Any, number: int) -> float:
    # CPU time of this process, not wall time: on a busy machine a process waiting for a
    # core would count the wait
    return min(timeit.repeat(fn, number=number, repeat=5, timer=time.process_time)) / number * 1e6


def healthz(multiprocess: bool) -> dict[str, float]:
    from fastapi import FastAPI

    from app.core.config import Settings
    from app.main import create_app

    app = create_app(
        Settings(DATABASE_URL="postgresql://x@127.0.0.1:1/x", REDIS_URL="redis://127.0.0.1:1/0")
    )
    bare = FastAPI()

    @bare.get("/healthz")
    async def ok() -> dict[str, str]:
        return {"status": "ok"}

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/healthz",
        "raw_path": b"/healthz",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"t")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(_: dict[str, Any]) -> None:
        return None

    loop = asyncio.new_event_loop()

    def call(target: Any) -> Any:
        return lambda: loop.run_until_complete(target(dict(scope), receive, send))

    for _ in range(200):
        call(app)()
        call(bare)()
    out = {"stack": best(call(app), 2000), "bare": best(call(bare), 2000)}
    loop.close()
    return out


def counting() -> float:
    from app.messages import service
    from app.messages.canonical import CanonicalMessage

    rnd = random.Random(3)
    batch = [
        CanonicalMessage(
            "user" if i % 2 else "assistant", " ".join(rnd.choice(WORDS) for _ in range(150))
        )
        for i in range(20)
    ]
    if hasattr(service, "_texts_and_counts"):
        return best(lambda: service._texts_and_counts(batch), 20)
    return best(lambda: ([m.token_count() for m in batch], [m.text for m in batch]), 20)


def decoding() -> tuple[float, int]:
    from app.core import pg

    rnd = random.Random(1)
    doc = [
        {
            "seq": i,
            "role": "user",
            "content": " ".join(rnd.choice(WORDS) for _ in range(150)),
            "tool_calls": None,
            "token_count": 200,
            "metadata": {},
            "created_at": "2026-11-25T21:48:07.123456+00:00",
        }
        for i in range(62)
    ]
    raw = json.dumps(doc, ensure_ascii=False).encode()
    binary = "JSONB_VERSION" in dir(pg)  # the tree reads json in binary: bytes go straight in
    fn = (lambda: pg.loads(raw)) if binary else (lambda: pg.loads(raw.decode()))
    return best(fn, 200), len(raw)


def main() -> None:
    sys.path.insert(0, os.getcwd())
    results: dict[str, Any] = {"tree": os.getcwd()}
    results["healthz_stack"] = healthz(False)
    count = counting()
    decode, size = decoding()
    results["append_count_20"] = count
    results[f"json_decode_{size // 1024}k"] = decode
    with tempfile.TemporaryDirectory() as d:  # a fresh interpreter reads the variable
        import subprocess

        code = "import json, bench.micro as m; print(json.dumps(m.healthz(True)))"
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": d}
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=os.getcwd(),
        )
        results["healthz_stack_multiprocess"] = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
