"""A new session takes its agent profile's ROM and its `facts` and `audit` defaults (the
session resource reads the profile; memory freezes the ROM it is handed): a session's own
settings win, an inline ROM reads no profile, and a ROM over half the budget is refused."""

import httpx

from tests.support.api import create_session


async def _memory(client: httpx.AsyncClient, sid: str) -> dict:
    r = await client.get(f"/v1/sessions/{sid}/memory")
    assert r.status_code == 200, r.text
    return r.json()


async def test_profile_rom_and_defaults(client: httpx.AsyncClient) -> None:
    put = await client.put(
        "/v1/agents/agent-1/profile",
        json={"system_prompt": "You plan.", "facts": {"enabled": True}, "audit": True},
    )
    assert put.status_code == 200, put.text

    taken = await create_session(client)
    assert taken["config"]["facts"]["enabled"] is True
    assert taken["config"]["audit"] is True
    assert (await _memory(client, taken["id"]))["rom_profile_version"] == 1

    own = await create_session(client, facts={"enabled": False}, audit=False)
    assert own["config"]["facts"]["enabled"] is False and own["config"]["audit"] is False

    inline = await create_session(client, rom={"system_prompt": "Inline."})
    assert inline["config"]["facts"] is None and inline["config"]["audit"] is None
    assert (await _memory(client, inline["id"]))["rom_profile_version"] is None


async def test_no_profile_is_an_empty_rom(client: httpx.AsyncClient) -> None:
    session = await create_session(client, "agent-without-profile")
    memory = await _memory(client, session["id"])
    assert memory["rom_profile_version"] is None and memory["tokens"]["rom"] == 0
    assert session["config"]["facts"] is None and session["config"]["audit"] is None


async def test_rom_over_half_the_budget_is_refused(client: httpx.AsyncClient) -> None:
    big = "word " * 2000
    assert (
        await client.put("/v1/agents/agent-1/profile", json={"system_prompt": big})
    ).status_code == 200
    for body in ({}, {"rom": {"system_prompt": big}}):
        r = await client.post("/v1/sessions", json={"config": {"max_context_tokens": 2000}, **body})
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert error["code"] == "rom_too_large" and "at most half the budget" in error["message"]
    assert (await client.get("/v1/sessions")).json()["items"] == []
