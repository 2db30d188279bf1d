"""The pure parts of issue 28: the users rule, erasure receipts and keyed hashes, and the
export format's reader (direct and property tests)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.erasure import policy
from app.portability import format as fmt
from app.users.access import sees_every_user


def test_only_agent_keys_are_limited_to_the_users_their_agent_knows() -> None:
    assert sees_every_user("service") and sees_every_user("admin")
    assert not sees_every_user("agent")


@given(st.text(min_size=1, max_size=50), st.text(min_size=1, max_size=50))
def test_subject_hash_is_keyed_and_names_nobody(a: str, b: str) -> None:
    key = policy.derive_key("s3cret", None, None)
    h = policy.subject_hash(key, "t", "user", a)
    assert len(h) == 64
    assert h == policy.subject_hash(key, "t", "user", a)
    assert h != policy.subject_hash(policy.derive_key("other", None, None), "t", "user", a)
    assert (h == policy.subject_hash(key, "t", "user", b)) == (a == b)
    assert h != policy.subject_hash(key, "t2", "user", a)
    assert h != policy.subject_hash(key, "t", "session", a)


def test_receipts_list_every_kind_in_order() -> None:
    counts = policy.receipt_counts({"messages": 3, "sessions": 1})
    assert list(counts) == list(policy.COUNT_KINDS)
    assert counts["messages"] == 3 and counts["facts"] == 0
    assert policy.job_ids("s1") == ["compress:s1", "facts:s1"]
    assert policy.runs_inline(10, 10) and not policy.runs_inline(11, 10)


def _export(n: int) -> list[str]:
    lines = [
        fmt.header_line({"kind": "user", "id": "u"}, "2026-01-01T00:00:00+00:00"),
        json.dumps({"t": "session", "id": "s", "agent_id": "a"}),
    ]
    lines += [
        json.dumps({"t": "message", "session_id": "s", "seq": i, "role": "user"})
        for i in range(1, n + 1)
    ]
    return [*lines, fmt.end_line({"session": 1, "message": n})]


@given(st.integers(min_value=0, max_value=30), st.data())
def test_the_reader_takes_a_whole_export_and_names_the_first_bad_line(
    n: int, data: st.DataObject
) -> None:
    lines = _export(n)
    reader = fmt.Reader()
    got = [x for x in map(reader.feed, lines) if x is not None]
    reader.finish()
    assert [k for k, _ in got] == ["session"] + ["message"] * n
    # cut anywhere before the end line: refused, naming the line after the last one read
    cut = data.draw(st.integers(min_value=1, max_value=len(lines) - 1))
    reader = fmt.Reader()
    for x in lines[:cut]:
        reader.feed(x)
    with pytest.raises(fmt.FormatError) as err:
        reader.finish()
    assert err.value.line == cut + 1
    # one garbled line: refused at that line
    bad = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    garbled = [*lines[:bad], lines[bad][: len(lines[bad]) // 2], *lines[bad + 1 :]]
    reader = fmt.Reader()
    with pytest.raises(fmt.FormatError) as err:
        for x in garbled:
            reader.feed(x)
        reader.finish()
    assert err.value.line == bad + 1


def test_every_table_that_names_a_session_is_erased_explicitly() -> None:
    """A new table holding a session's data (a `session_id` or `source_session_id` column)
    must be in the erasure's statements, so its rows are counted in the receipt (and those
    without a key to `sessions` deleted at all)."""
    from app.erasure import repository
    from app.models import metadata

    sql = " ".join(
        s
        for _, s in (*repository.SESSION_DELETES, repository.MESSAGES_BATCH, repository.SESSION_ROW)
    )
    holders = {
        t.name
        for t in metadata.sorted_tables
        if {"session_id", "source_session_id"} & set(t.c.keys())
    }
    missing = [t for t in sorted(holders) if f" {t} " not in f" {sql} "]
    assert missing == [], missing


def test_a_line_nested_too_deeply_is_a_format_error() -> None:
    reader = fmt.Reader()
    reader.feed(fmt.header_line({}, "x"))
    with pytest.raises(fmt.FormatError) as err:
        reader.feed("[" * 100_000 + "]" * 100_000)
    assert err.value.line == 2
