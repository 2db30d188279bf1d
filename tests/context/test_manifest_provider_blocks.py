"""A provider's block in a manifest (`app.manifests.blocks.provider_block`, pure): the
reason is the provider's own, whatever its name; the manifest adds the budget's share."""

from app.context.blocks import ContextBlock
from app.manifests.blocks import provider_block


def test_any_provider_gives_its_own_reason() -> None:
    block = ContextBlock(
        name="pinned_notes",
        text="- call Ana on Friday",
        token_count=7,
        sources=({"kind": "note", "id": "n1"},),
        replay={"share": 0.1, "limit": 400},
        why="1 note pinned by the operator",
    )
    m = provider_block(block)
    assert m["why"] == (
        "1 note pinned by the operator within its share 0.1 of the budget (400 tokens offered)."
    )
    assert (m["key"], m["layer"], m["name"], m["tokens"]) == (
        "block:pinned_notes",
        "block",
        "pinned_notes",
        7,
    )
    assert m["sources"] == [{"kind": "note", "id": "n1"}] and m["replay"] == block.replay


def test_a_provider_without_a_reason_is_named() -> None:
    m = provider_block(ContextBlock(name="facts", text="x", token_count=1))
    assert m["why"] == "Context block 'facts' of a provider."
