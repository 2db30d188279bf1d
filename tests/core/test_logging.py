"""Request ids and JSON logs: the id is taken from X-Request-Id (when valid) or made, echoed
in every response, and on each log line of the request; in JSON mode an access line per
request, with nothing secret and no message text in any line."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from app.core.config import Settings
from app.core.logs import JsonFormatter
from app.main import create_app
from tests.support import api

GENERATED = re.compile(r"[0-9a-f]{32}")
MESSAGES = "/v1/sessions/{session_id}/messages"
Lines = Callable[[], list[dict[str, Any]]]


@pytest.fixture
async def json_app(settings: Settings) -> AsyncIterator[Any]:
    application = create_app(settings.model_copy(update={"log_format": "json"}))

    async def boom() -> None:
        raise RuntimeError("an unexpected failure")

    application.add_api_route("/boom", boom)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
def json_lines() -> Iterator[Lines]:
    """Every record logged during the test (any logger, any level), as the JSON lines the
    formatter writes."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def access(lines: list[dict[str, Any]], request_id: str) -> dict[str, Any]:
    [line] = [x for x in lines if x["logger"] == "loom.access" and x["request_id"] == request_id]
    return line


async def test_json_access_lines_carry_the_request_id_route_status_and_duration(
    json_app: Any, tenant: Any, json_lines: Lines
) -> None:
    secret_text = f"the launch code is swordfish-{uuid.uuid4().hex}"
    async with api.make_client(json_app, tenant.service_key, {"X-Agent-Id": "agent-1"}) as c:
        sid = await api.new_session(c)
        given = await c.post(
            f"/v1/sessions/{sid}/messages",
            headers={"X-Request-Id": "trace-1"},
            json={"messages": [{"role": "user", "content": secret_text}]},
        )
        made = await c.get(f"/v1/sessions/{sid}/messages")
        missing = await c.get(f"/v1/sessions/{uuid.uuid4()}", headers={"X-Request-Id": "nf-2"})
    assert given.status_code == 201 and given.headers["x-request-id"] == "trace-1"
    assert made.status_code == 200 and GENERATED.fullmatch(made.headers["x-request-id"])
    assert missing.status_code == 404 and missing.headers["x-request-id"] == "nf-2"

    lines = json_lines()
    line = access(lines, "trace-1")
    assert {"time", "level", "logger", "message"} <= line.keys()
    assert line["level"] == "INFO"
    assert (line["method"], line["route"], line["status"]) == ("POST", MESSAGES, 201)
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] > 0
    line = access(lines, made.headers["x-request-id"])
    assert (line["method"], line["route"], line["status"]) == ("GET", MESSAGES, 200)
    assert access(lines, "nf-2")["status"] == 404
    assert access(lines, "nf-2")["route"] == "/v1/sessions/{session_id}"

    # the server's lines (the test client's own, httpx's, name the URLs it asked for)
    everything = "\n".join(
        json.dumps(x) for x in lines if not x["logger"].startswith(("httpx", "httpcore"))
    )
    assert sid not in everything  # route templates, never raw paths
    for secret in (secret_text, "swordfish", tenant.service_key, "Bearer", "authorization"):
        assert secret.lower() not in everything.lower()


