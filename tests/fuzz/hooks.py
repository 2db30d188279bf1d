"""Schemathesis hooks for fuzzing Loom Memory (loaded through schemathesis.toml).

They only teach the generator of *positive* (schema-valid) cases the few rules that JSON
Schema cannot state; each rule is also written in the OpenAPI description of the field, and
the server answers a violation with a status the operation declares (400/422). Negative
cases are never touched, so every check still sees every invalid request.

- Cursors are opaque and signed: only a `next_cursor` the same operation issued (for the same
  `order_by`) is a valid cursor. A positive case carrying any other cursor gets it removed
  (it is then a first-page request; issued cursors are still sent).
- Shared memory: whether `scope_id` is required depends on the `namespace` path parameter
  (required for workflow/swarm/debate/session, where session takes a session id; refused for
  global/agent). A positive case breaking that is dropped.
- Sums and differences across fields (context-package and session-knowledge `shares` summing
  to at most 1; a session's `max_context_tokens - reserved_output_tokens` at least
  MIN_BUDGET_TOKENS; a promoted range ascending and at most 200 messages long): a positive
  case breaking one is dropped. So is a Kernel tool list with a repeated name (JSON Schema's
  uniqueItems compares whole items, not one field).
- Messages: the Anthropic/OpenAI block shapes inside `content` and `tool_calls` (blocks with a
  `type`, tool calls with an id and a name, JSON arguments, unique call ids) are described in
  the schema but not spelled out in it; positive message lists the server's own shape check
  (app.messages.canonical) refuses are dropped. TODO: state them in the schema.
- A message's `created_at` may be at most MAX_CLOCK_SKEW after now, a bound that moves: a
  positive case's later `created_at` is moved to the year 2000 (most generated years are
  later than now, so dropping those cases would drop most message lists).
"""

from __future__ import annotations

import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import schemathesis

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from app.memory.policy import DEFAULT_MAX_CONTEXT_TOKENS, MIN_BUDGET_TOKENS  # noqa: E402
from app.messages.canonical import MessageShapeError, canonicalise  # noqa: E402
from app.messages.schemas import MAX_CLOCK_SKEW  # noqa: E402

# cursor -> (operation path, order_by) of the request that issued it
_ISSUED_CURSORS: dict[str, tuple[str, Any]] = {}
_SCOPED_NAMESPACES = {"workflow", "swarm", "debate", "session"}


def _positive(case: Any) -> bool:
    meta = case.meta
    return meta is not None and meta.generation.mode.is_positive


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    try:
        body = response.json()
    except Exception:
        return
    if isinstance(body, dict) and isinstance(body.get("next_cursor"), str):
        _ISSUED_CURSORS[body["next_cursor"]] = (case.operation.path, _order_by(case))


def _order_by(case: Any) -> Any:
    body = case.body if isinstance(case.body, dict) else {}
    return body.get("order_by", "timestamp")


def _issued_here(case: Any, cursor: Any) -> bool:
    """A cursor this operation issued for the same ordering (another is 400 by design)."""
    return cursor is None or _ISSUED_CURSORS.get(cursor) == (case.operation.path, _order_by(case))


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    if not _positive(case):
        return case
    query = case.query
    if isinstance(query, dict) and not _issued_here(case, query.get("cursor")):
        case.query = {k: v for k, v in query.items() if k != "cursor"}
    body = case.body
    if isinstance(body, dict) and not _issued_here(case, body.get("cursor")):
        case.body = {k: v for k, v in body.items() if k != "cursor"}
    if (
        case.operation.path == "/v1/sessions/{session_id}/messages"
        and case.method == "POST"
        and isinstance(body, dict)
        and isinstance(body.get("messages"), list)
    ):
        for m in body["messages"]:
            if isinstance(m, dict) and _in_future(m.get("created_at")):
                m["created_at"] = "2000" + m["created_at"][4:]
    return case


def _in_future(created_at: Any) -> bool:
    """A date-time string more than MAX_CLOCK_SKEW after now (422 `created_at_in_future`)."""
    try:
        when = datetime.fromisoformat(created_at) if isinstance(created_at, str) else None
    except ValueError:
        return False
    return (
        when is not None and when.tzinfo is not None and when > datetime.now(UTC) + MAX_CLOCK_SKEW
    )


def _shares_ok(shares: Any) -> bool:
    if not isinstance(shares, dict):
        return True
    values = [shares.get(k, d) for k, d in (("task", 0.4), ("project", 0.4), ("global", 0.2))]
    if not all(isinstance(v, int | float) for v in values):
        return True
    return sum(values) <= 1 + 1e-9


def _session_config_ok(config: Any) -> bool:
    if not isinstance(config, dict):
        return True
    reserved = config.get("reserved_output_tokens")
    maximum = config.get("max_context_tokens", DEFAULT_MAX_CONTEXT_TOKENS)
    if (
        isinstance(reserved, int)
        and isinstance(maximum, int)
        and maximum - reserved < MIN_BUDGET_TOKENS
    ):
        return False
    knowledge = config.get("knowledge")
    return not isinstance(knowledge, dict) or _shares_ok(knowledge.get("shares"))


def _messages_ok(messages: Any) -> bool:
    if not isinstance(messages, list):
        return True
    try:
        for i, raw in enumerate(messages):
            if isinstance(raw, dict):
                canonicalise(raw, i)
    except MessageShapeError:
        return False
    return True


def _scope_ok(namespace: Any, scope_id: Any) -> bool:
    if namespace in _SCOPED_NAMESPACES:
        if not scope_id:
            return False
        if namespace == "session":
            try:
                uuid.UUID(str(scope_id))
            except ValueError:
                return False
        return True
    return not scope_id


@schemathesis.hook
def filter_case(context: Any, case: Any) -> bool:
    if not _positive(case):
        return True
    path = case.operation.path
    body = case.body if isinstance(case.body, dict) else {}
    if path.startswith("/v1/shared-memory/{namespace}"):
        namespace = (case.path_parameters or {}).get("namespace")
        return _scope_ok(namespace, (case.query or {}).get("scope_id"))
    if path == "/v1/context-packages":
        return _shares_ok(body.get("shares"))
    if path in ("/v1/sessions", "/v1/sessions/{session_id}"):
        return _session_config_ok(body.get("config"))
    if path == "/v1/sessions/{session_id}/messages" and case.method == "POST":
        return _messages_ok(body.get("messages"))
    if path == "/v1/sessions/{session_id}/kernel/tools":
        names = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
        return len(names) == len(set(names))
    if path == "/v1/sessions/{session_id}/memory/promote":
        start, end = body.get("start_seq"), body.get("end_seq")
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (start, end)):
            return True
        assert isinstance(start, int | float) and isinstance(end, int | float)
        return 0 <= end - start < 200
    return True


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx: Any, value: Any) -> bytes:
    """`POST /v1/import` takes NDJSON (issue 28): a generated string goes as its UTF-8 bytes,
    anything else as one JSON line."""
    import json as _json

    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return (_json.dumps(value) + "\n").encode()
