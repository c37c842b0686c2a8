"""The offline summarizer: a structured snapshot without a model, exact values kept verbatim.

``ExtractiveSummarizer`` reads the messages once, front to back, and collects
candidates for each section of the snapshot:

* **Files Modified** from tool calls: write / edit / create / delete / move
  tools (by name, or by an editor's ``command`` argument such as
  ``str_replace``) and their path arguments, shell commands that change files
  (``rm``, ``mv``, ``cp``, ``touch``, ``sed -i``, redirections) and patch text
  (``*** Update File:``, ``+++ b/...``); plus paths the assistant says it
  changed. Each file gets what happened to it, how often, and why (the
  assistant's own words for the turn, else the user's request).
* **Key Decisions** from sentences that decide, choose, agree, prefer, or say
  "let's", "going with", "instead of"; and the user's constraints ("must
  not", "don't", "always").
* **Important Values** from ``values.extract_values`` over user and
  assistant text, tool arguments and short tool results, and error lines from
  any tool result. File dumps and long logs give only their error lines, so
  the values the participants actually handle win the space.
* **Current State**: the last request, the last action, the last tool result
  in brief (``run_tests -> 1 failed, 4 passed; FAILED ...``; a bare "ok"
  confirmation is data only as the very last result), earlier results that
  carried data, and the expected next step.
* **Pending Tasks** from TODO / FIXME, unchecked ``- [ ]`` boxes, lists
  under "Remaining:" / "Next steps:", todo-list tools (``TodoWrite``,
  ``update_plan``), and stated next steps ("next, I'll", "still need to");
  checked boxes and completed todo items cancel them.

Every candidate is scored by kind, by who said it, by recency (its message's
position in the window) and by how often it recurs. ``Snapshot.render`` keeps
the best within the word limit after giving each section a guaranteed share;
within a section each further bullet competes at a slowly falling discount, so
one long list cannot crowd the others out. Values are copied, never
rewritten, so what the snapshot keeps it keeps verbatim.

Incremental: ``previous`` (the last checkpoint's snapshot) is parsed back and
its bullets compete with the new ones at a discount that grows with their
position; the current state is superseded by newer state. The old messages
are never needed again. Deterministic: no clocks, no randomness, ties broken
by position.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline.compaction.snapshot import (
    DEFAULT_MAX_WORDS,
    SECTION_NAMES,
    SectionName,
    Snapshot,
    SummaryResult,
    clip_words,
    code_span,
    parse,
    words,
)
from threadline.compaction.toolcalls import (
    BRIEF_MAX_WORDS,
    CODE_ARG_KEYS,
    DEST_ARG_KEYS,
    DONE_STATUSES,
    PATH_ARG_KEYS,
    SHELL_ARG_KEYS,
    SOURCE_ARG_KEYS,
    brief_result,
    call_action,
    describe_call,
    is_patch,
    patch_ops,
    path_args,
    plausible_path,
    shell_file_ops,
    shell_text,
    split_heredocs,
    strings,
    todo_items,
)
from threadline.compaction.values import (
    Value,
    ValueKind,
    extract_error_lines,
    extract_values,
    retention,
    unique_values,
)
from threadline.messages import FilePart, ImagePart, Message, ToolCall


def _split(text: str) -> tuple[str, ...]:
    """The words of ``text``: long word lists stay readable as one string."""
    return tuple(text.split())


SUMMARIZER_NAME = "extractive"

DEFAULT_SHARES: dict[SectionName, float] = {
    "files_modified": 0.18,
    "key_decisions": 0.12,
    "important_values": 0.34,
    "current_state": 0.18,
    "pending_tasks": 0.10,
}
"""Guaranteed share of the words for each section; the rest goes to the best bullets overall."""

RECENCY_FLOOR = 0.4
"""Weight of the oldest message in the window; the newest weighs 1."""
FREQUENCY_WEIGHT = 0.35
"""Something seen n times scores ``1 + FREQUENCY_WEIGHT * ln(n)`` times its best sighting."""
SECTION_DECAY = 0.012
"""A bullet competes at ``1 / (1 + SECTION_DECAY * w)`` of its score, ``w`` being the words its
section spends on better bullets: after 80 words a section's next bullet counts about half."""
PREVIOUS_FACTOR = 0.5
"""A bullet carried over from the previous snapshot scores this fraction of a fresh one..."""
PREVIOUS_POSITION_DECAY = 0.3
"""...less up to this much more for the last bullet of its section."""

