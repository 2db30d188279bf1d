"""Erasure rules (pure, no I/O).

An erasure runs in two phases. The request sets the tombstone in one transaction (the
`erasures` row, and `erasure_id` on every session it takes), so from its commit on the
subject reads as deleted everywhere and nothing can be written back (migration 0016's
guards). Then a runner deletes the rows in batches, each batch one transaction that also
adds what it deleted to the receipt's counts, so a runner killed at any point leaves an
exact receipt and the next runner (the worker's sweep) goes on where it stopped.

What is counted, per kind of data (`COUNT_KINDS`, in the order the runner deletes):
every table row that held the subject's data, the queued Redis jobs of its sessions, and
the cached copies dropped in API processes are not counted (they are copies). The LLM cost
ledger's rows are not deleted but blanked (`llm_usage_anonymised`): the calls still count
in the tenant's totals by day, purpose and model, without saying whose they were.

The audit keeps `subject_hash`: HMAC-SHA256 under a server secret of
"<tenant>:<kind>:<id>", so someone who knows an id can ask whether it was erased, and
the row itself names nobody.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

SubjectKind = Literal["user", "session", "agent"]

# Per session, then per subject (user tier / agent tier and namespace).
SESSION_KINDS: tuple[str, ...] = (
    "references",
    "messages",
    "shared_memory_entries",
    "summaries",
    "snapshots",
    "memory_states",
    "search_stats",
    "search_terms",
    "idempotency_records",
    "compression_jobs",
    "fact_extractions",
    "context_manifests",
    "fact_versions",
    "facts",
    "llm_usage_anonymised",
    "queued_jobs",
    "sessions",
)
COUNT_KINDS: tuple[str, ...] = SESSION_KINDS

# arq keeps a job under these key prefixes (arq.constants); the queue is a sorted set.
ARQ_KEY_PREFIXES: tuple[str, ...] = ("arq:job:", "arq:retry:", "arq:result:", "arq:in-progress:")


def job_ids(session_id: uuid.UUID, makers: Iterable[Callable[[uuid.UUID], str]]) -> list[str]:
    """The ids of the jobs a session can have queued, each from its owner's function
    (`app.erasure.runner.SESSION_JOBS`: the job ids are theirs, not copied here)."""
    return [make(session_id) for make in makers]


def empty_counts() -> dict[str, int]:
    return dict.fromkeys(COUNT_KINDS, 0)


def receipt_counts(stored: Mapping[str, Any] | None) -> dict[str, int]:
    """Every kind, zero where nothing was deleted, in the documented order."""
    out = empty_counts()
    for k, v in (stored or {}).items():
        out[k] = out.get(k, 0) + int(v)
    return out


def derive_key(secret: str | None, admin_key: str | None, database_url: str | None) -> bytes:
    """The HMAC key: `LOOM_ERASURE_SECRET`, else derived from the admin key and database
    URL every process of a deployment shares, else random (a bare test app)."""
    if secret:
        return hashlib.sha256(b"loom-erasure-secret\0" + secret.encode()).digest()
    if admin_key or database_url:
        return hashlib.sha256(
            b"loom-erasure\0" + (admin_key or "").encode() + b"\0" + (database_url or "").encode()
        ).digest()
    return secrets.token_bytes(32)


def subject_hash(key: bytes, tenant_id: uuid.UUID | str, kind: str, subject: str) -> str:
    """The keyed hash an audit row keeps instead of the id."""
    msg = f"{tenant_id}:{kind}:{subject}".encode()
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


def lock_key(tenant_id: uuid.UUID | str, kind: str, subject: str) -> str:
    """The advisory lock the request and the write guards share (migration 0016)."""
    return f"loom-erasure:{tenant_id}:{kind}:{subject}"


def runs_inline(messages: int, inline_max: int) -> bool:
    """Small subjects are erased within the request; big ones by a worker job."""
    return messages <= inline_max
