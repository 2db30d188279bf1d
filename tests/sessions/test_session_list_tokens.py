"""GET /v1/sessions carries each session's tokens per layer, equal to GET /v1/sessions/{id}
(the list reads the stored counters; the single session sums L1)."""

from typing import Any

from tests.support.api import new_session


async def test_listed_tokens_per_layer_equal_the_sessions_own(client: Any) -> None:
    fresh = await new_session(client, "lister")
    busy = await new_session(
        client, "lister", rom={"system_prompt": "You keep the logs."}, l1_max_messages=6
    )
    r = await client.post(
        f"/v1/sessions/{busy}/messages",
        json={
            "messages": [
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"entry {i}: the lighthouse keeper logs a passing ship " * 3,
                }
                for i in range(20)
            ]
        },
    )
    assert r.status_code == 201, r.text
    assert (
        await client.post(f"/v1/sessions/{busy}/memory/compress", params={"wait": "true"})
    ).status_code == 200
    assert (
        await client.post(f"/v1/sessions/{busy}/memory/promote", json={"seqs": [1, 2]})
    ).status_code == 200

    listed = (await client.get("/v1/sessions", params={"agent_id": "lister"})).json()["items"]
    by_id = {s["id"]: s["memory"] for s in listed}
    for sid in (fresh, busy):
        own = (await client.get(f"/v1/sessions/{sid}")).json()["memory"]
        assert by_id[sid] == own, sid
    assert by_id[busy]["l2"] > 0 and by_id[busy]["promoted"] > 0 and by_id[busy]["rom"] > 0
    assert by_id[fresh]["total"] == 0
