"""Important Values keep what a reader can use: a value the person or the agent's prose
names, or that a command which changed something used, labelled by what it is; not the
places a look-up command searched, the pages the agent fetched, nor an id only read in a
path (run F's ``./.git/``, ``CHANGELOG.md``, ultracite docs URLs; run E's bare UUID)."""

from __future__ import annotations

from pathlib import Path

from tests.test_compaction_truth import CWD, ClaudeLog, compacted, section, store
from tests.test_ledger import imported_plain, numbered
from tests.test_progress import _messages
from threadline.compaction.id_label import id_label
from threadline.compaction.lookups import only_looks
from threadline.compaction.trail import Trail, build_trail
from threadline.store.protocol import Store

__all__ = ["store"]  # the fixture

SESSION = "019aad50-a7e6-7422-b7a8-0b384290624f"
OTHER = "891483b6-d5df-446c-9163-5a0694bbc472"
DOCS = "https://www.ultracite.ai/docs/provider/oxlint"
GIVEN = "https://www.ultracite.ai/"


def test_look_up_commands_only_look() -> None:
    for command in (
        "find . -maxdepth 3 -type f -not -path './node_modules/*' -not -path './.git/*' | sort",
        "printf '%s\\n' '-- refs --'; rg -n -i 'oxlint' --glob '!CHANGELOG.md' .",
        "git status --short && git diff --stat",
        "ls ~/.codemie/metrics 2>/dev/null | head -5",
        "printf '%s\\n' a.ts | xargs -n1 sh -c 'echo --- $0; head -100 \"$0\"'",
    ):
        assert only_looks(command), command
    for command in (
        "mkdir -p assets/pieces",
        "sed -i 's/a/b/' src/x.py",
        "find . -name '*.orig' -delete",
        "cat a.txt > b.txt",
        "ls | xargs rm",
        "python3 export_codex_session.py " + SESSION,
        "git -C /repo commit -am wip",
    ):
        assert not only_looks(command), command


def test_an_id_is_labelled_by_the_words_around_it() -> None:
    asked = f"The usage will be: python3 export_codex_session.py {SESSION} && python3 b.py"
    assert id_label(asked, SESSION) == "passed to python3 export_codex_session.py"
    assert id_label(f'When i run "python3 x.py -l {SESSION}"', SESSION) == "passed to python3 x.py"
    assert id_label(f"QA completed in session `{OTHER}`.", OTHER) == "session"
    assert id_label(f"Done, see `{OTHER}`.", OTHER) == ""
    assert id_label(f"bd close {OTHER}", OTHER, command=True) == "passed to bd close"


def _run() -> ClaudeLog:
    log = ClaudeLog()
    log.user(f"i think we can simplify our linting setup and use {GIVEN} for it")
    log.call(
        "Bash",
        {"command": "find . -type f -not -path './.git/*' | sort | grep -Ei 'lint'"},
        "./.oxlintrc.json\n./package.json",
    )
    log.call(
        "Bash",
        {"command": "rg -n -i 'oxlint' --glob '!CHANGELOG.md' --glob '!pnpm-lock.yaml' ."},
        'package.json:12:    "lint": "oxlint"',
    )
    for _ in range(2):
        log.call("WebFetch", {"url": DOCS, "prompt": "How is oxlint set up?"}, "# Oxlint\n...")
    for command in ("mkdir -p", "chmod 755", "chmod -R g+w"):
        log.call("Bash", {"command": f"{command} assets/pieces"}, "")
    path = f"/Users/dev/.pi/agent/sessions/2026-08-16T14-58-19-398Z_{OTHER}.jsonl"
    for offset in (1, 120):
        log.call("Read", {"file_path": path, "offset": offset}, '{"type":"session"}')
    log.user(f"The usage will be: python3 export_codex_session.py {SESSION} && python3 b.py")
    log.call("Bash", {"command": f"python3 export_codex_session.py {SESSION}"}, "wrote 3 rows")
    log.call("Bash", {"command": f"python3 export_codex_session.py -l {SESSION}"}, "ok")
    log.say(f"The export for `{SESSION}` is written.")
    return log


def test_a_reused_id_is_kept_when_said_and_labelled() -> None:
    trail: Trail = build_trail(numbered(_messages(_run())), cwd=CWD)
    assert trail.used[SESSION].said and trail.used[SESSION].label.startswith("passed to python3")
    assert trail.used[OTHER].count >= 2 and not trail.used[OTHER].said  # read in a path only
    assert not trail.used[DOCS].said  # fetched, never named
    again = Trail.from_metadata(trail.to_metadata())
    assert again is not None and again.used[SESSION] == trail.used[SESSION]