KIND_WEIGHTS: dict[ValueKind, float] = {
    "error": 3.0,
    "url": 2.6,
    "uuid": 2.6,
    "email": 2.3,
    "setting": 2.3,
    "port": 2.3,
    "path": 2.0,
    "hex": 2.0,
    "id": 2.0,
    "version": 2.0,
    "address": 1.8,
    "exception": 1.4,
    "identifier": 1.0,
}
SOURCE_WEIGHTS: dict[str, float] = {
    "user": 1.5,
    "argument": 1.3,
    "assistant": 1.2,
    "tool_error": 1.1,
    "tool_short": 0.8,
    "bulk": 0.4,
}
"""Who said it. ``bulk`` is a long tool output (logs): its error lines only. Code (a file read,
a file being written, a patch, a heredoc) gives nothing: its "raise ValueError" is no event."""
IMPORTANT_SOURCE_WEIGHT = 0.8
"""A value seen only in sources weighing less than this is not an important value."""
SHORT_RESULT_CHARS = 1_500
"""A tool result up to this long is data worth mining in full (the ids, URLs it returned)."""
MAX_VALUES_PER_RESULT = 5
"""A short result listing many ids (``docker ps``) contributes its best few, not all."""
SCAN_HEAD_CHARS = 12_000
"""Text longer than head + tail is mined for token values at its ends only..."""
SCAN_TAIL_CHARS = 6_000
"""...while error lines are found anywhere in it."""

FILE_SCORE = 3.0
DECISION_SCORE = 2.0
TASK_SCORE = 2.0
STATE_SCORE = 10.0
"""Current-state bullets outrank everything: an agent cannot resume without them."""
EARLIER_RESULT_SCORE = 1.6
PREVIOUS_VALUE_SCORE = KIND_WEIGHTS["path"] * SOURCE_WEIGHTS["assistant"]
"""What a value carried over from the previous snapshot scores before its discount."""
NOTED_FILES = 6
"""Only the most recent files carry the why; older ones just say what happened to them."""
MENTIONED_FILE_FACTOR = 0.6
"""A file the assistant says it changed, with no tool call to show it."""
USER_DECISION_FACTOR = 1.3
MAX_DECISIONS_PER_MESSAGE = 5
"""A prompt template's ten "always ..." rules must not crowd out the session's decisions."""

FOCUS_BOOST = 2.5
"""A bullet that names a word of the user's focus text scores this many times more."""
_FOCUS_STOPWORDS = frozenset(
    _split("the and for with from that this into about focus focusing keep on of to in a an")
)
MAX_BULLET_WORDS = 40
REQUEST_MAX_WORDS = 60
NOTE_MAX_WORDS = 14
ACCOUNT_MIN_WORDS = 4
""""Perfect!" is no account of a reply; the first sentence at least this long is."""
RECENT_RESULTS = 4
"""Data-carrying tool results kept in brief besides the last one."""
MAX_CALLS_IN_ACTION = 3
CONTAINMENT_WINDOW = 300
"""A value inside one of the best this-many others (a name inside its error line) is skipped..."""
CONTAINER_MIN_SHARE = 0.5
"""...when that other value scores at least this share of its own, so it is likely shown."""

