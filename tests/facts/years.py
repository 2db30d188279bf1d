"""Issue 45, years of one life with one assistant: the scenario, the imperfect model, the
run through HTTP and its checks, shared by the short form in the test suite
(`test_facts_issue45_years.py`) and the full form in `bench/facts_years.py` (two years,
2,000+ facts).

One person talks to one assistant every few days. Each session says some life news (the
user moves, changes jobs and diet, adopts a dog that later dies; the sister moves;
friends' jobs), reads books, notes trivia (records and trips: the bulk of the 2,000+
facts), and restates what is known. The model (`tests.fakes.fact_model.FactModel`) names
one attribute with several keys (`user.home_city`, `user.residence`, `residence.city`;
`user.job`, `user.employer`, `user.occupation`; `user.diet`, `user.food.diet`) by turns
unless the prompt shows one in use, writes every 9th key outside the pattern, gives a
friend's job the key "The user's occupation" every other time, adds a stray field to
every candidate, answers with bad JSON every 41st call (the extraction is asked again,
as a retry would) and slowly (1.5 s) every 29th. Three sessions are extracted last (late
old sessions), one is imported with old dates in the middle of the run (a home the rest
never mentions), three are deleted, and a second user has a scope of their own.

Checks (`Report`): no attribute with two current values, no false current fact, no true
fact lost (a candidate dropped beyond repair is counted), `as_of` right at 10 dates for
every single-valued attribute, the context of a new session for "Where do I live now and
what do I do for work?" naming the current home and job and no other home or job of the
user, and the LLM calls and input tokens per 1,000 messages."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import httpx

from app.core.tokens import count_text
from tests.facts.helpers import scope_facts
from tests.facts.support import facts_session
from tests.fakes.fact_model import FactModel, Pattern, Rule
from tests.fakes.llm_server import FakeLLMServer, RecordedRequest

START = datetime(2024, 11, 4, 9, tzinfo=UTC)  # two years end before the tests' today
HOME_KEYS = ("user.home_city", "user.residence", "residence.city")
JOB_KEYS = ("user.job", "user.employer", "user.occupation")
DIET_KEYS = ("user.diet", "user.food.diet")
CITIES = ["Seattle", "Berlin", "Vienna", "Madrid", "Prague", "Lisbon", "Dublin", "Zurich"]
JOBS = [
    ("work as a nurse at St Mary", "The user works as a nurse at St Mary."),
    ("I now teach at Lycee Hoche", "The user teaches at Lycee Hoche."),
    ("joined Acme as an accountant", "The user works as an accountant at Acme."),
    ("data analyst at Globex", "The user works as a data analyst at Globex."),
]
DIETS = [
    ("I'm pescatarian", "The user is pescatarian."),
    ("vegetarian now", "The user is vegetarian."),
    ("gone fully vegan", "The user is vegan."),
]
SISTER = ["Porto", "Ghent", "Bergen"]
FRIENDS = [("Lurel", "an actor"), ("Mira", "a pilot"), ("Tobi", "a chef"), ("Anya", "a judge")]
IMPORTED_CITY = "Oslo"
SLOW_SECONDS = 1.5


@dataclass
class Said:
    """One statement of the script: when, the message, the fact it states, its attribute
    (None: a fact of its own that holds several values)."""

    at: datetime
    message: str
    fact: str
    attribute: str | None = None


@dataclass
class Session:
    day: int
    said: list[Said]
    late: bool = False  # extracted after all the others
    imported: bool = False
    deleted: bool = False
    sid: str = ""


@dataclass
class Scenario:
    days: int
    every: int
    trivia: int
    sessions: list[Session] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    patterns: list[Pattern] = field(default_factory=list)


def at(day: int, minute: int = 0) -> datetime:
    return START + timedelta(days=day, minutes=minute)


def build(days: int = 730, every: int = 5, trivia: int = 13, seed: int = 45) -> Scenario:
    """The script: a session every `every` days for `days` days, `trivia` trivia facts each
    (a record or a trip per fact)."""
    rng = random.Random(seed)
    sc = Scenario(days, every, trivia)
    for city in CITIES:
        for phrase in (f"live in {city}", f"based in {city}", f"moved to {city}"):
            sc.rules.append(
                Rule(
                    phrase,
                    f"The user lives in {city}.",
                    HOME_KEYS[0],
                    aliases=HOME_KEYS[1:],
                )
            )
    sc.rules.append(
        Rule(
            f"based in {IMPORTED_CITY}",
            f"The user lives in {IMPORTED_CITY}.",
            HOME_KEYS[0],
            aliases=HOME_KEYS[1:],
        )
    )
    sc.rules += [Rule(t, f, JOB_KEYS[0], aliases=JOB_KEYS[1:]) for t, f in JOBS]
    sc.rules += [Rule(t, f, DIET_KEYS[0], aliases=DIET_KEYS[1:]) for t, f in DIETS]
    sc.rules += [
        Rule(
            "adopted a dog named Biscuit",
            "The user has a dog named Biscuit.",
            "user.pet.biscuit",
            one_value=True,
        ),
        Rule("Biscuit died", "The user's dog Biscuit died.", "user.pet.biscuit", one_value=True),
    ]
    sc.rules += [
        Rule(
            f"sister lives in {c}",
            f"The user's sister lives in {c}.",
            "user.sister.home_city",
            aliases=("user.sister.city",),
        )
        for c in SISTER
    ]
    sc.rules += [
        Rule(
            f"friend {n} is {j}",
            f"The user's friend {n} is {j}.",
            f"user.friend_{n.lower()}.occupation",
            sloppy="The user's occupation",
        )
        for n, j in FRIENDS
    ]
    sc.patterns = [
        Pattern(
            r"read the book (\d+)", "The user has read book {0}.", "user.books_read", several=True
        ),
        Pattern(r"vinyl record (\d+)", "The user owns vinyl record {0}.", "user.vinyl.r{0}"),
        Pattern(r"visited town (\d+)", "The user visited town {0}.", "user.trip.t{0}"),
    ]
    n = days // every
    span = lambda k: k * days // 8  # noqa: E731  (eight homes over the run)
    news: dict[int, list[tuple[str, str, str | None]]] = {}

    def on(day: int, message: str, fact: str, attribute: str | None) -> None:
        k = min(range(n), key=lambda j: abs(j * every - day))
        news.setdefault(k, []).append((message, fact, attribute))

    phrasing = ["I live in {c}.", "I'm based in {c} now.", "We moved to {c}."]
    for i, city in enumerate(CITIES):
        on(span(i), phrasing[i % 3].format(c=city), f"The user lives in {city}.", "home")
    for i, (t, f) in enumerate(JOBS):
        on(3 * every + i * days // 4, f"News: {t}.", f, "job")
    for i, (t, f) in enumerate(DIETS):
        on(5 * every + i * days // 3, f"Food-wise: {t}.", f, "diet")
    on(days // 6, "We adopted a dog named Biscuit!", "The user has a dog named Biscuit.", "dog")
    on(days // 2, "Sad day: Biscuit died.", "The user's dog Biscuit died.", "dog")
    for i, c in enumerate(SISTER):
        on(
            2 * every + i * days // 3,
            f"My sister lives in {c}.",
            f"The user's sister lives in {c}.",
            "sister",
        )
    for i, (nm, j) in enumerate(FRIENDS):
        on(
            7 * every + i * days // 5,
            f"My friend {nm} is {j}.",
            f"The user's friend {nm} is {j}.",
            None,
        )
    book = 0
    record = 0
    late = {n // 4, n // 2 + 1, 3 * n // 4 + 1}
    deleted = {
        next((k for k in range(t, n) if k not in news and k not in late), -1)
        for t in (n // 3, n // 2 + 3, 5 * n // 6)
    } - {-1}
    for k in range(n):
        day = k * every
        said: list[Said] = []
        minute = 0

        def say(
            message: str,
            fact: str,
            attribute: str | None,
            said: list[Said] = said,
            day: int = day,
        ) -> None:
            nonlocal minute
            said.append(Said(at(day, minute), message, fact, attribute))
            minute += 2

        for message, fact, attribute in news.get(k, []):
            say(message, fact, attribute)
        for _ in range(rng.randint(1, 2)):
            book += 1
            say(f"I read the book {book} this week.", f"The user has read book {book}.", None)
        for q in range(0, trivia, 5):
            part = range(record + q, record + min(q + 5, trivia))
            notes = ", ".join(
                f"I have vinyl record {r}" if r % 2 else f"I visited town {r}" for r in part
            )
            for r in part:
                fact = (
                    f"The user owns vinyl record {r}." if r % 2 else f"The user visited town {r}."
                )
                said.append(Said(at(day, minute), f"Notes: {notes}.", fact, None))
            minute += 2
        record += trivia
        if k > 3 and k % 3 == 0:  # restatements: a book, and the home
            old = rng.randint(1, max(1, book - 3))
            say(
                f"Did I say I read the book {old}? Loved it.",
                f"The user has read book {old}.",
                None,
            )
        moved = any(a == "home" for _, _, a in news.get(k, []))
        # no restatement while the imported home held (its statement is unknown until
        # it is imported: restating the home before it would contradict it)
        imported = (span(3) + span(4)) // 2 <= day <= span(4)
        if k > 2 and k % 4 == 1 and k not in late and not moved and not imported:
            home = [s for s in _statements(sc.sessions, "home")]
            if home:
                city = home[-1].fact.removeprefix("The user lives in ").rstrip(".")
                say(f"As I said, I live in {city}.", home[-1].fact, "home")
        for _ in range(rng.randint(2, 5)):
            said.append(Said(at(day, minute), "What a week, nothing else to report.", "", None))
            minute += 2
        sc.sessions.append(Session(day, said, late=k in late, deleted=k in deleted))
    # the imported session: an old conversation brought in, a home the rest never mentions
    mid = (span(3) + span(4)) // 2
    sc.sessions.append(
        Session(
            mid,
            [
                Said(
                    at(mid, 600),
                    f"I'm based in {IMPORTED_CITY} for a while.",
                    f"The user lives in {IMPORTED_CITY}.",
                    "home",
                ),
                Said(
                    at(mid, 602),
                    "I read the book 100000 on the way.",
                    "The user has read book 100000.",
                    None,
                ),
            ],
            imported=True,
        )
    )
    return sc


def _statements(sessions: list[Session], attribute: str) -> list[Said]:
    return sorted(
        (s for x in sessions if not x.deleted for s in x.said if s.attribute == attribute),
        key=lambda s: s.at,
    )


ATTRIBUTES = ("home", "job", "diet", "dog", "sister")


def true_at(sc: Scenario, when: datetime) -> dict[str, str | None]:
    """The state of each single-valued attribute at `when`: the latest statement said
    before it (the dog: "died" ends "has a dog")."""
    out: dict[str, str | None] = {}
    for a in ATTRIBUTES:
        said = [s for s in _statements(sc.sessions, a) if s.at <= when]
        out[a] = said[-1].fact if said else None
    return out


def true_now(sc: Scenario) -> set[str]:
    """Every fact true at the end: the attributes' last states, and every fact of its own
    said in a session that was not deleted."""
    out = {v for v in true_at(sc, at(sc.days + 400)).values() if v}
    out |= {
        s.fact
        for x in sc.sessions
        if not x.deleted
        for s in x.said
        if s.fact and s.attribute is None
    }
    return out


class Imperfect:
    """The scripted model behind the fake server, plus what a real one does now and then:
    a stray field on every candidate, bad JSON every `bad_every`-th call, and a slow
    answer (`SLOW_SECONDS`) every `slow_every`-th."""

    def __init__(self, model: FactModel, bad_every: int = 41, slow_every: int = 29) -> None:
        self.model, self.bad_every, self.slow_every, self.calls = model, bad_every, slow_every, 0
        self.bad = self.slow = 0

    def __call__(self, req: RecordedRequest) -> Any:
        self.calls += 1
        if self.slow_every and self.calls % self.slow_every == 0:
            self.slow += 1
            time.sleep(SLOW_SECONDS)  # the fake server's own thread: a slow answer
        if self.bad_every and self.calls % self.bad_every == 0:
            self.bad += 1
            self.model.calls.append(req.tool_name or "")
            return {"facts": "{not json"} if req.tool_name == "record_facts" else {"oops": 1}
        out = self.model(req)
        if req.tool_name == "record_facts":
            for f in out["facts"]:
                f["confidence"] = 0.9  # a stray field
        return out


def request_tokens(req: RecordedRequest) -> int:
    body = req.json
    parts = [str(body.get("system", ""))]
    parts += [
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in body.get("messages", [])
    ]
    parts += [json.dumps(t["input_schema"]) for t in body.get("tools", [])]
    return sum(count_text(p) for p in parts)


@dataclass
class Report:
    sessions: int = 0
    messages: int = 0
    facts: int = 0
    current: int = 0
    two_current: list[str] = field(default_factory=list)
    false_current: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    dropped: int = 0
    repaired: int = 0
    as_of_right: int = 0
    as_of_checks: int = 0
    as_of_wrong: list[Any] = field(default_factory=list)
    context_names: list[str] = field(default_factory=list)
    context_ok: bool = False
    calls: dict[str, int] = field(default_factory=dict)
    bad_answers: int = 0
    slow_answers: int = 0
    input_tokens: int = 0
    max_request_tokens: int = 0
    per_1000: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    batch_seconds: list[tuple[int, float]] = field(default_factory=list)
    other_user_ok: bool = False

    def ok(self) -> bool:
        return (
            not self.two_current
            and not self.false_current
            and not self.lost
            and self.as_of_right == self.as_of_checks
            and self.context_ok
            and self.other_user_ok
        )


async def _extract(client: httpx.AsyncClient, sid: str, report: Report) -> dict[str, Any]:
    """`?wait=true`, asked again after a bad answer (as the job's retry would)."""
    for _ in range(5):
        r = await client.post(f"/v1/sessions/{sid}/memory/extract", params={"wait": "true"})
        if r.status_code == 200:
            result = dict(r.json()["result"])
            report.dropped += int(result.get("dropped", 0))
            report.repaired += int(result.get("repaired", 0))
            return result
        assert r.status_code == 202, r.text
    raise AssertionError(f"session {sid} never extracted")


def attribute_of(sc: Scenario) -> dict[str, str]:
    return {s.fact: s.attribute for x in sc.sessions for s in x.said if s.attribute}


async def live(
    client: httpx.AsyncClient, fake: FakeLLMServer, sc: Scenario, scope: str, read_as: str
) -> Report:
    """Run the scenario through HTTP and check it (module doc): the sessions' facts
    `scope` (`agent`: the agent's tier, which is not capped as a project's is), read as
    `read_as` (`agent/<id>`)."""
    started = time.monotonic()
    report = Report()
    model = FactModel(sc.rules, sc.patterns, bad_key_every=9, stubborn_every=3)
    imperfect = Imperfect(model)
    fake.respond_with_tools(imperfect)
    for x in sc.sessions:
        x.sid = await facts_session(client, scope=scope)
        msgs: list[dict[str, Any]] = []
        seen: set[tuple[str, datetime]] = set()
        for s in x.said:
            if (s.message, s.at) in seen:
                continue
            seen.add((s.message, s.at))
            when = s.at.isoformat().replace("+00:00", "Z")
            then = (s.at + timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
            msgs.append({"role": "user", "content": s.message, "created_at": when})
            msgs.append({"role": "assistant", "content": "Noted.", "created_at": then})
        r = await client.post(f"/v1/sessions/{x.sid}/messages", json={"messages": msgs})
        assert r.status_code == 201, r.text
        report.messages += len(msgs)
        if not (x.late or x.imported):
            stored = report.facts
            t0 = time.monotonic()
            result = await _extract(client, x.sid, report)
            report.batch_seconds.append(
                (stored, (time.monotonic() - t0) / max(1, result["batches"]))
            )
            report.facts += result["added"]
    for x in sc.sessions:  # the late old sessions and the imported one, last
        if x.late or x.imported:
            await _extract(client, x.sid, report)
    for x in sc.sessions:
        if x.deleted:
            assert (await client.delete(f"/v1/sessions/{x.sid}")).status_code == 204
    report.sessions = len(sc.sessions)
    # a second user, in a scope of their own
    other = await facts_session(client, scope="project/second-user")
    r = await client.post(
        f"/v1/sessions/{other}/messages",
        json={
            "messages": [
                {"role": "user", "content": "I live in Dublin. I read the book 7 this week."}
            ]
        },
    )
    assert r.status_code == 201, r.text
    await _extract(client, other, report)
    theirs = {f["text"] for f in await scope_facts(client, "project/second-user")}

    facts = await scope_facts(client, read_as)
    report.facts = len(facts)
    current = [f for f in facts if f["invalid_at"] is None]
    report.current = len(current)
    texts = Counter(f["text"] for f in current)
    attr = attribute_of(sc)
    by_attribute = Counter(attr[t] for t in texts.elements() if t in attr)
    report.two_current = sorted(a for a, k in by_attribute.items() if k > 1)
    report.two_current += sorted(t for t, k in texts.items() if k > 1)
    expected = true_now(sc)
    report.false_current = sorted(set(texts) - expected)
    report.lost = sorted(expected - set(texts))
    report.other_user_ok = theirs == {"The user lives in Dublin.", "The user has read book 7."}
    # as_of: 10 dates, every single-valued attribute
    for k in range(10):
        moment = START + timedelta(days=(k + 0.5) * sc.days / 10)
        day = moment.date().isoformat()
        known = {f["text"] for f in await scope_facts(client, read_as, as_of=day)}
        truth = true_at(sc, datetime.combine(date.fromisoformat(day), datetime.min.time(), UTC))
        for a in ATTRIBUTES:
            shown = sorted(t for t in known if attr.get(t) == a)
            want = [truth[a]] if truth[a] else []
            report.as_of_checks += 1
            if shown == want:
                report.as_of_right += 1
            else:
                report.as_of_wrong.append((day, a, shown, want))
    # the context of a new session
    ask = await facts_session(client, scope=scope)
    question = "Where do I live now and what do I do for work?"
    r = await client.post(
        f"/v1/sessions/{ask}/messages", json={"messages": [{"role": "user", "content": question}]}
    )
    ctx = (await client.post(f"/v1/sessions/{ask}/context", json={"format": "raw"})).json()
    block = ctx["layers"]["facts"]["text"]
    now = true_at(sc, at(sc.days + 400))
    homes = {s.fact for s in _statements(sc.sessions, "home")}
    jobs = {s.fact for s in _statements(sc.sessions, "job")}
    report.context_names = [
        line for line in block.splitlines() if line.split(" (")[0][2:] in homes | jobs
    ]
    named = {line.split(" (")[0][2:] for line in report.context_names}
    report.context_ok = named == {now["home"], now["job"]}
    # cost
    reqs = fake.requests_for("anthropic")
    report.calls = dict(Counter(q.tool_name or "" for q in reqs))
    report.bad_answers = imperfect.bad
    report.slow_answers = imperfect.slow
    tokens = [request_tokens(q) for q in reqs]
    report.input_tokens = sum(tokens)
    report.max_request_tokens = max(tokens, default=0)
    per = 1000 / max(1, report.messages)
    report.per_1000 = {
        "llm_calls": round(len(reqs) * per, 1),
        "input_tokens": round(report.input_tokens * per),
    }
    report.seconds = round(time.monotonic() - started, 1)
    return report


def table(report: Report) -> str:
    """The figures, as docs/facts.md quotes them."""
    rows = [
        ("sessions / messages", f"{report.sessions} / {report.messages}"),
        ("facts stored (current)", f"{report.facts} ({report.current})"),
        ("attributes with two current values", str(len(report.two_current))),
        ("current facts no longer true", str(len(report.false_current))),
        ("true facts lost", str(len(report.lost))),
        ("candidates dropped beyond repair / repaired", f"{report.dropped} / {report.repaired}"),
        ("`as_of` right (10 dates x 5 attributes)", f"{report.as_of_right}/{report.as_of_checks}"),
        ("context: current home and job only", "yes" if report.context_ok else "no"),
        (
            "LLM calls (bad answers, slow answers)",
            f"{report.calls} ({report.bad_answers}, {report.slow_answers})",
        ),
        (
            "per 1,000 messages",
            f"{report.per_1000['llm_calls']} calls, "
            f"{report.per_1000['input_tokens']:,} input tokens",
        ),
        ("largest request (tokens)", str(report.max_request_tokens)),
        ("run time", f"{report.seconds} s"),
    ]
    return "\n".join(["| check | result |", "| --- | --- |", *(f"| {a} | {b} |" for a, b in rows)])
