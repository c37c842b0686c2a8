"""A snapshot made true to its history: the trail of the whole covered range laid over it.

Whatever wrote a snapshot (the extractive summarizer, a model, or another tool
whose compaction was imported and is now being updated), ``reconcile``
rebuilds it against the trail of everything the checkpoint will cover
(``trail.py``), so what it says was changed, failed or is left to do is what
the stored messages show (invariant 11):

* **Files Modified** is the trail's: every file a tool call changed, once,
  relative to the working directory, saying what happened to it (a file whose
  last action deleted it says ``deleted``); the most recent ones also say what
  changed (the trail's note, else the summarizer's words for that file), the
  rest are named in lines grouped by what happened to them. A file only the
  summarizer names is kept after those.
* **Key Decisions** keeps decisions and the user's constraints, not the agent
  narrating its next step ("Now let me ...").
* **Important Values**: the commands that failed and their error lines, the
  URLs and ids the agent used more than once, then the summarizer's own values;
  each labelled with what it is (``URL: `...```), none an escape sequence, a
  lone flag, a build artefact, a markup fragment or an id the run names only
  once; capped at ``max_values``.
* **Current State** and **Pending Tasks** follow later evidence: the latest
  todo state supersedes earlier lists; a task or state line whose item was
  closed since (``bd close X``, a commit naming it) or completed in the todo
  list is dropped; a task carried over from the previous snapshot says the
  point it dates from (``(as of #315)``); a next step that says nothing
  ("continue from the result of `Bash`") gives way to a concrete one, or to
  none. When the agent loaded skills, a Current State line names them (``Skills in
  use: ...``), so the names outlive the results a compaction summarizes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from threadline.compaction.decisions import is_narration, standing_first
from threadline.compaction.disputes import note as disputed_note
from threadline.compaction.extractive import DEFAULT_MAX_VALUES, file_bullet
from threadline.compaction.file_edit import FileEdit
from threadline.compaction.history import (
    as_history,
    carried,
    earlier_files,
    earlier_intent,
    settled_failure,
    stale_state,
    superseded_step,
)
from threadline.compaction.ledger import ACTIVE, WorkItem
from threadline.compaction.progress import (
    ACCOUNT_WORDS,
    PROGRESS_HEADS,
    Segment,
    account,
    current_line,
    failing_checks,
    in_progress,
    unresolved,
)
from threadline.compaction.reports import reserved
from threadline.compaction.signatures import SIGNATURE_LEAD
from threadline.compaction.snapshot import (
    DEFAULT_MAX_WORDS,
    MODEL_SUMMARIZERS,
    SKELETON_WORDS,
    Bullet,
    SectionName,
    Snapshot,
    SummaryResult,
    clip_words,
    code_span,
    parse,
    shown_by_share,
    words,
)
from threadline.compaction.standing import requirement_lines
from threadline.compaction.subagents import BY_SUBAGENT, resolved
from threadline.compaction.toolcalls import DONE_STATUSES
from threadline.compaction.trail import Trail, Used, mentions
from threadline.compaction.values import (
    COMMAND_LABEL,
    ID_KINDS,
    VALUE_LABELS,
    Value,
    ValueKind,
    bullet_note,
    bullet_value,
    extract_values,
    is_ticket,
    unique_values,
    value_bullet,
    worth_keeping,
)

SHARES: dict[SectionName, float] = {
    "files_modified": 0.28,
    "key_decisions": 0.10,
    "important_values": 0.24,
    "current_state": 0.18,
    "pending_tasks": 0.10,
}
"""Guaranteed share of the words for each section; the rest goes to the best bullets."""
NOTED_FILES = 6
"""The most recently changed files get a line of their own, saying what changed..."""
FILE_BULLET_WORDS = 24
FOLD_SIZE = 12
"""...the others are named, this many to a line, grouped by what happened to them."""
FILE_SCORE = 3.0
FOLD_SCORE = 2.9
"""Naming every file weighs more than a value: a resumed agent must know what it touched."""
SUMMARIZER_FILE_SCORE = 1.2
VALUE_SCORE = 2.6
FAILURE_SCORE = 2.8
REUSED_SHARE = 0.7
"""At most this share of the values are the URLs and ids the agent used again (counted by
the trail over the whole range), leaving room for the summarizer's paths, settings and
versions."""
STATE_SCORE = 9.0
DECISION_SCORE = 2.0
CHOICE_SCORE = DECISION_SCORE
"""An option the person picked: their decision on the design, as high as the best other."""
TASK_SCORE = 2.2
TODO_SCORE = 3.2
SAME_ITEM_SHARE = 0.75
"""A pending line shares this much of a completed item's words: the same item, done."""
LEDGER_SCORE = 3.4
FAILING_SCORE = 2.85
"""A check whose latest run failed (none passed since): open work, after the items trackers
show open (those the kept tail opened too)."""
FAILING_TASKS = 3
FAILING_WORDS = 16
REQUEST_SCORE = 3.0
"""A follow-up request the agent has not answered yet, after the items trackers show open."""
"""An item a tracker shows open outranks every other pending line (``ledger.py``)."""
TAIL_NOTE = "opened after #{seq}, in the messages kept below"
TAIL_ACTIVE = "set in progress after #{seq}, in the messages kept below"
"""An item open at the cut that the kept tail took up."""
"""An item the kept tail opened: still open, but not as of the summary's end."""
EARLIER_SCORE = 0.3
INTENT_SCORE = 1.0
"""The task as another tool's earlier summary stated it: what the work is for, above the
earlier state and results (``history.earlier_intent``)."""
HISTORY_SCORE = 0.35
"""The earlier summary's state, as of its point: after the newer state, before "Earlier
result" lines (``history``)."""
"""An "Earlier result" line only fills the words left over: open items, failures, decisions
and the current request come first (issue 31)."""
NOTE_WORDS = 14
ACCOUNT_MIN_WORDS = 60
PENDING_RESERVE = 90
"""Words the account of the work leaves for Pending Tasks and the rest: it never crowds
out Files Modified (every changed file named) nor the open items."""
CARRIED_WORDS = 45
"""A line carried from the previous snapshot keeps this many words: it dates from then, and
the account of the work since says what followed."""
CARRIED_OPENING = 12
"""A line this long whose opening words the previous snapshot holds comes from it."""
SYMBOLS = 4
"""Definitions named for each file the item in progress changed."""

