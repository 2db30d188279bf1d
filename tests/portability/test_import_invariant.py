"""Nothing an import stores breaks a read (issue 36, 1 and 2).

A real user export (two sessions with an inline ROM, Kernel tools, tool calls and an
offloaded tool result, summaries from a compression, a fact with a version, the session's
shared memory) is mutated by hypothesis: a field set to a value the API would refuse (or
accept), a field removed, a line doubled or dropped (the end line's counts follow, so the
mutation itself is what is judged). Each mutation is imported, with fresh ids, into one
tenant of a live server. Then:

- an import that answers 2xx leaves every read route of every imported object answering
  2xx, and the session still takes an append;
- an import that answers 422 names a line and a field and wrote nothing;
- nothing answers 5xx.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from tests.support.live import live_api

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("LOOM_IMPORT_MUTATIONS", "200"))
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
REF_RE = re.compile(r"ref_[0-9a-f]{16}")

NASTY: list[Any] = [
    None,
    -1,
    0,
    1,
    "1",
    "abc",
    "",
    True,
    1.5,
    2**63,
    -(2**63) - 1,
    [1, 2],
    [],
    {},
    {"a": 1},
    "a b",
    "../x y",
    "hacker",
    "4713-01-01 00:00:00+00 BC",
    "200000-01-01T00:00:00Z",
    "2026-01-01T00:00:00",
    "2999-01-01T00:00:00Z",
    "2020-01-01T00:00:00Z",
    "infinity",
    "x" * 300,
    {"max_context_tokens": "abc", "l1_max_messages": -5},
    {"max_context_tokens": 1, "reserved_output_tokens": 5},
    {"max_context_tokens": 300, "l1_max_messages": 2},
    [{"type": "text", "text": "hi"}],
    [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}],
    [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}],
    [{"id": "c1", "name": "f", "input": "not an object"}],
    [{"id": "c1", "name": "f", "input": {"q": 1}}],
    {"system_prompt": 5},
    {"system_prompt": "be brief", "patterns": ["p"], "profile_version": None},
    {"tools": [{"name": "bad name!", "input_schema": {}}]},
    {"tools": "x", "schemas": []},
    "\\x00",
    "\\x1f8b0800",
    "\\xzz",
    "session",
    "agent",
    "no-such-namespace",
    "ref_0000000000000000",
    str(uuid.UUID(int=7)),
]


def _deep(n: int) -> Any:
    value: Any = "bottom"
    for _ in range(n):
        value = {"d": value}
    return value


NASTY += [
    _deep(70),
    _deep(900),
    [_deep(62)],
    _deep(62),
    _deep(63),
    # what one rule of storable values (app.core.storable) covers
    "a\ud800b",
    "nul \x00 inside",
    {"k\udfff": 1},
    2**63 - 1,
    2**53 - 1,
    2**53,
    "2025-03-01T10:00:00+23:59",
    "2025-03-01T10:00:00-23:59",
    "2025-03-01T10:00:00+15:59",
]


@st.composite
def mutations(draw: st.DrawFn, n_lines: int, fields: list[list[str]]) -> dict[str, Any]:
    i = draw(st.integers(1, n_lines - 2))  # a data line (not the header, not the end)
    op = draw(st.sampled_from(["set", "set", "set", "del", "dup", "drop", "extra", "late"]))
    field = draw(st.sampled_from(fields[i])) if fields[i] else "t"
    value = draw(
        st.one_of(
            st.sampled_from(NASTY),
            st.integers(-(2**64), 2**64),
            st.text(max_size=20),
        )
    )
    return {"line": i, "op": op, "field": field, "value": value}


def apply(lines: list[str], m: dict[str, Any]) -> list[str]:
    """The mutated export, its end line's counts recomputed."""
    objs = [json.loads(x) for x in lines]
    i, field = m["line"], m["field"]
    if m["op"] == "set" and field != "t":
        objs[i][field] = m["value"]
    elif m["op"] == "del" and field not in ("t",):
        objs[i].pop(field, None)
    elif m["op"] == "dup":
        objs.insert(i, dict(objs[i]))
    elif m["op"] == "drop":
        del objs[i]
    elif m["op"] == "late":  # the line moved to just before the end: after its rows
        objs.insert(len(objs) - 1, objs.pop(i))
    elif m["op"] == "extra":  # one more message, in a session of the export
        sid = next(o["session_id"] for o in objs if o["t"] == "message")
        seq = max(o["seq"] for o in objs if o["t"] == "message" and o["session_id"] == sid)
        objs.insert(
            -1,
            {
                "t": "message",
                "session_id": sid,
                "seq": seq + 1,
                "role": "user",
                "content": m["value"] if isinstance(m["value"], str) else "one more",
                "token_count": 3,
                "created_at": "2026-01-01T00:00:00+00:00",
            },
        )
    counts: dict[str, int] = {}
    for o in objs[1:-1]:
        counts[o["t"]] = counts.get(o["t"], 0) + 1
    objs[-1] = {"t": "end", "counts": counts}
    return [json.dumps(o) for o in objs]


