"""LoCoMo data (Maharana et al., ACL 2024) as turns and questions. Pure: no I/O but reading
the file.

Each sample is one conversation: turns `"<speaker>: <text> <blip_caption>"` in order (role
`user` for `speaker_a`, `assistant` for `speaker_b`), each at its session's date and time
plus one second per turn, and the questions with at least one evidence turn that exists
in the conversation (evidence ids normalised to `D<int>:<int>`: the data has "D:11:26",
"D30:05", "D8:6; D9:17" and a bare "D").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from app.search.dates import MONTH_NUMBERS

DATA_FILE = "locomo10-dev.json"

_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
_DATE = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+"
    r"(\d{4})\s*$",
    re.IGNORECASE,
)


def normalise_ids(raw: list[str]) -> list[str]:
    """Evidence ids as `D<int>:<int>`, in order, without duplicates (a bare "D" is
    dropped; one string may hold two ids)."""
    out: list[str] = []
    for item in raw:
        for m in _EVIDENCE.finditer(str(item)):
            dia = f"D{int(m[1])}:{int(m[2])}"
            if dia not in out:
                out.append(dia)
    return out


def parse_session_date(text: str) -> datetime:
    """ "1:56 pm on 8 May, 2023" -> 2023-05-08 13:56 UTC."""
    m = _DATE.match(text)
    if not m:
        raise ValueError(f"unrecognised session date: {text!r}")
    hour, minute, ampm, day, month, year = m.groups()
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    return datetime(int(year), MONTH_NUMBERS[month.lower()], int(day), h, int(minute), tzinfo=UTC)


@dataclass
class Turn:
    dia_id: str
    role: str
    text: str
    created_at: datetime | None


@dataclass
class Question:
    index: int  # position in the sample's qa list
    question: str
    category: int
    evidence: list[str]  # normalised, existing in the conversation
    missing: list[str]  # normalised ids that are not turns of the conversation


@dataclass
class Sample:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]
    skipped: int  # questions without any existing evidence id
    session_id: str = ""
    seq_to_dia: dict[int, str] = field(default_factory=dict)


def data_file(arg: str | Path) -> Path:
    """The JSON file: `arg` itself, or `locomo10-dev.json` inside the directory `arg`."""
    path = Path(arg)
    if path.is_dir():
        path = path / DATA_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"LoCoMo data not found: {path} (the file is data/locomo10.json of "
            f"https://github.com/snap-research/LoCoMo, CC BY-NC 4.0: README, "
            f'"Measuring the memory")'
        )
    return path


def parse_samples(data: list[dict], only: set[str] | None = None) -> list[Sample]:
    """The samples of a LoCoMo JSON document (`only`: these sample ids)."""
    samples = []
    for raw in data:
        if only and raw["sample_id"] not in only:
            continue
        conv = raw["conversation"]
        speaker_a = conv["speaker_a"]
        numbers = sorted(
            int(k.split("_")[1])
            for k in conv
            if re.fullmatch(r"session_\d+", k) and isinstance(conv[k], list)
        )
        turns: list[Turn] = []
        for n in numbers:
            when = conv.get(f"session_{n}_date_time")
            start = parse_session_date(when) if when else None
            for i, t in enumerate(conv[f"session_{n}"]):
                ids = normalise_ids([t["dia_id"]])
                if len(ids) != 1:
                    raise ValueError(f"{raw['sample_id']}: bad dia_id {t['dia_id']!r}")
                text = f"{t['speaker']}: {t['text']}"
                if t.get("blip_caption"):
                    text += f" {t['blip_caption']}"
                turns.append(
                    Turn(
                        ids[0],
                        "user" if t["speaker"] == speaker_a else "assistant",
                        text,
                        start + timedelta(seconds=i) if start else None,
                    )
                )
        existing = {t.dia_id for t in turns}
        if len(existing) != len(turns):
            raise ValueError(f"{raw['sample_id']}: duplicate dia_ids")
        questions, skipped = [], 0
        for i, qa in enumerate(raw["qa"]):
            ids = normalise_ids(qa.get("evidence") or [])
            ev = [d for d in ids if d in existing]
            if not ev:
                skipped += 1
                continue
            questions.append(
                Question(
                    i,
                    qa["question"],
                    int(qa["category"]),
                    ev,
                    [d for d in ids if d not in existing],
                )
            )
        samples.append(Sample(raw["sample_id"], turns, questions, skipped))
    if only and {s.sample_id for s in samples} != only:
        missing = only - {s.sample_id for s in samples}
        raise ValueError(f"unknown sample(s): {', '.join(sorted(missing))}")
    return samples


def load_samples(path: Path, only: set[str] | None = None) -> list[Sample]:
    """The samples of a LoCoMo JSON file."""
    return parse_samples(json.loads(path.read_text()), only)
