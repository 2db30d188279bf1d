"""A heuristic summary that is not shorter than the messages it would replace is not written
(issue 38): two short turns stay in L1, the job ends with nothing written and logs no
"0 tokens saved"; once later turns make a range whose summary is shorter, it is written."""

import logging
from typing import Any

import httpx
import pytest

from app.core.config import Settings
from app.core.tokens import count_message
from app.memory.heuristic_summariser import heuristic_summary
from tests.jobs.support import append, drain_queue, exchange, memory, new_session, run_burst_worker

TWO_SHORT_TURNS = [
    {"role": "user", "content": "Plan the migration"},
    {"role": "assistant", "content": "Snapshot the billing database first."},
    {"role": "user", "content": "Which night?"},
    {"role": "assistant", "content": "Sunday."},
]


def _tokens(messages: list[dict[str, Any]]) -> int:
    return sum(count_message(m["role"], m["content"], None) for m in messages)


async def test_two_short_turns_are_not_replaced_by_a_longer_summary(
    client: httpx.AsyncClient, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    await drain_queue(settings)
    no_llm = settings.model_copy(update={"llm_provider": "none"})
    caplog.set_level(logging.INFO, logger="loom.jobs.compress")
    # L1 keeps 2 messages: the first turn overflows it, and the append enqueues a job
    sid = await new_session(client, l1_max_messages=2)
    await append(client, sid, TWO_SHORT_TURNS)
    first = [{"seq": i + 1, **m} for i, m in enumerate(TWO_SHORT_TURNS[:2])]
    assert heuristic_summary(first).token_count >= _tokens(TWO_SHORT_TURNS[:2])  # the premise
    before = await memory(client, sid)
    assert before["compression_due"] and before["l1_seqs"] == [1, 2, 3, 4]

    await run_burst_worker(no_llm)
    mem = await memory(client, sid)
    assert mem["l1_seqs"] == [1, 2, 3, 4] and mem["l2"] == []
    job = mem["compression"]
    assert job["status"] == "succeeded" and job["summaries_written"] == 0
    assert not [r for r in caplog.records if "tokens saved" in r.getMessage()]
    # an explicit compression, in the request, leaves them too
    done = await client.post(f"/v1/sessions/{sid}/memory/compress?wait=true")
    assert done.status_code == 200, done.text
    assert done.json()["summaries_written"] == 0
    assert done.json()["memory"]["l1_seqs"] == [1, 2, 3, 4] and done.json()["memory"]["l2"] == []
    # the context still shows every message, within its budget
    ctx = (await client.post(f"/v1/sessions/{sid}/context", json={"format": "raw"})).json()
    assert ctx["total_tokens"] <= ctx["budget"]

    # longer turns make a range whose summary saves tokens: written, and the log says so
    for n in range(3):
        await append(client, sid, exchange(n))
    await run_burst_worker(no_llm)
    mem = await memory(client, sid)
    assert mem["l2"] and mem["l2"][0]["start_seq"] == 1 and mem["l2"][0]["method"] == "heuristic"
    assert mem["l1_seqs"][0] == mem["l2"][-1]["end_seq"] + 1
    assert mem["compression"]["tokens_saved"] > 0
    saved = [r.getMessage() for r in caplog.records if "tokens saved" in r.getMessage()]
    assert saved and all(not m.endswith(" 0 tokens saved") for m in saved)
