"""`loom-memory eval locomo` (app/eval): the harness through the Python client against the
app in-process, on a small conversation made here (exact figures) and, in its fast mode,
on the development half of LoCoMo when it is beside the repository."""

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from loom_client import AsyncLoomClient

from app.eval import cli as eval_cli
from app.eval import locomo, measures
from app.eval.locomo_data import parse_samples
from app.launcher import cli


def _dev_data() -> Path:
    """The development half of LoCoMo (CC BY-NC, never in the repository): $LOOM_LOCOMO_DATA,
    else `shared/data/locomo-dev` beside the repository or beside any folder above it, else
    where this project's machines keep it (a clean clone for CI may live elsewhere)."""
    if os.environ.get("LOOM_LOCOMO_DATA"):
        return Path(os.environ["LOOM_LOCOMO_DATA"])
    repo = Path(__file__).resolve().parents[2]
    for above in repo.parents:
        found = above / "shared" / "data" / "locomo-dev"
        if found.is_dir():
            return found
    return Path("/work/shared/data/locomo-dev")


DEV_DATA = _dev_data()
FILLER = [
    "we compared lunch menus for the offsite",
    "the printer jammed again today",
    "traffic on the bridge was slow",
    "my cat knocked over a plant",
]


def conversation() -> list[dict[str, Any]]:
    """Two sessions: the answer to an old question early in the first, 200 turns of
    filler, and the answer to a recent question in the last turns."""
    first = [
        {
            "speaker": "Ann",
            "dia_id": "D1:1",
            "text": "My sister Wilhelmina moved to Reykjavik last spring.",
        },
        {
            "speaker": "Bo",
            "dia_id": "D1:2",
            "text": "Reykjavik, wow!",
            "blip_caption": "a photo of a harbour",
        },
    ]
    first += [
        {
            "speaker": "Ann" if i % 2 else "Bo",
            "dia_id": f"D1:{i}",
            "text": f"{FILLER[i % 4]} (note {i})",
        }
        for i in range(3, 203)
    ]
    second = [
        {"speaker": "Ann", "dia_id": "D2:1", "text": "I adopted a beagle named Ziggy."},
        {"speaker": "Bo", "dia_id": "D2:2", "text": "Ziggy is a great name."},
    ]
    return [
        {
            "sample_id": "tiny-1",
            "conversation": {
                "speaker_a": "Ann",
                "speaker_b": "Bo",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": first,
                "session_2_date_time": "10:00 am on 2 June, 2023",
                "session_2": second,
            },
            "qa": [
                {
                    "question": "Where does Ann's sister Wilhelmina live?",
                    "answer": "Reykjavik",
                    "evidence": ["D1:1"],
                    "category": 4,
                },
                {
                    "question": "What is the name of Ann's beagle?",
                    "answer": "Ziggy",
                    "evidence": ["D:2:1", "D2:01"],
                    "category": 4,
                },
                {"question": "Unanswerable", "answer": "-", "evidence": ["D9:9"], "category": 5},
            ],
        }
    ]


async def test_the_harness_measures_search_and_the_context_at_each_budget(app, tenant):
    [sample] = parse_samples(conversation())
    assert sample.skipped == 1 and [q.evidence for q in sample.questions] == [["D1:1"], ["D2:1"]]
    options = locomo.Options(budgets=(600, 3000), settle_seconds=0)
    async with AsyncLoomClient(
        "http://loom.test", tenant.service_key, transport=httpx.ASGITransport(app=app)
    ) as loom:
        result = await locomo.run(loom, [sample], options, log=lambda _: None)
        # what it stored: one session per budget, the whole conversation with its times
        [info] = result["samples"]
        for budget, sid in info["sessions"].items():
            session = await loom.get_session(sid)
            assert session.agent_id == "locomo-tiny-1"
            config = dict(session.config)
            assert config["max_context_tokens"] == int(budget)
            assert config["reserved_output_tokens"] == 0
            assert config.get("recall") is None  # the question goes as recall.query only
            stored = [m async for m in loom.iter_messages(sid)]
            assert [m.seq for m in stored] == list(range(1, 205))
            assert stored[0].created_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
            assert stored[-1].created_at == datetime(2023, 6, 2, 10, 0, 1, tzinfo=UTC)
            assert stored[1].content == "Bo: Reykjavik, wow! a photo of a harbour"
            assert stored[1].role == "assistant" and stored[0].role == "user"
    old, recent = result["questions"]
    assert old["search"]["r@5"] == 1.0 and old["search"]["ranks"] == {"D1:1": 1}
    assert recent["search"]["r@10"] == 1.0
    assert info["last_n_turns"]["600"] < 204 and info["last_n_turns"]["3000"] < 204
    for budget in ("600", "3000"):
        c = old["context"][budget]
        assert c["recall"]["found"] == 1.0 and c["recall"]["recalled"] >= 1
        assert c["no_recall"]["found"] == 0.0 and c["last_n"]["found"] == 0.0
        assert not c["recent"]
        assert c["recall"]["tokens"] <= int(budget) and c["last_n"]["tokens"] <= int(budget)
        r = recent["context"][budget]
        assert r["recent"] and r["last_n"]["found"] == 1.0 and r["recall"]["found"] == 1.0
    figs = result["figures"]
    assert figs["search"]["r@10"] == 100.0 and figs["search"]["questions"] == 2
    at = figs["context"]["3000"]
    assert at["recall"]["evidence_recall"] == 100.0 and at["last_n"]["evidence_recall"] == 50.0
    assert at["recent"] == {
        "questions": 1,
        "recall": 100.0,
        "no_recall": at["recent"]["no_recall"],
        "last_n": 100.0,
        "recalled_tokens_mean": at["recent"]["recalled_tokens_mean"],
    }
    assert at["recall"]["latency_ms"]["n"] == 2