def test_important_values_keep_what_a_reader_can_use(store: Store, tmp_path: Path) -> None:
    log = _run()
    for i in range(6):  # later work, for a kept tail after the cut
        log.call("Read", {"file_path": f"{CWD}/docs/page{i}.md"}, "# page\n" * 40)
    summary = compacted(imported_plain(store, log, tmp_path))
    values = "\n".join(section(summary, "important_values"))
    assert GIVEN in values  # the person gave it
    assert "`assets/pieces`" in values  # a command that changed something used it
    assert f"`{SESSION}` (passed to python3 export_codex_session.py)" in values
    for noise in ("./.git/", "CHANGELOG.md", "pnpm-lock.yaml", DOCS, OTHER):
        assert noise not in values, noise


def test_a_tracker_id_only_a_listing_printed_is_no_value(store: Store, tmp_path: Path) -> None:
    """Judges, runs A and B: ``spotter-6lq.1`` came from ``bd ready`` listing other items;
    the item the run worked on (named in its commands) stays."""
    log = ClaudeLog.asking("Work on bead shop-9. Start with the first ready task.")
    listing = "Ready work:\n1. [P1] shop-9.1: Cart totals\n2. [P2] other-g6r.1: Unrelated item\n"
    for _ in range(2):
        log.bd("ready", listing)
    log.bd("update shop-9.1 --status in_progress", "✓ Updated issue: shop-9.1")
    log.call("Edit", {"file_path": f"{CWD}/lib/cart.ex", "old_string": "a", "new_string": "b"})
    for i in range(6):
        log.call("Read", {"file_path": f"{CWD}/docs/page{i}.md"}, "# page\n" * 40)
    summary = compacted(imported_plain(store, log, tmp_path))
    assert "other-g6r.1" not in "\n".join(section(summary, "important_values"))
    assert "shop-9.1" in summary


def test_a_quoted_path_with_a_placeholder_is_a_path() -> None:
    from threadline.compaction.values import extract_values

    said = "So it's a JSON file at `~/.codemie/sessions/{sessionId}.json` with `syncState`."
    assert [(v.text, v.kind) for v in extract_values(said)] == [
        ("~/.codemie/sessions/{sessionId}.json", "path"),
        ("syncState", "identifier"),
    ]


def test_names_the_person_typed_and_a_path_with_a_placeholder_are_values(
    store: Store, tmp_path: Path
) -> None:
    """Judges, run D: the ``SyncState`` fields the person named in prose and the session
    file the agent located (``~/.codemie/sessions/{sessionId}.json``) were missing; a
    proposal the person pasted back names nothing of theirs."""
    log = ClaudeLog.asking("Review the sync design in docs/sync.md.")
    log.say("So it's a JSON file at `~/.codemie/sessions/{sessionId}.json` with `syncState`.")
    log.call("Edit", {"file_path": f"{CWD}/docs/sync.md", "old_string": "a", "new_string": "b"})
    log.user("processedRecordIds is the same as lastSyncedId. there is lastProcessedLine too")
    log.call("Edit", {"file_path": f"{CWD}/docs/sync.md", "old_string": "b", "new_string": "c"})
    log.user("Give more details about this proposal:\n- state.js: playMove, resetGame\n- ui.js")
    for i in range(6):
        log.call("Read", {"file_path": f"{CWD}/docs/page{i}.md"}, "# page\n" * 40)
    values = "\n".join(section(compacted(imported_plain(store, log, tmp_path)), "important_values"))
    assert "name: `lastProcessedLine` (named by the user)" in values
    assert "playMove" not in values  # pasted back, not typed


def test_commands_that_write_through_an_option_do_not_only_look() -> None:
    """Review: ``git remote add URL``, ``sort -o``, ``sed -Ei`` and ``find -fprint`` write."""
    for command in (
        "git remote add origin https://github.com/x/y.git",
        "git branch -D old-work",
        "sort -o sorted.txt input.txt",
        "sed -Ei 's/a/b/' src/x.py",
        "sed --in-place=.bak 's/a/b/' src/x.py",
        "find . -name '*.log' -fprint found.txt",
    ):
        assert not only_looks(command), command
    for command in ("git remote -v", "git branch", "git branch --list", "sed -n 1,5p x.py"):
        assert only_looks(command), command
