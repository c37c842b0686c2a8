"""What one editor call added and removed: definitions (functions, module attributes) and
tests, so a work item's line can say "added `a`, `b`; removed `@c`; 13 new tests" (a reader
continuing the work needs the names, not only the file)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from threadline.compaction.toolcalls import definitions, edit_pairs
from threadline.messages import ToolCall

_ATTRIBUTE = re.compile(r"\s*(?P<name>@[a-z_]\w*)\s+[^\s=]")
"""An Elixir-style module attribute set to a value (``@default_visible_lines 10``);
a bare decorator (``@property``) or a call (``@app.route(...)``) is none."""
_NOT_ATTRIBUTES = frozenset(
    [
        "@doc",
        "@moduledoc",
        "@spec",
        "@impl",
        "@type",
        "@typep",
        "@opaque",
        "@callback",
        "@behaviour",
        "@derive",
        "@since",
        "@deprecated",
        "@dialyzer",
        "@compile",
        "@tag",
        "@describetag",
        "@moduletag",
        "@external_resource",
    ]
)
"""Attributes that document or annotate rather than define a value."""
_TEST = re.compile(
    r"""\s*(?:test\s+["'][^"']|(?:async\s+)?def\s+test_\w|func\s+Test[A-Z_]\w*\s*\(|"""
    r"""(?:it|test)\s*\(\s*["'`])"""
)
"""A test case: ExUnit ``test "..."``, pytest ``def test_``, Go ``func TestX(``, Jest/Mocha
``it("...")`` / ``test("...")``."""


@dataclass(frozen=True, slots=True)
class EditDefs:
    """Names an edit defined that its old text did not, names it dropped, tests it added."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    tests: int = 0


def _names(lines: Iterable[str]) -> dict[str, None]:
    lines = list(lines)
    names = dict.fromkeys(definitions(lines))
    for line in lines:
        m = _ATTRIBUTE.match(line)
        if m and m.group("name") not in _NOT_ATTRIBUTES:
            names[m.group("name")] = None
    return names


def _tests(lines: Iterable[str]) -> int:
    return sum(1 for line in lines if _TEST.match(line))


def edit_defs(call: ToolCall) -> EditDefs:
    """What an editor call's (old, new) texts define differently; nothing for other calls
    (a whole file written over is no edit: what it replaced is not in the call)."""
    old_lines: list[str] = []
    new_lines: list[str] = []
    for old, new in edit_pairs(call):
        old_lines += old.splitlines()
        new_lines += new.splitlines()
    if not new_lines and not old_lines:
        return EditDefs()
    before, after = _names(old_lines), _names(new_lines)
    added = tuple(n for n in after if n not in before)
    removed = tuple(n for n in before if n not in after)
    return EditDefs(added, removed, max(0, _tests(new_lines) - _tests(old_lines)))


__all__ = ["EditDefs", "edit_defs"]
