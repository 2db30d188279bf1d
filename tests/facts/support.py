"""A rule-based stand-in for the model behind the fake Anthropic server, and helpers.

`FactModel` answers both extraction steps from what the prompts show (so the tests also
prove the prompts carry what the model needs): step 1 turns each message line that
matches a rule into a fact naming that message's seq; step 2 compares each new fact's
`topic` with the stored facts shown (same topic and same text: NONE; same topic, other
text: INVALIDATE, or UPDATE for topics marked so; otherwise ADD).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import httpx
from arq.worker import Worker

from app.core.config import Settings
from app.core.redis import arq_settings
from tests.fakes.llm_server import RecordedRequest
from workers.settings import compression_functions, facts_functions, shutdown, startup

_LINE = re.compile(r"^\[msg (\d+) \| ([^|]+) \| ([^\]]+)\] (.*)$", re.M)
_NEW = re.compile(r"^New fact (\d+) \(stated [^)]*\): (.*)$", re.M)
_STORED = re.compile(r"^  - id=([0-9a-f-]{36}) \(since [^)]*\): (.*)$", re.M)


@dataclass
class Rule:
    """A message containing `trigger` states `fact` (about `topic`)."""

    trigger: str
    fact: str
    topic: str
    importance: float = 0.8
    update: bool = False  # a different fact of the same topic rewrites instead of replacing


@dataclass
class FactModel:
    rules: list[Rule]
    calls: list[str] = field(default_factory=list)
    latest_only: bool = True  # False: a model that records every change of a batch

    def topic_of(self, text: str) -> Rule | None:
        return next((r for r in self.rules if r.fact == text.strip()), None)

    def __call__(self, req: RecordedRequest) -> Any:
        self.calls.append(req.tool_name or "")
        if req.tool_name == "record_facts":
            return self.extract(req.text)
        if req.tool_name == "decide_facts":
            return self.decide(req.text)
        raise AssertionError(f"unexpected tool {req.tool_name}")

    def extract(self, prompt: str) -> dict[str, Any]:
        """As the prompt asks: a fact the batch changes is recorded in its latest state
        (citing every message about it)."""
        by_topic: dict[str, dict[str, Any]] = {}
        for m in _LINE.finditer(prompt):
            seq, speaker, text = int(m.group(1)), m.group(3), m.group(4)
            if not speaker.startswith("user"):
                continue
            for r in self.rules:
                if r.trigger in text:
                    key = r.topic if self.latest_only else f"{r.topic}:{seq}"
                    seqs = by_topic.pop(key, {}).get("source_seqs", [])
                    by_topic[key] = {"text": r.fact, "importance": r.importance,
                                         "tags": [r.topic], "source_seqs": [*seqs, seq]}
        return {"facts": list(by_topic.values())}

    def decide(self, prompt: str) -> dict[str, Any]:
        decisions = []
        for block in prompt.split("\n\nNew fact ")[0:]:
            block = block if block.startswith("New fact ") else "New fact " + block
            m = _NEW.search(block)
            if m is None:
                continue
            i, text = int(m.group(1)), m.group(2).strip()
            rule = self.topic_of(text)
            decision: dict[str, Any] = {"candidate": i, "op": "ADD"}
            for sid, stored in _STORED.findall(block):
                old = self.topic_of(stored)
                if rule is None or old is None or old.topic != rule.topic:
                    continue
                if stored.strip() == text:
                    decision = {"candidate": i, "op": "NONE"}
                elif rule.update:
                    decision = {"candidate": i, "op": "UPDATE", "target_id": sid,
                                "text": text}
                else:
                    decision = {"candidate": i, "op": "INVALIDATE", "target_id": sid}
                break
            decisions.append(decision)
        return {"decisions": decisions}


PREFERENCES = [
    Rule("I prefer tea", "The user prefers tea in the morning.", "drink"),
    Rule("switched to coffee", "The user prefers coffee in the morning.", "drink"),
    Rule("sister lives in Lisbon", "The user's sister lives in Lisbon.", "sister"),
]


def facts_settings(settings: Settings, fake_base_url: str, **over: Any) -> Settings:
    values: dict[str, Any] = {
        "llm_provider": "anthropic", "anthropic_api_key": "sk-ant-fake-test-key-0000",
        "anthropic_base_url": fake_base_url, "llm_timeout_seconds": 5.0,
        "llm_max_retries": 0, "facts_retry_base_seconds": 0.0, "facts_max_tries": 2,
        # a second app per test process: small pools (the machine's PostgreSQL is shared)
        "db_pool_size": 4,
    }
    values.update(over)
    from pydantic import SecretStr

    values["anthropic_api_key"] = SecretStr(values["anthropic_api_key"])
    return settings.model_copy(update=values)


async def run_burst_worker(settings: Settings) -> Worker:
    """A real arq worker with the compression and facts jobs that runs every queued job
    (retries included), then stops."""
    assert settings.redis_url
    worker = Worker(functions=[*compression_functions(settings), *facts_functions(settings)],
                    redis_settings=arq_settings(settings.redis_url),
                    queue_name=settings.queue_name, burst=True, poll_delay=0,
                    ctx={"settings": settings}, on_startup=startup, on_shutdown=shutdown,
                    handle_signals=False, max_jobs=4)
    try:
        await worker.main()
    finally:
        await worker.close()
    return worker


async def say(client: httpx.AsyncClient, sid: str, *pairs: tuple[str, str],
              day: int = 1) -> None:
    """Append user/assistant turns, dated 2026-03-<day> at 09:00, 09:01..."""
    msgs = []
    for k, (user, answer) in enumerate(pairs):
        msgs.append({"role": "user", "content": user,
                     "created_at": f"2026-03-{day:02d}T09:{2 * k:02d}:00Z"})
        msgs.append({"role": "assistant", "content": answer,
                     "created_at": f"2026-03-{day:02d}T09:{2 * k + 1:02d}:00Z"})
    r = await client.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text


async def facts_session(client: httpx.AsyncClient, agent_id: str | None = None,
                        **facts: Any) -> str:
    body: dict[str, Any] = {"config": {"facts": {"enabled": True, **facts}}}
    if agent_id:
        body["agent_id"] = agent_id
    r = await client.post("/v1/sessions", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def items(client: httpx.AsyncClient, *, include_invalidated: bool = False,
                **filters: Any) -> list[dict[str, Any]]:
    r = await client.post("/v1/memory-items/query",
                          params={"include_invalidated": str(include_invalidated).lower()},
                          json={"filters": {"kind": "fact", **filters},
                                "order_by": "-timestamp"})
    assert r.status_code == 200, r.text
    return list(r.json()["items"])
