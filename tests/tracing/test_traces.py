# mypy: disable-error-code="index,union-attr,operator"
"""Issue 47: OpenTelemetry traces. With the SDK's in-memory exporter: an append that puts
the memory under pressure is one trace with the compression job it queued (the trace
context travels with the arq job), the job's LLM summary and its L2 write; a reranked
search is one trace with its `search_memory` span and the rerank's LLM span. One test sends
the spans to a real OTLP/HTTP receiver started here and decodes them with
opentelemetry-proto."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.core import tracing
from app.core.config import Settings
from app.main import create_app
from tests.fakes.llm_server import FakeLLMServer
from tests.jobs.support import append, drain_queue, exchange, llm_settings, new_session
from tests.jobs.support import run_burst_worker as run_compression_worker
from tests.support.api import make_client

MODEL = "claude-haiku-4-5"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider)
    try:
        yield exporter
    finally:
        tracing.use(None)
        AsyncPGInstrumentor().uninstrument()


@pytest.fixture
async def traced_client(
    spans: InMemorySpanExporter, settings: Settings, fake_llm: FakeLLMServer, tenant: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, Settings]]:
    traced = llm_settings(settings, fake_llm, otel=True, db_pool_size=4)
    application = create_app(traced)
    async with application.router.lifespan_context(application):
        async with make_client(application, tenant.service_key, {"X-Agent-Id": "agent-1"}) as c:
            yield c, traced


def by_id(found: tuple[ReadableSpan, ...]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in found}


def parent_of(span: ReadableSpan, index: dict[int, ReadableSpan]) -> ReadableSpan | None:
    return index.get(span.parent.span_id) if span.parent is not None else None


def ancestors(span: ReadableSpan, index: dict[int, ReadableSpan]) -> list[str]:
    names, cur = [], parent_of(span, index)
    while cur is not None:
        names.append(cur.name)
        cur = parent_of(cur, index)
    return names


def tree(found: tuple[ReadableSpan, ...], trace_id: int) -> str:
    """The trace as an indented tree (for the failure message and the report)."""
    mine = [s for s in found if s.context.trace_id == trace_id]
    index = by_id(tuple(mine))
    kids: dict[int | None, list[ReadableSpan]] = {}
    for s in sorted(mine, key=lambda s: s.start_time or 0):
        p = s.parent.span_id if s.parent is not None and s.parent.span_id in index else None
        kids.setdefault(p, []).append(s)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for s in kids.get(parent, []):
            lines.append("  " * depth + s.name)
            walk(s.context.span_id, depth + 1)

    walk(None, 0)
    return "\n".join(lines)


async def test_an_append_its_compression_job_and_the_llm_summary_are_one_trace(
    traced_client: tuple[httpx.AsyncClient, Settings],
    spans: InMemorySpanExporter,
    fake_llm: FakeLLMServer,
) -> None:
    client, traced = traced_client
    await drain_queue(traced)
    sid = await new_session(client)
    creates = [s for s in spans.get_finished_spans() if s.name == "create_memory_store"]
    assert [s.attributes["gen_ai.memory.store.id"] for s in creates] == [sid]
    for n in range(8):
        await append(client, sid, exchange(n))
    await run_compression_worker(traced)
    found = spans.get_finished_spans()
    index = by_id(found)
    [job] = [s for s in found if s.name == "job compress_session"]
    trace_id = job.context.trace_id
    picture = tree(found, trace_id)
    # the job continues the trace of the append that queued it
    request = [s for s in found if s.context.trace_id == trace_id and s.parent is None]
    assert len(request) == 1 and request[0].name.startswith("POST"), picture
    assert str(request[0].attributes["url.path"]).endswith(f"/{sid}/messages"), picture
    updates = [
        s
        for s in found
        if s.context.trace_id == trace_id
        and s.name == "update_memory"
        and parent_of(s, index) is request[0]
    ]
    assert [u.attributes["gen_ai.memory.store.id"] for u in updates] == [sid], picture
    assert updates[0].attributes.get("gen_ai.memory.records") is None  # content is off
    assert request[0].name in ancestors(job, index), picture
    # under the job: the LLM summary and the L2 write
    llm = [
        s
        for s in found
        if s.name == f"chat {MODEL}" and "job compress_session" in ancestors(s, index)
    ]
    assert llm, picture
    for call in llm:
        attrs = call.attributes
        assert attrs["gen_ai.provider.name"] == "anthropic"
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.request.model"] == MODEL
        assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
        assert attrs["loom.llm.purpose"] == "summary"
    l2 = [
        s
        for s in found
        if s.name == "update_memory" and "job compress_session" in ancestors(s, index)
    ]
    assert l2 and l2[0].attributes["gen_ai.memory.store.id"] == sid, picture
    # the database statements are spans of the same trace
    db = [
        s
        for s in found
        if s.context.trace_id == trace_id and s.attributes.get("db.system") == "postgresql"
    ]
    assert db and any("job compress_session" in ancestors(s, index) for s in db), picture
    print("\n" + picture)


async def test_a_reranked_search_is_one_trace_and_content_is_opt_in(
    traced_client: tuple[httpx.AsyncClient, Settings],
    spans: InMemorySpanExporter,
    fake_llm: FakeLLMServer,
) -> None:
    client, _ = traced_client
    sid = await new_session(client)
    await append(client, sid, exchange(1) + exchange(2))
    fake_llm.respond_with('[{"index": 0, "score": 9}]')
    for content, query in ((False, "fact1_3 remember"), (True, "fact2_4 remember")):
        spans.clear()  # two queries: the second is not a rerank cache hit
        tracing.Tracing.content = content
        r = await client.post(f"/v1/sessions/{sid}/search", json={"query": query, "rerank": True})
        assert r.status_code == 200 and r.json()["reranked"] is True, r.text
        found = spans.get_finished_spans()
        index = by_id(found)
        [search] = [s for s in found if s.name == "search_memory"]
        assert search.attributes["gen_ai.memory.store.id"] == sid
        assert search.attributes["loom.memory.store.kind"] == "session"
        assert ancestors(search, index)[-1].startswith("POST")
        [rerank] = [s for s in found if s.name == f"chat {MODEL}"]
        assert parent_of(rerank, index) is search
        assert rerank.attributes["loom.llm.purpose"] == "rerank"
        assert rerank.attributes["gen_ai.usage.input_tokens"] > 0
        shown = search.attributes.get("gen_ai.memory.query.text")
        assert shown == (query if content else None)
    tracing.Tracing.content = False


class _Receiver(BaseHTTPRequestHandler):
    got: list[ExportTraceServiceRequest] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/traces":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            self.got.append(request)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


async def test_spans_reach_a_real_otlp_http_receiver(
    settings: Settings, fake_llm: FakeLLMServer, tenant: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Receiver.got = []
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{server.server_port}/v1/traces"
    )
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "loom-wire-test")
    try:
        application = create_app(llm_settings(settings, fake_llm, otel=True, db_pool_size=4))
        assert tracing.on() and not tracing.Tracing.pinned
        async with application.router.lifespan_context(application):
            async with make_client(application, tenant.service_key, {"X-Agent-Id": "a"}) as c:
                sid = await new_session(c)
                fake_llm.respond_with('[{"index": 0, "score": 7}]')
                await append(c, sid, exchange(1))
                r = await c.post(f"/v1/sessions/{sid}/search", json={"query": "fact1_2"})
                assert r.status_code == 200, r.text
        tracing.Tracing.provider.force_flush()
    finally:
        tracing.shutdown()
        tracing.use(None)
        AsyncPGInstrumentor().uninstrument()
        server.shutdown()
    spans = [
        (span, rs.resource)
        for req in _Receiver.got
        for rs in req.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    ]
    names = {s.name for s, _ in spans}
    assert {"create_memory_store", "update_memory", "search_memory", f"chat {MODEL}"} <= names
    services = {
        a.value.string_value for _, r in spans for a in r.attributes if a.key == "service.name"
    }
    assert services == {"loom-wire-test"}
    [search] = [s for s, _ in spans if s.name == "search_memory"]
    attrs = {a.key: a.value.string_value for a in search.attributes}
    assert attrs["gen_ai.memory.store.id"] == sid
    [llm] = [s for s, _ in spans if s.name == f"chat {MODEL}"]
    assert llm.trace_id == search.trace_id and llm.parent_span_id == search.span_id
    tokens = {a.key: a.value.int_value for a in llm.attributes if a.key.startswith("gen_ai.usage")}
    assert tokens["gen_ai.usage.input_tokens"] > 0
