"""What an item's edits defined (issue 31, judges 3 and 4 on runs A and B): the functions and
module attributes a work item added and removed, the tests it added, and whether files
changed after its last passing check, said on the item's line.

Records are shaped like Claude Code's ``Edit`` calls and ``mix test`` results.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_ledger import numbered
from threadline.compaction.edit_defs import edit_defs
from threadline.compaction.progress import Progress, account
from threadline.compaction.reconcile import progress_lines
from threadline.compaction.trail import Trail, build_trail
from threadline.messages import Message, ToolCall

CWD = "/home/dev/shop"
RENDERER = f"{CWD}/lib/shop/renderer.ex"
RENDERER_TEST = f"{CWD}/test/shop/renderer_test.exs"


def _edit(call_id: str, path: str, old: str, new: str) -> Message:
    args = {"file_path": path, "old_string": old, "new_string": new, "replace_all": False}
    return Message.assistant("", tool_calls=[ToolCall(id=call_id, name="Edit", arguments=args)])


def _ran(call_id: str, command: str, output: str) -> list[Message]:
    call = ToolCall(id=call_id, name="Bash", arguments={"command": command})
    return [Message.assistant("", tool_calls=[call]), Message.tool(output, tool_call_id=call_id)]


def _updated(call_id: str, path: str) -> Message:
    return Message.tool(f"The file {path} has been updated successfully.", tool_call_id=call_id)


def _run(*, second_edit_fails: bool = False) -> list[Message]:
    failed = "<tool_use_error>String to replace not found in file.</tool_use_error>"
    return [
        Message.user("Work on bead shop-4k2. Start with the first ready task."),
        *_ran("b1", "bd update shop-4k2.1 --status in_progress", "✓ Updated issue: shop-4k2.1"),
        _edit(
            "e1",
            RENDERER,
            "  @max_result_lines 5\n\n  def render(rows) do",
            "  @default_visible_lines 10\n\n  def render(rows) do",
        ),
        _updated("e1", RENDERER),
        *_ran("t1", "mix test test/shop/renderer_test.exs", "Finished\n9 tests, 0 failures"),
        _edit(
            "e2",
            RENDERER,
            "  def render(rows) do",
            "  def group_rows(rows), do: rows\n\n  def render(rows) do",
        ),
        Message.tool(failed, tool_call_id="e2", metadata={"is_error": True})
        if second_edit_fails
        else _updated("e2", RENDERER),
        _edit(
            "e3",
            RENDERER_TEST,
            '  test "renders rows" do\n    assert true\n  end',
            '  test "renders rows" do\n    assert true\n  end\n\n'
            '  test "groups rows" do\n    assert true\n  end\n\n'
            '  test "keeps ten lines" do\n    assert true\n  end',
        ),
        _updated("e3", RENDERER_TEST),
    ]


def test_the_item_s_line_names_what_its_edits_defined_and_the_new_tests() -> None:
    """Judges: "missing concrete renderer changes (`@max_result_lines 5` removed,
    `@default_visible_lines 10`, `annotate_tool_result_groups`); 13 new tests"."""
    trail = build_trail(numbered(_run()), cwd=CWD)
    line = next(line for line in progress_lines(trail) if "shop-4k2.1" in line)
    assert "added `@default_visible_lines`, `group_rows`" in line
    assert "removed `@max_result_lines`" in line
    assert "2 new tests" in line
    assert "`9 tests, 0 failures` (files changed after it)" in line
    again = Trail.from_metadata(trail.to_metadata())  # carried in checkpoint metadata
    assert again is not None and progress_lines(again) == progress_lines(trail)


def test_an_edit_that_failed_defined_nothing() -> None:
    trail = build_trail(numbered(_run(second_edit_fails=True)), cwd=CWD)
    line = next(line for line in progress_lines(trail) if "shop-4k2.1" in line)
    assert "`group_rows`" not in line
    assert "added `@default_visible_lines`" in line


def test_files_unchanged_since_the_passing_check_are_not_said_changed() -> None:
    run = [*_run(), *_ran("t2", "mix test", "Finished\n11 tests, 0 failures")]
    line = next(
        line for line in progress_lines(build_trail(numbered(run), cwd=CWD)) if "4k2.1" in line
    )
    assert "`11 tests, 0 failures`" in line and "files changed after it" not in line


def _call(new: str) -> ToolCall:
    return _edit("x", "a.ex", "x", new).tool_calls[0]


def test_attributes_that_annotate_and_bare_decorators_are_no_definitions() -> None:
    new = '  @doc "Renders."\n  @impl true\n  @property\n  @limit 3\n'
    assert edit_defs(_call(new)).added == ("@limit",)


def test_test_cases_are_counted_in_each_language_s_form() -> None:
    new = (
        'test "a" do\nend\ndef test_b():\n    pass\nfunc TestC(t *testing.T) {}\n'
        "it('d', () => {})\n"
    )
    assert edit_defs(_call(new)).tests == 4


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(["a", "b", "@c", "d"]), max_size=3, unique=True),
            st.lists(st.sampled_from(["a", "b", "@c", "d"]), max_size=3, unique=True),
        ),
        max_size=6,
    )
)
def test_a_name_is_never_said_both_added_and_removed(
    edits: list[tuple[list[str], list[str]]],
) -> None:
    progress = Progress()
    progress.claimed("x-1", "Item", "beads", 1)
    for i, (added, removed) in enumerate(edits, 2):
        progress.defined(i, added, removed, 0)
    _, active = account(progress, 100)
    assert active is not None
    said = active.facts(lambda p: p, current=True)
    added_said = next((c for c in said if c.startswith("added ")), "")
    removed_said = next((c for c in said if c.startswith("removed ")), "")
    for name in ["a", "b", "@c", "d"]:
        assert not (f"`{name}`" in added_said and f"`{name}`" in removed_said)