_CARRIED = re.compile(r"\s*\(as of #\d+\)\s*$")
_OPEN_CLAIM = re.compile(
    r"(?i)\b(?:open|opened|in[ _-]?progress|working\s+on|pending|not\s+yet|"
    r"not\s+(?:been\s+)?committed|"
    r"to\s*do|blocked|remaining|next|needs?\s+to|should|will|still|unfinished|incomplete|"
    r"wip|ready)\b"
)
"""Words that claim an item is still to be done."""
PROGRESS_LABELS = ("in progress", "unresolved error", "earlier work")
"""Current State lines the progress account rebuilds from the trail each time."""
SKILLS_LABEL = "Skills in use"
ANSWER_LABEL = "Assistant's answer the latest request refers to"
REPLY_LABEL = "Reply to the latest request"
SKILLS_NOTE = "load one again with the skill tool to read its instructions"
_FACT_LABELS = frozenset(
    {
        "last action",
        "last result",
        "earlier result",
        "working directory",
        "latest request",
        SKILLS_LABEL.lower(),
    }
)
"""Current State lines that report what happened (or where), not what is left to do."""
_VAGUE_NEXT = re.compile(
    r"(?i)^next step:\s*(?:continue from the result of|deal with the error from|"
    r"wait for the (?:result|output) of|work through the pending tasks|"
    r"wait for the next request)"
)
_NORM = re.compile(r"[^\w]+")
_PLAIN_NAME = re.compile(r"[\w.:/@$<>*{}\[\](),#+=-]+")
"""A name a snapshot can quote: no spaces, box-drawing or symbols."""
_WRAPPER = re.compile(
    r"(?i)^\W*(?:please continue the conversation from where|if you need specific details from "
    r"before compaction|this session is being continued from a previous conversation|"
    r"\[codex compacted the conversation)"
)
"""The fixed sentences a tool wraps its compaction summary in (Claude Code, threadline's
Codex import): instructions to the model, not state."""
_DONE_WORK = re.compile(
    r"^\W*(?:installed|updated|added|fixed|created|removed|deleted|renamed|refactored|"
    r"implemented|completed|finished|committed|closed|merged|wrote|moved|extracted|replaced)\b",
    re.I,
)
"""A task list line that reports work done ("Installed highlight.js"), not work to do."""
_FOLD_TITLES = {
    "deleted": "Deleted",
    "created": "Also created",
    "moved": "Also moved",
    "copied": "Also copied",
    "written": "Also written",
    BY_SUBAGENT: "Changed by subagents",
}
_PATH_SPAN = re.compile(r"`([^`]+)`")
_PATHLIKE = re.compile(r"[/\\]|\.\w{1,10}$")
_NOT_A_PATH = re.compile(r"\s|/\d+$|^[@<$]|^~[A-Za-z]")
"""A code span that only looks like a path: code with spaces, a function's arity
(``render/2``), an attribute, a regex sigil, a tag or a variable."""
_LEADING_PATH = re.compile(
    r"^\s*(?:\*\*)?`?(?P<path>[\w.~/\\-]+\.\w{1,10}|[\w.~-]+(?:/[\w.~-]+)+)`?"
)


def _norm(text: str) -> str:
    return _NORM.sub(" ", text.lower()).strip()


def _label(text: str) -> str:
    head, sep, _ = text.partition(":")
    return head.split(" (")[0].strip().lower() if sep and len(head) <= 40 else ""


# -- files -------------------------------------------------------------------------------


def same_file(a: str, b: str) -> bool:
    """Whether two spellings name one file (one may be relative to a directory)."""
    a, b = a.replace("\\", "/").lstrip("./"), b.replace("\\", "/").lstrip("./")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def paths_of(text: str) -> list[str]:
    """The file paths a Files Modified bullet names (its code spans, else its leading path)."""
    quoted = [
        q for q in _PATH_SPAN.findall(text) if _PATHLIKE.search(q) and not _NOT_A_PATH.search(q)
    ]
    if quoted:
        return quoted
    m = _LEADING_PATH.match(text)
    return [m.group("path")] if m else []


