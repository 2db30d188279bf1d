"""Learned layer over HTTP: versions, active version, rollback, agent scoping."""

from __future__ import annotations


def _content(n: int) -> dict:
    return {
        "signatures": {"qa": {"inputs": ["question"], "outputs": ["answer"], "v": n}},
        "demonstrations": [{"question": f"q{n}", "answer": f"a{n}"}],
        "tuned_prompts": {"system": f"prompt v{n}"},
    }


async def test_versions_and_rollback_restores_earlier_version(client) -> None:
    assert (await client.get("/v1/agents/a1/learned")).status_code == 404
    for n in (1, 2, 3):
        r = await client.put("/v1/agents/a1/learned", json=_content(n))
        assert r.status_code == 200, r.text
        assert r.json()["version"] == n and r.json()["active_version"] == n
    got = (await client.get("/v1/agents/a1/learned")).json()
    assert got["version"] == 3 and got["tuned_prompts"] == {"system": "prompt v3"}
    r = await client.post("/v1/agents/a1/learned/rollback")
    assert r.status_code == 200 and r.json()["version"] == 2
    got = (await client.get("/v1/agents/a1/learned")).json()
    assert got["version"] == 2 and got["active_version"] == 2 and got["latest_version"] == 3
    assert got["tuned_prompts"] == {"system": "prompt v2"}
    r = await client.post("/v1/agents/a1/learned/rollback", json={"to_version": 1})
    assert r.json()["demonstrations"] == [{"question": "q1", "answer": "a1"}]
    # nothing older than 1; not forward; unknown version
    assert (await client.post("/v1/agents/a1/learned/rollback")).status_code == 409
    r = await client.post("/v1/agents/a1/learned/rollback", json={"to_version": 3})
    assert r.status_code == 409
    r = await client.post("/v1/agents/a1/learned/rollback", json={"to_version": 99})
    assert r.status_code == 404
    # a specific version is readable; a new PUT never reuses a number
    assert (await client.get("/v1/agents/a1/learned?version=3")).json()["version"] == 3
    r = await client.put("/v1/agents/a1/learned", json=_content(4))
    assert r.json()["version"] == 4 and r.json()["active_version"] == 4


async def test_agents_are_separate_and_agent_keys_see_only_their_own(client, tenant) -> None:
    await client.put("/v1/agents/a1/learned", json=_content(1))
    assert (await client.get("/v1/agents/a2/learned")).status_code == 404
    agent = await tenant.new_client(role="agent", agent_id="a2")
    assert (await agent.get("/v1/agents/a1/learned")).status_code == 403
    assert (await agent.put("/v1/agents/a1/learned", json=_content(2))).status_code == 403
    assert (await agent.put("/v1/agents/a2/learned", json=_content(1))).status_code == 200
    assert (await client.get("/v1/agents/a1/learned")).json()["version"] == 1


async def test_learned_body_is_validated(client) -> None:
    r = await client.put("/v1/agents/a1/learned", json={"signatures": [], "oops": 1})
    assert r.status_code == 422
