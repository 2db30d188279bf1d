"""Step 6 of a batch, done as each call returns: one structured LLM call with its
usage recorded at once (a killed attempt's calls count too) and its metrics."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from app.facts import metrics, prompts
from app.facts import state as runs
from app.facts.policy import FactOutputError
from app.facts.run import Deps, Outcome, connected
from app.llm.errors import LLMError

log = logging.getLogger("loom.facts")


async def record_usage(
    deps: Deps,
    tenant_id: uuid.UUID,
    session_id: uuid.UUID,
    calls: int,
    input_tokens: int,
    output_tokens: int,
) -> None:
    try:
        async with connected(deps.connect, commit=True) as conn:
            await runs.add_usage(
                conn,
                tenant_id,
                session_id,
                calls=calls,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
            )
    except Exception as exc:  # bookkeeping never decides the job's fate
        log.warning("could not record fact extraction usage: %s", type(exc).__name__)


async def ask(
    deps: Deps,
    outcome: Outcome,
    ids: tuple[uuid.UUID, uuid.UUID],
    step: str,
    system: str,
    prompt: str,
    tool: str,
    description: str,
    model: type[BaseModel],
    parse: Callable[[Any], Any] | None = None,
) -> Any:
    """One structured call, its usage recorded; the answer validated by `model` (or read
    by `parse`, which raises `FactOutputError`)."""
    assert deps.llm is not None
    outcome.llm_calls += 1
    metrics.LLM_CALLS.labels(step=step).inc()
    try:
        answer = await deps.llm.structured(
            system,
            prompt,
            tool_name=tool,
            tool_description=description,
            schema=prompts.tool_schema(model),
            max_tokens=int(deps.settings.facts_max_tokens),
        )
    except LLMError:  # a call that failed still counts (its tokens are unknown)
        await record_usage(deps, *ids, 1, 0, 0)
        raise
    outcome.input_tokens += answer.input_tokens
    outcome.output_tokens += answer.output_tokens
    await record_usage(deps, *ids, 1, answer.input_tokens, answer.output_tokens)
    metrics.LLM_TOKENS.labels(step=step, direction="input").inc(answer.input_tokens)
    metrics.LLM_TOKENS.labels(step=step, direction="output").inc(answer.output_tokens)
    if parse is not None:
        return parse(answer.data)
    try:
        return model.model_validate(answer.data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        raise FactOutputError(
            f"{step}: the answer does not match the schema ({where}: {first['msg']})"
        ) from None
