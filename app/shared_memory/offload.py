"""Large tool results: stored as shared-memory data at append time, message keeps a reference.

Message-append hooks (assembled in `app.wiring`):
- before the insert, a `tool` message whose content is over
  `LOOM_TOOL_RESULT_OFFLOAD_BYTES` (100 KB) is written to the `session` namespace under
  `tool_results/<id>` and its content becomes the ~50-token reference text; the message's
  `metadata.data_ref` carries the DataReference. Token counts are then computed on the
  reference, so the context stays small.
- after the insert, a holder row per referencing message keeps the data from expiring
  (the entry has a TTL, `LOOM_TOOL_RESULT_TTL_SECONDS`, that only bites once the messages
  are gone, e.g. when the session is deleted).

Both run in the append's transaction, on its connection (`AppendTx`): an append that rolls
back (e.g. its Idempotency-Key was taken meanwhile) leaves no entry behind, and the entry's
event is published only once the append has committed.
"""

import json
import uuid
from typing import Any

from app.auth.caller import Caller
from app.core.config import Settings
from app.messages.canonical import CanonicalMessage
from app.messages.hooks import AfterAppend, AppendedBatch, AppendTx, BeforeAppend
from app.shared_memory import keys, repository, service
from app.shared_memory.keys import Namespace
from app.shared_memory.metrics import OFFLOADED_TOOL_RESULTS
from app.shared_memory.refs import render
from app.shared_memory.runtime import SharedMemoryRuntime

DATA_REF = "data_ref"


def payload(content: Any) -> tuple[bytes, str]:
    """The bytes a tool result stands for, and their content type."""
    if isinstance(content, str):
        return content.encode(), "text/plain; charset=utf-8"
    return json.dumps(
        content, separators=(",", ":"), ensure_ascii=False
    ).encode(), "application/json"


def _too_large(m: CanonicalMessage, threshold: int) -> bool:
    if m.role != "tool" or m.content is None:
        return False
    if isinstance(m.content, str) and len(m.content) * 4 <= threshold:
        return False  # at most 4 UTF-8 bytes a character: small without encoding it
    return len(payload(m.content)[0]) > threshold


def offloader(rt: SharedMemoryRuntime, s: Settings) -> BeforeAppend:
    """The before-append hook that offloads large tool results into `rt`'s store."""

    def applies(messages: list[CanonicalMessage]) -> bool:
        return any(_too_large(m, s.tool_result_offload_bytes) for m in messages)

    async def offload(
        tx: AppendTx, caller: Caller, session_id: uuid.UUID, messages: list[CanonicalMessage]
    ) -> None:
        await offload_large_tool_results(tx, rt, s, caller, session_id, messages)

    return BeforeAppend(applies, offload)


def holds_reference(messages: list[CanonicalMessage]) -> bool:
    """Some message carries a data reference (`metadata.data_ref`)."""
    return any(
        isinstance(m.metadata, dict) and isinstance(m.metadata.get(DATA_REF), dict)
        for m in messages
    )


async def offload_large_tool_results(
    tx: AppendTx,
    rt: SharedMemoryRuntime,
    s: Settings,
    caller: Caller,
    session_id: uuid.UUID,
    messages: list[CanonicalMessage],
) -> None:
    """Offload the large tool results of `messages` (the append has locked the session, and
    found it visible to `caller`: nothing is written into the scope of another's)."""
    for m in messages:
        if not _too_large(m, s.tool_result_offload_bytes):
            continue
        data, ctype = payload(m.content)
        addr = keys.address(
            Namespace.SESSION, f"tool_results/{uuid.uuid4().hex}", str(session_id), caller.agent_id
        )
        loaded, publish = await service.create(
            tx.conn,
            rt,
            caller,
            addr,
            data,
            content_type=ctype,
            metadata={"kind": "tool_result", "tool_use_id": m.tool_use_id},
            ttl_seconds=s.tool_result_ttl_seconds,
            max_bytes=max(s.max_request_bytes, s.shared_memory_max_value_bytes),
            compress_threshold=s.shared_memory_compress_threshold_bytes,
        )
        tx.on_commit.append(publish)
        ref = loaded.reference()
        m.content = render(ref)
        m.metadata = {**(m.metadata or {}), DATA_REF: ref.model_dump(mode="json")}
        OFFLOADED_TOOL_RESULTS.inc()


async def _hold_references(tx: AppendTx, caller: Caller, batch: AppendedBatch) -> None:
    held = [
        (m.seq, m.metadata[DATA_REF]["id"])
        for m in batch.messages
        if isinstance(m.metadata, dict) and isinstance(m.metadata.get(DATA_REF), dict)
    ]
    if held:
        await repository.hold(tx.conn, batch.tenant_id, batch.session_id, held)


hold_references = AfterAppend(holds_reference, _hold_references)