def _summarizer_notes(bullets: Sequence[Bullet], paths: Iterable[str]) -> dict[str, str]:
    """What the summarizer said changed in each file, where it said anything."""
    notes: dict[str, str] = {}
    for b in bullets:
        found = paths_of(b.text)
        if len(found) != 1 or b.text.startswith(("Also ", "Deleted")):
            continue
        rest = b.text.split(found[0], 1)[1].lstrip("`*: -\u2014")
        words = [w for w in rest.split() if w.strip(",:;")]
        acts = {"created", "written", "edited", "deleted", "moved", "copied", "reverted", "changed"}
        while words and (words[0].strip(",:;") in acts or words[0].startswith("\u00d7")):
            words.pop(0)
        note = " ".join(words).lstrip(":;, ")
        if note:
            for path in paths:
                if same_file(path, found[0]):
                    notes.setdefault(path, clip_words(note, NOTE_WORDS))
    return notes


def _fold_group(rec: FileEdit) -> str:
    """Which folded line names a file: what happened to it last when that ended it (deleted,
    moved, copied), else created when the run created it (then edited or not), else
    written when a whole-file write is all it had, else edited."""
    if rec.last_action in ("deleted", "moved", "copied"):
        return rec.last_action
    if rec.actions.get("created"):
        return "created"
    if set(rec.actions) == {BY_SUBAGENT}:
        return BY_SUBAGENT
    return "written" if set(rec.actions) == {"written"} else "edited"


def _files(trail: Trail, old: Sequence[Bullet], snapshot: Snapshot) -> list[str]:
    """Files Modified from the trail; returns every path named."""
    files = trail.tracker.files(mentioned=False)
    ranked = sorted(files.values(), key=lambda r: (-r.last, -r.count, r.path))
    notes = _summarizer_notes(old, files)
    folded: dict[str, list[FileEdit]] = {}
    for rank, rec in enumerate(ranked):
        if rank < NOTED_FILES:
            if not rec.note and rec.path in notes:
                rec.note = notes[rec.path]
            text = clip_words(file_bullet(rec, noted=True), FILE_BULLET_WORDS)
            snapshot.add("files_modified", text, FILE_SCORE - rank * 0.01)
            continue
        group = _fold_group(rec)
        folded.setdefault(group, []).append(rec)
    rank = 0
    for group, recs in folded.items():
        title = _FOLD_TITLES.get(group, "Also edited")
        for start in range(0, len(recs), FOLD_SIZE):
            names = []
            for rec in recs[start : start + FOLD_SIZE]:
                where = f" to {code_span(rec.other)}" if rec.other and group == "moved" else ""
                names.append(code_span(rec.path) + where)
            snapshot.add("files_modified", f"{title}: {', '.join(names)}", FOLD_SCORE - rank * 0.01)
            rank += 1
    named = list(files)
    for i, b in enumerate(old):  # files only the summarizer knows (its words, another tool's)
        paths = paths_of(b.text)
        new = [p for p in paths if not any(same_file(p, n) for n in named)]
        if not new:
            continue
        text = b.text
        title = _label(text)
        if len(paths) > 1 and title:  # a line of names: only those no line names yet
            text = f"{text.split(':', 1)[0]}: {', '.join(code_span(p) for p in new)}"
        snapshot.add("files_modified", text, SUMMARIZER_FILE_SCORE * b.score - i * 0.001)
        named += new
    return named


EARLIER_FILES_SCORE = 2.8
"""Files only an earlier summary names: after the trail's, before the values."""


def _earlier_files(
    previous_text: str,
    previous_seq: int | None,
    named: Sequence[str],
    snapshot: Snapshot,
    seen: Collection[str] = (),
) -> list[str]:
    """The files another tool's earlier summary says were changed that the trail does not
    name, in one line marked as its word (``history.earlier_files``); returns them."""
    found: list[str] = []
    for path in earlier_files(previous_text):
        path = resolved(path, seen)  # the run's own spelling of it
        if any(same_file(path, n) for n in [*named, *found] if len(n) >= len(path)):
            continue
        found = [f for f in found if not same_file(f, path)]  # `a.go`, then `cmd/x/a.go`
        found.append(path)
    if found:
        at = f" as of #{previous_seq}" if previous_seq is not None else ""
        names = ", ".join(code_span(p) for p in found[: 2 * FOLD_SIZE])
        line = f"Changed before (earlier summary{at}, not checked against the messages): {names}"
        snapshot.add("files_modified", line, EARLIER_FILES_SCORE)
    return found


# -- values --------------------------------------------------------------------------------


def _kind_of(label: str | None, text: str) -> ValueKind | None:
    if label is not None:
        for kind, name in VALUE_LABELS.items():
            if name.lower() == label.lower():
                return kind
    found = extract_values(text)
    return found[0].kind if len(found) == 1 and found[0].text == text else None


