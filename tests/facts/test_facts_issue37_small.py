"""Issue 37, finding 11: an extraction `add` says why; `POST /v1/memory-items` gives the
ETag a PATCH needs; a weak `W/"n"` If-Match names version n; a date-only `as_of` is
accepted and means 00:00 UTC of that day."""

from __future__ import annotations

import httpx
from pydantic import TypeAdapter

from app.core.times import AsOf
from tests.facts.helpers import SCENARIO, extract, history, scope_facts, talk
from tests.fakes.fact_model import FactModel
from tests.fakes.llm_server import FakeLLMServer


def test_a_date_alone_is_the_start_of_that_day_utc() -> None:
    t = TypeAdapter(AsOf)
    assert t.validate_python("2026-02-15").isoformat() == "2026-02-15T00:00:00+00:00"
    assert t.validate_python("2026-02-15T10:00:00+02:00").hour == 8


async def test_extraction_adds_say_where_they_were_stated(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    fake_llm.respond_with_tools(FactModel(SCENARIO))
    sid = (
        await llm_client.post("/v1/sessions", json={"config": {"facts": {"enabled": True}}})
    ).json()["id"]
    await talk(llm_client, sid, ("2026-01-10T09:00:00Z", "Hi! I live in Paris."))
    await extract(llm_client, sid)
    [fact] = await scope_facts(llm_client, "agent/agent-1")
    [v1] = (await history(llm_client, fact["id"]))["versions"]
    assert v1["change"] == "add" and v1["reason"] == f"stated in session {sid} msg 1"


async def test_etag_on_create_weak_if_match_and_date_only_as_of(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post(
        "/v1/memory-items", json={"scope": "agent", "kind": "fact", "text": "Lives in Oslo."}
    )
    assert r.status_code == 201 and r.headers["ETag"] == '"1"', r.headers
    iid = r.json()["id"]
    r = await client.patch(
        f"/v1/memory-items/{iid}",
        headers={"If-Match": 'W/"1"'},
        json={"valid_from": "2026-02-15T06:00:00Z"},
    )
    assert r.status_code == 200 and r.headers["ETag"] == '"2"', r.text
    r = await client.patch(
        f"/v1/memory-items/{iid}", headers={"If-Match": 'W/"1"'}, json={"importance": 0.9}
    )
    assert r.status_code == 409 and r.json()["error"]["code"] == "version_conflict", r.text

    async def true_at(at: str) -> list[str]:
        r = await client.post(
            "/v1/memory-items/query",
            params={"as_of": at},
            json={"filters": {"kind": "fact", "scope": "agent"}},
        )
        assert r.status_code == 200, r.text
        return [i["text"] for i in r.json()["items"]]

    assert await true_at("2026-02-15") == []  # 00:00 UTC: before 06:00
    assert await true_at("2026-02-16") == ["Lives in Oslo."]
    h = await client.get(f"/v1/memory-items/{iid}/history", params={"as_of": "2026-02-16"})
    assert h.status_code == 200 and h.json()["as_of"] == "2026-02-16T00:00:00Z", h.text
    bad = await client.post(
        "/v1/memory-items/query",
        params={"as_of": "2026-02-30"},
        json={"filters": {"kind": "fact"}},
    )
    assert bad.status_code == 422 and "real date" in bad.text, bad.text
    package = await client.post(
        "/v1/context-packages",
        json={"budget_tokens": 500, "as_of": "2026-02-16"},
    )
    assert package.status_code == 200, package.text
