"""Where a context build's CPU goes, in one process: the app's route next to the floor's.

    .venv/bin/python -m bench.context_parts --requests 3000

No HTTP server and no load generator: requests go straight into the ASGI apps (the app, and
`bench/floor_app.py` on the same database), one at a time, on uvloop with `serve`'s
garbage-collector tuning, and each figure is this process's CPU time per request (what the
other processes of a busy machine barely move; wall time is not reported). The session is
the bench's kind: 50 messages of ~150 tokens, compressed by a real worker until L1 holds the
last 10, so the build reads what `bench.run`'s random 50-message sessions read.

Printed, per request:

* `floor route` / `app route`: the whole request through each app (the ratio is what
  `bench.run`'s context figure compares, minus uvicorn's share, which both pay alike);
* `app: a lane answering at once` (our middleware and a lane, `app.core.edge`), and the
  same after reading the caller and the body as the context lane does;
* `app: middleware + routing`: a route that answers at once, placed first in the app's
  table (our middleware, FastAPI's routing and request handling), and the same with the
  context route's parameters (`+ caller, body`: the key, the body, their validation);
* `app: connection + SELECT 1` inside and outside a request;
* the floor's connection and read (its pool, the same statement), and the context build's
  own parts, called directly: `load` (the pool connection, the same read, the rows),
  `build` (policy, fit, providers), `finish` (the manifest hook), `render` (the response's
  JSON), and all four as the route runs them (`build_and_record`), and the context lane
  called directly.

Also printed: the two responses' sizes. With `--spin LABEL --seconds N` only that figure
runs, for a profiler (py-spy); `BENCH_CPROFILE=N` profiles it in-process and prints the
Python calls per request and the top N functions, `BENCH_CALLEES=regex` their callees.

Measure on a quiet machine when comparing runs; the parts, each against the others in
one run, hold on a busy one.
"""

import argparse
import asyncio
import cProfile
import dataclasses
import importlib
import os
import pstats
import secrets
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import httpx

from bench.inprocess import REDIS
from bench.tenants import fresh_tenant, scratch_database

PG = os.environ.get("BENCH_PG_SERVER", "postgresql://postgres@127.0.0.1:5432")

Scope = dict[str, Any]


async def call(app: Any, path: str, body: bytes, headers: list[tuple[bytes, bytes]]) -> list[Any]:
    """One POST through an ASGI app; the messages it sent."""
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("bench", 80),
    }
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # no disconnect
        raise AssertionError

    out: list[Any] = []

    async def send(message: Any) -> None:
        out.append(message)

    await app(scope, receive, send)
    return out


def cpu_ms(n: int) -> Callable[[Callable[[], Awaitable[Any]]], Awaitable[float]]:
    async def measure(fn: Callable[[], Awaitable[Any]]) -> float:
        start = time.process_time()
        for _ in range(n):
            await fn()
        return (time.process_time() - start) / n * 1e3

    return measure


def add_probes(app: Any) -> None:
    """Routes that answer at once, first in the app's table (as the context route is).
    (This module has no `from __future__ import annotations`: FastAPI reads the routes'
    annotations, some of them imported in this function, as objects.)"""
    from fastapi import Body, Request, Response

    from app.auth.deps import CallerDep
    from app.context import examples
    from app.context.schemas import ContextRequest
    from app.state import app_state

    @app.post("/v1/probe/{session_id}/bare")
    async def bare(session_id: uuid.UUID, request: Request) -> Response:
        return Response(b"{}", media_type="application/json")

    @app.post("/v1/probe/{session_id}/params")
    async def params(
        session_id: uuid.UUID,
        caller: CallerDep,
        request: Request,
        body: Annotated[ContextRequest | None, Body(openapi_examples=examples.BUILD)] = None,
    ) -> Response:
        return Response(b"{}", media_type="application/json")

    @app.post("/v1/probe/{session_id}/select")
    async def select(session_id: uuid.UUID, request: Request) -> Response:
        async with app_state(request.app).connection() as conn:
            await conn.fetchval("SELECT 1")
        return Response(b"{}", media_type="application/json")

    probes = app.router.routes[-3:]
    del app.router.routes[-3:]
    app.router.routes[0:0] = probes