def _values(
    trail: Trail,
    old: Sequence[Bullet],
    snapshot: Snapshot,
    *,
    named: Sequence[str],
    previous_text: str,
    max_values: int,
    evidence: Trail | None = None,
) -> list[Value]:
    """Important Values: failures, reused URLs and ids, then the summarizer's; the values
    shown, for retention accounting."""
    picked: list[tuple[str, str]] = []  # (bullet, value text)
    shown: list[Value] = []

    def taken(text: str) -> bool:
        return any(text in b for b, _ in picked) or any(same_file(text, n) for n in named)

    open_failures = trail.unsettled(evidence or trail)
    settled = {e for f in trail.failures if f not in open_failures for e in f.errors}
    for f in reversed(open_failures):
        errors = "; ".join(code_span(e) for e in f.errors)
        bullet = f"{COMMAND_LABEL}: {code_span(f.command)}" + (f" -> {errors}" if errors else "")
        picked.append((bullet, f.command))
        shown += [Value("error", e) for e in f.errors]
    room = max(0, int(max_values * REUSED_SHARE))
    for text, used in sorted(trail.reused(), key=lambda tu: not _exact_kind(*tu)):
        if room <= 0:
            break
        value = Value(next((k for k in VALUE_LABELS if k == used.kind), "id"), text)
        if not used.said:
            continue  # only passed to tools (fetched) or read in a path: nothing names it
        if worth_keeping(value, used.refs) and not taken(text):
            note = item_note(trail, evidence, text) or used.label or None
            picked.append((value_bullet(value.kind, text, note), text))
            shown.append(value)
            room -= 1
    for b in old:
        if b.text.startswith(SIGNATURE_LEAD):
            picked.append((b.text, b.text))  # read from an applied edit: true as written
            continue
        label, text = bullet_value(b.text)
        if label is not None and label.lower() == COMMAND_LABEL:
            continue  # the trail's failures replace them
        if text in settled or (evidence or trail).settled_error(text):
            continue  # the error of a command that ran clean since
        kind = _kind_of(label, text)
        if kind == "identifier" and not _PLAIN_NAME.fullmatch(text):
            continue  # a banner ("★ Insight ───"), not a name
        if kind == "hex" and not _agent_used(evidence or trail, text):
            continue  # a hex the agent never used itself: a background task's handle
        if kind is None:
            if not taken(text) and worth_keeping(Value("identifier", text), 2):
                picked.append((b.text, text))
            continue
        refs = trail.refs(text) + (text in previous_text)
        if kind not in ID_KINDS:
            refs = max(refs, 1)
        value = Value(kind, text)
        if worth_keeping(value, refs) and not taken(text) and not _is_root(trail, text):
            note = (
                disputed_note((evidence or trail).disputed, text)
                or item_note(trail, evidence, text)
                or bullet_note(b.text)
            )
            picked.append((value_bullet(kind, text, note), text))
            shown.append(value)
    for rank, (bullet, _) in enumerate(picked[:max_values]):
        base = FAILURE_SCORE if bullet.startswith(COMMAND_LABEL) else VALUE_SCORE
        snapshot.add("important_values", bullet, base / (1.0 + 0.04 * rank))
    return shown


_STATUS_WORDS = {"open": "open", "in_progress": "in progress", "closed": "closed"}
ITEM_NOTE_WORDS = 10


def item_note(trail: Trail, evidence: Trail | None, key: str) -> str | None:
    """What an id names, when a tracker the run used knows it: "beads item: <title>,
    closed" (as of the covered range; a later change in the messages kept after it is
    said so)."""
    item = trail.ledger.items.get(key)
    if item is None or item.source == "git":
        return None
    named = item.title and item.title != key
    title = f": {clip_words(item.title, ITEM_NOTE_WORDS)}" if named else ""
    note = f"{item.source} item{title}, {_STATUS_WORDS.get(item.status, item.status)}"
    later = (evidence or trail).ledger.items.get(key)
    if later is not None and later.status != item.status:
        note += f", then {_STATUS_WORDS.get(later.status, later.status)} in the messages kept below"
    return note


def _agent_used(trail: Trail, text: str) -> bool:
    """The agent itself used ``text`` (in its prose or a command), not only a tool's output."""
    used = trail.used.get(text)
    return used is not None and used.count > 0


def _exact_kind(text: str, used: Used) -> bool:
    """A URL, a UUID, a commit hash or a ticket id: what a resumed agent cannot guess, as
    against a code that only looks like an id (``FFD700``, ``bg-gray-800``)."""
    return used.kind in ("url", "uuid", "hex") or is_ticket(text)


def _is_root(trail: Trail, text: str) -> bool:
    root = trail.tracker.root
    return root is not None and text.rstrip("/") == root.rstrip("/")


# -- state and tasks -----------------------------------------------------------------------


def _todo_done(evidence: Trail) -> list[str]:
    if evidence.todos is None:
        return []
    return [_norm(t) for t, status in evidence.todos.items if status in DONE_STATUSES]


_MARK = re.compile(r"^\s*\[[^\]]{1,20}\]\s*")
"""A todo item's status mark: ``[in progress] ``."""


def bare(text: str) -> str:
    """A task line normalised for comparison, without its status mark and carried note."""
    return _norm(_CARRIED.sub("", _MARK.sub("", text)))


def _names_done(text: str, evidence: Trail, done: Sequence[str]) -> bool:
    """Whether ``text`` is about an item closed since, or completed in the todo list: its
    first id is closed, or it names a completed todo item."""
    ids = [v.text for v in extract_values(text) if v.kind == "id"]
    if ids and (
        mentions(ids[0], evidence.closed) or mentions(ids[0], evidence.ledger.closed_keys())
    ):
        return True
    norm = bare(text)
    if any(d and (d in norm or (len(norm.split()) >= 3 and norm in d)) for d in done):
        return True
    return any(_same_item(norm, d) for d in done)


def _same_item(a: str, b: str) -> bool:
    """Two wordings of one item ("Debug why X is not stored in Y" and "Debug X not stored in
    Y"): most of the shorter one's words of three or more letters are in the other."""
    wa = {w for w in a.split() if len(w) >= 3}
    wb = {w for w in b.split() if len(w) >= 3}
    shared = len(wa & wb)
    return shared >= 3 and shared >= SAME_ITEM_SHARE * min(len(wa), len(wb))


