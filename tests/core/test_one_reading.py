"""A request is read once, and what is stored follows one rule (issue 44, findings 1 and 2).

1. The body's media type is decided once, at the edge: two `Content-Type` headers are 400
   `ambiguous_content_type` whatever they say (the depth check read the last, the parser
   the first, so a body checked as text was parsed as JSON and stored a message that broke
   the session's reads); FastAPI's reading of a media type and the edge's agree.
2. One definition of a storable value (`app.core.storable`) for the append and the import:
   a lone surrogate is a 422 naming its field with or without `created_at`; a stored
   document nests no deeper than an export line can carry, so a session's export always
   imports again; an import's seqs leave room for appends; an offset PostgreSQL would not
   parse is stored in UTC as the API stores it; the order of an import's lines does not
   matter.
"""

from __future__ import annotations

import email.message
import json
import uuid
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from app.core import storable
from app.core.limits import is_json_type
from tests.portability.test_export_import import do_import, export, fresh_tenant
from tests.support.api import new_session


def deep_text(n: int) -> str:
    return '{"a":' * n + "1" + "}" * n


async def _count(db: Any, sid: str) -> int:
    q = sa.text("select count(*) from messages where session_id = :s")
    return int((await db.execute(q, {"s": sid})).scalar_one())


def _fastapi_reads_json(content_type: str) -> bool:
    """FastAPI's own test of a body's media type (fastapi.routing, strict content type)."""
    message = email.message.Message()
    message["content-type"] = content_type
    if message.get_content_maintype() == "application":
        subtype = message.get_content_subtype()
        return subtype == "json" or subtype.endswith("+json")
    return False


_PARTS = st.sampled_from(
    [
        "application",
        "json",
        "text",
        "plain",
        "/",
        "+",
        ";",
        " ",
        "\t",
        "x-",
        "ld",
        "APPLICATION",
        "JSON",
        "charset=utf-8",
        ",",
        "*",
        "vnd.a",
        '"',
        "=",
        "//",
    ]
)


@given(st.lists(_PARTS, max_size=8).map("".join))
def test_the_edge_and_fastapi_read_a_media_type_alike(content_type: str) -> None:
    if not content_type.strip():
        return  # no header value: FastAPI's strict mode reads no JSON, nor does the edge
    assert is_json_type(content_type) == _fastapi_reads_json(content_type), content_type


@pytest.mark.parametrize(
    "types",
    [
        ("application/json", "text/plain"),
        ("text/plain", "application/json"),
        ("application/json", "application/json"),
    ],
)
async def test_two_content_types_are_refused_and_nothing_is_stored(
    client: httpx.AsyncClient, db: Any, types: tuple[str, str]
) -> None:
    sid = await new_session(client)
    for depth in (8, 300):
        raw = '{"messages":[{"role":"user","content":"hi","metadata":' + deep_text(depth) + "}]}"
        r = await client.post(
            f"/v1/sessions/{sid}/messages",
            content=raw.encode(),
            headers=[("Content-Type", types[0]), ("Content-Type", types[1])],
        )
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["code"] == "ambiguous_content_type", err
        assert "2 Content-Type headers" in err["message"]
    assert await _count(db, sid) == 0
    r = await client.get(f"/v1/sessions/{sid}/messages")
    assert r.status_code == 200 and r.json()["items"] == []
    # one header, the same body: stored, and read back
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        content=b'{"messages":[{"role":"user","content":"hi"}]}',
        headers={"Content-Type": types[0]},
    )
    assert r.status_code in (201, 422), r.text  # 422: text/plain is not a JSON body
    assert (await client.get(f"/v1/sessions/{sid}/messages")).status_code == 200


