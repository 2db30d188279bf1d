"""The bench's report (issue 46): a figure whose measurement answered no request is a MISS,
whatever its value (wrk reports a latency of 0 for no request) and even without a target."""

from __future__ import annotations

from bench.run import Bench
from bench.wrk import Measured


def _measured(requests: int, errors: int, p50: float) -> Measured:
    return Measured("test", 1, requests, 2.0, errors, p50, p50, p50, p50, p50)


def _bench() -> Bench:
    b = object.__new__(Bench)
    b.figures = []
    return b


def test_no_answered_request_is_a_miss() -> None:
    b = _bench()
    none = _measured(0, 0, 0.0)
    failed = _measured(5, 5, 3.0)
    fine = _measured(40, 0, 30.0)
    f1 = b.fig("a", "tenant", none.p50_ms, "ms", measured=none, target="<= 50 ms", ok=True)
    f2 = b.fig("b", "agent", failed.p50_ms, "ms", measured=failed, target="<= 50 ms", ok=True)
    f3 = b.fig("c", "no target", none.p50_ms, "ms", measured=none)
    f4 = b.fig("d", "session", fine.p50_ms, "ms", measured=fine, target="<= 50 ms", ok=True)
    assert [f.verdict() for f in (f1, f2, f3, f4)] == ["MISS", "MISS", "MISS", "ok"]
    assert "no answered request" in f1.note and f4.note == ""