_FENCED = re.compile(r"```.*?(?:```|\Z)", re.S)
_TAGGED = re.compile(r"<([a-z]\w*-[\w-]+)>.*?</\1>", re.S)
_LINE_MARKER = re.compile(r"^\s*(?:#{1,6}\s+|[-*+\u2022]\s+|\d+[.)]\s+|>\s*)")
_CHECKBOX_LINE = re.compile(r"^\s*[-*+]\s*\[[ xX]\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[*])")
_EMPHASIS = re.compile(r"\*\*|__")
_DECISION = re.compile(
    r"\b(?:(?<!before\s)(?<!whether\s)decid(?:e|ed|es)|chose|choose|chosen|"
    r"opt(?:ed|ing)?\s+(?:for|to)|agree(?:d|s)?|settled\s+on|going\s+with|go\s+with|"
    r"stick(?:ing)?\s+with|instead\s+of|rather\s+than|prefer(?:red|s)?|"
    r"switch(?:ed|ing)?\s+(?:to|from)|"
    r"we(?:'ll|\s+will|\s+should|\s+are\s+going\s+to)\s+(?:use|keep|go|switch|stick|adopt)|"
    r"(?:I|we)(?:'ll|\s+will)\s+use)\b",
    re.I,
)
_LETS = re.compile(
    r"\blet(?:['\u2019]?s|\s+us)\s+(?!(?:see|look|check|start|first|examine|read|view|verify|"
    r"explore|find|search|open|run|take|begin|dig|review|investigate|understand|inspect|figure|"
    r"debug|test|try|get|analyze|analyse|trace|confirm|also|now|paste|list|create|scroll|go\s+"
    r"ahead|proceed|continue)\b)",
    re.I,
)
"""A "let's" that is not just the next step ("let's check"): a weaker sign of a decision."""
LETS_FACTOR = 0.6
"""An assistant's "let's" is often a plan for the next minute, not a decision; a user's is."""
_DIRECTIVE = re.compile(
    r"\b(?:must(?:n't|\s+not)?|should(?:n't|\s+not)?|don't|do\s+not|never|always|make\s+sure|"
    r"important|avoid|no\s+need\s+to|not\s+(?:acceptable|accepable|valid|allowed|needed))\b",
    re.I,
)
"""A user's constraint ("don't commit until the end") is a decision the agent must keep."""
_TASK = re.compile(
    r"\b(?:TODO|FIXME)\b|\b(?:next,?\s+(?:I|we)(?:'ll|\s+will|\s+need\s+to|\s+should|\s+must)|"
    r"(?:I|we)(?:'ll|\s+will)\s+(?:next|then|also\s+need\s+to)|"
    r"still\s+(?:need|needs|have|has)\s+to|remaining:|left\s+to\s+do|yet\s+to\s+be|"
    r"not\s+yet\s+(?:done|implemented|fixed|tested)|pending:|to\s+do:|follow[- ]up:)",
    re.I,
)
_TASK_HEADER = re.compile(
    r"^\s*(?:#{1,6}\s*)?(?:\*\*)?(?:remaining|todo|to\s+do|next\s+steps?|pending|still\s+to\s+do|"
    r"open\s+items|follow[- ]ups?)(?:\s+(?:tasks?|items?|work))?(?:\*\*)?\s*:?\s*(?:\*\*)?\s*$",
    re.I,
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+\u2022]|\d+[.)])\s+(?!\[[xX]\])(?:\[ \]\s+)?(?P<text>\S.*)$")
_UNCHECKED = re.compile(r"(?m)^\s*[-*+]\s*\[ \]\s+(?P<text>\S.*)$")
_CHECKED = re.compile(r"(?m)^\s*[-*+]\s*\[[xX]\]\s+(?P<text>\S.*)$")
_NEXT_STEP = re.compile(
    r"\b(?:next|now\s+I(?:'ll|\s+will)|I(?:'ll|\s+will)|let\s+me|then\s+I|going\s+to|"
    r"the\s+next\s+step)\b",
    re.I,
)
_SKIP_REQUEST = re.compile(r"^\s*(?:\[Request interrupted|Caveat:|<[\w-]+>)", re.I)
_CHANGE_VERBS = (
    r"(?:updated|modified|changed|edited|created|added|wrote|fixed|removed|deleted|renamed|"
    r"refactored|patched|rewrote)"
)
_CHANGE_CLAIM = re.compile(
    r"\b(?:I|[Ww]e)(?:'ve|\s+have)?\s+(?:just\s+|now\s+|also\s+)?" + _CHANGE_VERBS + r"\b|"
    r"^(?i:" + _CHANGE_VERBS + r")\b|\b[Aa]pplied\s+edit\s+to\b"
)
"""The assistant saying it changed a file (not planning to): "I've updated `x.py`"."""
# -- text ----------------------------------------------------------------------------


def _norm(text: str) -> str:
    return re.sub(r"[^\w/.:-]+", " ", text.lower()).strip()


def _window(text: str) -> str:
    if len(text) <= SCAN_HEAD_CHARS + SCAN_TAIL_CHARS:
        return text
    return text[:SCAN_HEAD_CHARS] + "\n" + text[-SCAN_TAIL_CHARS:]


def _message_text(m: Message) -> str:
    """Text plus file and image references (their names are values too)."""
    if isinstance(m.content, str):
        return m.content
    refs = [p.uri for p in m.content if isinstance(p, FilePart)]
    refs += [p.url for p in m.content if isinstance(p, ImagePart) and p.url]
    return "\n".join([m.text, *(r for r in refs if r and not r.startswith("data:"))]).strip()


def _prose(text: str) -> str:
    return _TAGGED.sub(" ", _FENCED.sub("\n", text))


