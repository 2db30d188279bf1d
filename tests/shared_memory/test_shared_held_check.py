"""An entry is held only by its own holders: another entry's reference keeps nothing else
alive (the upsert's check once matched any holder of any entry)."""

import uuid

import sqlalchemy as sa

from tests.support.api import new_session

SM = "/v1/shared-memory"


async def test_another_entrys_reference_does_not_keep_an_expired_entry(client, tenant, db):
    sid = await new_session(client)
    big = "ship sighted off the rocks; " * 5000  # over the offload threshold: a reference
    r = await client.post(
        f"/v1/sessions/{sid}/messages",
        json={
            "messages": [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "tu_log", "name": "read_log", "input": {}}
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "tu_log", "content": big}],
                },
            ]
        },
    )
    assert r.status_code == 201, r.text
    held = r.json()["messages"][1]["metadata"]["data_ref"]["id"]

    url = f"{SM}/global/lease"
    first = await client.put(url, json={"value": "first holder"})
    assert first.status_code == 201, first.text
    await db.execute(
        sa.text(
            "UPDATE shared_memory_entries SET expires_at = now() - interval '1 hour', "
            "created_at = now() - interval '2 hours' "
            "WHERE tenant_id = :t AND namespace = 'global' AND storage_key = 'lease'"
        ),
        {"t": uuid.UUID(tenant.id)},
    )
    await db.commit()

    # expired (behind the API's back) and unreferenced: gone, so a create-only PUT creates
    # it anew
    again = await client.put(url, json={"value": "second holder"}, headers={"If-None-Match": "*"})
    assert again.status_code == 201, again.text
    got = await client.get(url)
    assert got.json()["value"] == "second holder"
    created = (
        await db.execute(
            sa.text(
                "SELECT now() - created_at < interval '1 minute' FROM shared_memory_entries "
                "WHERE tenant_id = :t AND namespace = 'global' AND storage_key = 'lease'"
            ),
            {"t": uuid.UUID(tenant.id)},
        )
    ).scalar_one()
    assert created  # a new entry: its creation time restarted
    assert (await client.get(f"/v1/refs/{held}")).status_code == 200
