"""Namespace rules and key scoping (pure: no I/O).

An entry is addressed by (tenant, namespace, scope_id, storage_key):

- `global`: tenant-wide; takes no `scope_id` (stored as "").
- `workflow`, `swarm`, `debate`, `session`: need a `scope_id` (for `session` the service
  also checks it names a session of the caller's tenant).
- `agent`: scoped by the caller's *authenticated* agent id, never by anything the caller
  sends; a `scope_id` is refused. scope_id = agent id and the storage key is
  `agent:{agent_id}:{key}`.

Key rules (decision; the spec is silent): 1..256 characters (so at most 1,024 UTF-8
bytes), none of `FORBIDDEN_CHARS` (C0/C1 controls, whitespace other than the plain space,
invisible format characters such as zero-width and bidi controls, surrogates, BOM), and the
plain space may not lead or trail. The rule is a fixed character class, not a Unicode
category lookup, so it does not move with the Unicode database and the OpenAPI document
states it exactly (`KEY_PATTERN`, `PREFIX_PATTERN`, `SCOPE_ID_PATTERN`).
`/` separates segments for prefix listing; segments may not be empty, `.` or `..`, so
a URL normaliser can never turn one key into another. The key `watch` is reserved because
`GET /v1/shared-memory/{namespace}/watch` is the watch stream. Colons are allowed: an agent
writing `agent:player2:x` in `agent` gets its own entry `agent:player1:agent:player2:x`.

Isolation proof sketch: the agent id is percent-escaped (`%` and `:` only) before it is
put in the storage key, so the first `:` after `agent:` always ends the agent id and
`storage_key` is injective in (agent_id, key). The scope_id column also carries the agent id,
so lookups are filtered by it as well (two independent fences).
"""

import re
from dataclasses import dataclass
from enum import StrEnum

from app.shared_memory.errors import AgentRequired, InvalidKey, InvalidScope

MAX_KEY_CHARS = 256
MAX_KEY_BYTES = 1024
MAX_SCOPE_CHARS = 128
RESERVED_KEYS = frozenset({"watch"})
# Characters no key, prefix or scope_id may hold (a regex character-class body, valid in
# Python and ECMA-262 regexes alike).
FORBIDDEN_CHARS = (
    r"\x00-\x1f\x7f-\xa0\xad\u1680\u180e\u2000-\u200f"
    r"\u2028-\u202f\u205f-\u206f\u3000\ufeff\ufff9-\ufffb"
)
_SEGMENT = rf"(?!\.\.?(?:/|$))[^/{FORBIDDEN_CHARS}]+"
# The whole key rule except the length (maxLength 256): what the OpenAPI document declares.
KEY_PATTERN = rf"^(?! )(?!.* $)(?!watch$){_SEGMENT}(?:/{_SEGMENT})*$"
PREFIX_PATTERN = rf"^(?! )(?!.* $)[^{FORBIDDEN_CHARS}]*$"
SCOPE_ID_PATTERN = rf"^[^{FORBIDDEN_CHARS}]*$"
# Lone surrogates (from JSON `\\ud800` escapes) too; no valid UTF-8 text holds one, and the
# pattern leaves them out because JSON Schema regexes cannot name them.
_FORBIDDEN_RE = re.compile(rf"[{FORBIDDEN_CHARS}\ud800-\udfff]")
AGENT_PREFIX = "agent:"


class Namespace(StrEnum):
    GLOBAL = "global"
    WORKFLOW = "workflow"
    SWARM = "swarm"
    DEBATE = "debate"
    SESSION = "session"
    AGENT = "agent"


SCOPED_NAMESPACES = frozenset(
    {Namespace.WORKFLOW, Namespace.SWARM, Namespace.DEBATE, Namespace.SESSION}
)


@dataclass(frozen=True, slots=True)
class Address:
    """Where an entry lives; `key` is what the caller sees, `storage_key` what is stored."""

    namespace: Namespace
    scope_id: str
    key: str
    storage_key: str