async def test_two_content_types_on_another_route(client: httpx.AsyncClient) -> None:
    sid = await new_session(client, metadata={"k": 1})
    r = await client.patch(
        f"/v1/sessions/{sid}",
        content=json.dumps({"metadata": {"k": 2}}).encode(),
        headers=[("Content-Type", "application/json"), ("Content-Type", "text/plain")],
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "ambiguous_content_type"
    assert (await client.get(f"/v1/sessions/{sid}")).json()["metadata"] == {"k": 1}


async def test_a_lone_surrogate_is_422_with_or_without_created_at(
    client: httpx.AsyncClient, db: Any
) -> None:
    sid = await new_session(client)
    for extra in ("", ',"created_at":"2025-01-01T00:00:00Z"'):
        # the lane takes plain application/json; another JSON type goes to the router
        for media in ("application/json", "application/loom+json"):
            raw = '{"messages":[{"role":"user","content":"a\\ud800b"' + extra + "}]}"
            r = await client.post(
                f"/v1/sessions/{sid}/messages",
                content=raw.encode(),
                headers={"Content-Type": media},
            )
            assert r.status_code == 422, (extra, media, r.text)
            err = r.json()["error"]
            assert err["code"] == "unsupported_characters", err
            assert err["details"][0]["loc"][:4] == ["body", "messages", 0, "content"], err
    # in metadata, as a key
    raw = '{"messages":[{"role":"user","content":"x","metadata":{"k\\udfffk":1}}]}'
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        content=raw.encode(),
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "unsupported_characters"
    assert await _count(db, sid) == 0


async def test_a_tool_input_parsed_from_arguments_is_held_to_the_stored_depth(
    client: httpx.AsyncClient, db: Any, tenant: Any, app: Any
) -> None:
    """OpenAI `arguments` is a string: its JSON is parsed and stored as the call's input,
    two levels further down its column than the string was; the stored document must
    still fit an export line."""
    sid = await new_session(client)
    limit = storable.max_stored_depth()

    def call(depth: int) -> dict[str, Any]:
        return {
            "messages": [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": deep_text(depth)},
                        }
                    ],
                }
            ]
        }

    r = await client.post(f"/v1/sessions/{sid}/messages", json=call(limit - 1))
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "json_too_deep"
    assert await _count(db, sid) == 0
    r = await client.post(f"/v1/sessions/{sid}/messages", json=call(limit - 2))
    assert r.status_code == 201, r.text
    target = await fresh_tenant(tenant, app)
    async with target:
        await reimports_to_the_same_context(client, target, sid)


async def reimports_to_the_same_context(
    client: httpx.AsyncClient, target: httpx.AsyncClient, sid: str
) -> None:
    """Every read of the session answers 2xx, it takes an append, and its export imports
    into another tenant (`target`) and builds the same context there."""
    for path in ("", "/messages?limit=200", "/memory", "/export"):
        r = await client.get(f"/v1/sessions/{sid}{path}")
        assert r.status_code == 200, (path, r.text[:300])
    lines = await export(client, f"/v1/sessions/{sid}/export")
    r = await do_import(target, lines)
    assert r.status_code == 200, r.text
    body = {"format": "raw"}
    here = await client.post(f"/v1/sessions/{sid}/context", json=body)
    there = await target.post(f"/v1/sessions/{sid}/context", json=body)
    assert here.status_code == there.status_code == 200, (here.text[:300], there.text[:300])
    assert here.json()["messages"] == there.json()["messages"]
    r = await client.post(
        f"/v1/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "more"}]}
    )
    assert r.status_code == 201, r.text


NON_FINITE = ["NaN", "Infinity", "-Infinity"]


@pytest.mark.parametrize("number", NON_FINITE)
async def test_a_non_finite_number_is_422(client: httpx.AsyncClient, db: Any, number: str) -> None:
    sid = await new_session(client)
    raw = '{"messages":[{"role":"user","content":"x","metadata":{"n":' + number + "}}]}"
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        content=raw.encode(),
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 422, r.text
    assert await _count(db, sid) == 0
    assert (await client.get(f"/v1/sessions/{sid}/messages")).status_code == 200


def test_storable_problem_names_the_first_thing() -> None:
    assert storable.problem("fine") is None
    assert storable.problem({"a": [1, 2.5, "x", {"b": None}]}) is None
    p = storable.problem({"a": [1, "x\x00"]})
    assert p is not None and p.code == storable.UNSUPPORTED_CHARACTERS and p.loc == ("a", 1)
    p = storable.problem({"a": float("nan")})
    assert p is not None and p.code == storable.UNSTORABLE_VALUE and p.loc == ("a",)
    deep: Any = 1
    for _ in range(storable.max_stored_depth()):
        deep = [deep]
    assert storable.problem(deep) is None
    p = storable.problem([deep])
    assert p is not None and p.code == storable.JSON_TOO_DEEP
    assert storable.seq_problem(storable.MAX_SEQ) is None
    assert storable.seq_problem(storable.MAX_SEQ + 1) is not None
    assert storable.seq_problem(0) is not None and storable.seq_problem(True) is not None


@given(st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF)))
def test_text_is_storable_exactly_when_utf8_without_nul_holds_it(text: str) -> None:
    ok = "\x00" not in text and all(not 0xD800 <= ord(c) <= 0xDFFF for c in text)
    assert (storable.text_problem(text) is None) == ok


