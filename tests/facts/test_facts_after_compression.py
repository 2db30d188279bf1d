"""Extraction follows compression: the compression job enqueues it over the messages that
left L1 (once `min_batch` of them are new), and each message is read once."""

from __future__ import annotations

import httpx

from app.core.config import Settings
from tests.facts.support import FactModel, Rule, items, run_burst_worker
from tests.fakes.llm_server import FakeLLMServer
from tests.jobs.support import SMALL, append, drain_queue, exchange, memory


async def test_compression_enqueues_extraction_of_the_messages_that_left_l1(
        client: httpx.AsyncClient, settings: Settings, fake_llm: FakeLLMServer,
        llm_settings_for_facts: Settings) -> None:
    await drain_queue(settings)
    model = FactModel([Rule(f"question {n}:", f"The user asked question number {n}.", f"q{n}")
                       for n in range(12)])

    def answer(req):  # summaries are plain text; the facts steps are tool calls
        return model(req)

    fake_llm.respond_with_tools(answer)
    fake_llm.script()  # nothing scripted
    r = await client.post("/v1/sessions", json={"config": {
        **SMALL, "facts": {"enabled": True, "min_batch": 4}}})
    sid = r.json()["id"]
    for n in range(8):
        await append(client, sid, exchange(n, words=40))
    await run_burst_worker(llm_settings_for_facts)
    mem = await memory(client, sid)
    left = min(mem["l1_seqs"]) - 1
    assert left >= 4, mem
    status = (await client.get(f"/v1/sessions/{sid}/memory/extract")).json()
    assert status["status"] == "succeeded", status
    assert status["watermark_seq"] == left  # only what left L1
    texts = sorted(f["text"] for f in await items(client))
    asked = sorted({int(s) for f in await items(client) for s in f["source_seqs"]})
    assert asked and max(asked) <= left and len(texts) == len(asked) == len(set(texts))
    assert all(s % 2 == 1 for s in asked)  # user messages only
    calls = len([c for c in model.calls if c])
    # a second pass with nothing new left L1 reads nothing
    await client.post(f"/v1/sessions/{sid}/memory/extract")
    await run_burst_worker(llm_settings_for_facts)
    after = (await client.get(f"/v1/sessions/{sid}/memory/extract")).json()
    assert after["status"] == "succeeded" and after["watermark_seq"] == 16
    # the explicit extract read the messages still in L1 exactly once
    assert sorted({int(s) for f in await items(client) for s in f["source_seqs"]}) == list(
        range(1, 17, 2))
    assert len(model.calls) > calls


async def test_the_cron_pass_enqueues_lost_extractions(
        client: httpx.AsyncClient, settings: Settings, fake_llm: FakeLLMServer,
        llm_settings_for_facts: Settings, db) -> None:
    import sqlalchemy as sa

    from app.facts.tasks import recover_fact_extractions

    await drain_queue(settings)
    fake_llm.respond_with_tools(FactModel([Rule("question 0:", "The user asked zero.", "q0")]))
    r = await client.post("/v1/sessions", json={"config": {
        **SMALL, "facts": {"enabled": True, "min_batch": 1}}})
    sid = r.json()["id"]
    for n in range(8):
        await append(client, sid, exchange(n, words=40))
    await client.post(f"/v1/sessions/{sid}/memory/compress", params={"wait": "true"})
    await drain_queue(settings)  # the enqueue is lost (as with Redis down)
    await db.execute(sa.text("UPDATE fact_extractions SET status = 'pending', updated_at = "
                             "now() - interval '1 hour' WHERE session_id = :s"), {"s": sid})
    await db.commit()
    from workers.settings import shutdown, startup

    ctx: dict = {"settings": llm_settings_for_facts}
    await startup(ctx)
    try:
        out = await recover_fact_extractions(ctx)
        assert out["enqueued"] >= 1
    finally:
        await shutdown(ctx)
    await run_burst_worker(llm_settings_for_facts)
    status = (await client.get(f"/v1/sessions/{sid}/memory/extract")).json()
    assert status["status"] == "succeeded" and status["watermark_seq"] > 0, status
    assert [f["text"] for f in await items(client)] == ["The user asked zero."]