def _sentences(text: str) -> Iterator[str]:
    """Sentences of the prose in ``text``: code, tables, checkboxes and list markers removed."""
    for line in _prose(text).splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("|") or _CHECKBOX_LINE.match(stripped):
            continue
        stripped = _EMPHASIS.sub("", _LINE_MARKER.sub("", stripped))
        for sentence in _SENTENCE_END.split(stripped):
            if sentence.strip():
                yield sentence.strip()


def _decision_strength(sentence: str, user: bool) -> float:
    """How surely a sentence records a decision (0: it does not)."""
    factor = USER_DECISION_FACTOR if user else 1.0
    if _DECISION.search(sentence) or (user and _DIRECTIVE.search(sentence)):
        return factor
    if _LETS.search(sentence):
        return factor if user else LETS_FACTOR
    return 0.0


def _account(text: str) -> str:
    """The first sentence of a reply that says something; a trailing colon takes the next."""
    sentences = list(_sentences(text))
    for i, sentence in enumerate(sentences):
        if words(sentence) >= ACCOUNT_MIN_WORDS:
            if sentence.endswith(":") and i + 1 < len(sentences):
                sentence = f"{sentence} {sentences[i + 1]}"
            return clip_words(sentence, BRIEF_MAX_WORDS)
    return clip_words(sentences[0], BRIEF_MAX_WORDS) if sentences else ""


# -- one pass over the messages ------------------------------------------------------


@dataclass(slots=True)
class _ValueStat:
    value: Value
    score: float
    source: float
    first: int
    count: int = 1

    @property
    def ranked(self) -> float:
        return self.score * (1.0 + FREQUENCY_WEIGHT * math.log(self.count))


@dataclass(slots=True)
class _FileRecord:
    path: str
    actions: dict[str, int] = field(default_factory=dict)
    last: float = 0.0
    count: int = 0
    note: str | None = None
    failed: str | None = None
    moved_to: str | None = None
    mentioned_only: bool = True
    earlier: bool = False

    @property
    def score(self) -> float:
        factor = MENTIONED_FILE_FACTOR if self.mentioned_only else 1.0
        return FILE_SCORE * self.last * (1.0 + FREQUENCY_WEIGHT * math.log(self.count)) * factor

    def bullet(self, *, noted: bool = True) -> str:
        acts = ", ".join(f"{a} \u00d7{n}" if n > 1 else a for a, n in self.actions.items())
        text = f"{code_span(self.path)}: {acts}"
        if self.moved_to:
            text += f" to {code_span(self.moved_to)}"
        if self.note and noted:
            text += f" \u2014 {self.note}"
        if self.failed:
            text += f"; last attempt failed: {self.failed}"
        if self.earlier:
            text += " (also changed earlier)"
        return clip_words(text, MAX_BULLET_WORDS)


@dataclass(slots=True)
class _Result:
    call: ToolCall | None
    name: str
    text: str
    error: bool
    read: bool


Ranked = dict[str, tuple[str, float]]
"""Normalised text -> (bullet text, score)."""