def _open_todos(trail: Trail, done: Sequence[str]) -> list[tuple[str, str]]:
    """The open items of the trail's latest todo state, less those completed later."""
    items = trail.todos.items if trail.todos is not None else []
    return [(t, s) for t, s in items if s not in DONE_STATUSES and _norm(t) not in done]


def open_items(trail: Trail, evidence: Trail) -> list[WorkItem]:
    """The items open at the end of the covered range (as it left them), less those the
    kept tail closed: an item the tail opened is the tail's to show."""
    later = evidence.ledger.items
    return [i for i in trail.ledger.open_items() if (i.key not in later or later[i.key].open)]


def _in_progress(trail: Trail, evidence: Trail) -> WorkItem | None:
    return next((i for i in open_items(trail, evidence) if i.status == ACTIVE), None)


def _next_step(trail: Trail, done: Sequence[str], evidence: Trail | None = None) -> str | None:
    """A concrete next step: the todo item in progress, the failure to fix, the first open
    item; None when the trail shows none."""
    items = _open_todos(evidence or trail, done)  # the latest list, kept tail too
    active = [t for t, s in items if s.replace("-", "_") == "in_progress"]
    if active:
        return f"Next step: {active[0]} (in progress in the todo list)"
    item = _in_progress(trail, evidence or trail)  # one the kept tail closed is done
    if item is not None:
        return f"Next step: finish {code_span(item.key)}" + (
            f": {item.title}" if item.title else ""
        )
    failures = trail.unsettled(evidence or trail)
    if failures and failures[-1].seq == trail.last_result:
        f = failures[-1]
        error = f" ({code_span(f.errors[0])})" if f.errors else ""
        return f"Next step: make {code_span(f.command)} succeed{error}"
    return f"Next step: {items[0][0]} (open in the todo list)" if items else None


def _settled(text: str, trail: Trail, evidence: Trail) -> bool:
    """``text`` (a next step) asks to make a command succeed that a later run settled."""
    gone = {f.command for f in trail.failures} - {f.command for f in trail.unsettled(evidence)}
    return any(code_span(command) in text for command in gone)


def _carried(text: str, before: str, seq: int | None) -> str:
    """``text`` marked with the point it dates from when it comes from the previous snapshot
    (``before``, normalised) and is not marked yet."""
    flat = bare(text)
    opening = " ".join(flat.split()[:CARRIED_OPENING])  # a long one may join two of its lines
    if seq is None or not flat or _CARRIED.search(text):
        return text
    if flat not in before and (len(flat.split()) < CARRIED_OPENING or opening not in before):
        return text
    return f"{clip_words(text, CARRIED_WORDS)} (as of #{seq})"


