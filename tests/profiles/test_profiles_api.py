"""Agent profiles: versioned, read by version, and taken as a session's ROM when the session
is created (new sessions see the current version; a session's ROM is frozen)."""

from typing import Any

import httpx

from tests.support.api import new_session

# the memory tests' small window
SMALL: dict[str, Any] = {
    "max_context_tokens": 2000,
    "reserved_output_tokens": 200,
    "l1_max_messages": 10,
    "max_l2_tokens": 400,
}


async def test_rom_is_frozen_and_profiles_hot_reload(client: httpx.AsyncClient) -> None:
    v1 = await client.put("/v1/agents/agent-1/profile", json={"system_prompt": "You are v1."})
    assert v1.status_code == 200 and v1.json()["version"] == 1
    old = await new_session(client, **SMALL)
    v2 = await client.put(
        "/v1/agents/agent-1/profile", json={"system_prompt": "You are v2.", "patterns": ["p"]}
    )
    assert v2.json()["version"] == 2
    new = await new_session(client, **SMALL)
    ctx_old = (await client.post(f"/v1/sessions/{old}/context", json={})).json()
    ctx_new = (await client.post(f"/v1/sessions/{new}/context", json={})).json()
    assert ctx_old["system"][0]["text"] == "You are v1."
    assert ctx_old["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert ctx_new["system"][0]["text"].startswith("You are v2.")
    patch = await client.patch(f"/v1/sessions/{old}", json={"rom": {"system_prompt": "x"}})
    assert patch.status_code == 409 and patch.json()["error"]["code"] == "rom_frozen"
    inline = await new_session(client, rom={"system_prompt": "Inline ROM."}, **SMALL)
    ctx = (await client.post(f"/v1/sessions/{inline}/context", json={})).json()
    assert ctx["system"][0]["text"] == "Inline ROM."
    assert (await client.get("/v1/agents/agent-1/profile?version=1")).json()["version"] == 1


async def test_concurrent_publishes_never_share_a_version(client: httpx.AsyncClient) -> None:
    """Publishes racing for one agent: each stored version is one publish's, and a publish
    that lost the race is 409 `profile_version_conflict` (nothing half-stored)."""
    import asyncio

    agent = "agent-race"
    answers = await asyncio.gather(
        *(
            client.put(f"/v1/agents/{agent}/profile", json={"system_prompt": f"v{i}"})
            for i in range(8)
        )
    )
    won = [r.json() for r in answers if r.status_code == 200]
    lost = [r for r in answers if r.status_code != 200]
    assert won, [r.text for r in answers]
    for r in lost:
        assert r.status_code == 409, r.text
        assert r.json()["error"]["code"] == "profile_version_conflict"
    versions = [w["version"] for w in won]
    assert len(set(versions)) == len(versions)
    for w in won:
        got = await client.get(f"/v1/agents/{agent}/profile?version={w['version']}")
        assert got.status_code == 200 and got.json()["system_prompt"] == w["system_prompt"]
