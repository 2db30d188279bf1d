"""OpenTelemetry traces, on when `LOOM_OTEL=true` and the `otel` extra is installed.

A request is one trace: FastAPI's own HTTP server span (`create_app` hands it this
module's provider), the memory operations it performs in the GenAI memory conventions
(`memory_span`: `create_memory_store`, `search_memory`, `update_memory`,
`delete_memory_store`... with `gen_ai.memory.store.id` / `gen_ai.memory.record.id`), the
database statements (asyncpg's instrumentation) and the LLM calls (`app.llm.usage.Meter`:
`chat {model}` with `gen_ai.provider.name` and the usage tokens). A job queued by the
request carries the trace context (`carry()` adds it to the arq job's keyword arguments,
`job()` wraps the job function and continues it), so append -> compression job -> LLM
summary -> L2 write is one picture. Query texts and records are attributes only with
`LOOM_OTEL_CONTENT=true` (they may hold personal data).

Exporting follows the standard variables: `OTEL_EXPORTER_OTLP_ENDPOINT` (or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, the
default, or `grpc`), `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, and the SDK's sampler
and batch variables.

Off (the default, or without the extra) every hook here is one attribute test: `memory_span`
returns a shared no-op context manager, `carry()` an empty dict, the meter starts no span.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar, cast

log = logging.getLogger("loom.tracing")

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])
_NOOP = contextlib.nullcontext()
CARRIER = "otel_context"  # the arq job's keyword argument that carries the trace context


class Tracing:
    """The process's tracing state (set at start by `configure`, or by a test's `use`)."""

    tracer: Any = None  # an opentelemetry Tracer when on
    provider: Any = None
    content = False  # query texts and records as span attributes
    pinned = False  # a provider given by `use` (tests): `configure` keeps it


def on() -> bool:
    return Tracing.tracer is not None


def _exporter() -> Any:
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    return HttpExporter()


def configure(otel: bool, content: bool) -> Any:
    """At a process's start: the tracer provider (None when tracing is off)."""
    if Tracing.pinned:
        Tracing.content = content
        return Tracing.provider
    if not otel:
        Tracing.tracer = Tracing.provider = None
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("LOOM_OTEL=true but the otel extra is not installed: no traces")
        return None
    resource = Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME") or "loom-memory"}
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(_exporter()))
    use(provider, content=content, pinned=False)
    return provider


def use(provider: Any, *, content: bool = False, pinned: bool = True) -> None:
    """Trace with `provider` (tests pin an in-memory one); None turns tracing off."""
    Tracing.provider, Tracing.content = provider, content
    Tracing.pinned = bool(pinned and provider is not None)
    Tracing.tracer = provider.get_tracer("loom-memory") if provider is not None else None
    if provider is not None:
        _instrument_asyncpg(provider)


def _instrument_asyncpg(provider: Any) -> None:
    try:
        from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
    except ImportError:
        return
    instrumentor = AsyncPGInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()
    instrumentor.instrument(tracer_provider=provider)


def shutdown() -> None:
    """Export what is buffered (a process's end)."""
    provider = Tracing.provider
    if provider is not None and not Tracing.pinned:
        with contextlib.suppress(Exception):
            provider.shutdown()


# --- memory operations (GenAI memory conventions) ------------------------------------


@contextlib.contextmanager
def _memory_span(
    operation: str,
    store_id: object,
    record_id: object,
    query: str | None,
    records: object,
    store_kind: str | None,
) -> Iterator[Any]:
    attrs: dict[str, Any] = {"gen_ai.operation.name": operation}
    if store_id is not None:
        attrs["gen_ai.memory.store.id"] = str(store_id)
    if store_kind is not None:
        attrs["loom.memory.store.kind"] = store_kind
    if record_id is not None:
        attrs["gen_ai.memory.record.id"] = str(record_id)
    if Tracing.content:
        if query is not None:
            attrs["gen_ai.memory.query.text"] = query
        if records is not None:
            attrs["gen_ai.memory.records"] = str(records)[:4000]
    with Tracing.tracer.start_as_current_span(operation, attributes=attrs) as span:
        yield span


def memory_span(
    operation: str,
    store_id: object = None,
    *,
    record_id: object = None,
    query: str | None = None,
    records: object = None,
    store_kind: str | None = None,
) -> contextlib.AbstractContextManager[Any]:
    """A span of one memory operation (`search_memory`, `update_memory`...) when tracing is
    on; a shared no-op otherwise."""
    if Tracing.tracer is None:
        return _NOOP
    return _memory_span(operation, store_id, record_id, query, records, store_kind)


# --- LLM client spans (app.llm.usage.Meter) -------------------------------------------


class _LLMSpan:
    def __init__(self, span: Any) -> None:
        self.span = span

    def tokens(self, call: Any) -> None:
        self.span.set_attribute("gen_ai.usage.input_tokens", call.input_tokens)
        self.span.set_attribute("gen_ai.usage.output_tokens", call.output_tokens)


@contextlib.contextmanager
def _llm_span(provider: str, model: str, operation: str, purpose: str) -> Iterator[_LLMSpan]:
    from opentelemetry.trace import SpanKind

    attrs = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "loom.llm.purpose": purpose,
    }
    with Tracing.tracer.start_as_current_span(
        f"{operation} {model}", kind=SpanKind.CLIENT, attributes=attrs
    ) as span:
        yield _LLMSpan(span)


def llm_span(provider: str, model: str, operation: str, purpose: str) -> Any:
    """The span of one LLM call, or None when tracing is off."""
    if Tracing.tracer is None:
        return None
    return _llm_span(provider, model, operation, purpose)


# --- jobs: the trace context travels with the arq job ---------------------------------


def carry() -> dict[str, Any]:
    """Keyword arguments for an arq enqueue: the current trace context (none when off)."""
    if Tracing.tracer is None:
        return {}
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return {CARRIER: carrier} if carrier else {}


def job(fn: F) -> F:
    """An arq job function that continues the trace of whoever queued it: the carried
    context (a keyword argument) is taken off and the job runs in a span of its own."""

    @functools.wraps(fn)
    async def run(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        carried = kwargs.pop(CARRIER, None)
        if Tracing.tracer is None:
            return await fn(ctx, *args, **kwargs)
        from opentelemetry import propagate
        from opentelemetry.trace import SpanKind

        parent = propagate.extract(carried) if isinstance(carried, dict) else None
        with Tracing.tracer.start_as_current_span(
            f"job {fn.__name__}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes={"messaging.system": "arq", "messaging.operation.name": "process"},
        ):
            return await fn(ctx, *args, **kwargs)

    return cast(F, run)
