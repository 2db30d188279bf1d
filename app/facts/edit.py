"""`PATCH /v1/memory-items/{id}`: people correct facts (any item, in fact), with
`If-Match` on the item's version (the ETag `"<version>"`). As for shared-memory entries
(app/shared_memory/etag.py): no If-Match is 428 `if_match_required`; a stale version is 409
`version_conflict` with `details.current_version`; a weak tag `W/"3"` names version 3 too
(the ETag is the version number, nothing weaker). The change is one version row `edit`."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import asyncpg

from app.auth.caller import Caller
from app.core.errors import Conflict, PreconditionRequired, Unprocessable
from app.facts import repository as repo
from app.facts.item import Fact
from app.knowledge import versions
from app.knowledge.schemas import MemoryItemUpdate
from app.knowledge.service import get_item, token_cost
from app.shared_memory.etag import format_etag, parse_match_header


def etag(item: Fact) -> str:
    return format_etag(item.version)


def _strong(header: str) -> str:
    return ",".join(t.strip()[2:] if t.strip().startswith("W/") else t for t in header.split(","))


def check_if_match(if_match: str | None, version: int) -> None:
    if if_match is None:
        raise PreconditionRequired(
            'PATCH needs If-Match with the item\'s version (its ETag, e.g. "3").',
            code="if_match_required",
        )
    # an item's ETag is its version number: a weak tag (`W/"2"`, as a proxy that
    # compresses may send it back) names the same version
    spec = parse_match_header(_strong(if_match))
    if not spec.any and version not in spec.versions:
        raise Conflict(
            "The item changed since that version; read it again.",
            code="version_conflict",
            details={"current_version": version},
        )


async def edit_item(
    conn: asyncpg.Connection,
    caller: Caller,
    item_id: uuid.UUID,
    body: MemoryItemUpdate,
    if_match: str | None,
    *,
    via: str = "api",
) -> Fact:
    item = Fact.of(await get_item(conn, caller, item_id, for_update=True))
    check_if_match(if_match, item.version)
    given = body.model_fields_set
    if "text" in given:
        item.text = body.text
    if "importance" in given:
        item.importance = float(body.importance)
    if "tags" in given:
        item.tags = list(dict.fromkeys(body.tags))
    if "key" in given:
        item.fact_key = body.key
    if "valid_from" in given:
        item.valid_from = body.valid_from
    if "invalid_at" in given:
        item.invalid_at = body.invalid_at
    start = item.valid_from or item.created_at
    if item.invalid_at is not None and item.invalid_at < start:
        raise Unprocessable(
            "invalid_at would be before valid_from.",
            code="invalid_validity",
            details=[
                {
                    "loc": ["body", "invalid_at"],
                    "type": "value_error",
                    "msg": "invalid_at is before valid_from",
                }
            ],
        )
    item.token_cost = token_cost(item.kind, item.text, item.payload)
    item.version += 1
    item.updated_at = datetime.now(UTC)
    await repo.update_item(conn, item)
    await versions.record(
        conn, item, "edit", versions.actor_of(caller, via), body.reason or "edited"
    )
    return item
