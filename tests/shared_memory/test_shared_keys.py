"""Namespace rules and agent key scoping (pure), incl. the isolation property."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.shared_memory.errors import AgentRequired, InvalidKey, InvalidScope
from app.shared_memory.keys import (
    Namespace,
    address,
    public_key,
    resolve_scope,
    storage_key,
    storage_prefix,
    validate_key,
)

agent_ids = st.text(min_size=1, max_size=40)
any_text = st.text(max_size=300)


def valid_key_or_none(raw: str) -> str | None:
    try:
        return validate_key(raw)
    except InvalidKey:
        return None


def test_agent_storage_key_is_prefixed_with_authenticated_agent() -> None:
    addr = address(Namespace.AGENT, "character_sheet", None, "player1")
    assert addr.storage_key == "agent:player1:character_sheet"
    assert addr.scope_id == "player1"


def test_crafted_key_stays_inside_callers_scope() -> None:
    addr = address(Namespace.AGENT, "agent:player2:character_sheet", None, "player1")
    assert addr.storage_key == "agent:player1:agent:player2:character_sheet"
    assert addr.storage_key != storage_key(Namespace.AGENT, "player2", "character_sheet")


def test_agent_namespace_refuses_caller_scope_and_needs_identity() -> None:
    with pytest.raises(InvalidScope):
        resolve_scope(Namespace.AGENT, "player2", "player1")
    with pytest.raises(AgentRequired):
        resolve_scope(Namespace.AGENT, None, None)


@pytest.mark.parametrize("ns", ["workflow", "swarm", "debate", "session"])
def test_scoped_namespaces_need_scope(ns: str) -> None:
    with pytest.raises(InvalidScope):
        resolve_scope(Namespace(ns), None, "a1")
    assert resolve_scope(Namespace(ns), "run-1", "a1") == "run-1"


def test_global_refuses_scope() -> None:
    assert resolve_scope(Namespace.GLOBAL, None, None) == ""
    with pytest.raises(InvalidScope):
        resolve_scope(Namespace.GLOBAL, "x", None)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "../",
        "..",
        "a/../b",
        "./a",
        "a//b",
        "/a",
        "a/",
        "watch",
        "a\nb",
        "a\x00b",
        " a",
        "a ",
        "tab\tkey",
        "x" * 257,
        "é" * 600,
    ],
)
def test_invalid_keys_rejected(bad: str) -> None:
    with pytest.raises(InvalidKey):
        validate_key(bad)


@pytest.mark.parametrize(
    "good", ["character_sheet", "party/inventory", "agent:player2:x", "a b", "..a", "ключ", "w"]
)
def test_valid_keys_accepted(good: str) -> None:
    assert validate_key(good) == good


@given(any_text)
def test_validate_key_only_raises_invalid_key(raw: str) -> None:
    valid_key_or_none(raw)


@given(agent_ids, agent_ids, any_text, any_text)
def test_no_key_reaches_another_agents_storage_key(a: str, b: str, ka: str, kb: str) -> None:
    """For distinct agents, no pair of accepted keys collides in storage."""
    key_a, key_b = valid_key_or_none(ka), valid_key_or_none(kb)
    if a == b or key_a is None or key_b is None:
        return
    assert storage_key(Namespace.AGENT, a, key_a) != storage_key(Namespace.AGENT, b, key_b)


@given(agent_ids, st.sampled_from(["agent:", ":", "%3A", "agent:x:", "%", ""]), agent_ids)
def test_adversarial_agent_ids_and_keys(a: str, glue: str, b: str) -> None:
    """Keys built from another agent's id and separators still land in the caller's space."""
    key = valid_key_or_none(f"{glue}{b}:character_sheet")
    if key is None or a == b:
        return
    mine = storage_key(Namespace.AGENT, a, key)
    assert mine != storage_key(Namespace.AGENT, b, "character_sheet")
    assert public_key(Namespace.AGENT, a, mine) == key


@given(agent_ids, any_text)
def test_public_key_inverts_storage_key(agent: str, raw: str) -> None:
    key = valid_key_or_none(raw)
    if key is None:
        return
    assert public_key(Namespace.AGENT, agent, storage_key(Namespace.AGENT, agent, key)) == key
    assert public_key(Namespace.GLOBAL, "", storage_key(Namespace.GLOBAL, "", key)) == key


@given(agent_ids, agent_ids, any_text)
def test_prefix_of_one_agent_never_covers_another(a: str, b: str, raw: str) -> None:
    """Listing/watching with any prefix cannot match another agent's storage keys."""
    try:
        prefix = storage_prefix(Namespace.AGENT, a, raw)
    except InvalidKey:
        return
    if a != b:
        assert not storage_key(Namespace.AGENT, b, "k").startswith(prefix)