def _state(
    trail: Trail,
    evidence: Trail,
    old: Sequence[Bullet],
    snapshot: Snapshot,
    done: Sequence[str],
    *,
    before: str,
    previous_seq: int | None,
    earlier: Sequence[str] = (),
    intent: Sequence[str] = (),
    room: int = DEFAULT_MAX_WORDS,
    shares: Mapping[SectionName, float] = SHARES,
) -> None:
    """Current State; ``room``: the snapshot's word limit, of which the account of the work
    takes what Files Modified, Key Decisions and the other state lines leave; ``shares``:
    the sections' guaranteed shares it is rendered with (what Key Decisions will show)."""
    had_next = False
    kept: list[str] = []
    history: list[str] = []  # the earlier summary's state, as of its point (``history``)
    for b in old:
        label = _label(b.text)
        if label == "next step" and (
            _VAGUE_NEXT.match(b.text) or _settled(b.text, trail, evidence)
        ):
            continue
        claims_open = label not in _FACT_LABELS and _OPEN_CLAIM.search(b.text)
        if claims_open and _names_done(b.text, evidence, done):
            continue  # says an item closed since is still to do
        rebuilt = label in (
            SKILLS_LABEL.lower(),
            ANSWER_LABEL.lower(),
            REPLY_LABEL.lower(),
            "in progress",
        )
        rebuilt = rebuilt or label.startswith(PROGRESS_LABELS) or b.text.startswith(PROGRESS_HEADS)
        if _WRAPPER.match(b.text) or rebuilt or label.startswith(("subagent ", "last commit")):
            continue  # a wrapper; the skills and answer lines are rebuilt from the trail below
        fact = label in _FACT_LABELS or label.startswith(("primary request", "latest request"))
        if not fact and carried(bare(b.text), earlier):
            if not stale_state(b.text, evidence, previous_seq):
                history.append(as_history(_CARRIED.sub("", b.text), previous_seq))
            continue
        had_next = had_next or label == "next step"
        kept.append(b.text if fact else _carried(b.text, before, previous_seq))
    if not had_next and (step := _next_step(trail, done, evidence)):
        at = next((i for i, t in enumerate(kept) if _label(t) == "working directory"), len(kept))
        kept.insert(at, step)
    if (reply := _reply(trail)) is not None:
        at = next((i + 1 for i, t in enumerate(kept) if _label(t).startswith("latest")), 0)
        kept.insert(at, reply)
    answer = evidence.wanted_answer()
    if answer is not None and answer[0] <= trail.through:  # else the kept tail shows it
        kept.insert(min(2, len(kept)), f"{ANSWER_LABEL} (#{answer[0]}): {answer[1]}")
    reports = [o.line() for o in evidence.ledger.outcomes if o.seq <= trail.through]
    kept[min(3, len(kept)) : min(3, len(kept))] = reports  # in order; later ones: the kept tail
    at = next((i + 1 for i, t in enumerate(kept) if _is_request_line(t)), 0)
    taken = sum(
        words(b.text)
        for name in ("files_modified", "key_decisions")
        for b in snapshot.section(name)
    )
    taken += sum(words(t) for t in kept if _label(t) != "earlier result")
    budget = max(
        ACCOUNT_MIN_WORDS, min(ACCOUNT_WORDS, room - SKELETON_WORDS - taken - PENDING_RESERVE)
    )
    progress = progress_lines(trail, evidence, budget=budget)
    asked_already = {int(n) for t in [*kept, *progress] for n in _NAMED_REQUEST.findall(t)}
    segments = [s for s in trail.progress.segments if s.start <= trail.through]
    decided = shown_by_share(snapshot, "key_decisions", room, shares)
    standing = requirement_lines(segments, budget=STANDING_WORDS, skip=asked_already, said=decided)
    if progress:
        kept[at:at] = progress
    elif (ended := trail.ledger.in_progress()) is not None:  # as the covered range left it
        what = ended.line().removeprefix("[in progress] ")
        kept.insert(min(at, len(kept)), f"In progress at #{trail.through}: {what}")
    commit = trail.ledger.commit_line()  # as the covered range left it
    if commit is not None:
        kept.insert(min(2, len(kept)), commit)
    skills = evidence.skills_in_use()
    if skills:
        named = ", ".join(code_span(name) for name in skills)
        kept.insert(min(2, len(kept)), f"{SKILLS_LABEL}: {named} ({SKILLS_NOTE})")
    for i, text in enumerate(kept):
        earlier_result = _label(text) == "earlier result"
        score = EARLIER_SCORE if earlier_result else STATE_SCORE
        snapshot.add("current_state", text, score - i * 0.01)
    for i, text in enumerate(standing):  # the newest weigh most: the budget cuts the oldest
        snapshot.add("current_state", text, STANDING_SCORE + (i - len(standing)) * 0.01)
    if intent:
        task = "; ".join(t.rstrip(". ") for t in intent)
        line = as_history(f"the task: {task}", previous_seq)
        snapshot.add("current_state", line, INTENT_SCORE)
        said = _norm(task)
        history = [h for h in history if _norm(h.partition("): ")[2]) not in said]  # no twice
    for i, text in enumerate(history):
        snapshot.add("current_state", text, HISTORY_SCORE - i * 0.01)


_NAMED_REQUEST = re.compile(r"(?:request #|user, #)(\d+)")
STANDING_WORDS = 240
"""Words the standing requirements may spend (``standing``): a long run's spec."""
STANDING_SCORE = 2.5
"""Below the state of the work, above decisions (a user decision often repeats one) and
"Earlier result" lines."""


def _reply(trail: Trail) -> str | None:
    """How the agent answered the latest request when that was a question and the answer is
    in the covered range: the question then reads as answered, not as open."""
    asked, reply = trail.latest_request, trail.reply
    if asked is None or reply is None or "?" not in asked[1] or asked == trail.first_request:
        return None
    return f"{REPLY_LABEL} (#{asked[0]}), at #{reply[0]}: {reply[1]}"


def _is_request_line(text: str) -> bool:
    return _label(text).startswith(("primary request", "latest request"))


def _shown_path(trail: Trail) -> Callable[[str], str]:
    tracker = trail.tracker

    def shown(path: str) -> str:
        key = tracker.key(path)
        return tracker.shown(key) if key else path

    return shown


def _symbols(trail: Trail, since: int) -> Callable[[str], str]:
    """The definitions a file's edits touched (the tracker's), for the item in progress."""
    tracker = trail.tracker

    def detail(path: str) -> str:
        key = tracker.key(path)
        rec = tracker.records.get(key) if key else None
        if rec is None or rec.last < since:
            return ""
        return ", ".join(code_span(s) for s in rec.symbols[-SYMBOLS:])

    return detail


def _made(trail: Trail) -> Callable[[str, int], bool]:
    """Whether the run created a file (the tracker's ``created``) at or after a seq."""
    tracker = trail.tracker

    def made(path: str, since: int) -> bool:
        key = tracker.key(path)
        rec = tracker.records.get(key) if key else None
        return rec is not None and bool(rec.actions.get("created")) and rec.first >= since

    return made


def progress_lines(
    trail: Trail, evidence: Trail | None = None, *, budget: int = ACCOUNT_WORDS
) -> list[str]:
    """Current State's account of the work (``progress.py``): each finished stretch of work
    in order, then the one in progress where the covered range ends, with the error still
    open on it verbatim and what the run says remains."""
    shown = _shown_path(trail)
    later = (evidence or trail).progress
    made = _made(trail)
    lines, active = account(trail.progress, trail.through, shown, budget=budget, made=made)
    if active is not None:
        ended = bool(active.key) and any(
            s.key == active.key and s.closed is not None
            for s in later.segments
            if s.start >= active.start
        )
        line = current_line(
            active,
            trail.through,
            shown,
            continued=ended,
            detail=_symbols(trail, active.start),
            made=made,
        )
        lines.append(line)
        for check in unresolved(active, later)[:2]:
            lines.append(f"Unresolved error (latest run failed, none passed since): {check.said()}")
    return lines


