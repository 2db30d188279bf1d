"""Liveness, readiness and Prometheus metrics (no auth)."""

import asyncio
from typing import Any

import sqlalchemy as sa
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


async def _check_db(request: Request) -> str:
    try:
        async with request.app.state.engine.connect() as conn:
            await asyncio.wait_for(conn.execute(sa.text("SELECT 1")), timeout=2)
        return "ok"
    except Exception as exc:
        return f"unavailable ({type(exc).__name__})"


async def _check_redis(request: Request) -> str:
    try:
        await asyncio.wait_for(request.app.state.redis.ping(), timeout=2)
        return "ok"
    except Exception as exc:
        return f"unavailable ({type(exc).__name__})"


@router.get("/readyz", responses={503: {"description": "A backing store is unavailable."}})
async def readyz(request: Request) -> Any:
    """PostgreSQL and Redis both answer."""
    checks = {"database": await _check_db(request), "redis": await _check_redis(request)}
    ready = all(v == "ok" for v in checks.values())
    if ready:
        return {"status": "ready", "checks": checks}
    return JSONResponse({"error": {"code": "not_ready", "message": "Not ready.",
                                   "details": checks}}, status_code=503)


@router.get("/metrics", response_class=Response)
async def metrics() -> Response:
    """Prometheus metrics."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
