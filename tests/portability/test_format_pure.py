"""The export format's reader (issue 28), pure: a whole export is read, a cut or garbled
one is refused naming the first bad line (direct and property tests)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.portability import format as fmt


def _export(n: int) -> list[str]:
    lines = [
        fmt.header_line({"kind": "user", "id": "u"}, "2026-01-01T00:00:00+00:00"),
        json.dumps({"t": "session", "id": "s", "agent_id": "a"}),
    ]
    lines += [
        json.dumps({"t": "message", "session_id": "s", "seq": i, "role": "user"})
        for i in range(1, n + 1)
    ]
    return [*lines, fmt.end_line({"session": 1, "message": n})]


@given(st.integers(min_value=0, max_value=30), st.data())
def test_the_reader_takes_a_whole_export_and_names_the_first_bad_line(
    n: int, data: st.DataObject
) -> None:
    lines = _export(n)
    reader = fmt.Reader()
    got = [x for x in map(reader.feed, lines) if x is not None]
    reader.finish()
    assert [k for k, _ in got] == ["session"] + ["message"] * n
    # cut anywhere before the end line: refused, naming the line after the last one read
    cut = data.draw(st.integers(min_value=1, max_value=len(lines) - 1))
    reader = fmt.Reader()
    for x in lines[:cut]:
        reader.feed(x)
    with pytest.raises(fmt.FormatError) as err:
        reader.finish()
    assert err.value.line == cut + 1
    # one garbled line: refused at that line
    bad = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    garbled = [*lines[:bad], lines[bad][: len(lines[bad]) // 2], *lines[bad + 1 :]]
    reader = fmt.Reader()
    with pytest.raises(fmt.FormatError) as err:
        for x in garbled:
            reader.feed(x)
        reader.finish()
    assert err.value.line == bad + 1


def test_a_line_nested_too_deeply_is_a_format_error() -> None:
    reader = fmt.Reader()
    reader.feed(fmt.header_line({}, "x"))
    with pytest.raises(fmt.FormatError) as err:
        reader.feed("[" * 100_000 + "]" * 100_000)
    assert err.value.line == 2
