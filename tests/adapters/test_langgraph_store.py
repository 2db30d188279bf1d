"""`LoomStore`, LangGraph's `BaseStore` on Loom shared memory, through LangGraph's own
methods and a compiled graph, against a live server; what it stored is read back over HTTP."""

import asyncio
from typing import Any, TypedDict
from urllib.parse import quote

import httpx
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import GetOp, InvalidNamespaceError, Item, PutOp
from loom_client import AsyncLoomClient, LoomClient
from loom_client.adapters.langgraph import LoomStore, parse_key, storage_key

from tests.client.conftest import TenantKeys


def entry(rest: httpx.Client, key: str, namespace: str = "global") -> dict[str, Any]:
    resp = rest.get(f"/v1/shared-memory/{namespace}/{quote(key, safe='/')}")
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def loom_keys(rest: httpx.Client, namespace: str = "global", prefix: str = "") -> list[str]:
    resp = rest.get(f"/v1/shared-memory/{namespace}", params={"prefix": prefix, "limit": 1000})
    assert resp.status_code == 200, resp.text
    return [k["key"] for k in resp.json()["items"]]


def test_put_get_delete_are_shared_memory_entries(loom: LoomClient, rest: httpx.Client):
    store = LoomStore(loom)
    store.put(("users", "alice"), "prefs", {"text": "likes short answers", "n": 1})

    item = store.get(("users", "alice"), "prefs")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (
        ("users", "alice"),
        "prefs",
        {"text": "likes short answers", "n": 1},
    )
    stored = entry(rest, "langgraph/users/alice/=prefs")
    assert stored["value"] == {"text": "likes short answers", "n": 1}
    assert stored["metadata"] == {
        "langgraph": {"namespace": ["users", "alice"], "key": "prefs", "index": None}
    }
    assert stored["writer_agent_id"] == "agent-1"
    assert item.created_at.isoformat() == stored["created_at"].replace("Z", "+00:00")

    store.put(("users", "alice"), "prefs", {"text": "now likes long answers"})
    again = store.get(("users", "alice"), "prefs")
    assert again is not None and again.value == {"text": "now likes long answers"}
    assert again.created_at == item.created_at and again.updated_at > item.updated_at

    assert store.get(("users", "alice"), "missing") is None
    assert store.get(("users",), "prefs") is None  # another namespace
    store.delete(("users", "alice"), "prefs")
    assert store.get(("users", "alice"), "prefs") is None
    assert loom_keys(rest, prefix="langgraph/") == []
    store.delete(("users", "alice"), "prefs")  # deleting nothing is fine, as in LangGraph


@pytest.mark.parametrize(
    ("namespace", "key"),
    [
        (("a/b",), "k"),
        (("a", "b"), "k"),
        (("=k",), "k"),
        (("..",), ".."),
        (("%2F", "100%"), "%2e%2e"),
        (("ünï", "日本"), "clé/é"),
        (("x",), ""),
        (("sp ace", "tab-less"), " lead"),
    ],
)
def test_namespaces_and_keys_round_trip_exactly(namespace, key):
    loom_key = storage_key("langgraph", namespace, key)
    assert parse_key("langgraph", loom_key) == (namespace, key)
    segments = loom_key.split("/")
    assert len(segments) == 2 + len(namespace)  # no label adds or removes a level
    assert all(s not in ("", ".", "..") for s in segments)
    assert [s.startswith("=") for s in segments[1:]] == [False] * len(namespace) + [True]


