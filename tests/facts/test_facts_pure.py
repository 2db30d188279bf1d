"""The pure parts of facts: prompts and schemas, decision checking, the context choice."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.tokens import count_text
from app.facts import prompts as p
from app.facts.policy import (
    FactLine,
    FactOutputError,
    FactsConfig,
    check_candidates,
    choose_for_context,
    fit_text,
    plan_operations,
)


def test_prompts_show_speakers_dates_seqs_keys_and_times() -> None:
    batch = [
        p.BatchMessage(
            41,
            p.speaker("user", "Maria", "concierge"),
            datetime(2026, 3, 5, 9, 0, tzinfo=UTC),
            "I switched to coffee.",
        ),
        p.BatchMessage(
            42,
            p.speaker("assistant", None, "concierge"),
            datetime(2026, 3, 5, 9, 1, tzinfo=UTC),
            "Coffee it is.",
        ),
    ]
    stored = p.ShownFact(
        str(uuid.UUID(int=7)),
        "The user prefers tea.",
        datetime(2026, 3, 1, 9, 0, tzinfo=UTC),
        "user.drink",
        datetime(2026, 3, 1, 9, 0, tzinfo=UTC),
    )
    text = p.render_batch(batch, [stored])
    assert "[msg 41 | 2026-03-05 09:00 UTC | user (Maria)] I switched to coffee." in text
    assert "[msg 42 | 2026-03-05 09:01 UTC | assistant (concierge)] Coffee it is." in text
    assert "msg 41-42" in text
    # step 1 sees the stored facts bearing on the batch (no ids: nothing to target there)
    assert (
        "- key=user.drink (since 2026-03-01 09:00 UTC, said 2026-03-01 09:00 UTC): "
        "The user prefers tea."
        in text
        and "id=" not in text
    )
    assert "record_facts" in p.EXTRACT_SYSTEM and "Never invent" in p.EXTRACT_SYSTEM
    assert "two facts with the same key" in p.EXTRACT_SYSTEM
    new = p.NewFact(
        "The user prefers coffee.",
        "user.drink",
        datetime(2026, 2, 1, tzinfo=UTC),
        datetime(2026, 3, 5, 9, 0, tzinfo=UTC),
        "s-1",
        [41],
    )
    decide = p.render_decisions([new], [stored])
    assert (
        "New fact 0 (key=user.drink; valid from 2026-02-01 00:00 UTC, stated "
        "2026-03-05 09:00 UTC; session s-1 msg 41): The user prefers coffee."
    ) in decide
    assert f"- id={stored.id} key=user.drink (since 2026-03-01 09:00 UTC" in decide
    assert "(no stored facts)" in p.render_decisions([new], [])
    # UPDATE and INVALIDATE told apart plainly, with an example of each
    assert "the world did not change" in p.DECIDE_SYSTEM
    assert "the world changed" in p.DECIDE_SYSTEM and "Example" in p.DECIDE_SYSTEM
    assert "new-<j>" in p.DECIDE_SYSTEM


def test_tool_schemas_come_from_the_models_and_reject_bad_output() -> None:
    schema = p.tool_schema(p.DecisionsOut)
    dumped = json.dumps(schema)
    assert "ADD" in dumped and "INVALIDATE" in dumped and schema["type"] == "object"
    assert p.tool_schema(p.CandidatesOut)["required"] == ["facts"]
    with pytest.raises(ValueError):  # a key is subject.attribute in lowercase
        p.CandidatesOut.model_validate(
            {"facts": [{"text": "x", "key": "User Home", "importance": 0.5, "source_seqs": [1]}]}
        )
    with pytest.raises(ValueError):
        p.DecisionsOut.model_validate({"decisions": [{"candidate": 0, "op": "MERGE"}]})
    with pytest.raises(ValueError):
        p.CandidatesOut.model_validate(
            {"facts": [{"text": "x", "importance": 2, "source_seqs": [1]}]}
        )


def D(i: int, op: str, target: str | None = None, text: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(candidate=i, op=op, target_id=target, text=text)


A, B = str(uuid.UUID(int=1)), str(uuid.UUID(int=2))


def test_plan_operations_accepts_a_consistent_answer() -> None:
    plan = plan_operations(
        [D(0, "ADD"), D(1, "INVALIDATE", A), D(2, "UPDATE", B.upper(), "t"), D(3, "NONE")],
        4,
        [set(), {A}, {B}, {A, B}],
    )
    assert plan.counts == {"add": 1, "update": 1, "invalidate": 1, "none": 1}
    assert plan.operations[2].target == B  # ids compared case-insensitively


@pytest.mark.parametrize(
    ("decisions", "shown", "message"),
    [
        ([D(0, "ADD"), D(0, "NONE")], [set()], "decided twice"),
        ([D(1, "ADD")], [set()], "unknown fact 1"),
        ([], [set()], "no decision for fact 0"),
        ([D(0, "INVALIDATE", B)], [{A}], "not shown"),
        ([D(0, "UPDATE", A, "  ")], [{A}], "gives no text"),
        ([D(0, "INVALIDATE")], [{A}], "not shown"),
        ([D(0, "INVALIDATE", "new-0")], [{A}], "not shown"),  # only an earlier candidate
        ([D(0, "ADD"), D(1, "INVALIDATE", "new-1")], [set(), set()], "not shown"),
    ],
)
def test_plan_operations_rejects_inconsistent_answers(
    decisions: list[SimpleNamespace], shown: list[set[str]], message: str
) -> None:
    with pytest.raises(FactOutputError, match=message):
        plan_operations(decisions, len(shown), shown)


def test_a_candidate_may_target_an_earlier_candidate_and_none_may_confirm() -> None:
    plan = plan_operations(
        [D(0, "ADD"), D(1, "INVALIDATE", "new-0"), D(2, "NONE", A), D(3, "NONE")], 4, [{A}] * 4
    )
    assert [(o.op, o.target) for o in plan.operations] == [
        ("add", None),
        ("invalidate", "new-0"),
        ("confirm", A),
    ]
    assert plan.counts == {"add": 1, "update": 0, "invalidate": 1, "none": 2}


def test_candidates_must_name_seqs_of_the_batch() -> None:
    ok = SimpleNamespace(text="a", source_seqs=[3, 4])
    check_candidates([ok], {3, 4, 5})
    with pytest.raises(FactOutputError, match="outside the batch"):
        check_candidates([ok, SimpleNamespace(text="b", source_seqs=[6])], {3, 4, 5})


@given(
    st.lists(
        st.tuples(st.sampled_from(["ADD", "UPDATE", "INVALIDATE", "NONE"]), st.integers(0, 3)),
        max_size=6,
    )
)
def test_a_plan_never_targets_an_id_that_was_not_shown(pairs: list[tuple[str, int]]) -> None:
    ids = [str(uuid.UUID(int=k + 1)) for k in range(4)]
    shown = [{ids[i % 4]} for i in range(len(pairs))]
    decisions = [D(i, op, ids[t], "text") for i, (op, t) in enumerate(pairs)]
    try:
        plan = plan_operations(decisions, len(pairs), shown)
    except FactOutputError:
        return
    assert [o.candidate for o in plan.operations] == sorted(o.candidate for o in plan.operations)
    for o in plan.operations:
        assert o.target is None or o.target in shown[o.candidate]
    assert sum(plan.counts.values()) == len(pairs)


@given(st.lists(st.integers(1, 40), max_size=30), st.integers(0, 300), st.integers(0, 20))
def test_choose_for_context_never_exceeds_its_tokens(
    costs: list[int], tokens: int, header: int
) -> None:
    ranked = [FactLine(i, f"f{i}", c) for i, c in enumerate(costs)]
    chosen = choose_for_context(ranked, tokens, header)
    assert chosen.tokens <= tokens
    assert [f.id for f in chosen.lines] == sorted(f.id for f in chosen.lines)  # rank order
    if chosen.lines:
        assert chosen.tokens == header + sum(f.tokens + 1 for f in chosen.lines)
        # nothing left out would still have fitted
        room = tokens - chosen.tokens
        assert all(f.tokens + 1 > room for f in ranked if f not in chosen.lines)
    else:
        assert chosen.tokens == 0


@given(st.lists(st.text(min_size=1, max_size=40), max_size=12), st.integers(0, 200))
def test_fit_text_is_counted_whole(lines: list[str], tokens: int) -> None:
    fitted = fit_text("## Facts", lines, tokens, count_text)
    if fitted is not None:
        text, n = fitted
        assert n == count_text(text) <= tokens


def test_facts_config_share_and_defaults() -> None:
    cfg = FactsConfig.from_stored({"enabled": True, "share": 0.05})
    assert (cfg.scope, cfg.min_batch, cfg.every(6)) == ("agent", None, 6)
    assert FactsConfig.from_stored({"enabled": True, "min_batch": 3}).every(6) == 3
    assert cfg.tokens(10_000, 10_000) == 500 and cfg.tokens(10_000, 120) == 120
    assert FactsConfig.from_stored(None).tokens(10_000, 10_000) == 0
    with pytest.raises(ValueError):
        FactsConfig(share=0.9)
