"""Paths as the run itself spells them (issue 31: no false statement a judge can quote).

A subagent names a file bare (``domain.test.ts``); an earlier summary, written from
memory, drops a directory (``cmd/entire/cli/auto_commit_test.go`` for the
``cmd/entire/cli/strategy/auto_commit_test.go`` that ``git diff --stat`` listed). Each
is read against the paths the run read, changed or saw git list; a full path the run
has not met yet is never bent onto another file of the same name.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from threadline.compaction.subagents import resolved
from threadline.compaction.untracked import git_listed_paths

STATUS = """On branch alex/ent-112
Changes not staged for commit:
  (use "git add <file>..." to update what will be committed)
\tmodified:   cmd/entire/cli/hooks_claudecode_handlers.go
\trenamed:    cmd/old.go -> cmd/new.go

Untracked files:
  (use "git add <file>..." to include in what will be committed)
\tcmd/entire/cli/strategy/mid_session_commit_test.go
"""
STAT = """ cmd/entire/cli/agent/agent.go                    |  22 +++++
 cmd/entire/cli/strategy/auto_commit_test.go      |  40 ++++---
 .../strategy/manual_commit_hooks.go               |   3 +-
 3 files changed, 60 insertions(+), 5 deletions(-)
"""


def test_git_status_and_diff_stat_list_whole_paths() -> None:
    assert git_listed_paths("git status", STATUS) == [
        "cmd/entire/cli/strategy/mid_session_commit_test.go",
        "cmd/entire/cli/hooks_claudecode_handlers.go",
        "cmd/new.go",
    ]
    # an abbreviated ``.../`` line is not a whole path
    assert git_listed_paths("git diff --stat", STAT) == [
        "cmd/entire/cli/agent/agent.go",
        "cmd/entire/cli/strategy/auto_commit_test.go",
    ]
    assert git_listed_paths("git status --short", " M src/a.py\n?? b.txt") == ["b.txt", "src/a.py"]
    assert git_listed_paths("cat notes.txt", STATUS) == []  # not git's output


def test_a_path_said_short_is_the_run_s_one_path_of_that_name() -> None:
    known = ["cmd/entire/cli/strategy/auto_commit_test.go", "test/unit/domain.test.ts"]
    assert resolved("cmd/entire/cli/auto_commit_test.go", known) == known[0]
    assert resolved("domain.test.ts", known) == known[1]
    assert resolved("unit/domain.test.ts", known) == known[1]


def test_a_full_path_is_never_bent_onto_another_file() -> None:
    known = ["tools/oxlint/anti-slop/index.ts"]
    assert resolved(".pi/extensions/entire/index.ts", known) == ".pi/extensions/entire/index.ts"
    two = ["a/index.ts", "b/index.ts"]
    assert resolved("index.ts", two) == "index.ts"  # which one, the run does not say


@given(
    st.lists(st.sampled_from(["src", "lib", "cmd", "a", "b", "test"]), max_size=4),
    st.lists(st.sampled_from(["x.py", "y.go", "index.ts"]), min_size=1, max_size=5),
)
def test_resolving_only_ever_gives_the_name_or_a_known_path_ending_in_it(
    dirs: list[str], names: list[str]
) -> None:
    known = [
        f"{'/'.join(dirs[: i % (len(dirs) + 1)])}/{n}".lstrip("/") for i, n in enumerate(names)
    ]
    for n in names:
        out = resolved(n, known)
        assert out == n or (out in known and out.rsplit("/", 1)[-1] == n)


def test_a_later_range_is_read_in_the_session_s_directory() -> None:
    """Run C: the importer stamps the directory on the first record only, so a compaction of
    a later range saw none and wrote every turned-down edit's path in full."""
    from threadline.compaction.compactor import _in_directory
    from threadline.messages import Message

    later = [Message.user("go on"), Message.assistant("ok")]
    stamped = _in_directory(later, "/Users/alex/workspace/cli")
    assert stamped[0].metadata["cwd"] == "/Users/alex/workspace/cli"
    assert "cwd" not in later[0].metadata  # a copy: the stored message is untouched
    said = [Message.user("go on", metadata={"cwd": "/elsewhere"}), Message.assistant("ok")]
    assert _in_directory(said, "/Users/alex/workspace/cli") == said  # the range says it
    assert _in_directory(later, None) == later
