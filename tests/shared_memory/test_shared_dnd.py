"""The five-player D&D scenario of seeds/agent-private-memory.md, over HTTP with agent keys."""

import sqlalchemy as sa

SM = "/v1/shared-memory"
PLAYERS = {
    "player1": "Name: Eldrin, Race: Elf, Class: Wizard",
    "player2": "Name: Luna, Race: Human, Class: Rogue",
    "player3": "Name: Thorgrim, Race: Dwarf, Class: Fighter",
    "player4": "Name: Sable, Race: Tiefling, Class: Warlock",
    "player5": "Name: Pip, Race: Halfling, Class: Bard",
}


async def test_each_player_keeps_its_own_character_sheet(tenant, db):
    clients = {p: await tenant.new_client("agent", p) for p in PLAYERS}
    dm = await tenant.new_client("agent", "dm")
    for p, sheet in PLAYERS.items():
        r = await clients[p].put(f"{SM}/agent/character_sheet", json={"value": sheet})
        assert r.status_code == 201, r.text
    # The party state is shared in the workflow namespace, updated with compare-and-set.
    party = await dm.put(
        f"{SM}/workflow/party", params={"scope_id": "adventure-1"}, json={"value": {"members": []}}
    )
    for p in PLAYERS:
        while True:
            cur = await clients[p].get(f"{SM}/workflow/party", params={"scope_id": "adventure-1"})
            members = cur.json()["value"]["members"] + [p]
            r = await clients[p].put(
                f"{SM}/workflow/party",
                params={"scope_id": "adventure-1"},
                json={"value": {"members": members}},
                headers={"If-Match": cur.headers["etag"]},
            )
            if r.status_code == 200:
                break
            assert r.status_code == 409
    assert party.status_code == 201

    for p, sheet in PLAYERS.items():
        got = await clients[p].get(f"{SM}/agent/character_sheet")
        assert got.status_code == 200 and got.json()["value"] == sheet
        listing = (await clients[p].get(f"{SM}/agent")).json()
        assert [i["key"] for i in listing["items"]] == ["character_sheet"]
        assert listing["scope_id"] == p
    assert (await dm.get(f"{SM}/agent/character_sheet")).status_code == 404
    final = await dm.get(f"{SM}/workflow/party", params={"scope_id": "adventure-1"})
    assert sorted(final.json()["value"]["members"]) == sorted(PLAYERS)

    rows = (
        await db.execute(
            sa.text(
                "select scope_id, storage_key from shared_memory_entries "
                "where tenant_id = :t and namespace = 'agent' order by scope_id"
            ),
            {"t": tenant.id},
        )
    ).all()
    assert [(r.scope_id, r.storage_key) for r in rows] == [
        (p, f"agent:{p}:character_sheet") for p in sorted(PLAYERS)
    ]


async def test_crafted_keys_never_reach_another_player(tenant):
    p1 = await tenant.new_client("agent", "player1")
    p2 = await tenant.new_client("agent", "player2")
    await p2.put(f"{SM}/agent/character_sheet", json={"value": "Luna"})
    crafted = [
        "agent:player2:character_sheet",
        "agent%3Aplayer2%3Acharacter_sheet",
        "player2:character_sheet",
        ":player2:character_sheet",
    ]
    for key in crafted:
        assert (await p1.get(f"{SM}/agent/{key}")).status_code == 404, key
        assert (await p1.put(f"{SM}/agent/{key}", json={"value": "hacked"})).status_code == 201
        assert (await p1.delete(f"{SM}/agent/{key}")).status_code == 204
    for path in [
        "../player2/character_sheet",
        "..%2Fplayer2%2Fcharacter_sheet",
        "%2E%2E/character_sheet",
        "./character_sheet",
        "a/../character_sheet",
    ]:
        # httpx may normalise dot segments client-side; whatever arrives, it is either
        # refused or lands in player1's own space (checked below).
        r = await p1.get(f"{SM}/agent/{path}")
        assert r.status_code in (200, 400, 404, 422), (path, r.status_code)
        if r.status_code == 200:
            assert r.json()["value"] != "Luna" and r.json()["scope_id"] == "player1"
        r = await p1.put(f"{SM}/agent/{path}", json={"value": "hacked"})
        assert r.status_code in (200, 201, 400, 404, 405, 422), (path, r.status_code)
    # Neither a scope_id nor an X-Agent-Id lets player1 act as player2.
    assert (
        await p1.get(f"{SM}/agent/character_sheet", params={"scope_id": "player2"})
    ).status_code == 400
    assert (
        await p1.get(f"{SM}/agent/character_sheet", headers={"X-Agent-Id": "player2"})
    ).status_code == 403
    got = await p2.get(f"{SM}/agent/character_sheet")
    assert got.json()["value"] == "Luna"
    assert [i["key"] for i in (await p2.get(f"{SM}/agent")).json()["items"]] == ["character_sheet"]
    mine = (await p1.get(f"{SM}/agent")).json()
    assert mine["scope_id"] == "player1" and len(mine["items"]) <= 1
    own = await p1.get(f"{SM}/agent/character_sheet")
    assert own.status_code == 404 or own.json()["value"] == "hacked"
    # player2's reference id does not open its private data for player1.
    ref = (await p2.get(f"{SM}/agent/character_sheet", params={"ref": "true"})).json()
    assert ref["id"].startswith("ref_")
    assert (await p1.get(f"/v1/refs/{ref['id']}")).status_code == 404
    assert (await p2.get(f"/v1/refs/{ref['id']}")).json() == "Luna"
