"""Record 1,000 context builds across compression (stored summaries, stand-ins, the L1
FIFO), promotion, recall (hits with their tool groups), facts, knowledge and learned blocks
and truncation, then replay every one of them after the sessions moved on: the same
SHA-256 in every format.

Builds run directly (the service the route calls, then the recording step), the history
grows through the API; replays read their sources as the route does (`app.manifests.replay`).
"""

from __future__ import annotations

import json
import random
import re
import uuid
from typing import Any

import sqlalchemy as sa

from app.auth.caller import Caller
from app.context import service
from app.context.schemas import ContextRequest, RecallInput
from app.manifests import replay
from app.manifests import repository as manifest_repository
from app.manifests import service as manifest_service
from app.manifests.hashes import FORMATS
from app.state import app_state
from tests.support.sa_conn import driver_connection

BUILDS = 1000
WHY = {  # how each provider's reason begins in a manifest (its own words)
    "block:facts": r"\d+ valid fact\(s\) of the session's fact scope: \d+ matched ",
    "block:knowledge": r"\d+ item\(s\) of the session's knowledge package \(",
    "block:learned": r"The agent's active learned version \d+ ",
}
WORDS = (
    "invoice order billing database migration cache redis postgres deploy review "
    "schema search recall context budget summary token window agent tool"
).split()


def _text(rnd: random.Random, n: int) -> str:
    return " ".join(rnd.choice(WORDS) for _ in range(n))


def _turn(rnd: random.Random, step: int, long: bool) -> list[dict[str, Any]]:
    """A user message and an answer; every third turn with a tool call and its result;
    a `long` one is truncated in a short budget."""
    user = {"role": "user", "content": _text(rnd, 1500 if long else rnd.choice((6, 12, 40)))}
    if step % 3 == 0:
        tid = f"call_{step}"
        return [
            user,
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [{"id": tid, "name": "lookup", "input": {"q": step}}],
            },
            {"role": "tool", "tool_use_id": tid, "content": _text(rnd, 20)},
            {"role": "assistant", "content": _text(rnd, 15)},
        ]
    return [user, {"role": "assistant", "content": _text(rnd, rnd.choice((8, 25, 60)))}]


async def _sessions(client: Any) -> list[str]:
    project = f"p{uuid.uuid4().hex[:8]}"
    for i in range(6):
        r = await client.post(
            "/v1/memory-items",
            json={
                "scope": f"project/{project}",
                "kind": "fact",
                "importance": 0.5 + i / 10,
                "text": f"The {WORDS[i]} {WORDS[i + 5]} is owned by team {i}.",
            },
        )
        assert r.status_code == 201, r.text
        r = await client.post(
            "/v1/memory-items",
            json={
                "scope": f"project/{project}",
                "kind": "note",
                "importance": 0.3 + i / 10,
                "text": f"Note {i} about {WORDS[i + 2]}.",
            },
        )
        assert r.status_code == 201, r.text
    r = await client.put(
        "/v1/agents/agent-1/learned",
        json={
            "signatures": {"qa": {"inputs": ["question"], "outputs": ["answer"]}},
            "demonstrations": [{"question": "q", "answer": "a"}],
            "tuned_prompts": {"system": "Be brief."},
        },
    )
    assert r.status_code in (200, 201), r.text
    configs: list[dict[str, Any]] = [
        {
            "max_context_tokens": 1800,
            "l1_max_messages": 8,
            "facts": {"enabled": True, "scope": f"project/{project}", "share": 0.1},
            "recall": {"share": 0.2, "max_messages": 6},
        },
        {
            "max_context_tokens": 2400,
            "l1_max_messages": 10,
            "knowledge": {"project_id": project, "share": 0.1, "learned": True},
        },
        {
            "max_context_tokens": 1200,
            "l1_max_messages": 6,
            "recall": {"share": 0.15, "max_messages": 4},
        },
        {"max_context_tokens": 3000, "l1_max_messages": 12},
    ]
    out = []
    for cfg in configs:
        r = await client.post(
            "/v1/sessions",
            json={
                "config": {**cfg, "audit": True},
                "rom": {"system_prompt": "You are the billing agent.", "patterns": ["be exact"]},
            },
        )
        assert r.status_code == 201, r.text
        out.append(r.json()["id"])
    r = await client.put(
        f"/v1/sessions/{out[2]}/kernel/tools",
        json={
            "tools": [
                {
                    "name": "lookup",
                    "description": "Find a thing.",
                    "input_schema": {"type": "object", "properties": {"q": {"type": "integer"}}},
                }
            ]
        },
    )
    assert r.status_code == 200, r.text
    return out


