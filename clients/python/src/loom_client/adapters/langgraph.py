"""LangGraph's long-term memory store on Loom's shared memory: `LoomStore`.

```python
from loom_client import LoomClient
from loom_client.adapters.langgraph import LoomStore

store = LoomStore(LoomClient(url, key, agent_id="planner"))
store.put(("users", "alice"), "prefs", {"text": "likes short answers", "lang": "en"})
store.get(("users", "alice"), "prefs").value
store.search(("users",), query="short answers", filter={"lang": "en"}, limit=5)
graph = builder.compile(store=store)  # nodes get it as `store`
```

Why shared memory, not memory items: a LangGraph item is (namespace tuple, key) -> JSON
object, upserted and read by its key, with creation and update times. A shared-memory entry is
exactly that ((namespace, scope id, key) -> JSON value, with versions, timestamps and a TTL),
and its keys list by prefix, which is how namespaces nest. Memory items have server-made ids,
fixed scopes (task/project/global/agent/user) and no lookup by a caller's key, so a put would
need a query and a race-prone insert-or-update.

Layout: the LangGraph namespace `("users", "alice")` with key `prefs` is the Loom key
`{prefix}/users/alice/=prefs` in the Loom namespace `namespace` (default `global`, the
tenant's; `agent` keeps the store private to the client's agent; `workflow`, `swarm`,
`debate` and `session` need `scope_id`). Every label and the key are percent-encoded (all but
letters, digits, `-`, `_` and `~`; `.` too), so no label can add a level (`/`), make a `.` or
`..` segment, or pass for the key (which alone starts with `=`); decoding is exact. A pair too
long for a Loom key (256 characters once encoded) raises ValueError before any request.

Search: Loom has no query over shared-memory values, so the store lists the keys under the
namespace prefix (1,000 per request) and reads entries: with neither `filter` nor `query` only
the page asked for (in namespace-then-key order), else every entry under the prefix (the async
methods read 8 at a time), so a search costs one request per item under the prefix. `filter`
has LangGraph's semantics (exact values, nested objects, `$eq $ne $gt $gte $lt $lte`).
`query` is lexical, not semantic: an item's score is the share of the query's words found in
its text (the string and number leaves of the value, or the fields its put named in `index`;
`index=False` items are never found by a query); items sharing no word are left out, the rest
come best first. Not supported: embeddings (`index` configs with `embed`), TTL refresh on read
(a `ttl` counts from the last put).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from langgraph.store.base.embed import get_text_at_path

from loom_client._async.client import AsyncLoomClient
from loom_client._sync.client import LoomClient
from loom_client.errors import NotFound
from loom_client.models.shared_memory import SharedMemoryBlob, SharedMemoryEntry

__all__ = ["LoomStore"]

MAX_KEY_CHARS = 256
KEY_MARK = "="
PAGE_SIZE = 1000
READ_CONCURRENCY = 8
_WORD = re.compile(r"\w+")


# --- keys ---------------------------------------------------------------------------------


def encode_label(label: str) -> str:
    """One namespace label or key as one Loom key segment (reversible by `unquote`)."""
    if not isinstance(label, str):
        raise TypeError(f"namespace labels and keys must be strings, not {type(label).__name__}")
    return quote_segment(label)


def quote_segment(text: str) -> str:
    return quote(text, safe="").replace(".", "%2E")


def namespace_prefix(prefix: str, namespace: Sequence[str]) -> str:
    """The Loom key prefix of everything in `namespace` and below (ends with `/`)."""
    for label in namespace:
        if not isinstance(label, str) or not label:
            raise ValueError(f"namespace labels must be non-empty strings: {tuple(namespace)!r}")
    return prefix + "/" + "".join(encode_label(label) + "/" for label in namespace)


def storage_key(prefix: str, namespace: Sequence[str], key: str) -> str:
    """The Loom key of a LangGraph item; ValueError when it would be too long."""
    loom_key = namespace_prefix(prefix, namespace) + KEY_MARK + encode_label(key)
    if len(loom_key) > MAX_KEY_CHARS:
        raise ValueError(
            f"namespace {tuple(namespace)!r} and key {key!r} make a Loom key of {len(loom_key)} "
            f"characters once encoded; at most {MAX_KEY_CHARS}: shorten them"
        )
    return loom_key


def parse_key(prefix: str, loom_key: str) -> tuple[tuple[str, ...], str] | None:
    """(namespace, key) of a Loom key this store wrote, None for any other key."""
    head = prefix + "/"
    if not loom_key.startswith(head):
        return None
    *labels, last = loom_key[len(head) :].split("/")
    if not last.startswith(KEY_MARK) or any(not x or x.startswith(KEY_MARK) for x in labels):
        return None
    return tuple(unquote(x) for x in labels), unquote(last[len(KEY_MARK) :])


# --- filters, lexical search and namespace matching (LangGraph's semantics) ----------------


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """LangGraph's filter: every field equal (nested objects field by field, lists item by
    item) or satisfying its `$eq $ne $gt $gte $lt $lte` operators."""
    return not filter or all(_compare(value.get(k), v) for k, v in filter.items())


def _compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(actual, op, operand) for op, operand in wanted.items())
        return isinstance(actual, Mapping) and all(
            _compare(actual.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(wanted)
            and all(_compare(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


def _operator(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(actual == operand)
    if op == "$ne":
        return bool(actual != operand)
    if op not in ("$gt", "$gte", "$lt", "$lte"):
        raise ValueError(f"unsupported filter operator {op!r}: use $eq $ne $gt $gte $lt $lte")
    try:
        a, b = float(actual), float(operand)
    except (TypeError, ValueError):
        return False  # a missing or non-numeric field is not in any range
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.casefold()))


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        yield str(value)
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _leaves(v)


def item_texts(
    value: Mapping[str, Any], index: Any, default_fields: Sequence[str] | None
) -> list[str] | None:
    """The texts a query is matched against; None when the item is not indexed."""
    if index is False:
        return None
    fields = index if isinstance(index, list) else default_fields
    if not fields:
        return list(_leaves(value))
    texts: list[str] = []
    for path in fields:
        texts.extend(_leaves(value) if path == "$" else get_text_at_path(dict(value), path))
    return texts


def query_score(query_words: set[str], texts: list[str] | None) -> float:
    """Share of the query's words found in the texts (0 when not indexed)."""
    if texts is None or not query_words:
        return 0.0
    found: set[str] = set()
    for text in texts:
        found |= words(text)
    return len(query_words & found) / len(query_words)


def namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"unsupported match type {condition.match_type!r}")
    return all(p == "*" or n == p for n, p in pairs)


def list_prefix(prefix: str, op: ListNamespacesOp) -> str:
    """The narrowest Loom key prefix a namespace listing can read: the labels before the
    first wildcard of its prefix conditions."""
    head: list[str] = []
    for condition in op.match_conditions or ():
        if condition.match_type != "prefix":
            continue
        labels: list[str] = []
        for label in condition.path:
            if label == "*":
                break
            labels.append(label)
        if len(labels) > len(head):
            head = labels
    return namespace_prefix(prefix, head)


def select_namespaces(
    op: ListNamespacesOp, found: Iterable[tuple[str, ...]]
) -> list[tuple[str, ...]]:
    namespaces = {
        ns for ns in found if all(namespace_matches(c, ns) for c in op.match_conditions or ())
    }
    if op.max_depth is not None:
        namespaces = {ns[: op.max_depth] for ns in namespaces}
    return sorted(namespaces)[op.offset : op.offset + op.limit]


# --- the store ------------------------------------------------------------------------------


def _ttl_seconds(ttl_minutes: float | None) -> int | None:
    return None if ttl_minutes is None else max(1, math.ceil(ttl_minutes * 60))


class LoomStore(BaseStore):
    """A LangGraph `BaseStore` on Loom shared memory (see the module's docstring).

    `client`: a `LoomClient` (sync methods; the async ones run it in a thread) or an
    `AsyncLoomClient` (async methods only); pass both as `client` and `async_client` to use
    each for its own. `namespace`/`scope_id` choose the Loom namespace, `prefix` the first
    segment of every key the store writes. `index_fields`: the value fields (LangGraph
    paths such as `"text"` or `"notes[*].body"`) a query matches when a put names none;
    default every string and number in the value. `ttl`: LangGraph's `TTLConfig`
    (`default_ttl` in minutes; reads never extend it).
    """

    supports_ttl = True

    def __init__(
        self,
        client: LoomClient | AsyncLoomClient,
        *,
        async_client: AsyncLoomClient | None = None,
        namespace: str = "global",
        scope_id: str | None = None,
        prefix: str = "langgraph",
        index_fields: Sequence[str] | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        if not prefix or prefix.strip("/") != prefix or "//" in prefix:
            raise ValueError(f"prefix must be one or more non-empty key segments: {prefix!r}")
        self._aclient: AsyncLoomClient | None
        if isinstance(client, AsyncLoomClient):
            self._client: LoomClient | None = None
            self._aclient = async_client or client
        else:
            self._client = client
            self._aclient = async_client
        self.namespace = namespace
        self.scope_id = scope_id
        self.prefix = prefix
        self.index_fields = list(index_fields) if index_fields is not None else None
        self.ttl_config = ttl

    # - sync ---------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; one result per operation."""
        if self._client is None:
            raise TypeError(
                "this LoomStore was given only an AsyncLoomClient: use the async methods "
                "(aget, aput, asearch, ...) or pass a LoomClient too"
            )
        return [self._run(self._client, op) for op in ops]

    def _run(self, c: LoomClient, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._item(self._read(c, storage_key(self.prefix, op.namespace, op.key)))
        if isinstance(op, PutOp):
            loom_key = storage_key(self.prefix, op.namespace, op.key)
            if op.value is None:
                try:
                    c.delete_shared_memory(self.namespace, loom_key, scope_id=self.scope_id)
                except NotFound:
                    pass
            else:
                c.put_shared_memory(self.namespace, loom_key, dict(op.value), **self._put_args(op))
            return None
        if isinstance(op, SearchOp):
            keys = self._keys(c, namespace_prefix(self.prefix, op.namespace_prefix))
            if not op.filter and not op.query:
                page = keys[op.offset : op.offset + op.limit]
                return self._page([self._read(c, k) for k in page], op, sliced=True)
            return self._page([self._read(c, k) for k in keys], op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op, self._keys(c, list_prefix(self.prefix, op)))
        raise ValueError(f"unknown operation {type(op).__name__}")

    def _read(self, c: LoomClient, loom_key: str) -> SharedMemoryEntry | None:
        try:
            entry = c.get_shared_memory(self.namespace, loom_key, scope_id=self.scope_id)
        except NotFound:
            return None
        return entry if isinstance(entry, SharedMemoryEntry) else None

    def _keys(self, c: LoomClient, key_prefix: str) -> list[str]:
        return [
            k.key
            for k in c.iter_shared_memory_keys(
                self.namespace, scope_id=self.scope_id, prefix=key_prefix, page_size=PAGE_SIZE
            )
        ]

    # - async --------------------------------------------------------------------------------

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order; one result per operation."""
        if self._aclient is None:
            return await asyncio.to_thread(self.batch, list(ops))
        return [await self._arun(self._aclient, op) for op in ops]

    async def _arun(self, c: AsyncLoomClient, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._item(await self._aread(c, storage_key(self.prefix, op.namespace, op.key)))
        if isinstance(op, PutOp):
            loom_key = storage_key(self.prefix, op.namespace, op.key)
            if op.value is None:
                try:
                    await c.delete_shared_memory(self.namespace, loom_key, scope_id=self.scope_id)
                except NotFound:
                    pass
            else:
                await c.put_shared_memory(
                    self.namespace, loom_key, dict(op.value), **self._put_args(op)
                )
            return None
        if isinstance(op, SearchOp):
            keys = await self._akeys(c, namespace_prefix(self.prefix, op.namespace_prefix))
            if not op.filter and not op.query:
                page = keys[op.offset : op.offset + op.limit]
                return self._page(await self._aread_all(c, page), op, sliced=True)
            return self._page(await self._aread_all(c, keys), op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op, await self._akeys(c, list_prefix(self.prefix, op)))
        raise ValueError(f"unknown operation {type(op).__name__}")

    async def _aread(self, c: AsyncLoomClient, loom_key: str) -> SharedMemoryEntry | None:
        try:
            entry = await c.get_shared_memory(self.namespace, loom_key, scope_id=self.scope_id)
        except NotFound:
            return None
        return entry if isinstance(entry, SharedMemoryEntry) else None

    async def _aread_all(
        self, c: AsyncLoomClient, keys: list[str]
    ) -> list[SharedMemoryEntry | None]:
        gate = asyncio.Semaphore(READ_CONCURRENCY)

        async def one(loom_key: str) -> SharedMemoryEntry | None:
            async with gate:
                return await self._aread(c, loom_key)

        return list(await asyncio.gather(*(one(k) for k in keys)))

    async def _akeys(self, c: AsyncLoomClient, key_prefix: str) -> list[str]:
        return [
            k.key
            async for k in c.iter_shared_memory_keys(
                self.namespace, scope_id=self.scope_id, prefix=key_prefix, page_size=PAGE_SIZE
            )
        ]

    # - shared by both -----------------------------------------------------------------------

    def _put_args(self, op: PutOp) -> dict[str, Any]:
        index = op.index if op.index is False or op.index is None else list(op.index)
        return {
            "scope_id": self.scope_id,
            "metadata": {
                "langgraph": {"namespace": list(op.namespace), "key": op.key, "index": index}
            },
            "ttl_seconds": _ttl_seconds(op.ttl),
        }

    def _item(
        self,
        entry: SharedMemoryEntry | SharedMemoryBlob | None,
        score: float | None = None,
        *,
        search: bool = False,
    ) -> Any:
        if not isinstance(entry, SharedMemoryEntry) or not isinstance(entry.value, dict):
            return None  # gone meanwhile, or not written by a LoomStore
        parsed = parse_key(self.prefix, entry.key)
        if parsed is None:
            return None
        namespace, key = parsed
        if search:
            return SearchItem(
                namespace, key, entry.value, entry.created_at, entry.updated_at, score
            )
        return Item(
            value=entry.value,
            key=key,
            namespace=namespace,
            created_at=entry.created_at,
            updated_at=entry.updated_at,
        )

    def _page(
        self, entries: list[SharedMemoryEntry | None], op: SearchOp, *, sliced: bool = False
    ) -> list[SearchItem]:
        found = [e for e in entries if e is not None and isinstance(e.value, dict)]
        found = [e for e in found if matches_filter(e.value, op.filter)]
        query_words = words(op.query) if op.query else set()
        if query_words:
            scored = [(query_score(query_words, self._texts(e)), e) for e in found]
            ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: -s[0])
            page = ranked[op.offset : op.offset + op.limit]
            items = [self._item(e, score, search=True) for score, e in page]
        else:
            page_entries = found if sliced else found[op.offset : op.offset + op.limit]
            items = [self._item(e, search=True) for e in page_entries]
        return [i for i in items if i is not None]

    def _texts(self, entry: SharedMemoryEntry) -> list[str] | None:
        meta = entry.metadata.get("langgraph") if isinstance(entry.metadata, dict) else None
        index = meta.get("index") if isinstance(meta, dict) else None
        return item_texts(entry.value, index, self.index_fields)

    def _namespaces(self, op: ListNamespacesOp, keys: list[str]) -> list[tuple[str, ...]]:
        parsed = (parse_key(self.prefix, k) for k in keys)
        return select_namespaces(op, (p[0] for p in parsed if p is not None))
