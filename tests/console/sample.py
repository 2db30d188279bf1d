"""Sample data for the console's browser tests and screenshots, written through the REST API
of a live server (plain httpx, so a script can use it without pytest)."""

import random
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

# small windows, so a few dozen turns fill L1, L2 and the swap (and archive a snapshot)
SMALL = {
    "max_context_tokens": 2000,
    "reserved_output_tokens": 200,
    "l1_max_messages": 10,
    "max_l2_tokens": 400,
}
WORDS = (
    "migration",
    "billing",
    "replica",
    "index",
    "vacuum",
    "backup",
    "window",
    "latency",
    "rollback",
    "schema",
    "cutover",
    "queue",
)


@dataclass
class Tenant:
    base: str
    id: str
    service_key: str

    def client(self, agent_id: str | None = None, key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key or self.service_key}"}
        if agent_id:
            headers["X-Agent-Id"] = agent_id
        return httpx.Client(base_url=self.base, headers=headers, timeout=60)

    def agent_key(self, agent_id: str) -> str:
        with self.client() as c:
            resp = c.post("/v1/api-keys", json={"role": "agent", "agent_id": agent_id})
            resp.raise_for_status()
            return str(resp.json()["secret"])


def new_tenant(base: str, admin_key: str) -> Tenant:
    """A fresh tenant and a service key for it."""
    with httpx.Client(
        base_url=base, headers={"Authorization": f"Bearer {admin_key}"}, timeout=30
    ) as admin:
        resp = admin.post("/v1/tenants", json={"name": f"console-{uuid.uuid4().hex[:8]}"})
        resp.raise_for_status()
        tid = resp.json()["id"]
        key = admin.post("/v1/api-keys", json={"tenant_id": tid, "role": "service"})
        key.raise_for_status()
        return Tenant(base=base, id=tid, service_key=key.json()["secret"])


def turn(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """A user question, sometimes a tool call with its result, an answer."""
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))
    msgs: list[dict[str, Any]] = [{"role": "user", "content": f"question {n}: {words}"}]
    if n % 2 == 0:
        call = {"id": f"call_{n}", "name": "run_sql", "input": {"q": f"select {n}"}}
        msgs.append({"role": "assistant", "content": "checking", "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": call["id"], "content": f"{n} rows"})
    msgs.append({"role": "assistant", "content": f"answer {n}: {words[:120]}"})
    return msgs


def layered_session(
    c: httpx.Client, turns: int = 24, *, metadata: dict[str, Any] | None = None
) -> str:
    """A session with messages in L1, summaries in L2 and older summaries archived to swap
    (compression runs in the request with `wait=true`: the heuristic summariser)."""
    resp = c.post("/v1/sessions", json={"config": SMALL, "metadata": metadata or {}})
    resp.raise_for_status()
    sid = str(resp.json()["id"])
    rng = random.Random(11)
    for n in range(turns):
        c.post(f"/v1/sessions/{sid}/messages", json={"messages": turn(rng, n)}).raise_for_status()
        if n % 4 == 3:
            c.post(
                f"/v1/sessions/{sid}/memory/compress", params={"wait": "true"}
            ).raise_for_status()
    return sid


def long_session(c: httpx.Client, messages: int = 10_000) -> str:
    """A session with `messages` short messages (appended in batches)."""
    resp = c.post("/v1/sessions", json={"metadata": {"kind": "long"}})
    resp.raise_for_status()
    sid = str(resp.json()["id"])
    batch = 200
    for start in range(0, messages, batch):
        msgs = [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"message {i + 1} about {WORDS[i % len(WORDS)]}",
            }
            for i in range(start, min(messages, start + batch))
        ]
        c.post(f"/v1/sessions/{sid}/messages", json={"messages": msgs}).raise_for_status()
    return sid


def audited_session(c: httpx.Client, turns: int = 10) -> tuple[str, list[str]]:
    """A session with `config.audit` on whose context grows, compresses and gets promoted
    messages and facts between builds: (session id, context ids of its recorded builds,
    oldest first)."""
    project = f"apollo-{uuid.uuid4().hex[:6]}"
    for text in (
        "The cutover window is Sunday 02:00 UTC.",
        "Billing stays read-only during the migration.",
    ):
        c.post(
            "/v1/memory-items",
            json={"scope": f"project/{project}", "kind": "fact", "text": text, "importance": 0.8},
        ).raise_for_status()
    resp = c.post(
        "/v1/sessions",
        json={
            "config": {
                **SMALL,
                "audit": True,
                "recall": {"share": 0.15},
                "facts": {"enabled": True, "scope": f"project/{project}", "share": 0.1},
            }
        },
    )
    resp.raise_for_status()
    sid = str(resp.json()["id"])
    rng = random.Random(30)
    built: list[str] = []
    for n in range(turns):
        c.post(f"/v1/sessions/{sid}/messages", json={"messages": turn(rng, n)}).raise_for_status()
        if n == 5:
            c.post(
                f"/v1/sessions/{sid}/memory/compress", params={"wait": "true"}
            ).raise_for_status()
        if n == 7:
            c.post(f"/v1/sessions/{sid}/memory/promote", json={"seqs": [1]}).raise_for_status()
        if n % 3 == 0 or n == turns - 1:
            resp = c.post(f"/v1/sessions/{sid}/context", json={"format": "anthropic"})
            resp.raise_for_status()
            built.append(str(resp.json()["context_id"]))
    return sid, built