@dataclass(slots=True)
class _Pass:
    """Everything one front-to-back reading of the window finds, before ranking."""

    total: int
    values: dict[str, _ValueStat] = field(default_factory=dict)
    files: dict[str, _FileRecord] = field(default_factory=dict)
    decisions: Ranked = field(default_factory=dict)
    tasks: Ranked = field(default_factory=dict)
    done: set[str] = field(default_factory=set)
    todo_list: list[tuple[str, str]] | None = None
    results: list[_Result] = field(default_factory=list)
    open_calls: list[ToolCall] = field(default_factory=list)
    last: Message | None = None
    last_request: str | None = None
    last_text: str | None = None
    last_calls: list[ToolCall] = field(default_factory=list)
    calls_after_text: bool = False
    turn_note: str | None = None
    """Why files change in this turn: the assistant's first sentence, else the request."""

    def read(self, messages: Sequence[Message]) -> _Pass:
        for index, m in enumerate(messages):
            if m.role == "system":
                continue
            recency = RECENCY_FLOOR + (1.0 - RECENCY_FLOOR) * (index + 1) / max(1, self.total)
            if m.role == "tool":
                self.result(m, recency, index)
            else:
                self.said(m, recency, index)
                if m.tool_calls:
                    self.calls(m.tool_calls, recency, index)
            self.last = m
        return self

    # -- values

    def add_values(self, text: str, source: str, recency: float, index: int) -> None:
        if not text or source == "code":
            return
        weight = SOURCE_WEIGHTS[source]
        if source == "bulk":
            found = extract_error_lines(text)
        else:
            found = extract_values(_window(text))
            if len(text) > SCAN_HEAD_CHARS + SCAN_TAIL_CHARS:
                found = unique_values([*found, *extract_error_lines(text)])
            if source == "tool_short" and len(found) > MAX_VALUES_PER_RESULT:
                found = sorted(found, key=lambda v: -KIND_WEIGHTS[v.kind])[:MAX_VALUES_PER_RESULT]
        for v in found:
            w = max(weight, SOURCE_WEIGHTS["tool_error"]) if v.kind == "error" else weight
            self.add_value(v, KIND_WEIGHTS[v.kind] * w * recency, w, index)

    def add_value(self, v: Value, score: float, source: float, index: int) -> None:
        stat = self.values.get(v.text)
        if stat is None:
            self.values[v.text] = _ValueStat(v, score, source, index)
        else:
            stat.count += 1
            stat.score = max(stat.score, score)
            stat.source = max(stat.source, source)

    @staticmethod
    def add_ranked(bucket: Ranked, text: str, score: float) -> None:
        key = _norm(text)
        if key and (key not in bucket or bucket[key][1] < score):
            bucket[key] = (text, score)

    # -- user and assistant text

    def said(self, m: Message, recency: float, index: int) -> None:
        text = _message_text(m)
        if m.role == "user":
            self.turn_note = None
        if not text.strip():
            return
        self.add_values(text, "user" if m.role == "user" else "assistant", recency, index)
        if m.role == "user":
            cleaned = _prose(text).strip()
            injected = m.summary or m.synthetic or m.metadata.get("is_meta")
            injected = injected or m.metadata.get("compact_summary")
            if cleaned and not injected and not _SKIP_REQUEST.match(cleaned):
                self.last_request = clip_words(cleaned, REQUEST_MAX_WORDS)
                self.turn_note = f"asked: {clip_words(cleaned, NOTE_MAX_WORDS)}"
        else:
            self.last_text, self.calls_after_text = text, False
            first = next(_sentences(text), None)
            if first:
                self.turn_note = clip_words(first, NOTE_MAX_WORDS)
        self.sentences(text, m.role, recency)
        self.lists(text, recency)

    def sentences(self, text: str, role: str, recency: float) -> None:
        user = role == "user"
        decisions = 0
        for sentence in _sentences(text):
            if words(sentence) < 3:
                continue
            statement = not sentence.endswith("?")
            if statement and _TASK.search(sentence):
                clipped = clip_words(sentence, MAX_BULLET_WORDS)
                self.add_ranked(self.tasks, clipped, TASK_SCORE * recency)
            elif statement and (strength := _decision_strength(sentence, user)):
                decisions += 1
                if decisions <= MAX_DECISIONS_PER_MESSAGE:
                    clipped = ("User: " if user else "") + clip_words(sentence, MAX_BULLET_WORDS)
                    self.add_ranked(self.decisions, clipped, DECISION_SCORE * strength * recency)
            if not user and _CHANGE_CLAIM.search(sentence):
                for v in extract_values(sentence):
                    if v.kind == "path" and v.text not in self.files:
                        rec = self.touch(v.text, "changed", recency, mentioned=True)
                        if rec is not None:
                            rec.note = clip_words(sentence, NOTE_MAX_WORDS)

    def lists(self, text: str, recency: float) -> None:
        """Checkboxes, and list items under a "Remaining:" / "Next steps:" heading."""
        prose = _FENCED.sub("\n", text)
        self.done.update(_norm(m.group("text")) for m in _CHECKED.finditer(prose))
        for m in _UNCHECKED.finditer(prose):
            self.add_ranked(
                self.tasks, clip_words(m.group("text"), MAX_BULLET_WORDS), TASK_SCORE * recency
            )
        in_list = False
        for line in prose.splitlines():
            if _TASK_HEADER.match(line):
                in_list = True
            elif in_list and (item := _LIST_ITEM.match(line)):
                task = clip_words(_EMPHASIS.sub("", item.group("text")), MAX_BULLET_WORDS)
                self.add_ranked(self.tasks, task, TASK_SCORE * recency)
            elif line.strip():
                in_list = False

    # -- tool calls and results

    def calls(self, calls: Sequence[ToolCall], recency: float, index: int) -> None:
        self.last_calls, self.calls_after_text = list(calls), True
        self.open_calls.extend(calls)
        for call in calls:
            for key, value in call.arguments.items():
                for s in strings(value):
                    self.argument_values(s, key, recency, index)
            if call.raw_arguments:
                self.argument_values(call.raw_arguments, "", recency, index)
            todos = todo_items(call)
            if todos is not None:
                self.todo_list = todos
                self.done.update(_norm(t) for t, status in todos if status in DONE_STATUSES)
            self.file_ops(call, recency, index)

    def argument_values(self, text: str, key: str, recency: float, index: int) -> None:
        """Values of an argument; code in it (file content, patches, heredoc bodies) gives none."""
        if key in CODE_ARG_KEYS or is_patch(text):
            self.add_values(text, "code", recency, index)
        elif key in SHELL_ARG_KEYS and "<<" in text:
            commands, bodies = split_heredocs(text)
            self.add_values(commands, "argument", recency, index)
            self.add_values(bodies, "code", recency, index)
        else:
            self.add_values(text, "argument", recency, index)

    def file_ops(self, call: ToolCall, recency: float, index: int) -> None:
        texts = [s for v in call.arguments.values() for s in strings(v)]
        for text in [*texts, call.raw_arguments or ""]:
            if "*** " in text or "+++ " in text:
                for op, path in patch_ops(text):
                    self.touch(path, op, recency, index=index)
        action = call_action(call)
        if action == "shell":
            for op, target in shell_file_ops(shell_text(call) or ""):
                src, _, dest = target.partition(" -> ")
                rec = self.touch(src, op, recency, index=index)
                if rec is not None and dest:
                    rec.moved_to = dest
            return
        if action in (None, "read", "search"):
            return
        sources, dests = path_args(call, SOURCE_ARG_KEYS), path_args(call, DEST_ARG_KEYS)
        paths = path_args(call, PATH_ARG_KEYS)
        if action in ("moved", "copied") and (sources or paths) and dests:
            for src in sources or paths:
                rec = self.touch(src, action, recency, index=index)
                if rec is not None:
                    rec.moved_to = dests[0]
            return
        for path in paths:
            self.touch(path, action, recency, index=index)

    def touch(
        self, path: str, action: str, recency: float, *, mentioned: bool = False, index: int = 0
    ) -> _FileRecord | None:
        path = path.strip().strip("'\"`")
        if not plausible_path(path):
            return None
        rec = self.files.setdefault(path, _FileRecord(path))
        rec.actions[action] = rec.actions.get(action, 0) + 1
        rec.count += 1
        rec.last = max(rec.last, recency)
        if not mentioned:
            rec.mentioned_only = False
            rec.note = self.turn_note or rec.note
        weight = SOURCE_WEIGHTS["argument"]
        self.add_value(Value("path", path), KIND_WEIGHTS["path"] * weight * recency, weight, index)
        return rec

    def result(self, m: Message, recency: float, index: int) -> None:
        call = self.pair(m)
        text = _message_text(m)
        action = call_action(call) if call is not None else None
        source = "tool_short" if len(text) <= SHORT_RESULT_CHARS else "bulk"
        source = "code" if action == "read" else source
        self.add_values(text, source, recency, index)
        error = bool(m.metadata.get("is_error") or m.metadata.get("error"))
        name = call.name if call is not None else (m.name or "tool")
        self.results.append(_Result(call, name, text, error, action == "read"))
        if call is not None and error and action not in (None, "read", "shell"):
            brief = brief_result(text)
            for path in path_args(call, PATH_ARG_KEYS):
                if path in self.files and brief:
                    self.files[path].failed = brief

    def pair(self, m: Message) -> ToolCall | None:
        """The call a result answers: the first open call with its id, else the oldest open."""
        for i, call in enumerate(self.open_calls):
            if call.id == m.tool_call_id:
                return self.open_calls.pop(i)
        return self.open_calls.pop(0) if self.open_calls else None

    # -- the state at the end of the window

    def next_step(self) -> str | None:
        """What the assistant said it would do next, else what the window's end implies."""
        last = self.last
        if last is None:
            return None
        if last.role == "assistant" and last.tool_calls:
            names = ", ".join(dict.fromkeys(code_span(c.name) for c in last.tool_calls))
            return f"wait for the result of {names}."
        if last.role == "user":
            return "answer the last request."
        if last.role == "tool" and self.results:
            r = self.results[-1]
            verb = "deal with the error from" if r.error else "continue from the result of"
            return f"{verb} {code_span(r.name)}."
        said = [
            s
            for s in _sentences(self.last_text or "")
            if _NEXT_STEP.search(s) and not s.endswith(":")
        ]
        if said:
            return clip_words(said[-1], BRIEF_MAX_WORDS)
        return "work through the pending tasks." if self.tasks else "wait for the next request."