def fresh_ids(text: str, user: str, new_user: str) -> str:
    """The export with every id, reference and the user renamed (consistently)."""
    ids: dict[str, str] = {}
    text = UUID_RE.sub(lambda m: ids.setdefault(m.group(0), str(uuid.uuid4())), text)
    refs: dict[str, str] = {}
    text = REF_RE.sub(lambda m: refs.setdefault(m.group(0), "ref_" + uuid.uuid4().hex[:16]), text)
    return text.replace(user, new_user)


def _tenant(c: httpx.Client, admin: dict[str, str]) -> dict[str, str]:
    t = c.post("/v1/tenants", json={"name": f"imp-{uuid.uuid4().hex[:8]}"}, headers=admin)
    key = c.post(
        "/v1/api-keys", json={"tenant_id": t.json()["id"], "role": "service"}, headers=admin
    )
    return {
        "Authorization": f"Bearer {key.json()['secret']}",
        "X-Agent-Id": "agent-1",
        "X-Tenant-Id": t.json()["id"],
    }


def _ok(r: httpx.Response, what: str) -> Any:
    assert r.status_code < 300, (what, r.status_code, r.text[:500])
    return r.json() if r.headers.get("content-type", "").startswith("application/json") else r.text


def build_export(c: httpx.Client, h: dict[str, str], user: str) -> list[str]:
    for k in range(2):
        r = c.post(
            "/v1/sessions",
            headers=h,
            json={
                "user_id": user,
                "config": {
                    "max_context_tokens": 4000,
                    "l1_max_messages": 6,
                    "recall": {"enabled": True},
                    "facts": {"enabled": True, "scope": "user"},
                },
                "metadata": {"channel": "web", "k": k},
                "rom": {"system_prompt": "You help with refunds.", "patterns": ["be brief"]},
            },
        )
        sid = _ok(r, "create")["id"]
        _ok(
            c.put(
                f"/v1/sessions/{sid}/kernel/tools",
                headers=h,
                json={"tools": [{"name": "ledger", "input_schema": {"type": "object"}}]},
            ),
            "kernel",
        )
        msgs: list[dict[str, Any]] = []
        for i in range(4):
            msgs.append({"role": "user", "content": f"question {i} about invoice {i * 7}"})
            msgs.append({"role": "assistant", "content": f"answer {i}: refund {i * 7} is sent"})
        big = json.dumps([{"row": i} for i in range(2_000)])
        msgs += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"x{k}", "name": "ledger", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"x{k}", "content": big}],
            },
            {"role": "user", "content": "so where is my refund?", "metadata": {"mood": "ok"}},
        ]
        _ok(c.post(f"/v1/sessions/{sid}/messages", headers=h, json={"messages": msgs}), "append")
        _ok(c.post(f"/v1/sessions/{sid}/memory/compress?wait=true", headers=h), "compress")
    r = c.post(
        "/v1/memory-items",
        headers=h,
        json={"scope": f"user/{user}", "kind": "fact", "text": "The user's IBAN ends in 42."},
    )
    item = _ok(r, "item")
    r = c.get(f"/v1/memory-items/{item['id']}", headers=h)
    _ok(
        c.patch(
            f"/v1/memory-items/{item['id']}",
            headers={**h, "If-Match": r.headers["etag"]},
            json={"text": "The user's IBAN ends in 43."},
        ),
        "patch",
    )
    text = _ok(c.get(f"/v1/users/{user}/export", headers=h), "export")
    return str(text).splitlines()


