"""A shared-memory `version` is drawn from one counter for every write, not counted per key
(README "Shared memory", the field's description): it only grows, a new key starts past
the versions other keys took, and a key's next version skips those written meanwhile."""

import httpx


async def test_versions_come_from_one_counter_not_per_key(client: httpx.AsyncClient) -> None:
    async def put(key: str, value: int) -> int:
        r = await client.put(f"/v1/shared-memory/global/{key}", json={"value": value})
        assert r.status_code in (200, 201), r.text
        assert r.headers["etag"] == f'"{r.json()["version"]}"'
        return int(r.json()["version"])

    a1 = await put("counter-a", 1)
    b1 = await put("counter-b", 1)
    b2 = await put("counter-b", 2)
    a2 = await put("counter-a", 2)
    assert a1 < b1 < b2 < a2  # one sequence across keys: counter-b did not start at 1
    assert a2 - a1 >= 3  # counter-a's second write skipped counter-b's two
    # delete and re-create: the key's versions still only grow (no ABA)
    r = await client.delete("/v1/shared-memory/global/counter-a")
    assert r.status_code in (200, 204), r.text
    assert await put("counter-a", 3) > a2
