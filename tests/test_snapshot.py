"""The snapshot model: five sections always, a hard word limit, and a parse that reads it back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threadline.compaction.snapshot import (
    CODE_SPAN,
    DEFAULT_MAX_WORDS,
    EMPTY_BULLET,
    SECTION_NAMES,
    SECTION_TITLES,
    SKELETON_WORDS,
    Bullet,
    Snapshot,
    SummaryResult,
    clip_words,
    code_span,
    code_spans,
    one_line,
    parse,
    span_text,
    words,
)
from threadline.errors import UsageError

HEADINGS = [f"## {SECTION_TITLES[n]}" for n in SECTION_NAMES]


def headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("## ")]


# -- words ---------------------------------------------------------------------------


def test_words_counts_tokens_with_letters_or_digits() -> None:
    assert words("## Files Modified") == 2
    assert words("- `src/threadline/compaction/snapshot.py`") == 1
    assert words("- (none)") == 1
    assert words("a - b -- c") == 3
    assert words("") == 0
    assert words("port 8443, then v1.2.3!") == 4


def test_one_line_joins_lines_but_keeps_inner_spacing() -> None:
    assert one_line("  a\n  b\r\n\nc  ") == "a b c"
    assert one_line("E   assert  1 == 2") == "E   assert  1 == 2"


def test_clip_words_cuts_and_marks() -> None:
    assert clip_words("one two three", 5) == "one two three"
    clipped = clip_words("one two three four five six", 3)
    assert clipped.startswith("one two three") and clipped.endswith("\u2026")
    assert words(clipped) == 3


def test_code_span_quotes_only_clean_text() -> None:
    assert code_span("a.py") == "`a.py`"
    assert code_span("has ` tick") == "``has ` tick``"  # double backticks hold a single one
    assert code_spans(f"{code_span('has ` tick')}, {code_span('b.py')}") == ["has ` tick", "b.py"]
    assert code_span("`edge") == "`` `edge ``"  # padded where a backtick begins it
    assert code_span("two `` ticks") == "```two `` ticks```"  # a fence longer than any run
    assert code_spans(code_span("`edge")) == ["`edge"]
    assert code_span(" padded") == " padded"
    assert code_span("") == ""


def test_code_span_quotes_a_name_holding_backticks() -> None:
    name = "Let's start by adding the necessary CSS to the `App.css` file"  # aider made it
    assert code_span("a.py") == "`a.py`"
    assert code_span(name) == f"``{name}``"
    assert code_span("`x") == "`` `x ``"


@given(
    st.text(alphabet=st.sampled_from("ab `.,/"), min_size=1, max_size=12).filter(
        lambda t: t.strip() == t
    ),
    st.sampled_from(["", "Also changed: `z.py`, ", "- "]),
)
def test_a_quoted_path_reads_back_as_itself(path: str, before: str) -> None:
    line = f"{before}{code_span(path)}: edited, {code_span('y.py')}"
    spans = [span_text(m) for m in CODE_SPAN.finditer(line)]
    assert path in spans and spans[-1] == "y.py"


# -- render --------------------------------------------------------------------------


def test_empty_snapshot_has_every_section_in_order() -> None:
    text = Snapshot().render()
    assert headings(text) == HEADINGS
    assert text.count(f"- {EMPTY_BULLET}") == len(SECTION_NAMES)
    assert words(text) == SKELETON_WORDS


def test_render_orders_bullets_by_score_within_a_section() -> None:
    snap = Snapshot()
    snap.add("important_values", "`low`", 1.0)
    snap.add("important_values", "`high`", 3.0)
    snap.add("important_values", "`mid`", 2.0)
    text = snap.render()
    assert text.index("`high`") < text.index("`mid`") < text.index("`low`")
    assert "## Important Values\n- `high`" in text


def test_word_limit_drops_lowest_scored_first() -> None:
    snap = Snapshot()
    for i in range(50):
        snap.add("key_decisions", f"decision number {i} with some words", float(i))
    limit = SKELETON_WORDS + 30
    text = snap.render(limit)
    assert words(text) <= limit
    kept = [int(line.split()[3]) for line in text.splitlines() if line.startswith("- decision")]
    assert kept == sorted(kept, reverse=True)
    assert kept[0] == 49 and min(kept) > 40


def test_a_bullet_too_long_for_the_room_is_skipped_not_cut() -> None:
    snap = Snapshot()
    snap.add("current_state", " ".join(["word"] * 100), 9.0)
    snap.add("current_state", "short one", 1.0)
    text = snap.render(SKELETON_WORDS + 10)
    assert "short one" in text and "word word" not in text


def test_shares_guarantee_each_section_room() -> None:
    snap = Snapshot()
    for i in range(40):
        snap.add("pending_tasks", f"task {i} to do soon", 100.0 - i)
    snap.add("important_values", "`the-only-value` here", 0.001)
    limit = SKELETON_WORDS + 19  # exactly four tasks: 4 (replacing "(none)") + 5 + 5 + 5
    assert "the-only-value" not in snap.render(limit)
    assert "the-only-value" in snap.render(limit, shares={"important_values": 0.2})


def test_max_words_below_the_headings_is_refused() -> None:
    with pytest.raises(UsageError):
        Snapshot().render(SKELETON_WORDS - 1)
    assert words(Snapshot().render(SKELETON_WORDS)) == SKELETON_WORDS


def test_bullets_are_single_lines_and_strings_are_accepted() -> None:
    snap = Snapshot(key_decisions=["first\nsecond"])
    assert snap.key_decisions == [Bullet(text="first second", score=0.0)]
    assert "- first second\n" in snap.render()


def test_summary_result_counts_words() -> None:
    text = Snapshot().render()
    result = SummaryResult(text=text, snapshot=Snapshot())
    assert result.words == SKELETON_WORDS and result.summarizer == "extractive"


_EMPTY_MARKERS = {"none", "n/a", "na", "nothing", "none yet", "nothing yet", "-", ""}
_bullet_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=60
).filter(lambda t: one_line(t).strip("()[].* ").lower() not in _EMPTY_MARKERS)
"""Bullet text, except what ``parse`` reads as an empty-section marker ("(none)")."""
_snapshots = st.builds(
    Snapshot,
    **{
        name: st.lists(
            st.builds(Bullet, text=_bullet_text, score=st.floats(-10, 10, allow_nan=False)),
            max_size=12,
        )
        for name in SECTION_NAMES
    },
)


@settings(max_examples=150, deadline=None)
@given(snap=_snapshots, limit=st.integers(SKELETON_WORDS, 400))
def test_render_never_exceeds_the_limit(snap: Snapshot, limit: int) -> None:
    text = snap.render(limit)
    assert words(text) <= limit
    assert headings(text) == HEADINGS


@settings(max_examples=150, deadline=None)
@given(snap=_snapshots)
def test_parse_reads_a_rendered_snapshot_back(snap: Snapshot) -> None:
    text = snap.render(100_000)
    again = parse(text)
    assert again.render(100_000) == text
    for name in SECTION_NAMES:
        shown = [b.text for b in snap.section(name) if words(b.text)]
        assert sorted(b.text for b in again.section(name)) == sorted(shown)


# -- parse ---------------------------------------------------------------------------


def test_parse_tolerates_model_formatting() -> None:
    text = """Here is the updated snapshot you asked for.

