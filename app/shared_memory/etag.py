"""ETag / conditional-request helpers (pure).

ETag = the entry version in quotes (`"42"`), a strong validator. Versions come from one
PostgreSQL sequence, so they only grow, even across delete + re-create (no ABA).

Write preconditions (PUT and DELETE), documented decision:
- no `If-Match`: unconditional write, unless the server requires it for updates
  (`LOOM_SHARED_MEMORY_REQUIRE_IF_MATCH=true`): then updating or deleting an existing entry
  without `If-Match` is **428 Precondition Required**.
- `If-Match: "v"` and the entry exists at another version: **409 Conflict** (stale
  version, `details.current_version`); the client re-reads and retries.
- `If-Match` (any value, `*` included) but the entry does not exist (never did, deleted
  or expired): **412 Precondition Failed**.
- `If-None-Match: *` on PUT: create only; the entry exists -> **412**.
- Weak tags (`W/"v"`) never match (If-Match uses strong comparison, RFC 9110 13.1.1).
"""

from dataclasses import dataclass

from app.core.errors import BadRequest
from app.shared_memory.errors import (
    EntryPreconditionFailed,
    IfMatchRequired,
    VersionConflict,
)


@dataclass(frozen=True, slots=True)
class MatchSpec:
    any: bool
    versions: frozenset[int]


def format_etag(version: int) -> str:
    return f'"{version}"'


def parse_match_header(value: str) -> MatchSpec:
    """Parse an If-Match / If-None-Match header into `*` or a set of strong versions."""
    value = value.strip()
    if value == "*":
        return MatchSpec(True, frozenset())
    versions: set[int] = set()
    for raw in value.split(","):
        tag = raw.strip()
        if not tag:
            continue
        if tag.startswith("W/"):
            continue  # weak: can never satisfy a strong comparison
        if len(tag) < 2 or tag[0] != '"' or tag[-1] != '"':
            raise BadRequest(
                "If-Match/If-None-Match must hold quoted ETags or *", code="invalid_etag"
            )
        inner = tag[1:-1]
        if inner.isdigit() and len(inner) <= 19:
            versions.add(int(inner))
        # Any other quoted tag is well-formed but matches no version of ours.
    return MatchSpec(False, frozenset(versions))


def matches(spec: MatchSpec, version: int | None) -> bool:
    if version is None:
        return False
    return spec.any or version in spec.versions


def check_write(
    *,
    if_match: str | None,
    if_none_match: str | None,
    current_version: int | None,
    require_if_match: bool = False,
) -> None:
    """Raise the right precondition error for a PUT/DELETE against `current_version`."""
    if if_none_match is not None:
        spec = parse_match_header(if_none_match)
        if current_version is not None and (spec.any or current_version in spec.versions):
            raise EntryPreconditionFailed(
                "entry already exists", details={"current_version": current_version}
            )
    if if_match is None:
        if require_if_match and current_version is not None:
            raise IfMatchRequired("updating an existing entry requires If-Match")
        return
    spec = parse_match_header(if_match)
    if current_version is None:
        raise EntryPreconditionFailed("If-Match given but the entry does not exist")
    if not matches(spec, current_version):
        raise stale(current_version)


def stale(current_version: int | None) -> VersionConflict:
    """The 409 for a compare-and-set that lost (also used when a racing UPDATE matched 0 rows)."""
    return VersionConflict(
        "entry was modified: version is stale",
        details={
            "current_version": current_version,
            "etag": format_etag(current_version) if current_version else None,
        },
    )
