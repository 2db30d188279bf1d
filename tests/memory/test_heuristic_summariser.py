"""Heuristic summariser: deterministic, keeps user text, names tools and its range."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.tokens import count_text
from app.memory.heuristic_summariser import SummaryDraft, heuristic_summary

CI = settings(max_examples=300, derandomize=True, deadline=None)


def conversation() -> list[dict]:
    return [
        {"seq": 120, "role": "user", "content": "Find the slowest SQL queries of last week."},
        {
            "seq": 121,
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {"id": "a", "name": "run_sql", "input": {"q": "select 1"}},
                {"id": "b", "name": "run_sql", "input": {"q": "select 2"}},
                {"id": "c", "name": "fetch_dashboard", "input": {}},
            ],
        },
        {"seq": 122, "role": "tool", "tool_use_id": "a", "content": "3 rows"},
        {"seq": 123, "role": "tool", "tool_use_id": "b", "content": "timeout", "is_error": True},
        {
            "seq": 124,
            "role": "tool",
            "tool_use_id": "c",
            "content": [{"type": "text", "text": "ok"}],
        },
        {
            "seq": 135,
            "role": "assistant",
            "content": [{"type": "text", "text": "Query 7 is slowest."}],
        },
    ]


def test_summary_names_range_tools_and_method() -> None:
    draft = heuristic_summary(conversation())
    assert isinstance(draft, SummaryDraft)
    assert (draft.start_seq, draft.end_seq, draft.method) == (120, 135, "heuristic")
    assert "covers msg:120-135" in draft.text
    assert "Find the slowest SQL queries of last week." in draft.text
    assert "fetch_dashboard" in draft.text and "run_sql x2" in draft.text
    assert "3 result(s), 1 error(s)" in draft.text
    assert "Query 7 is slowest." not in draft.text or "Let me look." in draft.text
    assert draft.token_count == count_text(draft.text) + 4


def test_anthropic_shaped_blocks_are_understood() -> None:
    draft = heuristic_summary(
        [
            {
                "seq": 1,
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "x", "name": "search", "input": {}}],
            },
            {
                "seq": 2,
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "x", "content": "found"},
                    {"type": "text", "text": "thanks, now sort them"},
                ],
            },
        ]
    )
    assert "search" in draft.text and "1 result(s)" in draft.text
    assert "thanks, now sort them" in draft.text


def test_keeps_exactly_the_first_500_user_characters() -> None:
    long_text = "é" * 300 + "🙂" * 300
    draft = heuristic_summary([{"seq": 5, "role": "user", "content": long_text}])
    assert long_text[:500] in draft.text
    assert long_text[:501] not in draft.text
    draft.text.encode("utf-8")  # a character boundary: always valid UTF-8


def test_is_deterministic() -> None:
    assert heuristic_summary(conversation()) == heuristic_summary(conversation())


message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "tool", "system"]),
        "content": st.one_of(
            st.text(max_size=700),
            st.lists(
                st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=300)}),
                max_size=3,
            ),
            st.none(),
        ),
    }
)


@CI
@given(messages=st.lists(message, min_size=1, max_size=12), first=st.integers(0, 10_000))
def test_any_messages_summarise_with_their_user_text(messages: list[dict], first: int) -> None:
    for i, m in enumerate(messages):
        m["seq"] = first + i
    draft = heuristic_summary(messages)
    assert f"covers msg:{first}-{first + len(messages) - 1}" in draft.text
    assert draft.method == "heuristic"
    user_texts = []
    for m in messages:
        if m["role"] != "user" or m["content"] is None:
            continue
        c = m["content"]
        text = c if isinstance(c, str) else "\n".join(b["text"] for b in c if b["text"])
        user_texts.append(text)
    joined = "\n".join(t for t in user_texts if t)
    assert joined[:500] in draft.text
    assert draft.token_count == count_text(draft.text) + 4
