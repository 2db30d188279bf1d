"""The context route serialises its response once, from plain data: the body must still be
exactly the documented `ContextPublic` (same keys, types and values) in every format."""

import pytest

from app.context.schemas import ContextPublic
from tests.support.api import new_session

TURNS = [
    {"role": "user", "content": "Find the invoice for order 42 — café Ünïcode"},
    {
        "role": "assistant",
        "content": "Looking it up.",
        "tool_calls": [{"id": "t1", "name": "lookup", "input": {"order": 42, "big": 2**70}}],
    },
    {"role": "tool", "tool_use_id": "t1", "content": '{"invoice": "INV-42"}'},
    {"role": "assistant", "content": "Invoice INV-42, 19.50 EUR."},
]


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "raw"])
async def test_body_is_the_documented_model(client, fmt):
    sid = await new_session(client)
    r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": TURNS})
    assert r.status_code == 201, r.text
    r = await client.post(f"/v1/sessions/{sid}/context", json={"format": fmt})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert ContextPublic.model_validate(body).model_dump(mode="json") == body
    assert body["format"] == fmt and body["l1_seqs"] == [1, 2, 3, 4]
    text = r.text
    assert "café Ünïcode" in text and str(2**70) in text  # non-ASCII raw, ints of any size
    assert body["total_tokens"] == sum(body["tokens"].values()) <= body["budget"]
