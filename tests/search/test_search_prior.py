"""The informativeness prior and the time flag (`app.messages.prior`), directly and with
hypothesis: what each feature does, that it never raises, and the reference ranking's use
of it (`rank_windowed`)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from app.messages import prior as P
from app.search.bm25 import Doc, WindowParams, rank_windowed


def test_a_statement_of_facts_scores_above_small_talk() -> None:
    fact = "I adopted a dog named Luna in Boston last week, she is 3 years old."
    chat = "Haha, that's great! What about you?"
    assert P.prior_of(fact, "user", None) > P.prior_of(chat, "user", None)


def test_each_feature_moves_the_logit_its_way() -> None:
    base = P.features("the weather was fine and the food was good", "user", None)
    assert base["first_person"] == 0 and base["names"] == 0 and base["numbers"] == 0
    assert P.features("we went and my food was good", "user", None)["first_person"] > 0
    assert P.features("the food at Rosa's in Lisbon was good", "user", None)["names"] > 0
    assert P.features("the food cost 12 euros for two", "user", None)["numbers"] > 0
    # a capital that starts a sentence is no name; "I" is no name either
    assert P.features("Good. Fine! I think so", "user", None)["names"] == 0
    assert P.features("was it good?", "user", None)["question"] == 1
    assert P.features('was it good?" ', "user", None)["question"] == 1
    assert P.features("it was good", "user", None)["question"] == 0
    assert P.WEIGHTS["question"] < 0 < P.WEIGHTS["answer"]


def test_an_answer_is_a_reply_by_another_role_to_a_question() -> None:
    asked = P.Before("user", True)
    told = P.Before("user", False)
    text = "It was in Lisbon."
    assert P.features(text, "assistant", asked)["answer"] == 1
    assert P.features(text, "user", asked)["answer"] == 0  # the same speaker goes on
    assert P.features(text, "assistant", told)["answer"] == 0
    assert P.features(text, "assistant", None)["answer"] == 0
    assert P.prior_of(text, "assistant", asked) - P.prior_of(text, "assistant", told) == (
        round(P.WEIGHTS["answer"] + P.prior_of(text, "assistant", told), P.DIGITS)
        - P.prior_of(text, "assistant", told)
    )


def test_priors_of_a_run_read_each_message_before() -> None:
    rows = [("user", "Where did you go?"), ("assistant", "To Lisbon, 3 days."), ("user", "ok")]
    got = P.priors(rows)
    assert got[0] == (P.prior_of(rows[0][1], "user", None), False)
    assert got[1] == (P.prior_of(rows[1][1], "assistant", P.Before("user", True)), True)
    assert got[2][0] == P.prior_of("ok", "user", P.Before("assistant", False))
    # a run that continues a session reads the message before it
    assert P.priors(rows[1:], P.Before("user", True)) == got[1:]


def test_time_expressions() -> None:
    for text in (
        "I went there yesterday",
        "we moved 3 years ago",
        "last week was busy",
        "for a couple of months",
        "see you on Friday",
        "back in 2019",
        "it was in May, I think",
        "two weeks later",
    ):
        assert P.timed(text), text
    for text in ("you may go", "I will march on", "the second best", "a long day's work"):
        assert not P.timed(text), text


def test_when_questions() -> None:
    for q in (
        "When did Caroline go to the support group?",
        "what year did they move?",
        "How long has Nate had his turtles?",
        "Which month was the trip in",
        "so, when was that",
    ):
        assert P.asks_when(q), q
    for q in ("What did Caroline research?", "Where was the party?", "whenever you like"):
        assert not P.asks_when(q), q


@given(st.text(max_size=300), st.sampled_from(["user", "assistant", "tool"]), st.booleans())
def test_never_raises_and_is_finite(text: str, role: str, asks: bool) -> None:
    value = P.prior_of(text, role, P.Before("user", asks))
    assert math.isfinite(value)
    assert isinstance(P.timed(text), bool) and isinstance(P.asks_when(text), bool)
    assert P.asks(text) == P.asks(text + "")
    # reading only the head: a long tail changes nothing
    assert P.prior_of(text + "x" * P.MAX_CHARS, role, None) == P.prior_of(
        (text + "x" * P.MAX_CHARS)[: P.MAX_CHARS], role, None
    )


@given(st.integers(0, 60), st.integers(0, 8))
def test_more_first_person_words_never_lower_the_prior(a: int, b: int) -> None:
    low = P.prior_of(" ".join(["it"] * 40 + ["my"] * min(a, b)), "user", None)
    high = P.prior_of(" ".join(["it"] * 40 + ["my"] * max(a, b)), "user", None)
    assert high >= low


def _docs(priors: list[float], timed: list[bool]) -> list[Doc]:
    return [
        Doc(i, {"kafka": [1]}, sort_key=(-i,), session="s", seq=i, prior=p, timed=t)
        for i, (p, t) in enumerate(zip(priors, timed, strict=True))
    ]


@given(st.lists(st.floats(-6, 4), min_size=2, max_size=8))
def test_the_prior_orders_otherwise_equal_messages(priors: list[float]) -> None:
    docs = [
        Doc(i, {"kafka": [1]}, sort_key=(-i,), session=f"s{i}", seq=1, prior=p)
        for i, p in enumerate(priors)
    ]
    ranked = rank_windowed(docs, ["kafka"], windows=WindowParams(window=0, weight=0.0))
    scores = dict(ranked)
    for i, p in enumerate(priors):
        for j, q in enumerate(priors):
            if p > q + 1e-6:
                assert scores[i] > scores[j]
    off = rank_windowed(
        docs, ["kafka"], windows=WindowParams(window=0, weight=0.0, prior_weight=0.0)
    )
    assert len({round(s, 9) for _, s in off}) == 1


def test_a_time_question_boosts_timed_messages_only() -> None:
    docs = _docs([0.0] * 4, [False, True, False, True])
    w = WindowParams(window=0, weight=0.0)
    plain = dict(rank_windowed(docs, ["kafka"], windows=w))
    when = dict(rank_windowed(docs, ["kafka"], windows=w, when=True))
    for i in range(4):
        assert when[i] == plain[i] * (P.WHEN_BOOST if docs[i].timed else 1.0)


def test_the_window_leans_back() -> None:
    """The query's word two turns before a message counts fully in its window, two turns
    after it half as much."""
    docs = [
        Doc(i, ({"kafka": [1]} if i == 2 else {"pad": [1]}), sort_key=(-i,), session="s", seq=i)
        for i in range(5)
    ]
    w = WindowParams(window=2, weight=1.0, prior_weight=0.0)
    scores = dict(rank_windowed(docs, ["kafka"], windows=w))
    # message 4 has kafka two turns back (weight 1), message 0 two turns ahead (weight 0.5)
    assert scores[4] > scores[0]
    even = dict(rank_windowed(docs, ["kafka"], windows=WindowParams(2, 1.0, after_weight=1.0)))
    assert even[4] == even[0]
    assert WindowParams(window=2).span == 4.0