async def _session_export(client: httpx.AsyncClient, n: int = 2) -> tuple[str, list[dict]]:
    sid = await new_session(client)
    msgs = [{"role": "user", "content": f"turn {i} about the invoice"} for i in range(n)]
    r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    return sid, [json.loads(x) for x in await export(client, f"/v1/sessions/{sid}/export")]


def _lines(objs: list[dict[str, Any]]) -> list[str]:
    counts: dict[str, int] = {}
    for o in objs[1:-1]:
        counts[o["t"]] = counts.get(o["t"], 0) + 1
    return [json.dumps(o) for o in objs[:-1]] + [json.dumps({"t": "end", "counts": counts})]


@pytest.mark.parametrize(
    "field,value,named",
    [
        ("content", "a\ud800b", "content"),
        ("content", "nul\x00", "content"),
        ("metadata", {"k": {"\udc00": 1}}, "metadata"),
        ("seq", 2**63 - 1, "seq"),
        ("seq", storable.MAX_SEQ + 1, "seq"),
    ],
)
async def test_an_import_refuses_what_the_api_cannot_store(
    client: httpx.AsyncClient, tenant: Any, app: Any, field: str, value: Any, named: str
) -> None:
    sid, objs = await _session_export(client)
    line = next(i for i, o in enumerate(objs) if o["t"] == "message")
    objs[line][field] = value
    target = await fresh_tenant(tenant, app)
    async with target:
        r = await do_import(target, _lines(objs))
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["code"] == "invalid_import", err
        assert err["details"]["line"] == line + 1, err
        assert err["details"]["field"].split(".")[0] == named, err
        assert (await target.get(f"/v1/sessions/{sid}")).status_code == 404


async def test_an_import_at_the_last_seq_still_takes_appends(
    client: httpx.AsyncClient, tenant: Any, app: Any
) -> None:
    sid, objs = await _session_export(client)
    msgs = [i for i, o in enumerate(objs) if o["t"] == "message"]
    objs[msgs[-1]]["seq"] = storable.MAX_SEQ
    target = await fresh_tenant(tenant, app)
    async with target:
        r = await do_import(target, _lines(objs))
        assert r.status_code == 200, r.text
        r = await target.post(
            f"/v1/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": "after the import"}]},
        )
        assert r.status_code == 201, r.text
        assert r.json()["last_seq"] == storable.MAX_SEQ + 1
        r = await target.post(f"/v1/sessions/{sid}/search", json={"query": "invoice"})
        assert r.status_code == 200, r.text
        assert (await target.get(f"/v1/sessions/{sid}/messages")).status_code == 200


async def test_an_offset_the_api_accepts_an_import_accepts(
    client: httpx.AsyncClient, tenant: Any, app: Any
) -> None:
    sid = await new_session(client)
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {"role": "user", "content": "x", "created_at": "2025-03-01T10:00:00+23:59"}
            ]
        },
    )
    assert r.status_code == 201, r.text
    stored_at = r.json()["messages"][0]["created_at"]
    objs = [json.loads(x) for x in await export(client, f"/v1/sessions/{sid}/export")]
    line = next(i for i, o in enumerate(objs) if o["t"] == "message")
    objs[line]["created_at"] = "2025-03-01T10:00:00+23:59"  # as the client sent it
    target = await fresh_tenant(tenant, app)
    async with target:
        r = await do_import(target, _lines(objs))
        assert r.status_code == 200, r.text
        got = (await target.get(f"/v1/sessions/{sid}/messages")).json()["items"][0]
        assert got["created_at"] == stored_at


async def test_messages_before_their_session_line_import(
    client: httpx.AsyncClient, tenant: Any, app: Any
) -> None:
    """More message lines than one batch, all before the session's line."""
    sid, objs = await _session_export(client)
    template = next(o for o in objs if o["t"] == "message")
    session = next(o for o in objs if o["t"] == "session")
    body = [o for o in objs if o["t"] not in ("message", "session")]
    many = [dict(template, seq=i + 1, content=f"line {i}") for i in range(2_001)]
    for m in many:
        m.pop("text", None)
    reordered = [body[0], *many, *body[1:-1], session, body[-1]]
    target = await fresh_tenant(tenant, app)
    async with target:
        r = await do_import(target, _lines(reordered))
        assert r.status_code == 200, r.text
        r = await target.get(f"/v1/sessions/{sid}")
        assert r.status_code == 200 and r.json()["message_count"] == 2_001, r.text
        # an orphan still names its line
        orphan = dict(template, session_id=str(uuid.uuid4()), seq=1)
        r = await do_import(target, _lines([body[0], orphan, body[-1]]))
        assert r.status_code == 422 and r.json()["error"]["details"]["line"] == 2, r.text
