"""Knowledge scopes: ``task/<id>``, ``project/<id>``, ``global`` and ``agent/<agent_id>``
(pure, no I/O).

A memory item lives in exactly one scope of its tenant. Scopes are isolated:
nothing in ``project/a`` is ever returned for ``project/b``. Promotion moves an
item one tier up (task -> project -> global) and only when asked explicitly.

Decision (spec silent): scope ids are 1-128 characters from ``[A-Za-z0-9._:@-]``
starting with a letter or digit, so a scope string has exactly one ``/`` and
round-trips through URLs and logs without escaping.

The ``agent`` tier is private to one agent, visible exactly as the ``agent``
shared-memory namespace: its agent key, and service keys acting for it with
``X-Agent-Id``. Written as ``agent`` (the caller's agent, resolved by the service) or
``agent/<agent_id>`` (must be the caller's agent). ``Scope("agent")`` without an id is the
unresolved form; as a filter value it means "the agent tier" (the repository's visibility
clause keeps it to the caller's own agent).

The ``user`` tier, ``user/<user_id>``, holds facts about one person (a session's
``user_id``); who sees it is ``app.users.access`` (service keys of the tenant, agent keys
whose agent has a session with that user). ``user`` without an id is the unresolved form
of a facts config: the session's user.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

ScopeKind = Literal["task", "project", "global", "agent", "user"]
SCOPE_KINDS: tuple[ScopeKind, ...] = ("task", "project", "global", "agent", "user")
SCOPE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
_SCOPE_ID_RE = re.compile(SCOPE_ID_PATTERN)
_AGENT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,199}$")  # auth AGENT_ID_PATTERN
SCOPE_PATTERN = (
    r"^(global|agent|(task|project)/[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}"
    r"|(agent|user)/[A-Za-z0-9][A-Za-z0-9_.:@-]{0,199})$"
)


class ScopeError(ValueError):
    """A scope string or promotion request is invalid."""


@dataclass(frozen=True, slots=True)
class Scope:
    """One knowledge scope; ``id`` is None only for ``global``."""

    kind: ScopeKind
    id: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in SCOPE_KINDS:
            raise ScopeError(
                f"unknown scope kind {self.kind!r}; expected task, project, global or agent"
            )
        if self.kind == "global":
            if self.id is not None:
                raise ScopeError("the global scope takes no id")
        elif self.kind in ("agent", "user"):
            if self.id is not None and not _AGENT_ID_RE.match(self.id):
                raise ScopeError(f"invalid {self.kind} id {self.id!r}")
        else:
            validate_scope_id(self.id, what=f"{self.kind} id")

    def __str__(self) -> str:
        return self.kind if self.id is None else f"{self.kind}/{self.id}"

    @property
    def storage_id(self) -> str:
        """The ``scope_id`` column value ('' for global, so the column is NOT NULL)."""
        return self.id or ""


GLOBAL = Scope("global")
AGENT = Scope("agent")  # the caller's agent, unresolved
USER = Scope("user")  # a session's user, unresolved


def validate_scope_id(value: object, *, what: str = "scope id") -> str:
    """Return ``value`` if it is a valid task/project id, else raise ScopeError."""
    if not isinstance(value, str) or not _SCOPE_ID_RE.match(value):
        raise ScopeError(
            f"invalid {what} {value!r}: 1-128 characters of letters, digits and . _ : @ -"
        )
    return value


def parse_scope(text: object) -> Scope:
    """Parse ``task/<id>``, ``project/<id>`` or ``global`` into a Scope."""
    if not isinstance(text, str):
        raise ScopeError("scope must be a string such as 'task/t1', 'project/p1' or 'global'")
    if text == "global":
        return GLOBAL
    if text == "agent":
        return AGENT
    if text == "user":
        return USER
    kind, sep, ident = text.partition("/")
    if kind in ("agent", "user") and sep:
        return Scope(kind, ident)  # type: ignore[arg-type]
    if not sep or kind not in ("task", "project"):
        raise ScopeError(
            f"invalid scope {text!r}: expected 'task/<id>', 'project/<id>' or 'global'"
        )
    return Scope(kind, validate_scope_id(ident, what=f"{kind} id"))  # type: ignore[arg-type]


def scope_from_columns(kind: str, scope_id: str) -> Scope:
    """Rebuild a Scope from its stored ``scope_kind`` / ``scope_id`` columns."""
    return GLOBAL if kind == "global" else Scope(kind, scope_id)  # type: ignore[arg-type]


def agent_scope(agent_id: str) -> Scope:
    """The private tier of one agent."""
    return Scope("agent", agent_id)


def user_scope(user_id: str) -> Scope:
    """The tier of facts about one person."""
    return Scope("user", user_id)


def promotion_target(current: Scope, *, project_id: str | None = None) -> Scope:
    """The scope an item moves to when promoted one tier up.

    task -> project needs ``project_id`` (a task item does not know its project);
    project -> global ignores it; a global item cannot be promoted further.
    """
    if current.kind == "task":
        if project_id is None:
            raise ScopeError("promoting a task item needs project_id (the project it moves to)")
        return Scope("project", validate_scope_id(project_id, what="project id"))
    if current.kind == "project":
        return GLOBAL
    if current.kind == "agent":
        raise ScopeError("an agent item is private to its agent; it is not promoted")
    if current.kind == "user":
        raise ScopeError("a user item belongs to its user's tier; it is not promoted")
    raise ScopeError("a global item is already in the top tier")
