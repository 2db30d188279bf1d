"""Five D&D player agents and a DM sharing memory over plain HTTP (seeds/agent-private-memory).

Each player has its own `agent` API key and writes `character_sheet` in the `agent`
namespace: the same key name, five private values. The party state lives in `workflow`
(scope = the adventure id) and is updated with compare-and-set (If-Match), so concurrent
joins never lose a member.

    LOOM_URL=http://127.0.0.1:8420 LOOM_ADMIN_KEY=... .venv/bin/python examples/dnd_party.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from typing import NoReturn

import httpx

BASE = os.environ.get("LOOM_URL", "http://127.0.0.1:8420")
ADMIN = os.environ.get("LOOM_ADMIN_KEY", "")
HOW_TO_SET_THE_KEY = """\
Set LOOM_ADMIN_KEY to the admin key; ./scripts/serve keeps it in .loom/admin_key:

    LOOM_ADMIN_KEY=$(cat .loom/admin_key) .venv/bin/python examples/dnd_party.py

LOOM_URL is {url}."""
SM = "/v1/shared-memory"
PLAYERS = {
    "eldrin": "Name: Eldrin, Race: Elf, Class: Wizard",
    "luna": "Name: Luna, Race: Human, Class: Rogue",
    "thorgrim": "Name: Thorgrim, Race: Dwarf, Class: Fighter",
    "sable": "Name: Sable, Race: Tiefling, Class: Warlock",
    "pip": "Name: Pip, Race: Halfling, Class: Bard",
}


def fail(message: str) -> NoReturn:
    print(message, file=sys.stderr)
    sys.exit(2)


async def check_setup(admin: httpx.AsyncClient) -> None:
    """Exit 2 with what to do, not a traceback, when the key or the server is missing."""
    if not ADMIN:
        fail(HOW_TO_SET_THE_KEY.format(url=BASE))
    try:
        r = await admin.get("/v1/api-keys", params={"limit": 1})
    except httpx.TransportError as exc:
        fail(f"Cannot reach Loom Memory at {BASE} ({exc}): start it with ./scripts/serve, "
             "or set LOOM_URL.")
    if r.status_code in (401, 403):
        fail(f"{BASE} refused LOOM_ADMIN_KEY ({r.status_code}: "
             f"{r.json()['error']['message']})\n" + HOW_TO_SET_THE_KEY.format(url=BASE))


async def agent_client(admin: httpx.AsyncClient, tenant_id: str, agent: str) -> httpx.AsyncClient:
    key = await admin.post("/v1/api-keys", json={"tenant_id": tenant_id, "role": "agent",
                                                 "agent_id": agent})
    key.raise_for_status()
    return httpx.AsyncClient(base_url=BASE, timeout=30,
                             headers={"Authorization": f"Bearer {key.json()['secret']}"})


async def join_party(c: httpx.AsyncClient, adventure: str, name: str) -> None:
    """Read-modify-write with If-Match; retry on 409 (someone else joined first)."""
    params = {"scope_id": adventure}
    while True:
        cur = await c.get(f"{SM}/workflow/party", params=params)
        members = cur.json()["value"]["members"] + [name]
        r = await c.put(f"{SM}/workflow/party", params=params,
                        json={"value": {"members": members}},
                        headers={"If-Match": cur.headers["etag"]})
        if r.status_code != 409:
            r.raise_for_status()
            return


async def main() -> None:
    async with httpx.AsyncClient(base_url=BASE, timeout=30,
                                 headers={"Authorization": f"Bearer {ADMIN}"}) as admin:
        await check_setup(admin)
        tenant = await admin.post("/v1/tenants", json={"name": "dnd-" + uuid.uuid4().hex[:6]})
        tenant.raise_for_status()
        tid = tenant.json()["id"]
        players = {p: await agent_client(admin, tid, p) for p in PLAYERS}
        dm = await agent_client(admin, tid, "dm")
    adventure = "lost-mine-" + uuid.uuid4().hex[:6]
    try:
        r = await dm.put(f"{SM}/workflow/party", params={"scope_id": adventure},
                         json={"value": {"members": []}, "metadata": {"by": "dm"}})
        r.raise_for_status()
        # Every player writes the SAME key; the agent namespace keeps them apart.
        await asyncio.gather(*(c.put(f"{SM}/agent/character_sheet",
                                     json={"value": PLAYERS[p]})
                               for p, c in players.items()))
        await asyncio.gather(*(join_party(c, adventure, p) for p, c in players.items()))

        for p, c in players.items():
            sheet = (await c.get(f"{SM}/agent/character_sheet")).json()["value"]
            keys = [i["key"] for i in (await c.get(f"{SM}/agent")).json()["items"]]
            assert sheet == PLAYERS[p], (p, sheet)
            print(f"{p:9} reads its own sheet: {sheet!r}; its agent keys: {keys}")
        # A crafted key never reaches another player's entry.
        spy = await players["eldrin"].get(f"{SM}/agent/agent:luna:character_sheet")
        print(f"eldrin asking for 'agent:luna:character_sheet' -> {spy.status_code}")
        party = (await dm.get(f"{SM}/workflow/party", params={"scope_id": adventure})).json()
        print(f"dm sees the party (version {party['version']}): {party['value']['members']}")
        print(f"dm's own character_sheet -> "
              f"{(await dm.get(f'{SM}/agent/character_sheet')).status_code} (the DM has none)")
    finally:
        for c in [*players.values(), dm]:
            await c.aclose()


if __name__ == "__main__":
    asyncio.run(main())