def open_request(trail: Trail) -> Segment | None:
    """The person's request Current State calls in progress at the cut (``progress_lines``),
    unless the agent handed the turn back after its last step (it answered): open work.
    A tracker's item in progress is the ledger's to list."""
    seg = in_progress(trail.progress, trail.through)
    if seg is None or seg.key or trail.turn_end >= seg.last:
        return None
    return seg


def request_line(trail: Trail, evidence: Trail) -> str | None:
    """Pending's line for the request still in progress at the cut (``open_request``)."""
    seg = open_request(trail)
    if seg is None:
        return None
    if evidence.turn_end > trail.through:  # it ended in the kept messages: open only here
        return (
            f"Request #{seg.start}: in progress at #{trail.through}, where this summary ends; "
            "the agent handed the turn back in the messages kept below"
        )  # Current State quotes it
    asked = clip_words(seg.asks or seg.title, REQUEST_WORDS)
    later = next((s for s in evidence.progress.segments if s.start == seg.start), seg)
    tail = "; the kept messages go on with it" if later.last > seg.last else ""
    return f"Finish request #{seg.start}: {asked} (in progress at #{trail.through}{tail})"


REQUEST_WORDS = 12
"""Current State's in-progress line says more of the request: Pending names it."""


def _tasks(
    trail: Trail,
    evidence: Trail,
    old: Sequence[Bullet],
    snapshot: Snapshot,
    done: Sequence[str],
    *,
    previous_text: str,
    previous_seq: int | None,
    earlier: Sequence[str] = (),
) -> None:
    listed: list[str] = []
    asked = evidence.unanswered()
    if asked is not None and asked != evidence.first_request:  # the first is the whole task
        text = f"Answer the latest request (user, #{asked[0]}): {clip_words(asked[1], 30)}"
        snapshot.add("pending_tasks", text, REQUEST_SCORE)
    for rank, line in enumerate(failing_lines(trail, evidence)):
        snapshot.add("pending_tasks", line, FAILING_SCORE - rank * 0.05)
    if (working := request_line(trail, evidence)) is not None:
        snapshot.add("pending_tasks", working, LEDGER_SCORE)
        listed.append(_norm(working))
    at_end = open_items(trail, evidence)
    for rank, item in enumerate(at_end):
        line = clip_words(item.line(), 40)
        later = evidence.ledger.items.get(item.key)
        if item.status != ACTIVE and later is not None and later.status == ACTIVE:
            line += f": {TAIL_ACTIVE.format(seq=trail.through)}"
        snapshot.add("pending_tasks", line, LEDGER_SCORE - rank * 0.05)
        listed.append(_norm(item.title or item.key))
    known = {i.key for i in at_end}
    for rank, item in enumerate(i for i in evidence.ledger.open_items() if i.key not in known):
        line = f"{clip_words(item.line(), 36)}: {TAIL_NOTE.format(seq=trail.through)}"
        snapshot.add("pending_tasks", line, LEDGER_SCORE - 0.5 - rank * 0.05)
        listed.append(_norm(item.title or item.key))
    for rank, (text, status) in enumerate(_open_todos(evidence, done)):
        mark = "" if status == "pending" else f"[{status.replace('_', ' ')}] "
        snapshot.add("pending_tasks", clip_words(mark + text, 40), TODO_SCORE - rank * 0.05)
        listed.append(_norm(text))
    before = _norm(previous_text)
    for rank, b in enumerate(old):
        flat = bare(b.text)
        if _WRAPPER.match(b.text) or _DONE_WORK.match(b.text):
            continue  # an instruction to the model, or work already done
        if _names_done(b.text, evidence, done):
            continue  # an item closed since
        if carried(flat, earlier) and superseded_step(b.text, evidence, previous_seq):
            continue  # the earlier summary's step: the todo list written since is the plan now
        if any(flat and (flat in t or t in flat) for t in listed):
            continue
        text = _carried(b.text, before, previous_seq)
        snapshot.add("pending_tasks", text, TASK_SCORE * b.score - rank * 0.001)


FIX_LINES = 3
"""Fixes (``fixes.py``) stated among the decisions, newest first."""


def _choices(trail: Trail, snapshot: Snapshot) -> None:
    """The options the person picked over the whole range (``options.py``), each in the
    option's words: a summary of the span that says only "option 1" (or nothing) gains it."""
    have = {_norm(b.text) for b in snapshot.key_decisions}
    for _seq, line in reversed(trail.choices):
        if _norm(line) not in have:
            snapshot.add("key_decisions", line, CHOICE_SCORE)


BUILT_STEP = 0.001


