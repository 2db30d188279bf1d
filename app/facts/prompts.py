"""Prompts and output schemas of fact extraction (issue 19), in one place.

Two structured-output steps, each a forced tool call whose input JSON Schema comes from the
pydantic models below (and is validated by them):

1. `record_facts`: candidate facts from the new messages of one batch, given each message's
   seq, speaker and date. Each candidate names the seqs it came from.
2. `decide_facts`: for each candidate, the closest existing valid facts of the scope (with
   their ids) are shown, and the model decides ADD, UPDATE (rewrite a shown fact),
   INVALIDATE (a shown fact is contradicted from now on; the candidate is added) or NONE.

Everything the model sees is rendered here, so a test can read exactly what it is asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_CANDIDATES = 50
MAX_FACT_CHARS = 1000

# --- step 1: candidates -------------------------------------------------------------


class CandidateFact(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_FACT_CHARS, description=(
        "One self-contained sentence, understandable without the conversation: name the "
        "person or thing (\"The user prefers tea\", not \"They like it\")."))
    importance: float = Field(ge=0, le=1, description="0-1: how useful later (1 = essential).")
    tags: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        default_factory=list, max_length=10, description="A few lowercase topic labels.")
    source_seqs: list[int] = Field(min_length=1, max_length=50, description=(
        "The msg numbers this fact was taken from."))


class CandidatesOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    facts: list[CandidateFact] = Field(max_length=MAX_CANDIDATES, description=(
        "Durable facts stated in the new messages; empty when there are none."))


EXTRACT_TOOL = "record_facts"
EXTRACT_TOOL_DESCRIPTION = "Record the durable facts found in the new messages."
EXTRACT_SYSTEM = """\
You read new messages of a conversation between a user and an AI agent and write down \
the durable facts in them: preferences, personal details, plans, decisions, relationships, \
constraints and anything else worth remembering in a later conversation. Skip greetings, \
small talk, questions without an answer and what only matters for the current turn. \
Each fact is one self-contained sentence that names who or what it is about, states it \
as true at the message's date, and lists the msg numbers it comes from. When the \
messages change a fact (a preference, an address...), record only its latest state, \
citing the messages that changed it. Never invent a fact that the messages do not state. \
Call the record_facts tool exactly once."""

# --- step 2: decisions --------------------------------------------------------------

Op = Literal["ADD", "UPDATE", "INVALIDATE", "NONE"]


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    candidate: int = Field(ge=0, description="The number of the new fact decided on.")
    op: Op = Field(description=(
        "ADD: a new fact. UPDATE: the same fact as an existing one, with more or better "
        "detail: the existing fact is rewritten (give target_id and text). INVALIDATE: "
        "the new fact contradicts an existing one, which stops being true now; the new "
        "fact is added (give target_id). NONE: already known, nothing to do."))
    target_id: str | None = Field(default=None, description=(
        "For UPDATE and INVALIDATE: the id of an existing fact shown with this candidate."))
    text: str | None = Field(default=None, max_length=MAX_FACT_CHARS, description=(
        "For UPDATE: the rewritten fact (one self-contained sentence)."))


class DecisionsOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decisions: list[Decision] = Field(max_length=MAX_CANDIDATES, description=(
        "Exactly one decision per new fact."))


DECIDE_TOOL = "decide_facts"
DECIDE_TOOL_DESCRIPTION = "Decide, for each new fact, how it changes the stored facts."
DECIDE_SYSTEM = """\
You keep an agent's long-term memory of facts current. For each new fact you are shown \
the closest stored facts (with their ids). Decide exactly once per new fact: ADD when it \
is new; UPDATE when it restates a stored fact with more or corrected detail (rewrite the \
stored fact in text); INVALIDATE when it contradicts a stored fact that is no longer true \
(for example a changed preference or a moved address); NONE when a stored fact already \
says it. Only use ids that are shown with that new fact. Call the decide_facts tool \
exactly once."""


def tool_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The tool's input JSON Schema (pydantic's, definitions inlined by reference)."""
    return model.model_json_schema()


# --- rendering ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchMessage:
    """One message of an extraction batch, as the prompt shows it."""

    seq: int
    speaker: str
    created_at: datetime
    text: str


@dataclass(frozen=True, slots=True)
class ShownFact:
    """An existing fact shown to the model in step 2."""

    id: str
    text: str
    valid_from: datetime | None


def _date(ts: datetime | None) -> str:
    return ts.strftime("%Y-%m-%d %H:%M UTC") if ts is not None else "unknown date"


def speaker(role: str, name: str | None, agent_id: str) -> str:
    """How a message's author is named: the user, the agent (by id), a tool."""
    if role == "assistant":
        return f"assistant ({agent_id})"
    if role == "user":
        return f"user ({name})" if name else "user"
    return f"{role} ({name})" if name else role


def render_batch(messages: Sequence[BatchMessage]) -> str:
    """Step 1's user prompt: the messages with seq, date and speaker."""
    lines = [f"[msg {m.seq} | {_date(m.created_at)} | {m.speaker}] {m.text}"
             for m in messages]
    first, last = messages[0].seq, messages[-1].seq
    return (f"New messages msg {first}-{last}:\n\n<messages>\n" + "\n".join(lines)
            + "\n</messages>\n\nRecord the durable facts they state.")


def render_decisions(candidates: Sequence[Any], shown: Sequence[Sequence[ShownFact]],
                     dates: Sequence[datetime | None]) -> str:
    """Step 2's user prompt: each candidate (numbered from 0, with its date) and the
    stored facts closest to it."""
    parts = []
    for i, (cand, near, when) in enumerate(zip(candidates, shown, dates, strict=True)):
        stored = "\n".join(f"  - id={f.id} (since {_date(f.valid_from)}): {f.text}"
                           for f in near) or "  (no similar stored facts)"
        parts.append(f"New fact {i} (stated {_date(when)}, msg "
                     f"{', '.join(str(s) for s in cand.source_seqs)}): {cand.text}\n"
                     f"Closest stored facts:\n{stored}")
    return "\n\n".join(parts) + "\n\nDecide once for each new fact."