def add_probe_lanes(app: Any) -> None:
    """Lanes (`app.core.edge`) that answer at once, and after the caller and the body, next
    to the app's own (before the app's first request builds its middleware)."""
    from starlette.responses import Response

    from app.auth.deps import get_caller
    from app.context.schemas import ContextRequest
    from app.core.edge import Edge, Lane, json_model

    async def bare(request: Any, id_: str, body: bytes) -> Response:
        return Response(b"{}", media_type="application/json")

    async def params(request: Any, id_: str, body: bytes) -> Response | None:
        if json_model(request.scope, body, ContextRequest) is None:
            return None
        await get_caller(request)
        uuid.UUID(id_)
        return Response(b"{}", media_type="application/json")

    for middleware in app.user_middleware:
        if middleware.cls is Edge:
            middleware.kwargs["lanes"] = (
                *middleware.kwargs["lanes"],
                Lane("POST", "/v1/probe/{session_id}/lane", bare),
                Lane("POST", "/v1/probe/{session_id}/lane-params", params),
            )


async def compressed_session(c: httpx.AsyncClient, env: dict[str, str]) -> str:
    """A session of 50 messages of ~150 tokens, compressed by a worker until L1 is 10."""
    sid = (await c.post("/v1/sessions", json={"agent_id": "a"})).json()["id"]
    words = " ".join(["lorem ipsum dolor sit amet"] * 30)
    for i in range(25):
        turn = [
            {"role": "user", "content": f"q{i} {words}"},
            {"role": "assistant", "content": f"a{i} {words}"},
        ]
        r = await c.post(f"/v1/sessions/{sid}/messages", json={"messages": turn})
        assert r.status_code == 201, r.text
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.launcher.cli", "worker", env=env
    )
    try:
        for _ in range(60):
            memory = (await c.get(f"/v1/sessions/{sid}/memory")).json()
            if len(memory["l1_seqs"]) <= 10:
                return str(sid)
            await asyncio.sleep(1)
        raise RuntimeError("the worker did not compress the session within 60 s")
    finally:
        worker.terminate()
        await worker.wait()