def test_awkward_labels_are_stored_apart_and_listed_back(loom: LoomClient, rest: httpx.Client):
    store = LoomStore(loom)
    awkward = [("a/b",), ("a", "b"), ("..", "x"), ("%2e%2e",), ("ünï", "日本"), ("=k",)]
    # LangGraph's put refuses labels with a `.`; a batch passes them, and they are safe here
    store.batch([PutOp(ns, "k/..", {"i": i}) for i, ns in enumerate(awkward)])
    got = store.batch([GetOp(ns, "k/..") for ns in awkward])
    assert [(g.namespace, g.key, g.value) for g in got] == [  # type: ignore[union-attr]
        (ns, "k/..", {"i": i}) for i, ns in enumerate(awkward)
    ]
    assert store.list_namespaces() == sorted(awkward)
    assert len(loom_keys(rest, prefix="langgraph/")) == len(awkward)
    # nothing left the store's prefix, and no key is a '.'/'..' segment
    assert all(".." not in k.split("/") for k in loom_keys(rest))


def test_invalid_namespaces_and_overlong_keys_are_refused_before_any_request(loom: LoomClient):
    store = LoomStore(loom)
    with pytest.raises(InvalidNamespaceError):
        store.put((), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.put(("a", ""), "k", {"v": 1})
    with pytest.raises(ValueError, match="at most 256"):
        store.put(("n",), "k" * 300, {"v": 1})
    with pytest.raises(ValueError, match="non-empty strings"):
        store.batch([GetOp(("a", ""), "k")])  # batch skips LangGraph's own checks
    with pytest.raises(ValueError, match="prefix"):
        LoomStore(loom, prefix="/lg/")


def seed(store: LoomStore) -> None:
    store.put(("docs", "alice"), "d1", {"text": "Paris trip in May", "stars": 5, "tag": "travel"})
    store.put(("docs", "alice"), "d2", {"text": "Tax return notes", "stars": 2, "tag": "admin"})
    store.put(("docs", "bob"), "d3", {"text": "Trip to Rome", "stars": 4, "tag": "travel"})
    store.put(("docs", "bob", "old"), "d4", {"text": "Old trip to Paris", "stars": 1})
    store.put(
        ("docs", "carol"),
        "d5",
        {"title": "Paris", "body": "x", "meta": {"lang": "fr"}},
        index=["body"],
    )
    store.put(("docs", "carol"), "d6", {"text": "Paris Paris", "tag": "travel"}, index=False)
    store.put(("other",), "o1", {"text": "Paris"})


def test_search_filters_pages_and_queries(loom: LoomClient):
    store = LoomStore(loom)
    seed(store)

    every = store.search(("docs",), limit=100)
    assert [(i.namespace, i.key) for i in every] == [
        (("docs", "alice"), "d1"),
        (("docs", "alice"), "d2"),
        (("docs", "bob"), "d3"),
        (("docs", "bob", "old"), "d4"),
        (("docs", "carol"), "d5"),
        (("docs", "carol"), "d6"),
    ]
    assert all(i.score is None for i in every)
    assert [i.key for i in store.search(("docs",), limit=2, offset=1)] == ["d2", "d3"]
    assert [i.key for i in store.search(("docs", "bob"))] == ["d3", "d4"]
    assert [i.key for i in store.search(("doc",))] == []  # labels match whole
    assert len(store.search(())) == 7

    assert [i.key for i in store.search(("docs",), filter={"tag": "travel"})] == ["d1", "d3", "d6"]
    assert [i.key for i in store.search(("docs",), filter={"stars": {"$gte": 4}})] == ["d1", "d3"]
    assert [i.key for i in store.search(("docs",), filter={"stars": {"$gt": 1, "$lt": 5}})] == [
        "d2",
        "d3",
    ]
    assert [i.key for i in store.search(("docs",), filter={"tag": {"$ne": "travel"}})] == [
        "d2",
        "d4",
        "d5",
    ]
    assert [i.key for i in store.search(("docs",), filter={"meta": {"lang": "fr"}})] == ["d5"]
    assert [
        i.key for i in store.search(("docs",), filter={"tag": "travel"}, limit=1, offset=1)
    ] == ["d3"]

    # lexical query: share of the query's words found, best first, no-match left out
    hits = store.search(("docs",), query="trip to Paris")
    assert [(i.key, round(i.score or 0, 2)) for i in hits] == [
        ("d4", 1.0),
        ("d1", 0.67),
        ("d3", 0.67),
    ]
    # d5 is indexed on `body` only (its title says Paris), d6 not at all
    assert [i.key for i in store.search(("docs",), query="x")] == ["d5"]
    assert [i.key for i in store.search(("docs", "carol"), query="paris")] == []
    assert [i.key for i in store.search(("docs",), query="paris", filter={"tag": "travel"})] == [
        "d1"
    ]
    assert [i.key for i in store.search(("docs",), query="paris trip", limit=1, offset=1)] == [
        "d4"  # d1 and d4 both score 1.0: key order
    ]
    assert store.search(("docs",), query="nothing matches this") == []
    with pytest.raises(ValueError, match="unsupported filter operator"):
        store.search(("docs",), filter={"stars": {"$in": [1]}})


def test_store_wide_index_fields(loom: LoomClient):
    store = LoomStore(loom, index_fields=["title"])
    store.put(("n",), "a", {"title": "red fox", "body": "blue whale"})
    store.put(("n",), "b", {"title": "blue sky", "body": "red"}, index=["body"])
    assert [i.key for i in store.search(("n",), query="red")] == ["a", "b"]
    assert [i.key for i in store.search(("n",), query="whale")] == []
    assert [i.key for i in store.search(("n",), query="sky")] == []


def test_list_namespaces_with_conditions_depth_and_pages(loom: LoomClient):
    store = LoomStore(loom)
    seed(store)
    assert store.list_namespaces() == [
        ("docs", "alice"),
        ("docs", "bob"),
        ("docs", "bob", "old"),
        ("docs", "carol"),
        ("other",),
    ]
    assert store.list_namespaces(prefix=("docs", "bob")) == [
        ("docs", "bob"),
        ("docs", "bob", "old"),
    ]
    assert store.list_namespaces(suffix=("old",)) == [("docs", "bob", "old")]
    assert store.list_namespaces(prefix=("docs", "*", "old")) == [("docs", "bob", "old")]
    assert store.list_namespaces(prefix=("*", "carol")) == [("docs", "carol")]
    assert store.list_namespaces(max_depth=1) == [("docs",), ("other",)]
    assert store.list_namespaces(limit=2, offset=1) == [("docs", "bob"), ("docs", "bob", "old")]


def test_ttl_becomes_the_entrys_expiry(loom: LoomClient, rest: httpx.Client):
    store = LoomStore(loom)
    store.put(("tmp",), "k", {"v": 1}, ttl=2.5)
    stored = entry(rest, storage_key("langgraph", ("tmp",), "k"))
    assert stored["expires_at"] is not None
    store.put(("tmp",), "k2", {"v": 1})
    assert entry(rest, storage_key("langgraph", ("tmp",), "k2"))["expires_at"] is None


def test_agent_namespace_keeps_each_agents_store_apart(loom: LoomClient, rest: httpx.Client):
    mine = LoomStore(loom, namespace="agent")
    theirs = LoomStore(loom.with_agent("agent-2"), namespace="agent")
    mine.put(("prefs",), "k", {"who": "agent-1"})
    theirs.put(("prefs",), "k", {"who": "agent-2"})
    got = mine.get(("prefs",), "k")
    assert got is not None and got.value == {"who": "agent-1"}
    assert [i.value["who"] for i in theirs.search(("prefs",))] == ["agent-2"]
    assert entry(rest, "langgraph/prefs/=k", namespace="agent")["value"] == {"who": "agent-1"}
    assert loom_keys(rest, prefix="langgraph/") == []  # nothing in `global`


def test_scoped_namespace_needs_and_uses_its_scope_id(loom: LoomClient, rest: httpx.Client):
    store = LoomStore(loom, namespace="workflow", scope_id="run-7")
    store.put(("steps",), "s1", {"done": True})
    resp = rest.get("/v1/shared-memory/workflow/langgraph/steps/=s1", params={"scope_id": "run-7"})
    assert resp.status_code == 200 and resp.json()["value"] == {"done": True}
    assert LoomStore(loom, namespace="workflow", scope_id="run-8").get(("steps",), "s1") is None


def test_batch_runs_operations_in_order(loom: LoomClient):
    store = LoomStore(loom)
    results = store.batch(
        [
            PutOp(("b",), "k", {"v": 1}),
            GetOp(("b",), "k"),
            PutOp(("b",), "k", None),
            GetOp(("b",), "k"),
        ]
    )
    assert results[0] is None and results[2] is None and results[3] is None
    assert isinstance(results[1], Item) and results[1].value == {"v": 1}


async def test_async_methods_on_the_async_client(aloom: AsyncLoomClient, rest: httpx.Client):
    store = LoomStore(aloom)
    await asyncio.gather(
        *(store.aput(("a", f"u{i}"), "k", {"text": f"item {i}"}) for i in range(12))
    )
    item = await store.aget(("a", "u3"), "k")
    assert item is not None and item.value == {"text": "item 3"}
    hits = await store.asearch(("a",), query="item 7", limit=20)
    assert hits[0].key == "k" and hits[0].namespace == ("a", "u7") and hits[0].score == 1.0
    assert len(hits) == 12  # every item says "item"
    assert len(await store.alist_namespaces(prefix=("a",))) == 12
    await store.adelete(("a", "u3"), "k")
    assert await store.aget(("a", "u3"), "k") is None
    assert len(loom_keys(rest, prefix="langgraph/a/")) == 11
    with pytest.raises(TypeError, match="only an AsyncLoomClient"):
        store.get(("a", "u1"), "k")


async def test_async_methods_on_the_sync_client_run_in_a_thread(loom: LoomClient):
    store = LoomStore(loom)
    await store.aput(("t",), "k", {"v": 2})
    got = await store.aget(("t",), "k")
    assert got is not None and got.value == {"v": 2}
    assert store.get(("t",), "k") == got


class Notes(TypedDict):
    user: str
    note: str
    recalled: list[str]


def remember(state: Notes, runtime: Runtime) -> dict[str, Any]:
    assert runtime.store is not None
    runtime.store.put(
        ("notes", state["user"]), f"n{len(state['recalled'])}", {"text": state["note"]}
    )
    return {}


def recall(state: Notes, runtime: Runtime) -> dict[str, Any]:
    assert runtime.store is not None
    hits = runtime.store.search(("notes", state["user"]), query=state["note"])
    return {"recalled": [h.value["text"] for h in hits]}


async def arecall(state: Notes, runtime: Runtime) -> dict[str, Any]:
    assert runtime.store is not None
    hits = await runtime.store.asearch(("notes", state["user"]), query=state["note"])
    return {"recalled": [h.value["text"] for h in hits]}


def graph(node: Any, store: LoomStore) -> Any:
    builder = StateGraph(Notes)
    builder.add_node("remember", remember)
    builder.add_node("recall", node)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder.compile(store=store)


async def test_a_compiled_graph_uses_the_store(
    loom: LoomClient, aloom: AsyncLoomClient, loom_tenant: TenantKeys, rest: httpx.Client
):
    store = LoomStore(loom)
    out = graph(recall, store).invoke({"user": "ann", "note": "blue bicycle", "recalled": []})
    assert out["recalled"] == ["blue bicycle"]

    both = LoomStore(loom, async_client=aloom)
    out = await graph(arecall, both).ainvoke(
        {"user": "ann", "note": "red bicycle", "recalled": ["x"]}
    )
    assert out["recalled"] == ["red bicycle", "blue bicycle"]  # 1.0, then 0.5
    assert entry(rest, "langgraph/notes/ann/=n1")["value"] == {"text": "red bicycle"}