async def test_a_thousand_recorded_builds_replay_to_the_same_bytes(app, tenant, client, db):
    state = app_state(app)
    caller = Caller(tenant_id=uuid.UUID(tenant.id), role="service", agent_id="agent-1", key_id=None)
    rnd = random.Random(30)
    sids = await _sessions(client)
    recorded: list[tuple[str, str]] = []
    seen = {
        "summary": 0,
        "stand_in": 0,
        "recalled": 0,
        "promoted": 0,
        "block:facts": 0,
        "block:knowledge": 0,
        "block:learned": 0,
        "truncated": 0,
        "gap": 0,
    }
    step = 0
    while len(recorded) < BUILDS:
        step += 1
        for n, sid in enumerate(sids):
            r = await client.post(
                f"/v1/sessions/{sid}/messages",
                json={"messages": _turn(rnd, step, n == 2 and step % 10 == 5)},
            )
            assert r.status_code == 201, r.text
            if step % 7 == n:
                r = await client.post(
                    f"/v1/sessions/{sid}/memory/compress", params={"wait": "true"}
                )
                assert r.status_code in (200, 202), r.text

            if n == 3 and step % 5 == 0 and step > 6:
                await client.delete(f"/v1/sessions/{sid}/memory/promoted")
                r = await client.post(f"/v1/sessions/{sid}/memory/promote", json={"seqs": [1, 2]})
                assert r.status_code in (200, 409), r.text
            # the builds of one turn (the session's recall searches once for them), and
            # now and then one that recalls for a query of its own
            formats: list[Any] = list(FORMATS)
            bodies = [ContextRequest(format=f) for f in formats]
            if step % 3 == n % 3:
                bodies.append(
                    ContextRequest(
                        format=rnd.choice(formats),
                        recall=RecallInput(share=0.2, query=_text(rnd, 3)),
                    )
                )
            for body in bodies:
                built, extra, _ = await service.build_and_record(
                    state, caller, uuid.UUID(sid), body, body.format
                )
                assert extra["recorded"]
                recorded.append((sid, extra["context_id"]))
                m = manifest_service.make(built, body, body.format, uuid.UUID(extra["context_id"]))
                for b in m["blocks"]:
                    kind = b["key"].split(":")[0]
                    for what in ("summary", "stand_in", "gap"):
                        seen[what] += kind == what
                    seen["recalled"] += b["layer"] == "recalled"
                    seen["promoted"] += b["layer"] == "promoted"
                    seen["truncated"] += b["truncated_to"] is not None
                    if b["layer"] == "block":
                        seen[b["key"]] += 1
                        # the reason is the provider's own, with its share of the budget
                        assert re.match(WHY[b["key"]], b["why"]), b["why"]
                        assert "within its share" in b["why"] and b["why"].endswith(".")
    # every mechanism took part
    assert all(v > 0 for k, v in seen.items() if k != "gap"), seen

    rows = [  # what is stored, in full (`manifest_repository.row_of`)
        manifest_repository.row_of(r)
        for r in (
            await db.execute(
                sa.text("SELECT * FROM context_manifests WHERE tenant_id = :t"),
                {"t": uuid.UUID(tenant.id)},
            )
        ).all()
    ]
    assert len(rows) == len(recorded) >= BUILDS
    loaded: dict[str, replay.Sources] = {}  # builds of one turn name the same sources
    for row in rows:
        key = json.dumps(
            [row.session_id.hex, [b["sources"] for b in row.manifest["blocks"]]], sort_keys=True
        )
        if key not in loaded:
            loaded[key] = await replay.load_sources(
                await driver_connection(db), uuid.UUID(tenant.id), row.session_id, row.manifest
            )
        sources = loaded[key]
        again, changes = replay.rebuild(
            row.manifest, sources, app_state(app).parts[manifest_service.BlockReplays].by_name
        )
        assert again is not None and not changes, (row.id, changes)
        # the recorded format's bytes again (render checks every recorded hash: 409 else)
        fmt = row.manifest["format"]
        # (a raw build returns its manifest, so it hashed every format)
        assert sorted(row.manifest["sha256"]) == ([fmt] if fmt != "raw" else sorted(FORMATS))
        _, digest = replay.render(row.manifest, again, fmt)
        assert digest == row.manifest["sha256"][fmt]
        # and the other formats of the same rebuilt context
        for other in FORMATS:
            replay.render(row.manifest, again, other)
