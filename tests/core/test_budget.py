"""The connection budget of `serve` (app/launcher/budget.py, issue 36): the plan never asks
the database for more than it allows, uses CPUs this process may run on, and refuses what
cannot fit."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.launcher import budget
from app.launcher.budget import Plan, PlanError, Server, per_process, plan


def test_per_process_matches_the_pools_an_api_process_opens() -> None:
    assert per_process(20) == 35  # 20 asyncpg + 10 SQLAlchemy + 5 overflow (1.75 x 20)
    assert per_process(2) == 4
    assert [per_process(p) for p in range(2, 30)] == sorted(per_process(p) for p in range(2, 30))


def test_cpus_from_affinity_and_the_cgroup_quota() -> None:
    assert budget.cpus(8, None) == 8
    assert budget.cpus(8, "max 100000\n") == 8
    assert budget.cpus(8, "200000 100000\n") == 2
    assert budget.cpus(8, "150000 100000") == 2  # 1.5 CPUs: two processes can use it
    assert budget.cpus(2, "800000 100000") == 2
    assert budget.cpus(8, "garbage") == 8
    assert budget.cpus(0, None) == 1


def test_the_issue_s_cases() -> None:
    pg = Server(max_connections=100, reserved=3)
    # 8 processes on an 8-core host against 100 connections used to need 8 x 35 = 280
    eight = plan(server=pg, processes=None, cpu_count=8, pool_setting=20, with_worker=True)
    assert eight.processes == 8
    assert eight.api_connections + eight.worker + eight.reserve <= 97
    four = plan(server=pg, processes=4, cpu_count=2, pool_setting=20, with_worker=True)
    assert four.processes == 4 and four.api_connections + 12 + 10 <= 97
    # a number of processes that cannot get 4 connections each is refused, saying so
    with pytest.raises(PlanError, match="40 API processes need at least 4"):
        plan(server=pg, processes=40, cpu_count=2, pool_setting=20, with_worker=True)
    # one process keeps its pool setting when there is room
    one = plan(server=pg, processes=1, cpu_count=1, pool_setting=20, with_worker=True)
    assert one.pool == 20
    assert "1 API process x 35 (pool 20) + worker 12 + reserve 10 = 57 of 97" in one.line()


def test_a_given_budget_replaces_the_server_s() -> None:
    p = plan(
        server=None, processes=2, cpu_count=8, pool_setting=20, with_worker=False, connections=30
    )
    assert p.processes == 2 and per_process(p.pool) * 2 <= 30
    assert "within LOOM_DB_CONNECTIONS=30" in p.line()


@given(
    max_connections=st.integers(1, 2000),
    reserved=st.integers(0, 20),
    processes=st.one_of(st.none(), st.integers(1, 64)),
    cpu_count=st.integers(1, 128),
    pool_setting=st.integers(1, 100),
    with_worker=st.booleans(),
    reserve=st.integers(0, 50),
)
def test_a_plan_always_fits_or_is_refused(
    max_connections: int,
    reserved: int,
    processes: int | None,
    cpu_count: int,
    pool_setting: int,
    with_worker: bool,
    reserve: int,
) -> None:
    server = Server(max_connections, reserved)
    try:
        p: Plan = plan(
            server=server,
            processes=processes,
            cpu_count=cpu_count,
            pool_setting=pool_setting,
            with_worker=with_worker,
            reserve=reserve,
        )
    except PlanError:
        budget_left = max_connections - reserved - reserve - (12 if with_worker else 0)
        n = processes if processes is not None else 1
        assert budget_left < 4 * n
        return
    assert p.api_connections + p.worker + p.reserve <= max_connections - reserved
    assert p.pool >= 2
    assert p.pool <= max(2, pool_setting)
    if processes is not None:
        assert p.processes == processes
    else:
        assert 1 <= p.processes <= cpu_count
