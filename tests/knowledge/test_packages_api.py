"""Context packages over HTTP: budget and tier shares, ranking, ratio, head/tail."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TIERS = ("task", "project", "global")


async def _fill(client) -> list[dict]:
    items = []
    texts = [
        "short",
        "a somewhat longer piece of knowledge about the system " * 3,
        "medium length note about caching",
        "x " * 40,
    ]
    for tier_scope in ("task/t1", "project/p1", "global", "project/p2", "task/t2"):
        for i in range(8):
            r = await client.post(
                "/v1/memory-items",
                json={
                    "scope": tier_scope,
                    "kind": "note",
                    "importance": round((i * 37 % 10) / 10, 1),
                    "text": texts[i % len(texts)] + f" #{i}",
                },
            )
            assert r.status_code == 201
            items.append(r.json())
    return items


@pytest.fixture
async def filled(client) -> list[dict]:
    return await _fill(client)


def _check(pkg: dict, items: list[dict], budget: int, shares: dict[str, float]) -> None:
    candidates = [i for i in items if i["scope"] in ("task/t1", "project/p1", "global")]
    assert pkg["used_tokens"] <= budget
    assert pkg["used_tokens"] == sum(i["token_cost"] for i in pkg["items"])
    for tier in TIERS:
        share_cap = math.floor(budget * shares[tier] + 1e-9)
        used = sum(i["token_cost"] for i in pkg["items"] if i["tier"] == tier)
        assert used == pkg["tiers"][tier]["used_tokens"] <= share_cap
        tier_items = [i for i in candidates if i["scope"].split("/")[0] == tier]
        assert pkg["tiers"][tier]["candidate_tokens"] == sum(i["token_cost"] for i in tier_items)
    total = sum(i["token_cost"] for i in candidates)
    assert pkg["compression_ratio"] == pytest.approx(pkg["used_tokens"] / total)
    assert {i["scope"] for i in pkg["items"]} <= {"task/t1", "project/p1", "global"}


async def test_default_split_ranked_by_importance(client, filled) -> None:
    budget = 200
    r = await client.post(
        "/v1/context-packages", json={"task_id": "t1", "project_id": "p1", "budget_tokens": budget}
    )
    assert r.status_code == 200, r.text
    pkg = r.json()
    _check(pkg, filled, budget, {"task": 0.4, "project": 0.4, "global": 0.2})
    assert {t: pkg["tiers"][t]["allowance"] for t in TIERS} == {
        "task": 80,
        "project": 80,
        "global": 40,
    }
    for tier in TIERS:
        imps = [i["importance"] for i in pkg["items"] if i["tier"] == tier]
        assert imps == sorted(imps, reverse=True)
    assert 0 < pkg["compression_ratio"] < 1
    assert pkg["text"].startswith("Knowledge (task/t1, project/p1, global):")


async def test_everything_fits_ratio_is_one(client, filled) -> None:
    pkg = (
        await client.post(
            "/v1/context-packages",
            json={"task_id": "t1", "project_id": "p1", "budget_tokens": 1_000_000},
        )
    ).json()
    assert pkg["compression_ratio"] == 1.0 and len(pkg["items"]) == 24


async def test_empty_package_ratio_is_one(client) -> None:
    pkg = (
        await client.post("/v1/context-packages", json={"task_id": "nothing", "budget_tokens": 100})
    ).json()
    assert pkg["items"] == [] and pkg["compression_ratio"] == 1.0 and pkg["text"] == ""


@pytest.mark.parametrize(
    "shares", [{"task": 0.6, "project": 0.6}, {"global": -0.1}, {"task": 1.2}, {"tasks": 0.1}]
)
async def test_invalid_shares_are_422(client, shares) -> None:
    r = await client.post("/v1/context-packages", json={"budget_tokens": 100, "shares": shares})
    assert r.status_code == 422


async def test_head_tail_preserves_oldest_and_newest(client) -> None:
    made = []
    for i in range(10):
        r = await client.post(
            "/v1/memory-items",
            json={
                "scope": "project/ht",
                "kind": "note",
                "text": "same size note",
                "importance": 0.0 if i in (0, 9) else 1.0,
            },
        )
        made.append(r.json())
    cost = made[0]["token_cost"]
    body = {
        "project_id": "ht",
        "include_global": False,
        "budget_tokens": cost * 4,
        "shares": {"task": 0, "project": 1, "global": 0},
    }
    plain = (await client.post("/v1/context-packages", json=body)).json()
    assert {made[0]["id"], made[9]["id"]}.isdisjoint({i["id"] for i in plain["items"]})
    ht = (await client.post("/v1/context-packages", json={**body, "head_tail": 1})).json()
    ids = [i["id"] for i in ht["items"]]
    assert len(ids) == 4 and ids[0] == made[0]["id"] and ids[-1] == made[9]["id"]


async def test_package_never_exceeds_budget_or_share_property(client) -> None:
    items = await _fill(client)

    @settings(
        max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(
        budget=st.integers(1, 600),
        shares=st.tuples(st.integers(0, 10), st.integers(0, 10), st.integers(0, 10)).filter(
            lambda t: sum(t) <= 10
        ),
        head_tail=st.none() | st.integers(0, 3),
    )
    def prop(budget, shares, head_tail):
        share = dict(zip(TIERS, (s / 10 for s in shares), strict=True))
        body = {
            "task_id": "t1",
            "project_id": "p1",
            "budget_tokens": budget,
            "shares": share,
            "head_tail": head_tail,
        }
        samples.append((body, share))

    samples: list = []
    prop()
    for body, share in samples:
        r = await client.post("/v1/context-packages", json=body)
        assert r.status_code == 200, r.text
        _check(r.json(), items, body["budget_tokens"], share)
