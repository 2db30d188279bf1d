"""The diff of two manifests (`app.manifests.diff`, pure) on constructed pairs:
from a list of blocks, `b` is made by removing, adding and changing known blocks, and the
diff must name exactly those, with the token deltas."""

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from app.manifests.diff import diff, diff_blocks

LAYERS = ("rom", "kernel", "block", "l2", "recalled", "promoted", "l1")


def _block(key: str, layer: str, tokens: int, seq: int = 0) -> dict[str, Any]:
    return {
        "position": 0,
        "key": key,
        "layer": layer,
        "name": None,
        "tokens": tokens,
        "cache_control": None,
        "sources": [{"kind": "message", "seq": seq}],
        "why": "because",
        "truncated_to": None,
        "tool_calls_left_out": [],
        "replay": None,
    }


def _numbered(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**b, "position": i} for i, b in enumerate(blocks)]


blocks_st = st.lists(
    st.tuples(st.integers(0, 400), st.sampled_from(LAYERS), st.integers(0, 5000)),
    min_size=0,
    max_size=30,
    unique_by=lambda t: t[0],
).map(lambda items: _numbered([_block(f"msg:{k}", layer, tok, k) for k, layer, tok in items]))


@st.composite
def pairs(draw: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    a = draw(blocks_st)
    keys = [x["key"] for x in a]
    removed = set(draw(st.lists(st.sampled_from(keys), unique=True)) if keys else [])
    kept = [x for x in a if x["key"] not in removed]
    changed: dict[str, str] = {}
    b: list[dict[str, Any]] = []
    for x in kept:
        how = draw(st.sampled_from(("same", "tokens", "layer", "truncated", "sources")))
        y = dict(x)
        if how == "tokens":
            y["tokens"] = x["tokens"] + draw(st.integers(1, 300)) * draw(st.sampled_from((1, -1)))
            if y["tokens"] < 0:
                y["tokens"] = x["tokens"] + 1
        elif how == "layer":
            y["layer"] = draw(st.sampled_from([v for v in LAYERS if v != x["layer"]]))
        elif how == "truncated":
            y["truncated_to"] = draw(st.integers(1, 100))
        elif how == "sources":
            y["sources"] = [*x["sources"], {"kind": "message", "seq": -1}]
        if how != "same":
            changed[x["key"]] = how
        b.append(y)
    new = draw(
        st.lists(
            st.tuples(st.integers(1000, 2000), st.sampled_from(LAYERS), st.integers(0, 5000)),
            unique_by=lambda t: t[0],
            max_size=10,
        )
    )
    added = [_block(f"msg:{k}", layer, tok, k) for k, layer, tok in new]
    for blk in added:  # inserted anywhere: positions move, which alone changes nothing
        b.insert(draw(st.integers(0, len(b))), blk)
    expect = {
        "removed": [x["key"] for x in a if x["key"] in removed],
        "added": [x["key"] for x in b if x["key"] in {y["key"] for y in added}],
        "changed": changed,
    }
    return a, _numbered(b), expect


@given(pairs())
def test_diff_names_exactly_what_was_added_removed_and_changed(pair):
    a, b, expect = pair
    d = diff_blocks(a, b)
    assert [x["key"] for x in d["removed"]] == expect["removed"]
    assert [x["key"] for x in d["added"]] == expect["added"]
    assert {x["key"] for x in d["changed"]} == set(expect["changed"])
    kinds = {
        "tokens": "tokens",
        "layer": "layer",
        "truncated": "truncated_to",
        "sources": "sources",
    }
    for x in d["changed"]:
        assert x["fields"] == [kinds[expect["changed"][x["key"]]]]
        assert x["token_delta"] == x["tokens_b"] - x["tokens_a"]
    assert d["token_delta"] == sum(x["tokens"] for x in b) - sum(x["tokens"] for x in a)
    assert d["token_delta"] == (
        sum(x["token_delta"] for x in d["added"])
        + sum(x["token_delta"] for x in d["removed"])
        + sum(x["token_delta"] for x in d["changed"])
    )
    assert d["unchanged"] == len(b) - len(d["added"]) - len(d["changed"])


@given(pairs())
def test_diff_is_antisymmetric(pair):
    a, b, _ = pair
    ab, ba = diff_blocks(a, b), diff_blocks(b, a)
    assert [x["key"] for x in ab["added"]] == [x["key"] for x in ba["removed"]]
    assert [x["key"] for x in ab["removed"]] == [x["key"] for x in ba["added"]]
    assert {x["key"] for x in ab["changed"]} == {x["key"] for x in ba["changed"]}
    assert ab["token_delta"] == -ba["token_delta"]


@given(blocks_st)
def test_a_build_against_itself_is_empty(blocks):
    d = diff_blocks(blocks, blocks)
    assert d["added"] == d["removed"] == d["changed"] == [] and d["token_delta"] == 0


def _manifest(blocks: list[dict[str, Any]], **over: Any) -> dict[str, Any]:
    tokens = {"l1": sum(b["tokens"] for b in blocks), "overhead": 24}
    return {
        "blocks": blocks,
        "tokens": tokens,
        "total_tokens": tokens["l1"] + 24,
        "budget": 1000,
        "sha256": {"anthropic": "x", "openai": "y"},
        "config_sha256": "c",
        **over,
    }


def test_manifest_diff_reports_layers_hashes_and_config():
    a = _manifest([_block("msg:1", "l1", 10), _block("msg:2", "l1", 20)])
    b = _manifest(
        [_block("msg:2", "l1", 20), _block("msg:3", "l1", 7)],
        sha256={"anthropic": "x", "openai": "z"},
        config_sha256="d",
    )
    d = diff(a, b)
    assert [x["key"] for x in d["added"]] == ["msg:3"]
    assert [x["key"] for x in d["removed"]] == ["msg:1"]
    assert d["layer_token_deltas"] == {"l1": -3}
    assert d["total_tokens_a"] == 54 and d["total_tokens_b"] == 51
    assert d["same_bytes"] == {"anthropic": True, "openai": False}
    assert d["config_changed"] is True
