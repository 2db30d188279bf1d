"""A scripted model for fact extraction, behind the fake Anthropic server
(`fake.respond_with_tools(model)`), that answers only from the prompt it receives.

Step 1 (`record_facts`): each message line `[msg N | date | speaker] text` of a user that
matches a `Rule` becomes a fact naming that seq, with the rule's key; a rule's `when`
resolves an event time against the message's date ("last month"). Every state is recorded
in message order, and a fact of the prompt's <stored> section stated again is recorded in
its stored wording (as the prompt asks).

Step 2 (`decide_facts`): reads the stored facts (id, key, times) and the new facts in the
order shown; per new fact, the latest fact with the same key (an earlier new fact first,
`new-<j>`, else a stored one): same text -> NONE naming it; a rule marked `update` ->
UPDATE; else INVALIDATE. No fact with that key -> ADD. So a test also checks what the
product shows: a contradiction whose stored fact is not in the prompt is not caught.

Imperfect as real models are (issue 37): a rule with `aliases` names its attribute with
any of its keys (by turns) unless the prompt shows one of them in use (the <keys>
vocabulary or a stored fact): then it reuses that one; with `bad_key_every=n`, every n-th
fact it records has a key outside the pattern (`user.home-city`, or a sentence).

Issue 45: the prompt's <aliases> (`alias -> key`) count as keys in use (it names the
attribute with the key on the right); `follow_keys=False` makes it ignore what the prompt
shows and name attributes by turns anyway; a text in `forgetful` is always decided ADD
(a model that misses a contradiction or a restatement).

`calls` lists the tools asked, `prompts` the prompts received (tool, text).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from tests.fakes.llm_server import RecordedRequest

LINE = re.compile(r"^\[msg (\d+) \| ([^|]+) \| ([^\]]+)\] (.*)$", re.M)
NEW = re.compile(r"^New fact (\d+) \(key=([^;]*);[^)]*\): (.*)$", re.M)
STORED = re.compile(r"^- id=([0-9a-f-]{36}) key=(\S+) \(since [^)]*\): (.*)$", re.M)
KNOWN = re.compile(r"^- key=(\S+) \(since [^)]*\): (.*)$", re.M)
KEYS = re.compile(r"<keys>\n(.*?)\n</keys>", re.S)
KEY_LINE = re.compile(r"^(\S+) \((\d+)\)$", re.M)
ALIASES = re.compile(r"<aliases>\n(.*?)\n</aliases>", re.S)
ALIAS_LINE = re.compile(r"^(\S+) -> (\S+)$", re.M)


def last_month(said: date) -> str:
    """The first day of the month before `said` (what "last month" resolves to)."""
    year, month = (said.year, said.month - 1) if said.month > 1 else (said.year - 1, 12)
    return date(year, month, 1).isoformat()


@dataclass
class Rule:
    """A user message containing `trigger` states `fact` (about `key`)."""

    trigger: str
    fact: str
    key: str
    importance: float = 0.8
    update: bool = False  # another fact of the same key refines it (UPDATE), not replaces
    when: Callable[[date], str] | None = None  # the event time, from the message's date
    aliases: tuple[str, ...] = ()  # other keys it may name the attribute with
    one_value: bool | None = None  # what it says of the key (None: says nothing)
    # issue 45: a key it gives every other time instead (a sentence naming the wrong
    # subject: "The user's occupation" for a friend's job)
    sloppy: str | None = None
    fired: int = 0

    @property
    def topic(self) -> str:
        return self.key


@dataclass
class Pattern:
    """Many facts of one form: each match of `regex` in a user message is a fact
    (`fact` and `key` formatted with the match's groups)."""

    regex: str
    fact: str
    key: str
    importance: float = 0.3
    several: bool = False  # facts of one key that hold several values (books read)


@dataclass
class FactModel:
    rules: list[Rule]
    patterns: list[Pattern] = field(default_factory=list)
    bad_key_every: int = 0  # every n-th recorded fact gets a key outside the pattern
    follow_keys: bool = True  # reuse the keys the prompt shows in use (issue 37)
    forgetful: set[str] = field(default_factory=set)  # texts always decided ADD (issue 45)
    stubborn_every: int = 0  # every n-th key of a rule with aliases ignores what is shown
    calls: list[str] = field(default_factory=list)
    recorded: int = 0
    turn: int = 0
    prompts: list[tuple[str, str]] = field(default_factory=list)

    def rule_for(self, text: str) -> Rule | None:
        """The rule of a fact's text."""
        return next((r for r in self.rules if r.fact == text.strip()), None)

    def __call__(self, req: RecordedRequest) -> Any:
        self.calls.append(req.tool_name or "")
        self.prompts.append((req.tool_name or "", req.text))
        if req.tool_name == "record_facts":
            return self.extract(req.text)
        if req.tool_name == "decide_facts":
            return self.decide(req.text)
        raise AssertionError(f"unexpected tool {req.tool_name}")

    def key_for(self, r: Rule, in_use: set[str], aliases: dict[str, str] | None = None) -> str:
        """The rule's key as shown in use (or the key an alias shown maps to), else one of
        its names by turns."""
        names = (r.key, *r.aliases)
        aliases = aliases or {}
        shown = [aliases.get(k, k) for k in names if k in in_use or k in aliases]
        self.turn += 1
        stubborn = bool(self.stubborn_every) and r.aliases and self.turn % self.stubborn_every == 0
        if shown and self.follow_keys and not stubborn:
            return shown[0]
        return names[self.turn % len(names)] if r.aliases else r.key

    def mangle(self, key: str) -> str:
        self.recorded += 1
        if not self.bad_key_every or self.recorded % self.bad_key_every:
            return key
        if self.recorded % (2 * self.bad_key_every) or key.count(".") != 1:
            return key.replace("_", "-").upper()  # USER.HOME-CITY
        subject, _, attribute = key.partition(".")
        return f"The {subject}'s {attribute.replace('_', ' ').replace('.', ' ')}"  # a sentence

    def topic(self, key: str, text: str) -> str:
        """What a fact is about, as a reader of its text knows: its rule's attribute (the
        same whichever key it was given), else its key."""
        rule = self.rule_for(text)
        if rule is not None:
            return rule.key
        if any(p.several and p.key == key for p in self.patterns):
            return text  # each holds its own value
        return key

    def extract(self, prompt: str) -> dict[str, Any]:
        vocabulary = KEYS.search(prompt)
        in_use = (
            {m.group(1) for m in KEY_LINE.finditer(vocabulary.group(1))} if vocabulary else set()
        )
        in_use |= {k for k, _ in KNOWN.findall(prompt)}
        learned = ALIASES.search(prompt)
        aliases = dict(ALIAS_LINE.findall(learned.group(1))) if learned else {}
        facts: list[dict[str, Any]] = []
        for m in LINE.finditer(prompt):
            seq, when, speaker, text = int(m.group(1)), m.group(2), m.group(3), m.group(4)
            if not speaker.startswith("user"):
                continue
            for r in self.rules:
                if r.trigger in text:
                    key = self.key_for(r, in_use, aliases)
                    in_use.add(key)  # the same answer names it once
                    r.fired += 1
                    if r.sloppy is not None and r.fired % 2 == 0:
                        key = r.sloppy
                    fact: dict[str, Any] = {
                        "text": r.fact,
                        "key": self.mangle(key),
                        "importance": r.importance,
                        "tags": [r.key],
                        "source_seqs": [seq],
                    }
                    if r.one_value is not None:
                        fact["one_value"] = r.one_value
                    if r.when is not None:
                        said = datetime.strptime(when.strip(), "%Y-%m-%d %H:%M UTC").date()
                        fact["valid_from"] = r.when(said)
                    facts.append(fact)
            for p in self.patterns:
                for found in re.finditer(p.regex, text):
                    facts.append(
                        {
                            "text": p.fact.format(*found.groups()),
                            "key": self.mangle(p.key.format(*found.groups())),
                            "importance": p.importance,
                            "source_seqs": [seq],
                        }
                    )
        return {"facts": facts}

    def decide(self, prompt: str) -> dict[str, Any]:
        # the latest fact per key: (id, text, rule) as the batch moves on
        latest: dict[str, tuple[str, str]] = {}
        for sid, key, text in STORED.findall(prompt):
            latest[self.topic(key, text.strip())] = (sid, text.strip())
        decisions = []
        for m in NEW.finditer(prompt):
            i, key, text = int(m.group(1)), m.group(2).strip(), m.group(3).strip()
            rule = self.rule_for(text)
            key = self.topic(key, text)
            before = latest.get(key)
            if before is None or text in self.forgetful:
                decisions.append({"candidate": i, "op": "ADD"})
                latest[key] = (f"new-{i}", text)
            elif before[1] == text:
                decisions.append({"candidate": i, "op": "NONE", "target_id": before[0]})
            elif rule is not None and rule.update:
                decisions.append(
                    {"candidate": i, "op": "UPDATE", "target_id": before[0], "text": text}
                )
                latest[key] = (before[0], text)
            else:
                decisions.append({"candidate": i, "op": "INVALIDATE", "target_id": before[0]})
                latest[key] = (f"new-{i}", text)
        return {"decisions": decisions}

    def shown_in_decisions(self) -> list[str]:
        """Texts of the stored facts shown in every decide prompt so far."""
        return [
            text.strip()
            for tool, p in self.prompts
            if tool == "decide_facts"
            for _, _, text in STORED.findall(p)
        ]