def test_measures():
    assert measures.last_n_that_fit([5, 5, 5], 11) == 2
    assert measures.last_n_that_fit([50], 10) == 0
    assert measures.percentile([1, 2, 3, 4], 50) == 2.5 and measures.percentile([], 50) is None
    text = measures.context_text(
        [{"type": "text", "text": "a  b"}],
        [{"role": "user", "content": [{"type": "text", "text": "Ann: x\ny"}]}],
    )
    assert (
        measures.evidence_in(text, ["D1", "D2", "D3"], {"D1": "Ann: x y", "D2": "a b", "D3": "zz"})
        == 2 / 3
    )


def test_bad_arguments_are_refused_before_anything_starts(capsys, tmp_path):
    assert cli.main(["eval", "locomo", "--data", str(tmp_path / "none.json")]) == 2
    assert "not found" in capsys.readouterr().err
    (tmp_path / "d.json").write_text("[]")
    assert cli.main(["eval", "locomo", "--data", str(tmp_path / "d.json"), "--budgets", "100"]) == 2
    assert "256" in capsys.readouterr().err
    # a server that does not answer: one line, no trace
    assert (
        cli.main(
            [
                "eval",
                "locomo",
                "--data",
                str(tmp_path / "d.json"),
                "--url",
                "http://127.0.0.1:1",
                "--key",
                "lm_x",
            ]
        )
        == 1
    )
    # the client's own error (LoomConnectionError), in one line
    assert capsys.readouterr().err.startswith(
        "eval failed: cannot connect to http://127.0.0.1:1/v1/me: is the Loom Memory server"
    )


@pytest.mark.skipif(not DEV_DATA.is_dir(), reason="LoCoMo dev data not beside the repo")
async def test_fast_mode_on_the_dev_half(app, settings, tmp_path):
    """One conversation, two budgets, the first questions: what `.ci/run` runs."""
    args = eval_cli.parse(
        ["--data", str(DEV_DATA), "--fast", "--settle", "0", "--out", str(tmp_path)]
    )
    result = await eval_cli.evaluate(
        "http://loom.test",
        settings.admin_key.get_secret_value(),
        args,
        log=lambda _: None,
        transport=httpx.ASGITransport(app=app),
    )
    notes = eval_cli.write(result, tmp_path)
    assert result["meta"]["samples"] == ["conv-26"]
    assert result["meta"]["questions"] == locomo.FAST_QUESTIONS
    figs = result["figures"]
    assert set(figs["context"]) == {"1000", "4000"}
    assert figs["search"]["r@10"] > 50
    at = figs["context"]["4000"]
    assert at["recall"]["evidence_recall"] > at["last_n"]["evidence_recall"]
    assert at["recall"]["tokens_mean"] <= 4000
    saved = json.loads((tmp_path / "locomo.json").read_text())
    assert saved["figures"] == json.loads(json.dumps(figs)) and "R@10" in saved["table"]
    assert (tmp_path / "locomo.txt").read_text().startswith("LoCoMo evidence recall")
    assert len(notes) == 2