**Files Modified:**
1. `src/app.py` - added retry
   with backoff
2) `README.md`

### Key Decisions
* Use httpx instead of requests

## Important Values
- (none)

## Something Else
- ignored line

Current State:
+ Tests pass
plain line under the heading

## Next Steps
- [ ] write docs
"""
    snap = parse(text)
    assert [b.text for b in snap.files_modified] == [
        "`src/app.py` - added retry with backoff",
        "`README.md`",
    ]
    assert [b.text for b in snap.key_decisions] == ["Use httpx instead of requests"]
    assert snap.important_values == []
    assert [b.text for b in snap.current_state] == ["Tests pass", "plain line under the heading"]
    assert [b.text for b in snap.pending_tasks] == ["[ ] write docs"]
    assert snap.files_modified[0].score > snap.files_modified[1].score


def test_parse_of_text_without_sections_is_empty() -> None:
    assert parse("just some prose\n- a bullet").bullet_count() == 0
    assert parse("").bullet_count() == 0


def test_parse_skips_code_fences_and_keeps_their_lines() -> None:
    snap = parse("## Important Values\n```\nDATABASE_URL=postgres://db/x\n```\n")
    assert [b.text for b in snap.important_values] == ["DATABASE_URL=postgres://db/x"]


def test_default_limit_is_the_seeds_600() -> None:
    assert DEFAULT_MAX_WORDS == 600
