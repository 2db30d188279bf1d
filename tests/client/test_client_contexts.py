"""The Python client's context history (issue 30): every build's context_id, the recorded
manifests, replay and diff, sync and async."""

import pytest
from loom_client import AsyncLoomClient, Conflict, LoomClient, NotFound


def test_context_id_history_replay_and_diff(loom: LoomClient) -> None:
    sid = loom.create_session(config={"audit": True}).id
    loom.append_messages(
        sid,
        [
            {"role": "user", "content": "Which harbour first?"},
            {"role": "assistant", "content": "Rotterdam."},
        ],
    )
    first = loom.context(sid)
    assert first.context_id == first.response.context_id and first.response.recorded
    loom.append_messages(sid, [{"role": "user", "content": "And then?"}])
    second = loom.build_context(sid, format="raw")
    assert second.manifest is not None and second.manifest["context_id"] == second.context_id
    assert [c.context_id for c in loom.iter_contexts(sid, page_size=1)] == [
        second.context_id,
        first.context_id,
    ]
    manifest = loom.get_context_manifest(sid, first.context_id)
    assert [b["key"] for b in manifest.blocks] == ["msg:1", "msg:2"]
    replayed = loom.replay_context(sid, first.context_id, format="openai")
    assert replayed.sha256 == manifest.sha256["openai"]
    diff = loom.diff_contexts(sid, first.context_id, second.context_id)
    assert [a["key"] for a in diff.added] == ["msg:3"] and diff.token_delta > 0
    with pytest.raises(NotFound):
        loom.get_context_manifest(sid, "00000000-0000-0000-0000-000000000000")
    unrecorded = loom.build_context(sid, record=False)
    assert not unrecorded.recorded
    loom.delete_session(sid)


async def test_async_replay_conflict_names_the_change(aloom: AsyncLoomClient) -> None:
    sid = (await aloom.create_session(config={"audit": True})).id
    await aloom.append_messages(sid, [{"role": "user", "content": "Start the survey."}])
    built = await aloom.context(sid)
    await aloom.put_kernel_tools(
        sid, [{"name": "probe", "description": "Probe depth.", "input_schema": {"type": "object"}}]
    )
    with pytest.raises(Conflict) as err:
        await aloom.replay_context(sid, built.context_id)
    assert "Kernel" in str(err.value)