# -- building the snapshot -----------------------------------------------------------


def _previous_weight(position: int, count: int) -> float:
    return PREVIOUS_FACTOR * (1.0 - PREVIOUS_POSITION_DECAY * position / max(1, count))


def _bullet_key(text: str) -> str:
    """What a Files Modified bullet is about: its first path, else its quoted head."""
    for v in extract_values(text):
        if v.kind == "path":
            return v.text
    quoted = re.match(r"\s*`([^`]+)`", text)
    return quoted.group(1) if quoted else _norm(text)


def _state_label(text: str) -> str:
    head, sep, _ = text.partition(":")
    label = head.strip().lower()
    return label.split(" (")[0] if sep and len(head) <= 40 else ""


def _diminish(snapshot: Snapshot) -> None:
    """Discount each bullet by the words its section already spent above it (order kept).

    Sections then interleave in the competition for words, and a section of
    long bullets (files with notes) pays for its length rather than crowding
    out a section of one-word values.
    """
    for name in SECTION_NAMES:
        bullets = snapshot.section(name)
        spent = 0
        out = []
        for b in sorted(bullets, key=lambda b: -b.score):
            out.append(b.model_copy(update={"score": b.score / (1.0 + SECTION_DECAY * spent)}))
            spent += words(b.text)
        bullets[:] = out


