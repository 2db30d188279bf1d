"""Learned-layer versioning policy (pure, no I/O).

Per agent, every PUT stores a new immutable version (1, 2, 3, ...) and makes it
active. Rollback only moves the active pointer to an earlier existing version;
nothing is deleted. Decision (spec silent): a rollback target must be older
than the active version (to go forward again, PUT the content again), and a
PUT after a rollback gets max(version) + 1, so version numbers are never reused.
"""

from __future__ import annotations

from collections.abc import Collection


class LearnedError(ValueError):
    """A rollback target is invalid."""


def next_version(existing_max: int | None) -> int:
    """Version number for a new PUT: never reuses a number, even after rollback."""
    return 1 if existing_max is None else existing_max + 1


def rollback_target(versions: Collection[int], active: int, to_version: int | None = None) -> int:
    """The version to activate on rollback.

    Without ``to_version``: the newest version older than the active one.
    With it: that version, which must exist and be older than the active one.
    """
    if to_version is None:
        older = [v for v in versions if v < active]
        if not older:
            raise LearnedError(f"no version older than the active version {active}")
        return max(older)
    if to_version not in versions:
        raise LearnedError(f"version {to_version} does not exist")
    if to_version >= active:
        raise LearnedError(
            f"rollback target {to_version} must be older than the active version {active}"
        )
    return to_version
