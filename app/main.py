"""Application factory and lifespan."""

import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial

import asyncpg
from fastapi import FastAPI
from fastapi.routing import APIRoute

from app import api, docs, wiring
from app.auth.cache import KeyCache
from app.auth.keys import hash_key
from app.console import router as console
from app.core import heap, pg, tracing
from app.core.config import Settings, api_pool_sizes, get_settings
from app.core.edge import Edge
from app.core.error_handlers import install_error_handlers
from app.core.queue import Queue
from app.core.redis import arq_settings, create_redis
from app.erasure import caches as erasure_caches
from app.facts.startup import say_why_facts_wait
from app.health.metrics import PoolGauges
from app.health.router import router as health_router
from app.llm import get_llm_client
from app.mcp.endpoint import McpEndpoint
from app.shared_memory.runtime import SharedMemoryRuntime
from app.state import AppState, Parts
from app.tools import built_in as built_in_tools
from app.version import VERSION

log = logging.getLogger("loom")

DESCRIPTION = """Memory server for LLM agents: segmented memory (ROM, Kernel, L1, L2, swap),
swap search, shared memory and knowledge tiers. Authenticate with `Authorization: Bearer
<api key>` (the Authorize button). Service keys act as an agent with `X-Agent-Id`; admin keys
name the tenant with `X-Tenant-Id` (both are in the Authorize dialog too, next to the key)."""


def _operation_id(route: APIRoute) -> str:
    return route.name


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app. Stores are opened in the lifespan, so building it needs no services."""
    settings = settings or get_settings()
    wiring.configure(settings)  # the worker's startup makes the same calls
    traces = tracing.configure(settings.otel, settings.otel_content)  # app.core.tracing

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not settings.database_url or not settings.redis_url:
            raise RuntimeError(
                "DATABASE_URL and REDIS_URL must be set "
                "(`loom-memory serve` without them starts embedded stores)"
            )
        # the hot paths hold one pool (LOOM_DB_POOL_SIZE); the other routes another of half
        # as many and half again (app.core.db)
        size, overflow = api_pool_sizes(settings.db_pool_size)
        pool = await pg.create_pool(settings.database_url, settings)
        db_pool = await pg.create_pool(
            settings.database_url, settings, size=size + overflow, generic_plans=False
        )
        redis = create_redis(settings.redis_url)
        try:
            llm = get_llm_client(settings)
        except Exception as exc:  # a misconfigured LLM: heuristic summaries, BM25 order
            log.warning("LLM client unavailable: %s", exc)
            llm = None
        say_why_facts_wait(settings, llm)

        def connection() -> AbstractAsyncContextManager[asyncpg.Connection]:
            return pg.connection(pool, settings.db_pool_timeout_seconds)

        def db_connection() -> AbstractAsyncContextManager[asyncpg.Connection]:
            return pg.connection(db_pool, settings.db_pool_timeout_seconds)

        wiring.meter_llm(llm, db_connection, settings)  # the LLM cost ledger and budgets
        queue = Queue(arq_settings(settings.redis_url), settings.queue_name)
        shared_memory = SharedMemoryRuntime(
            redis,
            cache_bytes=settings.shared_memory_cache_bytes,
            watch_queue=settings.shared_memory_watch_queue,
        )

        admin = settings.admin_key.get_secret_value() if settings.admin_key else None
        key_cache = KeyCache(
            redis,
            ttl=settings.key_cache_seconds,
            admin_hash=hash_key(admin) if admin else None,
        )
        state = AppState(
            settings=settings,
            pg=pool,
            db=db_pool,
            redis=redis,
            queue=queue,
            llm=llm,
            caches=wiring.caches(redis),
            parts=Parts(
                key_cache,
                shared_memory,
                built_in_tools.catalog(),
                *wiring.assemble(settings, shared_memory, queue, db_connection, connection),
            ),
        )
        erasure_caches.install(state)
        app.state.loom = state
        gauges = PoolGauges(state)
        try:
            if settings.key_cache_seconds > 0:
                await key_cache.start()
            await shared_memory.start()
            await gauges.start()
            async with mcp_endpoint.running():
                # the process is built: keep the collector off it while it serves
                thresholds = heap.tune() if settings.gc_tune else None
                try:
                    yield
                finally:
                    if thresholds is not None:
                        heap.untune(thresholds)
        finally:
            for name, close in (
                ("pool gauges", gauges.stop),
                ("shared memory", shared_memory.stop),
                ("key cache", key_cache.stop),
                ("queue", state.queue.close),
                ("redis", redis.aclose),
                ("llm", getattr(llm, "aclose", None)),
                ("database", partial(pg.close, db_pool)),
                ("pool", partial(pg.close, pool)),
            ):
                if close is None:
                    continue
                try:
                    await close()
                except Exception:
                    log.exception("closing the %s failed", name)
            del app.state.loom

    app = FastAPI(
        title="Loom Memory",
        version=VERSION,
        description=DESCRIPTION,
        openapi_tags=api.TAGS,
        docs_url=None,
        redoc_url=None,  # app.docs
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
        # the HTTP server span of every request on this module's provider (app.core.tracing)
        telemetry={"tracer_provider": traces, "metrics": False, "logs": False}
        if traces is not None
        else {"tracing": False, "metrics": False, "logs": False},
    )
    install_error_handlers(app)
    app.include_router(health_router)
    api.include(app)
    mcp_endpoint = McpEndpoint.build(app.version, settings.max_request_bytes)
    app.router.routes.append(mcp_endpoint.route())  # /mcp (not in the OpenAPI document)
    docs.install(app)  # after the API routes: a request to them never tries the docs routes
    console.install(app)  # /console: static files; the page calls the API above
    # every request's id, deadline, body limits, lane or route, metrics (app.core.edge);
    # access lines: JSON logs, and a log file (text mode writes them there only)
    app.add_middleware(
        Edge,
        max_bytes=settings.max_request_bytes,
        db_seconds=settings.db_request_seconds,
        access_log=settings.log_format == "json" or settings.log_file is not None,
        lanes=api.LANES,
    )
    return app
