"""Liveness, readiness and Prometheus metrics (no auth)."""

import asyncio
from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.core import metrics as prometheus
from app.core.errors import error_response
from app.health import metrics as store_gauges
from app.state import app_state
from app.version import VERSION

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Check that the process is up")
async def healthz() -> dict[str, str]:
    """The process is up; `version` is the server's (the `loom-memory-server` package)."""
    return {"status": "ok", "version": VERSION}


def _ready_timeout(request: Request) -> float:
    return float(app_state(request.app).settings.ready_timeout_seconds)


async def _check_db(request: Request, seconds: float) -> str:
    try:
        async with asyncio.timeout(seconds):
            # a pooled connection the server closed is replaced on checkout, and a broken
            # one is cut (app.core.pg.connection), so this follows the database both ways
            async with app_state(request.app).db_connection() as conn:
                await conn.fetchval("SELECT 1")
        return "ok"
    except Exception as exc:
        return f"unavailable ({type(exc).__name__})"


async def _check_redis(request: Request, seconds: float) -> str:
    try:
        async with asyncio.timeout(seconds):
            await app_state(request.app).redis.ping()
        return "ok"
    except Exception as exc:
        return f"unavailable ({type(exc).__name__})"


@router.get(
    "/readyz",
    responses={503: {"description": "A backing store is unavailable."}},
    summary="Check that PostgreSQL and Redis answer",
)
async def readyz(request: Request) -> Any:
    """PostgreSQL and Redis both answer."""
    # both checked at once, each cut off after LOOM_READY_TIMEOUT_SECONDS
    timeout = _ready_timeout(request)
    db, redis = await asyncio.gather(_check_db(request, timeout), _check_redis(request, timeout))
    checks = {"database": db, "redis": redis}
    ready = all(v == "ok" for v in checks.values())
    if ready:
        return {"status": "ready", "checks": checks}
    return error_response(503, "not_ready", "Not ready.", checks, headers={"Retry-After": "2"})


@router.get(
    "/metrics",
    response_class=Response,
    summary="Prometheus metrics",
    responses={
        200: {
            "description": "Every metric in the Prometheus text format.",
            "content": {"text/plain": {}},
        }
    },
)
async def metrics(request: Request) -> Response:
    """Prometheus metrics."""
    # this process's pools and a Redis PING first; with a multi-process directory the
    # answer merges every process's files (app.core.metrics), read off the event loop
    await store_gauges.refresh(app_state(request.app))
    return Response(await asyncio.to_thread(prometheus.exposition), media_type=CONTENT_TYPE_LATEST)