def reads(c: httpx.Client, h: dict[str, str], objs: list[dict[str, Any]]) -> None:
    """Every read route of every imported object answers 2xx; sessions take an append."""
    sessions = {o["id"] for o in objs if o["t"] == "session"}
    users = {o.get("user_id") for o in objs if o["t"] == "session"} - {None}
    _ok(c.get("/v1/sessions?limit=200", headers=h), "list sessions")
    _ok(c.get("/v1/users", headers=h), "list users")
    for sid in sessions:
        s = f"/v1/sessions/{sid}"
        for path in ("", "/messages?limit=200", "/memory", "/memory/snapshots", "/kernel"):
            _ok(c.get(s + path, headers=h), path or "session")
        _ok(c.get(s + "/tools", headers=h), "tools")
        _ok(c.get(s + "/export", headers=h), "session export")
        _ok(c.get(s + "/memory/extract", headers=h), "extract status")
        _ok(c.get(f"/v1/shared-memory/session?scope_id={sid}", headers=h), "shared list")
        for fmt in ("raw", "anthropic", "openai"):
            _ok(c.post(s + "/context", headers=h, json={"format": fmt}), f"context {fmt}")
        _ok(c.post(s + "/search", headers=h, json={"query": "refund", "rerank": False}), "search")
        _ok(c.get(s + "/contexts", headers=h), "manifests")
        r = c.post(
            s + "/messages", headers=h, json={"messages": [{"role": "user", "content": "hi"}]}
        )
        assert r.status_code == 201, ("append after import", r.text[:500])
        _ok(c.post(s + "/context", headers=h, json={"format": "raw"}), "context after append")
    for user in users:
        _ok(c.get(f"/v1/users/{user}", headers=h), "user")
        _ok(c.get(f"/v1/users/{user}/export", headers=h), "user export")
        _ok(
            c.post(
                "/v1/search",
                headers=h,
                json={"query": "refund", "scope": "user", "user_id": user, "rerank": False},
            ),
            "user search",
        )
        _ok(
            c.post(
                "/v1/memory-items/query", headers=h, json={"filters": {"scope": f"user/{user}"}}
            ),
            "items query",
        )
    for o in objs:
        if o["t"] == "memory_item":
            _ok(c.get(f"/v1/memory-items/{o['id']}", headers=h), "item")
            _ok(c.get(f"/v1/memory-items/{o['id']}/history", headers=h), "item history")
        if o["t"] == "shared_memory_entry":
            _ok(c.get(f"/v1/refs/{o['ref_id']}", headers=h), "ref")


@pytest.fixture(scope="module")
def server(settings: Any) -> Iterator[tuple[httpx.Client, dict[str, str], list[str], str]]:
    admin = {"Authorization": f"Bearer {settings.admin_key.get_secret_value()}"}
    # tool results past 4 KiB go to shared memory, so the export holds entries and references
    with (
        live_api(settings, LOOM_TOOL_RESULT_OFFLOAD_BYTES="4096") as base,
        httpx.Client(base_url=base, timeout=60) as c,
    ):
        source = _tenant(c, admin)
        user = f"imp-{uuid.uuid4().hex[:8]}"
        lines = build_export(c, source, user)
        yield c, _tenant(c, admin), lines, user


def _fields(lines: list[str]) -> list[list[str]]:
    return [sorted(k for k in json.loads(x) if k != "t") for x in lines]


def test_after_any_import_that_answers_2xx_every_read_answers_2xx(server: Any) -> None:
    c, h, lines, user = server
    fields = _fields(lines)
    outcomes: dict[int, int] = {}

    @hsettings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(mutations(len(lines), fields))
    def check(m: dict[str, Any]) -> None:
        new_user = f"u{uuid.uuid4().hex[:10]}"
        body = fresh_ids("\n".join(apply(lines, m)), user, new_user)
        r = c.post(
            "/v1/import",
            content=body + "\n",
            headers={**h, "Content-Type": "application/x-ndjson"},
        )
        outcomes[r.status_code] = outcomes.get(r.status_code, 0) + 1
        assert r.status_code in (200, 422), (m, r.status_code, r.text[:500])
        objs = [json.loads(x) for x in body.splitlines()]
        if r.status_code == 422:
            err = r.json()["error"]
            assert err["code"] == "invalid_import" and err["details"]["line"] >= 1, err
            for o in objs:  # nothing of it was written
                if (
                    o["t"] == "session"
                    and isinstance(o.get("id"), str)
                    and UUID_RE.fullmatch(o["id"])
                ):
                    gone = c.get(f"/v1/sessions/{o['id']}", headers=h)
                    assert gone.status_code == 404, (m, gone.text[:300])
            return
        reads(c, h, objs)

    check()
    # the mutations reached both outcomes
    print("import outcomes", outcomes)
    assert outcomes.get(200, 0) > 20 and outcomes.get(422, 0) > 20, outcomes


