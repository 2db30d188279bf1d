"""Bad model output writes nothing, is retried with backoff by the real arq job, and after
the last try leaves a visible job error (GET /v1/sessions/{id}/memory/extract); the queue
is left empty (no crash loop)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from app.core.config import Settings
from tests.facts.support import facts_session, items, run_burst_worker, say
from tests.fakes.llm_server import FakeLLMServer, RecordedRequest, Reply, ToolUse
from tests.jobs.support import drain_queue

GOOD_CANDIDATE = {
    "facts": [
        {
            "text": "The user prefers coffee.",
            "key": "user.drink",
            "importance": 0.8,
            "tags": ["drink"],
            "source_seqs": [1],
        }
    ]
}
STORED = "The user prefers tea."


def step2(decision: dict[str, Any]) -> ToolUse:
    return ToolUse({"decisions": [decision]})


# (name, the answers of every try, whether a stored neighbour makes step 2 run)
VARIANTS: list[tuple[str, list[Any], str]] = [
    ("schema", [ToolUse({"facts": [{"text": "x"}]})], "does not match the schema"),
    ("not_json_shape", [ToolUse({"facts": "none"})], "does not match the schema"),
    (
        "seq_outside",
        [ToolUse({"facts": [{**GOOD_CANDIDATE["facts"][0], "source_seqs": [99]}]})],
        "outside the batch",
    ),
    ("no_tool_call", [Reply("I found some facts!")], "no record_facts tool call"),
    (
        "unknown_op",
        [ToolUse(GOOD_CANDIDATE), step2({"candidate": 0, "op": "MERGE"})],
        "does not match the schema",
    ),
    (
        "unknown_id",
        [
            ToolUse(GOOD_CANDIDATE),
            step2({"candidate": 0, "op": "INVALIDATE", "target_id": str(uuid.uuid4())}),
        ],
        "which was not shown",
    ),
    (
        "unknown_candidate",
        [ToolUse(GOOD_CANDIDATE), step2({"candidate": 3, "op": "ADD"})],
        "unknown fact 3",
    ),
    (
        "update_without_text",
        [ToolUse(GOOD_CANDIDATE), step2({"candidate": 0, "op": "UPDATE", "target_id": "{stored}"})],
        "gives no text",
    ),
]


@pytest.mark.parametrize(("name", "answers", "error"), VARIANTS, ids=[v[0] for v in VARIANTS])
async def test_bad_output_writes_nothing_and_fails_visibly(
    name: str,
    answers: list[Any],
    error: str,
    client: httpx.AsyncClient,
    settings: Settings,
    fake_llm: FakeLLMServer,
    llm_settings_for_facts: Settings,
) -> None:
    await drain_queue(settings)
    stored = (
        await client.post(
            "/v1/memory-items", json={"scope": "agent", "kind": "fact", "text": STORED}
        )
    ).json()
    sid = await facts_session(client)
    await say(client, sid, ("I prefer coffee now.", "ok"))

    def resolve(a: Any) -> Any:
        given: Any = a.input if isinstance(a, ToolUse) else None
        if isinstance(a, ToolUse) and "{stored}" in str(given):
            d = dict(given["decisions"][0], target_id=stored["id"])
            return ToolUse({"decisions": [d]})
        return a

    tries = llm_settings_for_facts.facts_max_tries
    fake_llm.script(*[resolve(a) for _ in range(tries) for a in answers])
    r = await client.post(f"/v1/sessions/{sid}/memory/extract")
    assert r.status_code == 202 and r.json()["extraction"]["status"] == "pending", r.text
    await run_burst_worker(llm_settings_for_facts)

    status = (await client.get(f"/v1/sessions/{sid}/memory/extract")).json()
    assert status["status"] == "failed", status
    assert error in status["last_error"], status
    # the poison batch is set aside: marked failed, the watermark past it (issue 27)
    assert status["attempts"] == tries and status["watermark_seq"] == 2
    assert [(f["first_seq"], f["last_seq"]) for f in status["failed_ranges"]] == [(1, 2)]
    assert error in status["failed_ranges"][0]["error"]
    assert status["last_error"].startswith("msg 1-2 set aside after 2 tries")
    assert status["llm_calls"] == tries * len(answers)
    # nothing written: the stored fact unchanged, no new fact, no new version
    facts = await items(client, include_invalidated=True)
    assert [f["text"] for f in facts] == [STORED] and facts[0]["version"] == 1
    assert facts[0]["invalid_at"] is None
    h = (await client.get(f"/v1/memory-items/{stored['id']}/history")).json()
    assert [(v["version"], v["change"]) for v in h["versions"]] == [(1, "add")]
    assert len(fake_llm.requests) == tries * len(answers)
    r = aioredis.Redis.from_url(str(settings.redis_url))
    try:
        assert await r.zcard(settings.queue_name) == 0  # no crash loop: nothing queued
    finally:
        await r.aclose()


async def test_a_retry_after_bad_output_applies_once(
    client: httpx.AsyncClient,
    settings: Settings,
    fake_llm: FakeLLMServer,
    llm_settings_for_facts: Settings,
) -> None:
    await drain_queue(settings)
    sid = await facts_session(client)
    await say(client, sid, ("I prefer coffee now.", "ok"))

    def good(req: RecordedRequest) -> Any:
        return GOOD_CANDIDATE

    fake_llm.script(ToolUse({"facts": [{"text": ""}]}))  # the first try's answer is bad
    fake_llm.respond_with_tools(good)
    await client.post(f"/v1/sessions/{sid}/memory/extract")
    await run_burst_worker(llm_settings_for_facts)
    status = (await client.get(f"/v1/sessions/{sid}/memory/extract")).json()
    assert status["status"] == "succeeded" and status["attempts"] == 2, status
    assert status["watermark_seq"] == 2 and status["last_error"] is None
    assert [f["text"] for f in await items(client)] == ["The user prefers coffee."]