async def test_an_unexpected_error_answers_and_logs_with_the_request_id(
    json_app: Any, json_lines: Lines
) -> None:
    transport = httpx.ASGITransport(app=json_app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        resp = await c.get("/boom", headers={"X-Request-Id": "boom-1"})
    assert resp.status_code == 500
    assert resp.json()["error"]["code"] == "internal_error"
    assert resp.headers["x-request-id"] == "boom-1"
    lines = json_lines()
    assert access(lines, "boom-1")["status"] == 500
    [error] = [x for x in lines if x["logger"] == "loom.errors"]
    assert error["request_id"] == "boom-1" and error["level"] == "ERROR"
    assert "RuntimeError" in error["exc"]


@pytest.mark.parametrize("bad", ["has space", "x" * 129, "ünïcode".encode(), b"nul\x00", ""])
async def test_an_unusable_request_id_is_replaced(
    client: httpx.AsyncClient, bad: str | bytes
) -> None:
    headers: Any = {"X-Request-Id": bad}  # a str or raw bytes, as a client may send
    resp = await client.get("/healthz", headers=headers)
    assert GENERATED.fullmatch(resp.headers["x-request-id"])


async def test_text_mode_echoes_ids_and_writes_no_access_lines(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ok = await client.get("/healthz", headers={"X-Request-Id": "t" * 128})
    refused = await client.post(
        "/v1/sessions",
        content=b"{",
        headers={"content-type": "application/json", "X-Request-Id": "bad-body"},
    )
    assert ok.headers["x-request-id"] == "t" * 128
    assert refused.status_code == 422 and refused.headers["x-request-id"] == "bad-body"
    assert not [r for r in caplog.records if r.name == "loom.access"]


def test_json_lines_are_single_lines_with_the_traceback() -> None:
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        record = logging.LogRecord(
            "loom.test", logging.ERROR, __file__, 1, "failed: %s", ("x",), sys.exc_info()
        )
    out = JsonFormatter().format(record)
    assert "\n" not in out
    line = json.loads(out)
    assert line["message"] == "failed: x" and "request_id" not in line
    assert "ValueError: bad" in line["exc"]


def test_cron_runs_are_quiet_unless_debugging():
    import logging

    from app.core.logs import QuietCron

    def record(msg: str, level: int = logging.INFO, name: str = "arq.worker"):
        return logging.LogRecord(name, level, __file__, 1, msg, None, None)

    f = QuietCron()
    root = logging.getLogger()
    before = root.level
    try:
        root.setLevel(logging.INFO)
        assert not f.filter(record("  0.50s → cron:compress_busy_sessions()"))
        assert f.filter(record("  0.50s → compress_session(...)"))
        assert f.filter(record("cron:x failed", logging.ERROR))
        assert f.filter(record("cron: other logger", name="loom"))
        root.setLevel(logging.DEBUG)
        assert f.filter(record("  0.50s → cron:compress_busy_sessions()"))
    finally:
        root.setLevel(before)


def test_the_workers_health_lines_are_quiet_in_text_logs():
    import logging

    from app.core.logs import QuietHealth, dict_config

    health = logging.LogRecord(
        "arq.worker",
        logging.INFO,
        __file__,
        1,
        "recording health: %s",
        ("j_complete=3 queued=0",),
        None,
    )
    job = logging.LogRecord("arq.worker", logging.INFO, __file__, 1, "  0.50s → job", None, None)
    root = logging.getLogger()
    before = root.level
    try:
        root.setLevel(logging.INFO)
        assert not QuietHealth().filter(health) and QuietHealth().filter(job)
        root.setLevel(logging.DEBUG)
        assert QuietHealth().filter(health)
    finally:
        root.setLevel(before)
    assert "quiet_health" in dict_config("text", "info")["handlers"]["stderr"]["filters"]
    assert "quiet_health" not in dict_config("json", "info")["handlers"]["stderr"]["filters"]


def test_the_workers_lines_per_job_are_quiet_on_a_text_terminal(tmp_path):
    """arq's INFO lines per job run (start, finish, retry, abort, with arq's own format
    strings) stay off a text terminal and go to the log file; a failure shows; JSON
    logs keep them all; LOOM_LOG_LEVEL=debug shows them."""
    from app.core.logs import QuietJobs, dict_config

    def record(msg: str, args: tuple[Any, ...], level: int = logging.INFO):
        return logging.LogRecord("arq.worker", level, __file__, 1, msg, args, None)

    per_job = [
        record("%6.2fs → %s(%s)%s", (0.02, "compress:s1:compress_session", "", "")),
        record("%6.2fs ← %s ● %s", (0.05, "compress:s1:compress_session", None)),
        record("%6.2fs ↻ %s retrying job in %0.2fs", (0.05, "x:f", 1.0)),
        record("%6.2fs ⊘ %s aborted", (0.05, "x:f")),
    ]
    failed = record("%6.2fs ! %s failed, %s: %s", (0.05, "x:f", "E", "e"), logging.ERROR)
    started = record("Starting worker for %d functions: %s", (3, "a, b, c"))
    root = logging.getLogger()
    before = root.level
    try:
        root.setLevel(logging.INFO)
        assert not any(QuietJobs().filter(r) for r in per_job)
        assert QuietJobs().filter(failed) and QuietJobs().filter(started)
        root.setLevel(logging.DEBUG)
        assert all(QuietJobs().filter(r) for r in per_job)
    finally:
        root.setLevel(before)
    text = dict_config("text", "info", tmp_path / "serve.log")["handlers"]
    assert "quiet_jobs" in text["stderr"]["filters"] and "quiet_jobs" not in text["file"]["filters"]
    json_handlers = dict_config("json", "info")["handlers"]
    assert "quiet_jobs" not in json_handlers["stderr"]["filters"]