def _boost_focus(snapshot: Snapshot, focus: str) -> None:
    terms = {w for w in _norm(focus).split() if len(w) >= 3 and w not in _FOCUS_STOPWORDS}
    if not terms:
        return
    for name in SECTION_NAMES:
        bullets = snapshot.section(name)
        for i, b in enumerate(bullets):
            text = _norm(b.text)
            if any(term in text for term in terms):
                bullets[i] = b.model_copy(update={"score": b.score * FOCUS_BOOST})


class ExtractiveSummarizer:
    """Offline, deterministic snapshots; the default when no model is configured."""

    name = SUMMARIZER_NAME

    def __init__(self, *, shares: Mapping[SectionName, float] | None = None) -> None:
        self.shares: dict[SectionName, float] = dict(DEFAULT_SHARES if shares is None else shares)

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        previous: str | None = None,
        max_words: int = DEFAULT_MAX_WORDS,
        focus: str | None = None,
    ) -> SummaryResult:
        """Summarize ``messages``, folding in the ``previous`` snapshot when given; bullets
        about ``focus`` (the user's ``/compact`` text) get more room."""
        p = _Pass(total=len(messages)).read(messages)
        old = parse(previous) if previous and previous.strip() else Snapshot()
        snapshot = Snapshot()
        self._files(p, old, snapshot)
        self._ranked(p.decisions, old.key_decisions, snapshot, "key_decisions", set())
        self._values(p, old, snapshot, max_words)
        self._state(p, old, snapshot)
        self._tasks(p, old, snapshot)
        if focus:
            _boost_focus(snapshot, focus)
        _diminish(snapshot)
        text = snapshot.render(max_words, shares=self.shares)
        important = [s for s in p.values.values() if s.source >= IMPORTANT_SOURCE_WEIGHT]
        important.sort(key=lambda s: (-s.ranked, s.first))
        carried = [
            v for b in old.important_values + old.files_modified for v in extract_values(b.text)
        ]
        values = unique_values([*(s.value for s in important), *carried])
        return SummaryResult(
            text=text,
            snapshot=snapshot,
            values=values,
            retention=retention(values, text),
            input_tokens=None,
            output_tokens=None,
            summarizer=SUMMARIZER_NAME,
        )

    @staticmethod
    def _files(p: _Pass, old: Snapshot, snapshot: Snapshot) -> None:
        old_keys = {_bullet_key(b.text) for b in old.files_modified}
        for rank, rec in enumerate(sorted(p.files.values(), key=lambda r: -r.score)):
            rec.earlier = rec.path in old_keys
            snapshot.add("files_modified", rec.bullet(noted=rank < NOTED_FILES), rec.score)
        n = len(old.files_modified)
        for i, b in enumerate(old.files_modified):
            if _bullet_key(b.text) not in p.files:
                snapshot.add("files_modified", b.text, FILE_SCORE * _previous_weight(i, n))

    @staticmethod
    def _ranked(
        fresh: Ranked, old: Sequence[Any], snapshot: Snapshot, section: SectionName, done: set[str]
    ) -> None:
        """Fresh sentences by score, then the previous snapshot's not repeated or done."""
        seen = set(done)
        for key, (text, score) in sorted(fresh.items(), key=lambda kv: -kv[1][1]):
            if key not in seen:
                seen.add(key)
                snapshot.add(section, text, score)
        base = DECISION_SCORE if section == "key_decisions" else TASK_SCORE
        for i, b in enumerate(old):
            key = _norm(b.text)
            if key not in seen:
                seen.add(key)
                snapshot.add(section, b.text, base * _previous_weight(i, len(old)))

    @staticmethod
    def _values(p: _Pass, old: Snapshot, snapshot: Snapshot, max_words: int) -> None:
        stats = [
            s
            for s in p.values.values()
            if s.source >= IMPORTANT_SOURCE_WEIGHT and s.value.text not in p.files
        ]
        stats.sort(key=lambda s: (-s.ranked, s.first))
        stats = stats[:max_words]
        top = stats[:CONTAINMENT_WINDOW]
        old_texts = {b.text for b in old.important_values}
        for s in stats:
            text = s.value.text
            if any(
                len(o.value.text) > len(text)
                and o.ranked >= CONTAINER_MIN_SHARE * s.ranked
                and text in o.value.text
                for o in top
            ):
                continue  # inside another value that will show it: a name in its error line
            bullet = code_span(text)
            bonus = 1.0 + FREQUENCY_WEIGHT if bullet in old_texts else 1.0
            snapshot.add("important_values", bullet, s.ranked * bonus)
        present = {b.text for b in snapshot.important_values}
        n = len(old.important_values)
        for i, b in enumerate(old.important_values):  # in their old order: a stable prefix
            if b.text not in present:
                present.add(b.text)
                score = PREVIOUS_VALUE_SCORE * _previous_weight(i, n)
                snapshot.add("important_values", b.text, score)

    @staticmethod
    def _state(p: _Pass, old: Snapshot, snapshot: Snapshot) -> None:
        fresh: list[tuple[str, str]] = []
        if p.last_request:
            fresh.append(("last request", f"Last request (user): {p.last_request}"))
        if p.last_calls and p.calls_after_text:
            shown = [describe_call(c) for c in p.last_calls[:MAX_CALLS_IN_ACTION]]
            more = len(p.last_calls) - MAX_CALLS_IN_ACTION
            action = "; ".join(shown) + (f" (+{more} more)" if more > 0 else "")
            fresh.append(("last action", f"Last action: called {action}"))
        elif p.last_text and (account := _account(p.last_text)):
            fresh.append(("last action", f"Last action: replied: {account}"))
        briefs: list[str] = []
        for r in reversed(p.results):
            brief = brief_result(r.text, read=r.read)
            if brief is None and (briefs or r.error):
                continue  # a bare confirmation says something only as the very last result
            hint = describe_call(r.call) if r.call is not None else code_span(r.name)
            briefs.append(f"{hint} -> {'error: ' if r.error else ''}{brief or 'ok'}")
            if len(briefs) > RECENT_RESULTS:
                break
        if briefs:
            fresh.append(("last result", f"Last result: {briefs[0]}"))
        if step := p.next_step():
            fresh.append(("next step", f"Next step: {step}"))
        for rank, (_, text) in enumerate(fresh):
            snapshot.add("current_state", clip_words(text, REQUEST_MAX_WORDS), STATE_SCORE - rank)
        for rank, brief in enumerate(briefs[1:]):
            score = EARLIER_RESULT_SCORE * (1.0 - rank / (RECENT_RESULTS + 1))
            snapshot.add("current_state", f"Earlier result: {brief}", score)
        labels = {label for label, _ in fresh} | ({"earlier result"} if p.results else set())
        n = len(old.current_state)
        for i, b in enumerate(old.current_state):
            if _state_label(b.text) not in labels:
                score = EARLIER_RESULT_SCORE * _previous_weight(i, n)
                snapshot.add("current_state", b.text, score)

    def _tasks(self, p: _Pass, old: Snapshot, snapshot: Snapshot) -> None:
        fresh = dict(p.tasks)
        todos = p.todo_list or []
        for rank, (text, status) in enumerate(todos):
            if status not in DONE_STATUSES:
                label = "" if status == "pending" else f"[{status.replace('_', ' ')}] "
                score = TASK_SCORE * (1.5 - rank / (2 * len(todos)))
                fresh[_norm(text)] = (clip_words(label + text, MAX_BULLET_WORDS), score)
        self._ranked(fresh, old.pending_tasks, snapshot, "pending_tasks", p.done)


__all__ = [
    "DEFAULT_SHARES",
    "SUMMARIZER_NAME",
    "ExtractiveSummarizer",
    "brief_result",
    "clip_words",
]
