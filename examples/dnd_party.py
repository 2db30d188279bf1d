"""Five D&D player agents and a DM sharing memory, on the async Python client
(`loom_client`; seeds/agent-private-memory).

Each player has its own `agent` API key and writes `character_sheet` in the `agent`
namespace: the same key name, five private values. The party state lives in `workflow`
(scope = the adventure id) and is updated with compare-and-set (If-Match), so concurrent
joins never lose a member.

    LOOM_URL=http://127.0.0.1:8420 LOOM_ADMIN_KEY=... .venv/bin/python examples/dnd_party.py

The client lives in clients/python; ./scripts/serve installs it into .venv.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import Awaitable
from typing import Any, NoReturn

from loom_client import (
    AsyncLoomClient,
    Conflict,
    Forbidden,
    LoomConnectionError,
    LoomError,
    Unauthorized,
)
from loom_client.models import SharedMemoryEntry, Tenant

BASE = os.environ.get("LOOM_URL", "http://127.0.0.1:8420")
ADMIN = os.environ.get("LOOM_ADMIN_KEY", "")
HOW_TO_SET_THE_KEY = """\
Set LOOM_ADMIN_KEY to the admin key; ./scripts/serve keeps it in .loom/admin_key:

    LOOM_ADMIN_KEY=$(cat .loom/admin_key) .venv/bin/python examples/dnd_party.py

LOOM_URL is {url}."""
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


async def create_tenant(admin: AsyncLoomClient) -> Tenant:
    """The adventure's tenant. The first call, so it also checks the setup: exit 2 with
    what to do, not a traceback, when the key or the server is missing."""
    if not ADMIN:
        fail(HOW_TO_SET_THE_KEY.format(url=BASE))
    try:
        return await admin.create_tenant("dnd-" + uuid.uuid4().hex[:6])
    except LoomConnectionError as exc:
        fail(f"Cannot reach Loom Memory at {BASE} ({exc}): start it with ./scripts/serve, "
             "or set LOOM_URL.")
    except (Unauthorized, Forbidden) as exc:
        fail(f"{BASE} refused LOOM_ADMIN_KEY ({exc.status}: {exc.message})\n"
             + HOW_TO_SET_THE_KEY.format(url=BASE))


async def read(c: AsyncLoomClient, namespace: str, key: str, **kw: Any) -> SharedMemoryEntry:
    """A JSON entry (raw bytes would come back as a SharedMemoryBlob)."""
    entry = await c.get_shared_memory(namespace, key, **kw)
    assert isinstance(entry, SharedMemoryEntry)
    return entry


async def status_of(call: Awaitable[Any]) -> str:
    """`200`, or the status and code of the error the call raised."""
    try:
        await call
    except LoomError as exc:
        return f"{exc.status} {exc.code}"
    return "200"


async def join_party(c: AsyncLoomClient, adventure: str, name: str) -> None:
    """Read-modify-write with If-Match; retry on Conflict (someone else joined first)."""
    while True:
        party = await read(c, "workflow", "party", scope_id=adventure)
        try:
            await c.put_shared_memory("workflow", "party",
                                      {"members": [*party.value["members"], name]},
                                      scope_id=adventure, if_match=party.version)
            return
        except Conflict:
            continue


async def play(dm: AsyncLoomClient, players: dict[str, AsyncLoomClient],
               adventure: str) -> None:
    await dm.put_shared_memory("workflow", "party", {"members": []}, scope_id=adventure,
                               metadata={"by": "dm"})
    # Every player writes the SAME key; the agent namespace keeps them apart.
    await asyncio.gather(*(c.put_shared_memory("agent", "character_sheet", PLAYERS[p])
                           for p, c in players.items()))
    await asyncio.gather(*(join_party(c, adventure, p) for p, c in players.items()))

    for p, c in players.items():
        sheet = (await read(c, "agent", "character_sheet")).value
        keys = [k.key async for k in c.iter_shared_memory_keys("agent")]
        assert sheet == PLAYERS[p], (p, sheet)
        print(f"{p:9} reads its own sheet: {sheet!r}; its agent keys: {keys}")
    # A crafted key never reaches another player's entry.
    spy = await status_of(players["eldrin"].get_shared_memory(
        "agent", "agent:luna:character_sheet"))
    print(f"eldrin asking for 'agent:luna:character_sheet' -> {spy}")
    party = await read(dm, "workflow", "party", scope_id=adventure)
    print(f"dm sees the party (version {party.version}): {party.value['members']}")
    print(f"dm's own character_sheet -> "
          f"{await status_of(dm.get_shared_memory('agent', 'character_sheet'))} "
          "(the DM has none)")


async def main() -> None:
    async with contextlib.AsyncExitStack() as clients:
        admin = await clients.enter_async_context(AsyncLoomClient(BASE, ADMIN))
        tenant = await create_tenant(admin)

        async def agent(name: str) -> AsyncLoomClient:
            """A client with an `agent` key of its own for `name`."""
            key = await admin.create_api_key("agent", tenant_id=tenant.id, agent_id=name)
            return await clients.enter_async_context(AsyncLoomClient(BASE, key.secret))

        players = {p: await agent(p) for p in PLAYERS}
        dm = await agent("dm")
        adventure = "lost-mine-" + uuid.uuid4().hex[:6]
        print(f"tenant {tenant.name} ({tenant.id}), adventure {adventure}")
        await play(dm, players, adventure)


if __name__ == "__main__":
    asyncio.run(main())