# --- what the API accepts imports again (issue 44, finding 2) ----------------------------

API_EXAMPLES = int(os.environ.get("LOOM_API_STORABLE_EXAMPLES", "60"))
# any code point: surrogates and NUL included (a JSON text carries them as \\u escapes)
_TEXT = st.text(alphabet=st.characters(codec=None), max_size=12)
_TIMES = [
    None,
    "2025-03-01T10:00:00Z",
    "2025-03-01T10:00:00+23:59",
    "2025-03-01T10:00:00-23:59",
    "0002-01-01T00:30:00+01:00",
    "9998-12-31T23:30:00-01:00",
    "2025-03-01T10:00:00.1234567+05:30",
]
_TYPES = [
    ("application/json",),
    ("application/loom+json",),  # not the lane's: the router reads it
    ("application/json; charset=utf-8",),
    ("application/json", "text/plain"),
    ("text/plain", "application/json"),
    ("application/json", "application/json"),
]


@st.composite
def appends(draw: st.DrawFn) -> dict[str, Any]:
    text = draw(_TEXT)
    content: Any = draw(
        st.sampled_from(["plain", "blocks", "call"]).map(
            lambda k: (
                text
                if k == "plain"
                else [{"type": "text", "text": text or "x"}]
                if k == "blocks"
                else None
            )
        )
    )
    depth = draw(st.sampled_from([0, 1, 59, 60, 61, 62, 63, 200, 256, 300]))
    meta: Any = draw(_TEXT)
    for _ in range(depth):
        meta = {draw(st.sampled_from(["a", "\ud800", "k"])): meta}
    message: dict[str, Any] = {"role": "user", "content": content}
    if content is None:
        args: Any = draw(_TEXT)
        for _ in range(draw(st.sampled_from([0, 30, 60, 61, 62, 64]))):
            args = {"x": args}
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": json.dumps({"v": args})},
                }
            ],
        }
    if depth:
        message["metadata"] = meta if isinstance(meta, dict) else {"v": meta}
    created = draw(st.sampled_from(_TIMES))
    if created is not None:
        message["created_at"] = created
    return {
        "message": message,
        "types": draw(st.sampled_from(_TYPES)),
    }


def test_whatever_the_api_accepts_reads_appends_and_imports_again(
    server: Any, settings: Any
) -> None:
    c, _, _, _ = server
    admin = {"Authorization": f"Bearer {settings.admin_key.get_secret_value()}"}
    source, target = _tenant(c, admin), _tenant(c, admin)
    outcomes: dict[int, int] = {}

    @hsettings(
        max_examples=API_EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(appends())
    def check(a: dict[str, Any]) -> None:
        sid = _ok(c.post("/v1/sessions", headers=source, json={}), "create")["id"]
        body = json.dumps({"messages": [a["message"]]}).encode()
        headers = [(k, v) for k, v in source.items()] + [("Content-Type", t) for t in a["types"]]
        r = c.post(f"/v1/sessions/{sid}/messages", content=body, headers=headers)
        outcomes[r.status_code] = outcomes.get(r.status_code, 0) + 1
        assert r.status_code in (201, 400, 413, 422), (a, r.status_code, r.text[:300])
        stored = _ok(c.get(f"/v1/sessions/{sid}/messages", headers=source), "messages")
        if r.status_code != 201:
            assert "error" in r.json() and stored["items"] == [], (a, r.text[:300])
            return
        assert len(stored["items"]) == 1, stored
        export = _ok(c.get(f"/v1/sessions/{sid}/export", headers=source), "export")
        imported = c.post(
            "/v1/import",
            content=str(export),
            headers={**target, "Content-Type": "application/x-ndjson"},
        )
        assert imported.status_code == 200, (a, imported.text[:500])
        here = _ok(c.post(f"/v1/sessions/{sid}/context", headers=source, json={}), "context")
        there = _ok(c.post(f"/v1/sessions/{sid}/context", headers=target, json={}), "context")
        assert here["messages"] == there["messages"], a
        for h in (source, target):
            r = c.post(
                f"/v1/sessions/{sid}/messages",
                headers=h,
                json={"messages": [{"role": "user", "content": "next"}]},
            )
            assert r.status_code == 201, (a, r.text[:300])

    check()
    print("append outcomes", outcomes)
    assert outcomes.get(201, 0) > 5 and outcomes.get(422, 0) > 5, outcomes
