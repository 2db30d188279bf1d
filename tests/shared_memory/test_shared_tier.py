"""Memory tier: byte-bounded LRU, version floors, thread safety."""

import threading

from hypothesis import given
from hypothesis import strategies as st

from app.shared_memory.tier import ENTRY_OVERHEAD, MemoryTier


def test_lru_evicts_least_recently_used_by_bytes() -> None:
    tier = MemoryTier(max_bytes=3 * (100 + ENTRY_OVERHEAD))
    for k in "abc":
        assert tier.put(k, k * 100, 100, 1)
    assert tier.get("a") is not None  # a is now most recent
    tier.put("d", "d" * 100, 100, 1)
    assert "b" not in tier and "a" in tier and "c" in tier and "d" in tier
    assert tier.stats().evictions == 1


def test_too_big_value_is_not_cached() -> None:
    tier = MemoryTier(max_bytes=1000)
    assert not tier.put("big", b"x", 5000, 1)
    assert tier.get("big") is None
    assert tier.stats().misses == 1


def test_zero_size_tier_caches_nothing() -> None:
    tier = MemoryTier(max_bytes=0)
    assert not tier.put("k", b"", 0, 1)


def test_invalidation_floor_refuses_stale_put() -> None:
    tier = MemoryTier(max_bytes=10_000)
    tier.put("k", "v1", 2, 1)
    tier.invalidate("k", version=5)  # another process wrote version 5
    assert tier.get("k") is None
    assert not tier.put("k", "v1-slow-read", 2, 1)
    assert tier.put("k", "v5", 2, 5)
    assert tier.get("k") == ("v5", 5)


def test_older_version_never_replaces_newer() -> None:
    tier = MemoryTier(max_bytes=10_000)
    tier.put("k", "new", 3, 7)
    assert not tier.put("k", "old", 3, 6)
    assert tier.get("k") == ("new", 7)


@given(
    st.lists(st.tuples(st.integers(0, 20), st.integers(0, 3000)), max_size=200),
    st.integers(0, 20_000),
)
def test_bytes_never_exceed_budget(ops: list[tuple[int, int]], budget: int) -> None:
    tier = MemoryTier(max_bytes=budget)
    version = 0
    for key, size in ops:
        version += 1
        tier.put(key, None, size, version)
        stats = tier.stats()
        assert stats.bytes <= budget
        assert stats.items == len(tier)


def test_concurrent_threads_keep_accounting_consistent() -> None:
    tier = MemoryTier(max_bytes=50 * (64 + ENTRY_OVERHEAD))

    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            work(n)
        except BaseException as exc:  # surfaced below: a thread error must fail the test
            errors.append(exc)

    def work(n: int) -> None:
        for i in range(2000):
            key = (n * 7 + i) % 120
            tier.put(key, b"x" * 64, 64, i)
            tier.get((key + 3) % 120)
            if i % 13 == 0:
                tier.invalidate(key, version=i)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    stats = tier.stats()
    assert stats.bytes == stats.items * (64 + ENTRY_OVERHEAD)
    assert stats.bytes <= tier.max_bytes