async def main(n: int, rounds: int, spin: str | None = None, seconds: float = 0) -> None:
    from app.auth.caller import Caller
    from app.context import render
    from app.context.blocks import OneConnection
    from app.context.builder import build
    from app.context.service import ContextHooks, build_and_record
    from app.core import heap
    from app.core.config import Settings
    from app.main import create_app
    from app.memory.aggregate import StandIns, load
    from app.memory.repository import CONTEXT
    from app.state import app_state

    async with scratch_database(PG, "loom_parts") as (url, _fake):
        admin = "lm_" + secrets.token_urlsafe(32)
        queue = f"loom:parts:{uuid.uuid4().hex[:8]}"
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "REDIS_URL": REDIS,
            "LOOM_ADMIN_KEY": admin,
            "LOOM_QUEUE_NAME": queue,
            "LOOM_LOG_LEVEL": "warning",
        }
        app = create_app(
            Settings(DATABASE_URL=url, REDIS_URL=REDIS, LOOM_ADMIN_KEY=admin, LOOM_QUEUE_NAME=queue)
        )
        add_probes(app)
        add_probe_lanes(app)
        os.environ["BENCH_FLOOR_DSN"] = url.replace("postgresql+asyncpg://", "postgresql://")
        floor = importlib.import_module("bench.floor_app").app
        async with app.router.lifespan_context(app), floor.router.lifespan_context(floor):
            transport = httpx.ASGITransport(app=app)
            tenant_id, secret = await fresh_tenant(transport, admin, "parts")
            auth = {"Authorization": f"Bearer {secret}"}
            async with httpx.AsyncClient(
                transport=transport, base_url="http://bench", headers=auth
            ) as c:
                sid = await compressed_session(c, env)
            heap.tune()  # as `serve` runs (app.core.heap)
            headers = [
                (b"host", b"bench"),
                (b"authorization", f"Bearer {secret}".encode()),
                (b"content-type", b"application/json"),
                (b"content-length", b"2"),
            ]
            state = app_state(app)
            caller = Caller(
                tenant_id=uuid.UUID(tenant_id), role="service", agent_id=None, key_id=None
            )
            session_id = uuid.UUID(sid)
            hooks = state.parts[ContextHooks]

            async def load_it() -> Any:
                async with state.connection() as conn:
                    return await load(
                        conn,
                        caller.tenant_id,
                        session_id,
                        window=CONTEXT,
                        caller=caller,
                        stand_ins=state.caches[StandIns],
                    )

            loaded = await load_it()

            async def build_it() -> Any:
                fresh = dataclasses.replace(loaded, _drafts={}, _layers=None)
                blocks = OneConnection(state.db_connection)  # as build_and_record does
                try:
                    return await build(blocks, fresh.session, fresh, providers=hooks.blocks)
                finally:
                    await blocks.close()

            built = await build_it()

            async def select_outside() -> None:
                async with state.connection() as conn:
                    await conn.fetchval("SELECT 1")

            floor_module = sys.modules["bench.floor_app"]
            tenant_uuid = uuid.UUID(tenant_id)

            async def floor_read() -> Any:
                async with floor.state.pool.acquire() as conn:
                    return await conn.fetchrow(floor_module.READ_SQL, tenant_uuid, session_id)

            async def select_plain() -> None:
                async with state.pg.acquire() as conn:
                    await conn.fetchval("SELECT 1")

            async def finish_it() -> Any:
                return await hooks.built(built, None, "anthropic")

            async def render_it() -> bytes:
                return render.response_json(built, "anthropic", {"context_id": "x"}, None)

            from starlette.requests import Request

            from app.context import lane as context_lane

            lane_scope = {
                "type": "http",
                "method": "POST",
                "path": f"/v1/sessions/{sid}/context",
                "query_string": b"",
                "headers": headers,
                "app": app,
            }

            from app.context.schemas import ContextRequest

            empty_body = ContextRequest()

            async def all_of_it_with_body() -> Any:
                return await build_and_record(state, caller, session_id, empty_body, "anthropic")

            async def the_lane() -> Any:
                return await context_lane.handle(Request(lane_scope), sid, b"{}")

            async def all_of_it() -> Any:
                return await build_and_record(state, caller, session_id, None, "anthropic")

            def route(target: Any, path: str) -> Callable[[], Awaitable[Any]]:
                async def go() -> None:
                    out = await call(target, path, b"{}", headers)
                    assert out[0]["status"] == 200, out

                return go

            figures: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
                ("floor route", route(floor, f"/floor/sessions/{sid}/context")),
                ("app route", route(app, f"/v1/sessions/{sid}/context")),
                ("app: middleware + routing", route(app, f"/v1/probe/{sid}/bare")),
                ("  + caller, body", route(app, f"/v1/probe/{sid}/params")),
                ("  + connection, SELECT 1", route(app, f"/v1/probe/{sid}/select")),
                ("app: a lane answering at once", route(app, f"/v1/probe/{sid}/lane")),
                ("  + caller, body (lane)", route(app, f"/v1/probe/{sid}/lane-params")),
                ("connection, SELECT 1 (no request)", select_outside),
                ("  the same on the pool directly", select_plain),
                ("floor: connection + read", floor_read),
                ("load", load_it),
                ("build", build_it),
                ("finish", finish_it),
                ("render", render_it),
                ("build_and_record", all_of_it),
                ("build_and_record, body {}", all_of_it_with_body),
                ("the context lane, called", the_lane),
            ]
            if spin:
                chosen = dict(figures)[spin]
                for _ in range(50):
                    await chosen()  # warm
                profiler = cProfile.Profile() if os.environ.get("BENCH_CPROFILE") else None
                if profiler is not None:
                    profiler.enable()
                end, done = time.monotonic() + seconds, 0
                while time.monotonic() < end:
                    await chosen()
                    done += 1
                if profiler is not None:
                    profiler.disable()
                    stats = pstats.Stats(profiler)
                    total = sum(v[1] for v in stats.stats.values())  # type: ignore[attr-defined]
                    print(f"{done} requests, {total / done:.0f} Python calls per request")
                    stats.sort_stats("tottime").print_stats(int(os.environ["BENCH_CPROFILE"]))
                    if os.environ.get("BENCH_CALLEES"):
                        stats.print_callees(os.environ["BENCH_CALLEES"])
                return
            for label, target, path in (
                ("floor", floor, f"/floor/sessions/{sid}/context"),
                ("app", app, f"/v1/sessions/{sid}/context"),
            ):
                sent_messages = await call(target, path, b"{}", headers)
                size = sum(len(m.get("body", b"")) for m in sent_messages)
                print(f"{label} response: {size:,} bytes")
            measure = cpu_ms(n)
            for fn in (f for _, f in figures):
                await fn()  # warm
            seen: dict[str, list[float]] = {label: [] for label, _ in figures}
            for _ in range(rounds):
                for label, fn in figures:
                    seen[label].append(await measure(fn))
            print(f"CPU ms per request, median of {rounds} rounds of {n}:")
            for label, values in seen.items():
                print(f"  {label:<36} {sorted(values)[len(values) // 2]:.3f}")
            floor_ms = sorted(seen["floor route"])[rounds // 2]
            app_ms = sorted(seen["app route"])[rounds // 2]
            print(f"  floor / app                          {floor_ms / app_ms:.2f}")


if __name__ == "__main__":
    import uvloop

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="per figure and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--spin", help="run only this figure (a label above) for --seconds, for a profiler"
    )
    parser.add_argument("--seconds", type=float, default=20)
    args = parser.parse_args()
    uvloop.run(main(args.requests, args.rounds, args.spin, args.seconds))