def _built_room(
    snapshot: Snapshot, room: Sequence[str], max_words: int, shares: Mapping[SectionName, float]
) -> Mapping[SectionName, float]:
    """The Built lines given ``room`` (``reports.reserved``) added to Key Decisions just
    below the lines its share shows (those it leaves out moved below them), and that share
    grown by their words (of the room Files Modified leaves): the person's lines keep what
    they had, the design as built follows them."""
    if not room:
        return shares
    shown = set(shown_by_share(snapshot, "key_decisions", max_words, shares))
    floor = min((b.score for b in snapshot.key_decisions if b.text in shown), default=0.0)
    ceiling = max((b.score for b in snapshot.key_decisions if b.text not in shown), default=0.0)
    below = max(0.0, ceiling - floor) + BUILT_STEP * (len(room) + 1)
    section = snapshot.key_decisions  # what the share left out stays out: the room is theirs
    section[:] = [
        b if b.text in shown else Bullet(text=b.text, score=b.score - below) for b in section
    ]
    for rank, text in enumerate(room):
        snapshot.add("key_decisions", text, floor - BUILT_STEP * (rank + 1))
    used = sum(words(f"- {t}") for t in room)
    left = (max_words - SKELETON_WORDS) * (1.0 - shares.get("files_modified", 0.0))
    extra = used / left if left > 0 else 0.0
    return {**shares, "key_decisions": shares.get("key_decisions", 0.0) + extra}


def _fixes(trail: Trail, snapshot: Snapshot) -> None:
    """What the covered range changed to make a failing check pass, after the decisions the
    person and the agent stated (a fix a stated decision already names is not repeated)."""
    said = " ".join(b.text for b in snapshot.key_decisions)
    shown = [f for f in reversed(trail.fixes.fixes) if f.error not in said][:FIX_LINES]
    for rank, fix in enumerate(shown):
        snapshot.add("key_decisions", fix.line(trail.tracker.shown), -0.01 * (rank + 1))


def failing_lines(trail: Trail, evidence: Trail) -> list[str]:
    """Pending lines for the checks (tests, linters, builds) whose latest run failed with no
    passing run since, over the covered range and the messages kept after it: an unresolved
    failure is open work, whatever the todo list says."""
    lines = []
    root = (trail.tracker.root or "").rstrip("/")
    for check in failing_checks(evidence.progress)[:FAILING_TASKS]:
        where = "; in the messages kept below" if check.seq > trail.through else ""
        said = check.line.replace(root + "/", "") if root else check.line
        lines.append(
            f"Make {code_span(check.command)} pass (failed at #{check.seq}, none passed since"
            f"{where}): {code_span(clip_words(said, FAILING_WORDS))}"
        )
    return lines


# -- the whole -----------------------------------------------------------------------------


def reconcile(
    summary: SummaryResult,
    trail: Trail,
    *,
    later: Trail | None = None,
    max_words: int,
    max_values: int = DEFAULT_MAX_VALUES,
    previous_text: str | None = None,
    previous_seq: int | None = None,
    shares: Mapping[SectionName, float] | None = None,
) -> SummaryResult:
    """``summary`` rebuilt against ``trail`` (see the module docstring), under ``max_words``.

    ``later`` is the trail extended by the messages after the cut (kept verbatim): what
    they close or complete is not listed as still to do. ``previous_text`` /
    ``previous_seq`` are the previous checkpoint's summary and the last seq it covers:
    tasks carried from it are marked with that point.
    """
    evidence = later or trail
    old = parse(summary.text)
    snapshot = Snapshot()
    named = _files(trail, old.files_modified, snapshot)
    seen = trail.tracker.known()
    named += _earlier_files(previous_text or "", previous_seq, named, snapshot, seen)
    earlier = parse(previous_text) if previous_text else None
    reported = [bare(b.text) for b in earlier.key_decisions] if earlier else []
    scores = sorted((b.score for b in old.key_decisions), reverse=True)
    asked = [(g.start, g.title) for g in evidence.progress.segments if not g.key]
    room, stale = reserved([b.text for b in old.key_decisions], asked)
    ranked = standing_first([b for b in old.key_decisions if b.text not in room])
    for b, score in zip(ranked, scores, strict=False):
        if b.text in stale:
            continue  # a later request changed what it says was built (``reports.stale``)
        if carried(bare(b.text), reported) and settled_failure(
            b.text, evidence, previous_seq, present=True
        ):
            continue  # the earlier summary's failure, with a clean run since (``history``)
        if b.text.startswith("User:") or not is_narration(b.text):
            snapshot.add("key_decisions", b.text, DECISION_SCORE * score)
    if summary.summarizer not in MODEL_SUMMARIZERS:  # a model states the picks in its prose
        _choices(trail, snapshot)
    _fixes(trail, snapshot)
    shares = _built_room(snapshot, room, max_words, shares or SHARES)
    shown = _values(
        trail,
        old.important_values,
        snapshot,
        named=named,
        previous_text=previous_text or "",
        max_values=max_values,
        evidence=evidence,
    )
    done = _todo_done(evidence)
    before = _norm(previous_text or "")
    _state(
        trail,
        evidence,
        old.current_state,
        snapshot,
        done,
        before=before,
        previous_seq=previous_seq,
        earlier=[bare(b.text) for b in earlier.current_state] if earlier else (),
        intent=earlier_intent(previous_text or ""),
        room=max_words,
        shares=shares,
    )
    _tasks(
        trail,
        evidence,
        old.pending_tasks,
        snapshot,
        done,
        previous_text=previous_text or "",
        previous_seq=previous_seq,
        earlier=[bare(b.text) for b in earlier.pending_tasks] if earlier else (),
    )
    values = unique_values([*summary.values, *shown, *(Value("path", p) for p in named)])
    return summary.rewritten(snapshot.render(max_words, shares=shares), values)


__all__ = ["DEFAULT_MAX_VALUES", "SHARES", "bare", "paths_of", "reconcile", "same_file"]
