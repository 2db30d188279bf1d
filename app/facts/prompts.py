"""Prompts and output schemas of fact extraction, in one place.

Two structured-output steps, each a forced tool call whose input JSON Schema comes from the
pydantic models below (and is validated by them):

1. `record_facts`: candidate facts from the new messages of one batch, given each message's
   seq, speaker and date, and the scope's stored facts that bear on them (so a known fact
   is not recorded again, and a fact about the same thing reuses its key). Each candidate
   has a subject/attribute `key` (`user.home_city`), names the seqs it came from and may
   say when it became true (`valid_from`, resolved against the message date).
2. `decide_facts`: the stored valid facts of the scope (all of them when they fit the
   prompt; else those sharing a candidate's key and the best text matches), with ids,
   keys and times, then the candidates in time order; one decision per candidate: ADD,
   UPDATE (the same fact refined or corrected), INVALIDATE (the world changed: the stored
   fact stops being true), NONE (already known). A candidate may name an earlier
   candidate of the batch (`new-<j>`).

Everything the model sees is rendered here, so a test can read exactly what it is asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.knowledge.schemas import KEY_PATTERN

MAX_CANDIDATES = 50
MAX_FACT_CHARS = 1000

# --- step 1: candidates -------------------------------------------------------------


EVENT_TIME_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"(T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?$"
)


class CandidateFact(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(
        min_length=1,
        max_length=MAX_FACT_CHARS,
        description=(
            "One self-contained sentence, understandable without the conversation: name the "
            'person or thing ("The user prefers tea", not "They like it").'
        ),
    )
    key: str = Field(
        pattern=KEY_PATTERN,
        max_length=200,
        description=(
            "What the fact is about, as subject.attribute in lowercase (user.home_city, "
            "user.employer, user.pet.name, user.sister.home_city): two facts that cannot both "
            "be true share a key. Reuse a key in use (listed in <keys>) for the same thing."
        ),
    )
    valid_from: str | None = Field(
        default=None,
        pattern=EVENT_TIME_PATTERN,
        description=(
            'When the fact became true, if the messages say ("I moved here last month" on '
            "2026-03-05 -> 2026-02-01): an ISO date or date-time resolved against the "
            "message's date. Leave it out when it became true when it was said."
        ),
    )
    importance: float = Field(ge=0, le=1, description="0-1: how useful later (1 = essential).")
    tags: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        default_factory=list, max_length=10, description="A few lowercase topic labels."
    )
    one_value: bool | None = Field(
        default=None,
        description=(
            "true when the key holds one value at a time (a home city, an employer, a "
            "diet: a new value replaces the old); false when several facts can share it "
            "(allergies, pets, languages)."
        ),
    )
    source_seqs: list[int] = Field(
        min_length=1, max_length=50, description=("The msg numbers this fact was taken from.")
    )


class CandidatesOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    facts: list[CandidateFact] = Field(
        max_length=MAX_CANDIDATES,
        description=(
            "Durable facts stated in the new messages, in the order they were stated; empty "
            "when there are none."
        ),
    )


EXTRACT_TOOL = "record_facts"
EXTRACT_TOOL_DESCRIPTION = "Record the durable facts found in the new messages."
EXTRACT_SYSTEM = """\
You read new messages of a conversation between a user and an AI agent and write down \
the durable facts in them: preferences, personal details, plans, decisions, relationships, \
constraints and anything else worth remembering in a later conversation. Skip greetings, \
small talk, questions without an answer and what only matters for the current turn. \
Each fact is one self-contained sentence that names who or what it is about, with a \
subject.attribute key (facts that cannot both be true share a key), the msg numbers it \
comes from, and, when the messages say the fact became true at another time than the \
message ("I moved to Berlin last month"), that time as valid_from, resolved against the \
message's date. When the messages change a fact (a preference, an address...), record \
each state in the order stated, each citing its own messages: "I live in Paris" then \
"I moved to Berlin" are two facts with the same key. The stored facts shown are already \
known: never record one as a new fact. When the messages state one again, record it with \
its stored wording and key (its messages join its sources); when they change or correct \
it, record the new state with the same key. Never invent a fact that the messages do not \
state. The keys in use are listed with how many facts hold each: for an attribute \
already named there, use that key, never a synonym (user.home_city, not user.location). \
Call the record_facts tool exactly once."""

# --- step 2: decisions --------------------------------------------------------------

Op = Literal["ADD", "UPDATE", "INVALIDATE", "NONE"]


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    candidate: int = Field(ge=0, description="The number of the new fact decided on.")
    op: Op = Field(
        description=(
            "ADD: a new fact. UPDATE: the same fact as a stored one, refined or corrected "
            "(the world did not change; the stored fact is rewritten: give target_id and "
            "text). INVALIDATE: the world changed, the stored fact stops being true and the "
            "new fact replaces it (give target_id). NONE: already known (give target_id of "
            "the fact that says it)."
        )
    )
    target_id: str | None = Field(
        default=None,
        description=(
            "For UPDATE, INVALIDATE and NONE: the id of a stored fact shown, or new-<j> for "
            "an earlier new fact j of this list."
        ),
    )
    text: str | None = Field(
        default=None,
        max_length=MAX_FACT_CHARS,
        description=("For UPDATE: the rewritten fact (one self-contained sentence)."),
    )


class DecisionsOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decisions: list[Decision] = Field(
        max_length=MAX_CANDIDATES, description=("Exactly one decision per new fact.")
    )


DECIDE_TOOL = "decide_facts"
DECIDE_TOOL_DESCRIPTION = "Decide, for each new fact, how it changes the stored facts."
DECIDE_SYSTEM = """\
You keep an agent's long-term memory of facts current. You are shown the stored facts \
that could be affected (id, key, since when each is true, when it was said) and the new \
facts, in the order they became true. Decide exactly once per new fact, in order:
- ADD: nothing stored is about the same thing.
- UPDATE: the same fact, refined or corrected; the world did not change. Example: stored \
"The user works as a teacher", new "The user works as a maths teacher at Lycee Hoche": \
UPDATE with the rewritten text.
- INVALIDATE: the world changed, so the stored fact is no longer true and the new fact \
replaces it. Example: stored "The user lives in Paris", new "The user lives in Berlin" \
(same key user.home_city): INVALIDATE the Paris fact. A pet that died, a job that \
changed, a preference given up are INVALIDATE too.
- NONE: a stored fact already says it (give its id).
Facts with the same key usually concern the same thing; facts with other keys can too. \
A new fact may also replace or refine an earlier new fact of this list: name it new-<j>. \
Only use ids that are shown. Call the decide_facts tool exactly once."""


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
    """A stored fact shown to the model."""

    id: str
    text: str
    valid_from: datetime | None
    key: str | None = None
    stated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class NewFact:
    """A candidate as the decision step shows it."""

    text: str
    key: str | None
    valid_from: datetime
    stated_at: datetime
    session: str
    seqs: Sequence[int]


def _date(ts: datetime | None) -> str:
    return ts.strftime("%Y-%m-%d %H:%M UTC") if ts is not None else "unknown date"


def speaker(role: str, name: str | None, agent_id: str) -> str:
    """How a message's author is named: the user, the agent (by id), a tool."""
    if role == "assistant":
        return f"assistant ({agent_id})"
    if role == "user":
        return f"user ({name})" if name else "user"
    return f"{role} ({name})" if name else role


def stored_line(f: ShownFact, *, with_id: bool = True) -> str:
    said = f", said {_date(f.stated_at)}" if f.stated_at is not None else ""
    head = f"id={f.id} " if with_id else ""
    return f"- {head}key={f.key or '-'} (since {_date(f.valid_from)}{said}): {f.text}"


def key_line(key: str, count: int) -> str:
    return f"{key} ({count})"


def alias_line(alias: str, key: str) -> str:
    return f"{alias} -> {key}"


def render_batch(
    messages: Sequence[BatchMessage],
    known: Sequence[ShownFact] = (),
    keys: Sequence[tuple[str, int]] = (),
    aliases: Sequence[tuple[str, str]] = (),
) -> str:
    """Step 1's user prompt: the keys in use (with their counts) and the other keys
    learned to name the same attributes, the stored facts bearing on the
    batch, then the messages with seq, date and speaker."""
    lines = [message_line(m) for m in messages]
    first, last = messages[0].seq, messages[-1].seq
    stored = "\n".join(stored_line(f, with_id=False) for f in known) or "(none)"
    vocabulary = "\n".join(key_line(k, n) for k, n in keys) or "(none yet)"
    learned = (
        "Other keys that named the same attributes (use the key on the right):\n<aliases>\n"
        + "\n".join(alias_line(a, k) for a, k in aliases)
        + "\n</aliases>\n\n"
        if aliases
        else ""
    )
    return (
        f"Keys in use (facts each); reuse them for the same attribute:\n<keys>\n"
        f"{vocabulary}\n</keys>\n\n{learned}"
        f"Stored facts about these topics (already known):\n<stored>\n{stored}\n"
        f"</stored>\n\nNew messages msg {first}-{last}:\n\n<messages>\n"
        + "\n".join(lines)
        + "\n</messages>\n\nRecord the durable facts they state."
    )


def message_line(m: BatchMessage) -> str:
    return f"[msg {m.seq} | {_date(m.created_at)} | {m.speaker}] {m.text}"


def new_fact_line(i: int, c: NewFact) -> str:
    when = (
        f"valid from {_date(c.valid_from)}, stated {_date(c.stated_at)}"
        if c.valid_from != c.stated_at
        else f"stated {_date(c.stated_at)}"
    )
    return (
        f"New fact {i} (key={c.key or '-'}; {when}; session {c.session} msg "
        f"{', '.join(str(s) for s in c.seqs)}): {c.text}"
    )


def render_decisions(candidates: Sequence[NewFact], stored: Sequence[ShownFact]) -> str:
    """Step 2's user prompt: the stored facts (once, with ids), then each candidate
    (numbered from 0 in time order)."""
    shown = "\n".join(stored_line(f) for f in stored) or "(no stored facts)"
    news = "\n".join(new_fact_line(i, c) for i, c in enumerate(candidates))
    return (
        f"Stored valid facts that could be affected (those of each new fact's attribute, "
        f"then related attributes of its subject, then facts with matching "
        f"words):\n<stored>\n{shown}\n</stored>\n\nNew facts, in the order "
        f"they became true:\n<new>\n{news}\n</new>\n\nDecide once for each new fact."
    )