def _bad_char(ch: str) -> bool:
    return _FORBIDDEN_RE.match(ch) is not None


def validate_key(key: str, *, allow_empty: bool = False, what: str = "key") -> str:
    """Return `key` if it obeys the key rules, else raise InvalidKey.

    `allow_empty` is for list/watch prefixes.
    """
    if not key:
        if allow_empty:
            return key
        raise InvalidKey(f"{what} must not be empty")
    if len(key) > MAX_KEY_CHARS or len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        raise InvalidKey(
            f"{what} is longer than {MAX_KEY_CHARS} characters / {MAX_KEY_BYTES} bytes"
        )
    if any(_bad_char(ch) for ch in key):
        raise InvalidKey(f"{what} contains control or whitespace characters")
    if key != key.strip(" "):
        raise InvalidKey(f"{what} must not start or end with a space")
    if allow_empty:
        # A prefix may stop mid-segment ("par" matches "party/..."), so only chars are checked.
        return key
    if any(seg in ("", ".", "..") for seg in key.split("/")):
        raise InvalidKey(f"{what} segments must not be empty, '.' or '..'")
    if key in RESERVED_KEYS:
        raise InvalidKey(f"'{key}' is a reserved key")
    return key


def escape_agent_id(agent_id: str) -> str:
    """Percent-escape the two characters that could make a storage key ambiguous."""
    return agent_id.replace("%", "%25").replace(":", "%3A")


def agent_prefix(agent_id: str) -> str:
    """Storage-key prefix of every `agent` entry of `agent_id`."""
    return f"{AGENT_PREFIX}{escape_agent_id(agent_id)}:"


def storage_key(namespace: Namespace, scope_id: str, key: str) -> str:
    """The key as stored: `agent:{agent_id}:{key}` in `agent`, the key itself elsewhere."""
    if namespace is Namespace.AGENT:
        return agent_prefix(scope_id) + key
    return key


def public_key(namespace: Namespace, scope_id: str, stored: str) -> str:
    """Inverse of `storage_key` (what list and watch show the caller)."""
    if namespace is Namespace.AGENT:
        prefix = agent_prefix(scope_id)
        if not stored.startswith(prefix):
            raise ValueError("storage key does not belong to this agent")
        return stored[len(prefix) :]
    return stored


def validate_scope_id(scope_id: str) -> str:
    if not scope_id or len(scope_id) > MAX_SCOPE_CHARS or any(_bad_char(c) for c in scope_id):
        raise InvalidScope(
            f"scope_id must be 1..{MAX_SCOPE_CHARS} characters without control or whitespace"
        )
    return scope_id


def resolve_scope(namespace: Namespace, scope_id: str | None, caller_agent_id: str | None) -> str:
    """The scope an operation acts on, from the namespace rules and the caller identity."""
    if namespace is Namespace.AGENT:
        if scope_id:
            raise InvalidScope(
                "the agent namespace is scoped by the authenticated agent; omit scope_id"
            )
        if not caller_agent_id:
            raise AgentRequired(
                "the agent namespace needs an agent identity (agent key or X-Agent-Id)"
            )
        return caller_agent_id
    if namespace in SCOPED_NAMESPACES:
        if not scope_id:
            raise InvalidScope(f"namespace '{namespace.value}' requires scope_id")
        return validate_scope_id(scope_id)
    if scope_id:
        raise InvalidScope("namespace 'global' takes no scope_id")
    return ""


def address(
    namespace: Namespace, key: str, scope_id: str | None, caller_agent_id: str | None
) -> Address:
    """Validate and scope one (namespace, key) request into its storage address."""
    scope = resolve_scope(namespace, scope_id, caller_agent_id)
    validate_key(key)
    return Address(namespace, scope, key, storage_key(namespace, scope, key))


def storage_prefix(namespace: Namespace, scope: str, prefix: str) -> str:
    """Storage-key prefix for listing/watching `prefix` within one scope."""
    validate_key(prefix, allow_empty=True, what="prefix")
    return storage_key(namespace, scope, prefix)
