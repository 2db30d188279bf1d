"""The pure parts of erasure (issue 28): keyed subject hashes, receipts, and the statements
that reach every table naming a session (direct and property tests)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.erasure import policy


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
    assert policy.runs_inline(10, 10) and not policy.runs_inline(11, 10)


def test_the_queued_jobs_erased_are_the_ids_their_owners_enqueue_with() -> None:
    """Erasure takes a session's job ids from the functions the jobs are enqueued with
    (compression, fact extraction), not from copies of their formats."""
    import uuid

    from app.erasure import runner
    from app.facts.trigger import extract_job_id
    from app.jobs.service import compress_job_id

    sid = uuid.uuid4()
    assert policy.job_ids(sid, runner.SESSION_JOBS) == [compress_job_id(sid), extract_job_id(sid)]
    assert policy.job_ids(sid, (lambda s: f"x:{s}",)) == [f"x:{sid}"]


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
