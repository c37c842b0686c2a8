"""JSON Lines read record by record: glued records and torn lines are repairs, counted;
any other damage refuses the file, naming the line."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from threadline.errors import ImportFormatError
from threadline.interop.importers import import_sessions
from threadline.interop.records import jsonl

P = Path("t.jsonl")
records = st.lists(
    st.dictionaries(
        st.sampled_from(["type", "text", "n", "nested"]),
        st.one_of(st.text(max_size=8), st.integers(), st.just({"role": "user", "x": [1, 2]})),
        min_size=1,
    ),
    min_size=1,
    max_size=6,
)


def read(text: str) -> tuple[list[dict[str, object]], Counter[str]]:
    repairs: Counter[str] = Counter()
    return [r for _, r in jsonl(text, P, repairs)], repairs


@given(records, st.lists(st.booleans(), min_size=6, max_size=6))
def test_records_glued_on_one_line_are_all_read(
    recs: list[dict[str, object]], glue: list[bool]
) -> None:
    text = ""
    for i, r in enumerate(recs):
        text += json.dumps(r) + ("" if glue[i] and i < len(recs) - 1 else "\n")
    got, repairs = read(text)
    assert got == recs
    assert repairs["glued_records"] == sum(glue[: len(recs) - 1])


@given(records, st.integers(min_value=1, max_value=40))
def test_a_torn_last_line_keeps_every_whole_record(recs: list[dict[str, object]], cut: int) -> None:
    last = json.dumps({"type": "user", "text": "a reply the writer never finished"})
    text = "".join(json.dumps(r) + "\n" for r in recs) + last[: len(last) - cut]
    got, repairs = read(text)
    assert got == recs
    assert repairs == Counter({"torn_last_line": 1})


def test_a_torn_record_with_the_next_glued_to_it_is_skipped_alone() -> None:
    whole = {"type": "user", "message": {"role": "user", "content": "hi"}}
    text = '{"type": "user", "message": {"role": "us' + json.dumps(whole) + "\n"
    got, repairs = read(text)
    assert got == [whole]  # the nested object inside the torn fragment is not a record
    assert repairs == Counter({"torn_record": 1})


@pytest.mark.parametrize("bad", ['{"type": "user"', "[1, 2]", "{oops}", '{"a": 1} trailing'])
def test_other_damage_refuses_the_file_naming_the_line(bad: str) -> None:
    text = '{"type": "user"}\n' + bad + '\n{"type": "user"}\n'
    with pytest.raises(ImportFormatError) as err:
        read(text)
    assert err.value.line == 2


def test_without_a_counter_nothing_is_repaired() -> None:
    with pytest.raises(ImportFormatError, match="Extra data"):
        list(jsonl('{"a": 1}{"b": 2}\n', P))


def test_an_import_reports_the_repair(tmp_path: Path) -> None:
    user = {
        "type": "user",
        "sessionId": "s",
        "uuid": "u1",
        "message": {"role": "user", "content": "hi"},
    }
    reply = {
        "type": "assistant",
        "sessionId": "s",
        "uuid": "u2",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
    }
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(user) + json.dumps(reply) + "\n" + '{"type": "us', encoding="utf-8")
    (session,) = import_sessions(path)
    assert [m.text for m in session.messages] == ["hi", "hello"]
    assert session.repairs == {"glued_records": 1, "torn_last_line": 1}
    assert session.metadata["import_repairs"] == session.repairs
