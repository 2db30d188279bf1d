"""Issue 37, finding 7: one malformed field no longer fails the batch. Keys are repaired
(lowercase, invalid characters to `_`, length), only a candidate that cannot be repaired
is dropped, and the run's result counts it."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.facts.policy import FactOutputError
from app.facts.prompts import KEY_PATTERN
from app.facts.repair import repair_key, salvage_candidates
from tests.facts.helpers import extract, scope_facts, talk
from tests.fakes.llm_server import FakeLLMServer, ToolUse


def test_keys_are_repaired_to_the_pattern() -> None:
    assert repair_key("user.home_city") == "user.home_city"
    assert repair_key("user.favourite-food") == "user.favourite_food"
    assert repair_key("User.Home City") == "user.home_city"
    sentence = "The user's favourite colour is blue."
    assert repair_key(sentence) == "user.favourite_colour_is_blue"
    assert repair_key("The user's home city") == "user.home_city"
    assert repair_key("Favourite colour") == "favourite_colour"
    assert repair_key("a." + "b" * 100) == "a." + "b" * 60
    assert repair_key("a.b.c.d.e.f.g") == "a.b.c.d.e_f_g"
    assert repair_key("...") is None and repair_key("  ") is None and repair_key(None) is None
    assert repair_key(42) is None


@given(st.text(max_size=400))
def test_a_repaired_key_always_fits_the_pattern(raw: str) -> None:
    key = repair_key(raw)
    assert key is None or (re.match(KEY_PATTERN, key) and len(key) <= 200)


def test_only_irreparable_candidates_are_dropped() -> None:
    good = {"text": "The user likes figs.", "key": "user.food", "importance": 0.5}
    out = salvage_candidates(
        {
            "facts": [
                {**good, "source_seqs": [1]},
                {**good, "key": "user.favourite-food", "source_seqs": [1, 77]},
                {**good, "key": "!!!", "source_seqs": [1]},
                {**good, "source_seqs": [77]},
                {**good, "text": " ", "source_seqs": [1]},
                {**good, "importance": 7, "valid_from": "last week", "source_seqs": [1]},
                "a string",
            ]
        },
        {1, 2},
    )
    assert [f.key for f in out.facts] == ["user.food", "user.favourite_food", "user.food"]
    assert out.facts[1].source_seqs == [1] and out.facts[2].importance == 1.0
    assert out.facts[2].valid_from is None
    assert out.dropped == 4 and out.repaired == 2
    with pytest.raises(FactOutputError, match="outside the batch"):
        salvage_candidates({"facts": [{**good, "source_seqs": [9]}]}, {1})
    with pytest.raises(FactOutputError, match="does not match the schema"):
        salvage_candidates({"facts": "none"}, {1})
    assert salvage_candidates({"facts": []}, {1}).facts == []


async def test_a_malformed_key_loses_no_good_fact(
    llm_client: httpx.AsyncClient, fake_llm: FakeLLMServer
) -> None:
    def answer(req: Any) -> Any:
        assert req.tool_name == "record_facts"
        return {
            "facts": [
                {
                    "text": "The user likes figs.",
                    "key": "user.favourite-food",
                    "importance": 0.6,
                    "source_seqs": [1],
                },
                {
                    "text": "The user's favourite colour is blue.",
                    "key": "The user's favourite colour",
                    "importance": 0.6,
                    "source_seqs": [3],
                },
                {
                    "text": "The user has a dog named Rex.",
                    "key": "user.pet.name",
                    "importance": 0.7,
                    "source_seqs": [3],
                },
                {"text": "", "key": "user.nothing", "importance": 0.1, "source_seqs": [1]},
            ]
        }

    fake_llm.set_default(ToolUse(answer))
    r = await llm_client.post("/v1/sessions", json={"config": {"facts": {"enabled": True}}})
    sid = r.json()["id"]
    await talk(
        llm_client,
        sid,
        ("2026-01-03T09:00:00Z", "I love figs."),
        ("2026-01-03T09:05:00Z", "Blue is my colour, and my dog is Rex."),
    )
    body = await extract(llm_client, sid)
    assert body["result"]["added"] == 3, body
    assert body["result"]["dropped"] == 1 and body["result"]["repaired"] == 2, body
    assert body["extraction"]["status"] == "succeeded" and body["extraction"]["watermark_seq"] == 4
    facts = {f["text"]: f["key"] for f in await scope_facts(llm_client, "agent/agent-1")}
    assert facts == {
        "The user likes figs.": "user.favourite_food",
        "The user's favourite colour is blue.": "user.favourite_colour",
        "The user has a dog named Rex.": "user.pet.name",
    }
