"""The offline summarizer: a structured snapshot without a model, exact values kept verbatim.

``ExtractiveSummarizer`` reads the messages once, front to back, and collects
candidates for each section of the snapshot:

* **Files Modified** from tool calls, through ``toolcalls.FileTracker``: editor
  tools (``Edit``, ``Write``, ``str_replace_editor``, SWE-agent's ``edit``
  on the open file), patches (Codex's ``apply_patch``, also fed through a
  shell heredoc), shell commands that change files (redirections, ``tee``,
  ``sed -i``, ``mv`` / ``cp``, ``rm``), Aider's "Applied edit to"; plus paths
  the assistant says it changed. Each file is listed once, relative to the
  session's working directory (``metadata["cwd"]``, carried from snapshot to
  snapshot as a Current State line), with what happened to it and how often,
  and for the most recent ones what changed: the assistant's own words for the
  edit, else the definitions the edit touched. Files beyond the first few are
  folded into "Also changed:" lines, so a long session still names them all.
* **Key Decisions** from sentences that decide, choose, prefer or contrast
  ("we'll use X because Y", "instead of"), and the user's constraints ("must
  not", "don't", "always"); the assistant narrating its next step ("Let me
  check", "Now let's add") is not a decision, and a long prompt template's
  rules weigh less than a short request's. User-role text the agent was given
  rather than a person typed (``requests.request_text`` says none: meta records,
  skill bodies, reminders, AGENTS.md, command templates) gives nothing at all.
* **Important Values** from ``values.extract_values`` over user and
  assistant text, tool arguments and short tool results, and error lines from
  any tool result. File dumps and long logs give only their error lines, and
  commands that merely read or run a file give its path little weight, so the
  values the participants actually handle win the space. Values are merged
  when they name the same thing (a path absolute and relative, a commit hash
  short and long), dropped when Files Modified already names them, and ranked
  by kind, frequency and recency, each further value of one kind and each
  member of a long machine-made series (``seed: 4821``) counting less.
* **Current State**: the last request, the last action, the last tool result
  in brief (``run_tests -> 1 failed, 4 passed; FAILED ...``; a bare "ok"
  confirmation is data only as the very last result), earlier results that
  carried data, the expected next step and the working directory.
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
position (a file's earlier counts add to its new ones); the current state is
superseded by newer state. The old messages are never needed again.
Deterministic: no clocks, no randomness, ties broken by position.
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline.compaction.decisions import NARRATION as _NARRATION
from threadline.compaction.decisions import NOTE_LEAD as _NOTE_LEAD
from threadline.compaction.decisions import (
    REPLACING_WORDS,
    USER_DECISION_FACTOR,
    DecisionBook,
    agent_strength,
    plan_lines,
    stated_approach,
    states_decision,
    subject_words,
    user_strength,
)
from threadline.compaction.findings import answers, findings, settled
from threadline.compaction.fixes import announced_fix, fix_statement
from threadline.compaction.lookups import only_looks
from threadline.compaction.options import choice_line, offered, picks
from threadline.compaction.prose import EMPHASIS as _EMPHASIS
from threadline.compaction.prose import FENCED_CODE as FENCED_CODE
from threadline.compaction.prose import prose as _prose
from threadline.compaction.prose import sentences as _sentences
from threadline.compaction.reasoning import reasoning_text
from threadline.compaction.reports import Reports, builds
from threadline.compaction.retry import retry_why
from threadline.compaction.signatures import signatures
from threadline.compaction.snapshot import (
    DEFAULT_MAX_WORDS,
    SECTION_NAMES,
    SectionName,
    Snapshot,
    SummaryResult,
    clip_words,
    code_span,
    code_spans,
    parse,
    words,
)
from threadline.compaction.task_why import stated_rules, stated_why, with_why
from threadline.compaction.toolcalls import (
    BRIEF_MAX_WORDS,
    DONE_STATUSES,
    SHELL_ARG_KEYS,
    SUBAGENT_TOOLS,
    FileEdit,
    FileTracker,
    brief_result,
    call_action,
    call_file_ops,
    canonical_key,
    describe_call,
    is_code_key,
    is_patch,
    shell_text,
    split_heredocs,
    strings,
    todo_items,
)
from threadline.compaction.values import (
    Value,
    ValueKind,
    bullet_value,
    extract_error_lines,
    extract_values,
    split_words,
    unique_values,
    value_bullet,
    worth_keeping,
)
from threadline.compaction.verdicts import (
    PLAN_TOOL,
    SHARED_TOPIC,
    answer_decision,
    is_question_tool,
    redirects,
    rejects,
    topic_words,
)
from threadline.messages import FilePart, ImagePart, Message, ToolCall
from threadline.rejections import rejected, rejection_words
from threadline.requests import request_text

SUMMARIZER_NAME = "extractive"

DEFAULT_SHARES: dict[SectionName, float] = {
    "files_modified": 0.18,
    "key_decisions": 0.22,
    "important_values": 0.24,
    "current_state": 0.18,
    "pending_tasks": 0.10,
}
"""Guaranteed share of the words for each section; the rest goes to the best bullets overall."""

DEFAULT_MAX_VALUES = 25
"""Important Values kept (``ContextPolicy.summary_max_values`` is the compactor's setting)."""
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
    "identifier": 0.9,
}
SOURCE_WEIGHTS: dict[str, float] = {
    "user": 1.5,
    "argument": 1.3,
    "assistant": 1.2,
    "tool_error": 1.1,
    "lookup": 1.0,
    "snippet": 0.9,
    "tool_short": 0.8,
    "command": 0.6,
    "bulk": 0.4,
}
"""Who said it. ``bulk`` is a long tool output (logs): its error lines only. Code (a file read,
a file being written, a patch, a heredoc) gives nothing: its "raise ValueError" is no event.
``lookup`` is a path a read or search names, ``command`` a path a shell command reads or runs
(``mix test test/a_test.exs``), ``snippet`` a code block in a message (no bare identifiers)."""
IMPORTANT_SOURCE_WEIGHT = 0.8
"""A value seen only in sources weighing less than this is not an important value..."""
IMPORTANT_MIN_COUNT = 3
"""...unless it recurs this often (the test file run again and again)."""
KIND_DECAY = 0.06
"""The n-th value of one kind competes at ``1 / (1 + KIND_DECAY * n)``: no kind floods."""
SERIES_MIN = 5
"""This many values of one shape (digits aside) from tool output or commands are a series..."""
SERIES_KEEP = 2
"""...of which only the best few are worth keeping (``seed: 4821``, ``run_17.log``)."""
SERIES_SOURCES = frozenset({"tool_short", "command", "bulk", "lookup"})
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
FIX_FACTOR = 0.9
TASK_RULE_FACTOR = 0.9
"""A no-go the task's description sets: the person's rule, written before the run."""
ASKED_FACTOR = 0.8
"""A turn-down the person only asked a question with: a decision, worded as their question."""
"""A fix the agent announced and carried out: its fault is the why."""
ACTED_ONLY = ("Approach: ", "Fix: ")
"""Announcements that are decisions only once a call of the same turn carries them out."""
TASK_SCORE = 2.0
STATE_SCORE = 10.0
"""Current-state bullets outrank everything: an agent cannot resume without them."""
EARLIER_RESULT_SCORE = 1.6
FOUND_SCORE = 3.0
"""A cause the agent found outranks earlier results, below the latest request and action."""
ANSWER_SCORE = 2.6
FOUND_STEP = 0.1
SETTLED_SCORE = DECISION_SCORE * 2.0
SIGNATURE_SHARE = 0.9
"""A signature the run wrote ranks just below the best value: what code now calls."""
"""The design as last settled leads Key Decisions: it supersedes the corrections before it."""
PREVIOUS_VALUE_SCORE = KIND_WEIGHTS["path"] * SOURCE_WEIGHTS["assistant"]
"""What a value carried over from the previous snapshot scores before its discount."""
NOTED_FILES = 6
"""Only the most recent files say what changed; older ones just say what happened to them."""
FILE_BULLETS = 10
"""Files with a line of their own; the rest are named in "Also changed:" lines..."""
FOLD_SIZE = 10
"""...this many to a line."""
FOLD_FACTOR = 0.9
MAX_SYMBOLS = 3
MAX_IDENTIFIERS = 10
"""Bare names (``renderBoard``, ``state.inCheck``) said in passing: the best few are enough."""
MENTIONED_FILE_FACTOR = 0.6
"""A file the assistant says it changed, with no tool call to show it."""
TEMPLATE_WORDS = 400
"""A user message this long (an issue text, a prompt template) weighs half per sentence, and
less the longer it is: its rules are boilerplate next to a short request's."""
MAX_DECISIONS_PER_MESSAGE = 5
SAME_MESSAGE_DECAY = 0.8
"""Each further rule of one message of the person's counts for less, so that the rules of one
message (four cases of one feature) leave room for those of other messages."""
"""A prompt template's ten "always ..." rules must not crowd out the session's decisions."""

BUILT_FACTOR = 0.8
"""What the agent reported it built (``reports.py``): the design as it stands, below the
person's own rules and choices."""
BUILT_STEP = 0.08
"""Each older report line counts this much less."""

FOCUS_BOOST = 2.5
"""A bullet that names a word of the user's focus text scores this many times more."""
_FOCUS_STOPWORDS = frozenset(
    split_words("the and for with from that this into about focus focusing keep on of to in a an")
)
MAX_BULLET_WORDS = 40
LED_TO_WORDS = 6
"""An agent's decision names the call it led to in this many words."""
REQUEST_MAX_WORDS = 60
NOTE_MAX_WORDS = 14
NOTE_MIN_WORDS = 3
""""add it" says nothing; "add Endpoint config" does."""
ACCOUNT_MIN_WORDS = 4
""""Perfect!" is no account of a reply; the first sentence at least this long is."""
RECENT_RESULTS = 4
"""Data-carrying tool results kept in brief besides the last one."""
MAX_CALLS_IN_ACTION = 3
CONTAINMENT_WINDOW = 300
"""A value inside one of the best this-many others (a name inside its error line) is skipped..."""
CONTAINER_MIN_SHARE = 0.5
"""...when that other value scores at least this share of its own, so it is likely shown."""
WORKING_DIRECTORY = "Working directory"
"""The Current State line that carries the session's working directory to the next round."""
ALSO_CHANGED = "Also changed"

"""A fenced code block (to the end of the text when unclosed)."""
_FENCED = FENCED_CODE
_APOSTROPHE = "['\u2019]"
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
_NOTE_VERB = re.compile(
    r"(?:add|fix|updat|remov|replac|renam|extract|creat|writ|wrote|implement|chang|refactor|"
    r"mov|us(?:e|ing)\b|mak|handl|rewrit|simplif|convert|wir|regist|switch|introduc|defin|"
    r"delet|adjust|apply|set|includ|insert|restructur|split|clean|expos|guard|wrap|"
    r"inlin|drop|restor|revert|correct|modif|enabl|disabl|support|swap|bump|pin|migrat|patch|"
    r"append|prepend|initiali|mark|skip|allow|prevent|ensur|align|format|tweak|improv|optimi|"
    r"reduc|increas|limit|rais|catch|document|annotat|merg|sort|strip|normali|"
    r"validat|connect|hook|configur|install|generat|build|render|rework|consolidat|reorder|"
    r"comment|uncomment|emit|forward|lower|upgrad|downgrad|chang|put|fill|plug|gate|cache|"
    r"defer|lazy|escape|quote|point)\w*\b",
    re.I,
)
"""How an account of an edit starts: a verb that changes something ("fix", "extract")."""
_CODE_CHARS = re.compile(r"[;{}<>]|\s==?\s|[(\[,]$|^\w+\s+[\"']")
"""A line of code that happens to start with a verb (``return Response(``) is no account."""
_OLD_FILE = re.compile(
    r"^(?P<tick>`+)(?P<path>.+?)(?<!`)(?P=tick):\s*(?P<acts>(?:(?:created|written|edited|deleted|moved|copied|"
    r"reverted|changed)(?:\s*\u00d7\d+)?(?:,\s*)?)*)(?P<tail>.*)$"
)
_FOLDED = re.compile(r"^(?:Also \w+|Deleted):")
"""A line naming files by what happened to them (``Also changed:``, ``Deleted:``)."""
_ACTION_COUNT = re.compile(
    r"(created|written|edited|deleted|moved|copied|reverted|changed)(?:\s*\u00d7(\d+))?"
)
_SHAPE_DIGITS = re.compile(r"\d+")
_MENTIONED_FILE = re.compile(r"/.*\.\w{1,8}$|^[^/]+\.(?!js$)\w{1,8}$")
"""A path the assistant says it changed names a file: it has an extension, and a bare
``highlight.js`` is more likely a library than a file."""
_LOOKUPS = (None, "read", "search")
"""What ``call_action`` says of a call that changes nothing."""
_HEREDOC_MARKER = re.compile(r"<<-?\s*['\"]?\w+['\"]?")
# -- text ----------------------------------------------------------------------------


def _norm(text: str) -> str:
    return re.sub(r"[^\w/.:-]+", " ", text.lower()).strip()


def _window(text: str) -> str:
    if len(text) <= SCAN_HEAD_CHARS + SCAN_TAIL_CHARS:
        return text
    return text[:SCAN_HEAD_CHARS] + "\n" + text[-SCAN_TAIL_CHARS:]


def _message_text(m: Message, text: str | None = None) -> str:
    """Text (``text`` in place of the message's own) plus file and image references
    (their names are values too)."""
    own = m.text if text is None else text
    if isinstance(m.content, str):
        return own
    refs = [p.uri for p in m.content if isinstance(p, FilePart)]
    refs += [p.url for p in m.content if isinstance(p, ImagePart) and p.url]
    return "\n".join([own, *(r for r in refs if r and not r.startswith("data:"))]).strip()


def edit_note(text: str) -> str | None:
    """What an edit does, in the assistant's words: the last sentence that starts with a change.

    "Now fix the credo nesting issue by extracting the helper." gives "fix the
    credo nesting issue by extracting the helper"; "Now I have the full
    picture." and "All 15 tests pass." say nothing about the edit.
    """
    for sentence in reversed(list(_sentences(text))):
        rest = _NOTE_LEAD.sub("", sentence, count=1).strip()
        code = _CODE_CHARS.search(rest) or rest.count("(") != rest.count(")")
        if rest and _NOTE_VERB.match(rest) and words(rest) >= NOTE_MIN_WORDS and not code:
            if rest is not sentence and rest[:1].isupper() and rest[1:2].islower():
                rest = rest[0].lower() + rest[1:]
            return clip_words(rest.rstrip(":.").rstrip(), NOTE_MAX_WORDS)
    return None


def _account(text: str) -> str:
    """The first sentence of a reply that says something; a trailing colon takes the next."""
    sentences = list(_sentences(text))
    for i, sentence in enumerate(sentences):
        if words(sentence) >= ACCOUNT_MIN_WORDS:
            if sentence.endswith(":") and i + 1 < len(sentences):
                sentence = f"{sentence} {sentences[i + 1]}"
            return clip_words(sentence, BRIEF_MAX_WORDS)
    return clip_words(sentences[0], BRIEF_MAX_WORDS) if sentences else ""


def _recency(index: int, total: int) -> float:
    return RECENCY_FLOOR + (1.0 - RECENCY_FLOOR) * (index + 1) / max(1, total)


# -- one pass over the messages ------------------------------------------------------


@dataclass(slots=True)
class _ValueStat:
    value: Value
    score: float
    source: float
    first: int
    count: int = 1
    sources: set[str] = field(default_factory=set)

    @property
    def ranked(self) -> float:
        return self.score * (1.0 + FREQUENCY_WEIGHT * math.log(self.count))


@dataclass(slots=True)
class _Result:
    call: ToolCall | None
    name: str
    text: str
    error: bool
    read: bool


Ranked = dict[str, tuple[str, float]]
"""Normalised text -> (bullet text, score)."""
TURNED_DOWN = "turned down by the user"
"""What a call the person turned down did: nothing (its result as a brief)."""


@dataclass(slots=True)
class _Pass:
    """Everything one front-to-back reading of the window finds, before ranking."""

    total: int
    tracker: FileTracker
    values: dict[str, _ValueStat] = field(default_factory=dict)
    user_words: set[str] = field(default_factory=set)
    """The words the person typed: a name the agent quotes is theirs when they said it too."""
    book: DecisionBook = field(default_factory=DecisionBook)
    tentative: list[tuple[str, float]] = field(default_factory=list)
    task_why: str | None = None
    """The reason the last task description shown gave: an approach to it carries it."""
    """The agent's choices announced this turn, not yet acted on: (bullet, score)."""
    tasks: Ranked = field(default_factory=dict)
    done: set[str] = field(default_factory=set)
    todo_list: list[tuple[str, str]] | None = None
    results: list[_Result] = field(default_factory=list)
    last: Message | None = None
    last_request: str | None = None
    last_text: str | None = None
    last_calls: list[ToolCall] = field(default_factory=list)
    last_command: str | None = None
    """A SWE-agent text command: its output comes back as a user message."""
    calls_after_text: bool = False
    last_observation: bool = False
    turn_note: str | None = None
    """What the edits of this turn do, in the assistant's words."""
    proposed: list[str] = field(default_factory=list)
    """Keys of the agent's decisions since the last request: void if the user turns them down."""
    agent_tasks: set[str] = field(default_factory=set)
    """Keys of the next steps the agent set itself: they lapse at the user's next request
    (the user asked for something else, or asked for them and is the request)."""
    agent_chose: dict[str, set[str]] = field(default_factory=dict)
    """Topic words of each of the agent's decisions, for a later redirect to supersede."""
    user_said: list[tuple[str, set[str]]] = field(default_factory=list)
    """Keys and topic words of the previous request's decisions, for a correction to mark."""
    reports: Reports = field(default_factory=Reports)
    """What the agent reported it built at the end of each turn that changed files."""
    report: tuple[int, str] | None = None
    """The agent's last words with no call after a change: its account, once the turn ends."""
    turn_changed: list[str] = field(default_factory=list)
    """The code files calls since the person's last request changed (``reports.builds``)."""
    offer: str | None = None
    """The agent's last message, when it offered options (``options.py``): a reply picking
    one is resolved to that option's words."""
    choice: str | None = None
    """The option the request being read picked, in its own words."""
    asked_by: Message | None = None
    """The tool result whose turned-down call carried the person's words (``rejections``):
    the last request, when nothing followed it."""

    def read(self, messages: Sequence[Message]) -> _Pass:
        for index, m in enumerate(messages):
            observation = m.role == "user" and self.tracker.after_action
            answered, touched = self.tracker.observe(m, index)
            if m.role == "system" or m.metadata.get("is_demo"):
                continue
            recency = _recency(index, self.total)
            self.last_observation = observation
            if m.role == "tool" or observation:
                self.result(m, answered, recency, index)
            else:
                self.said(m, recency, index)
                if m.role == "assistant":
                    self.thought(m, recency)
                if m.tool_calls:
                    self.calls(m.tool_calls, recency, index)
                action = m.metadata.get("action")
                if m.role == "assistant" and isinstance(action, str) and not m.tool_calls:
                    self.last_command = action.strip().split("\n", 1)[0]
                    command = self.last_command
                    self.add_values(command, "argument", recency, index, paths="command")
            self.turn_changed += [rec.path for rec in touched if builds(rec.path)]
            for rec in touched:
                rec.note = self.turn_note or rec.note
                weight = SOURCE_WEIGHTS["argument"]
                value = Value("path", self.tracker.shown(rec.path))
                self.add_value(value, KIND_WEIGHTS["path"] * weight * recency, weight, index)
            self.last = m
        self.standing()
        return self

    # -- values

    def add_values(
        self, text: str, source: str, recency: float, index: int, *, paths: str | None = None
    ) -> None:
        """Values of ``text`` said by ``source``; ``paths`` is the source its paths (and its
        ``--flag=value`` options) count as."""
        if not text or source == "code":
            return
        weight = SOURCE_WEIGHTS[source]
        if source == "bulk":
            found = extract_error_lines(text)
        else:
            found = extract_values(_window(text))
            if len(text) > SCAN_HEAD_CHARS + SCAN_TAIL_CHARS:
                found = unique_values([*found, *extract_error_lines(text)])
            if source == "snippet":
                found = [v for v in found if v.kind != "identifier"]
            if source == "tool_short" and len(found) > MAX_VALUES_PER_RESULT:
                found = sorted(found, key=lambda v: -KIND_WEIGHTS[v.kind])[:MAX_VALUES_PER_RESULT]
            if source == "user" and "\n" not in text.strip():  # typed in prose, not pasted:
                # a code name the person typed bare is one they named
                had = {v.text for v in found}
                typed = (w for w in _CODE_NAME.findall(text) if w not in had)
                found += [Value("identifier", w) for w in dict.fromkeys(typed)]
        for v in found:
            flag = v.kind == "setting" and v.text.startswith("-")  # a command line's --type=bug
            named = paths if paths and (v.kind == "path" or flag) else source
            w = SOURCE_WEIGHTS[named]
            if v.kind == "error":
                w = max(weight, SOURCE_WEIGHTS["tool_error"])
            self.add_value(v, KIND_WEIGHTS[v.kind] * w * recency, w, index, named)
            if v.kind == "url" and paths == "command":  # ``curl -X POST``, ``git clone``
                self.values[v.text].sources.add(paths)

    def add_value(
        self, v: Value, score: float, source: float, index: int, name: str = "argument"
    ) -> None:
        stat = self.values.get(v.text)
        if stat is None:
            self.values[v.text] = _ValueStat(v, score, source, index, sources={name})
        else:
            stat.count += 1
            stat.score = max(stat.score, score)
            stat.source = max(stat.source, source)
            stat.sources.add(name)

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
        injected = m.summary or m.synthetic or m.metadata.get("compact_summary")
        if m.role == "assistant" and self.deferred and (text.strip() or reasoning_text(m)):
            self.tentative = [t for t in self.tentative if t not in self.deferred]
            self.deferred = []
        if not text.strip():
            return
        if m.role == "user" and not injected and m.text.strip():
            asked = request_text(m)
            if asked is None:
                return  # given, not said: a skill body, AGENTS.md, a reminder, a template
            text = _message_text(m, asked)
        speaker = "user" if m.role == "user" and not injected else "assistant"
        prose = _FENCED.sub("\n", text)
        self.add_values(prose, "user" if m.role == "user" else "assistant", recency, index)
        if speaker == "user":
            self.user_words.update(_NAME_WORD.findall(prose))
        self.add_values("\n".join(_FENCED.findall(text)), "snippet", recency, index)
        if m.role == "user":
            cleaned = _prose(text).strip()
            if cleaned and not injected and not _SKIP_REQUEST.match(cleaned):
                self.last_request = clip_words(cleaned, REQUEST_MAX_WORDS)
                self.new_request(cleaned)
        else:
            self.last_text, self.calls_after_text = text, False
            self.turn_note = edit_note(text)
            if not injected and offered(text):
                self.offer = text  # kept until the person's next request answers it
            if not injected and not m.tool_calls and self.turn_changed:  # a turn's end, if
                self.report = (m.seq if m.seq is not None else index + 1, text)  # nothing follows
        approach = stated_approach(text) if speaker == "assistant" and not injected else None
        if approach is not None:  # a decision once a call of this turn changes something
            self.tentative.append((approach, DECISION_SCORE * FIX_FACTOR * recency))
        led = m.tool_calls[0] if m.role == "assistant" and m.tool_calls else None
        self.sentences(text, speaker, recency, index, led_to=led, decide=not injected)
        self.lists(text, recency, agent=speaker != "user")

    def new_request(self, text: str) -> None:
        """A request: the agent's own next steps lapse; a rejection voids the proposal it
        answers and marks the earlier statement it corrects."""
        for key in self.agent_tasks:
            self.tasks.pop(key, None)
        self.agent_tasks.clear()
        self.choice, self.offer = choice_line(text, self.offer), None
        self.turn_ended()
        self.reports.asked(text)  # a request naming what a report built changes it
        if rejects(text):
            self.reports.void_last()  # what it reported is what the person turned down
            self.book.void(self.proposed)
            topics = topic_words(text)
            for key, words_of in self.user_said:
                if topics & words_of:
                    self.book.mark(key, f"corrected later: {clip_words(text, REPLACING_WORDS)}")
            self.rejecting = True
        elif redirects(text):
            topics = topic_words(text)
            for key, words_of in self.agent_chose.items():
                if len(topics & words_of) >= SHARED_TOPIC:
                    self.book.mark(key, f"superseded later: {clip_words(text, REPLACING_WORDS)}")
        self.book.request(list(_sentences(text)))
        self.proposed = []
        self.user_said = []
        self.tentative = []

    rejecting: bool = False
    """The request being read turns down what came before: each of its sentences is a
    constraint."""

    def turned_down(self, m: Message, call: ToolCall | None, recency: float, index: int) -> None:
        """A call the person turned down (``rejections``): it did nothing, the agent's
        proposal of this turn is void, and the words they typed are their turn: the latest
        request and, unless they only asked questions, their decision."""
        self.results.append(_Result(call, call.name if call else "tool", TURNED_DOWN, False, False))
        self.book.void(self.proposed)
        self.proposed, self.tentative = [], []
        self.report = None  # stopped mid-turn: no account of a finished turn
        words = rejection_words(m.text)
        if words is None:
            return
        self.asked_by = m
        self.turn_note = None
        self.add_values(words, "user", recency, index)
        self.last_request = clip_words(_prose(words).strip(), REQUEST_MAX_WORDS)
        self.new_request(words)
        said = clip_words(words, MAX_BULLET_WORDS)
        what = clip_words(self._described(call), LED_TO_WORDS) if call else "a tool call"
        # the person stopping the agent stands however long ago: no fading with recency
        score = DECISION_SCORE * USER_DECISION_FACTOR
        if all(s.rstrip().endswith("?") for s in _sentences(words)):
            # only questions: the call is still turned down, the question is why
            line = f"User turned down {what}, asking: {said}"
            self.book.add(line, score * ASKED_FACTOR, user=True, topics=subject_words(words))
            return
        self.book.add(
            f"User (turning down {what}): {said}", score, user=True, topics=subject_words(words)
        )

    def sentences(
        self,
        text: str,
        speaker: str,
        recency: float,
        index: int,
        led_to: ToolCall | None = None,
        *,
        decide: bool = True,
    ) -> None:
        """Tasks and decisions in ``text``; an agent's decision names the call it led to."""
        user = speaker == "user"
        rejecting, self.rejecting = self.rejecting and user, False
        decisions = 0
        length = words(text)
        template = 1.0 if length <= TEMPLATE_WORDS else TEMPLATE_WORDS / (2.0 * length)
        for sentence in _sentences(text):
            if words(sentence) < 3:
                continue
            statement = not sentence.endswith("?")
            if statement and _TASK.search(sentence) and not sentence.endswith(":"):
                if not _NARRATION.match(sentence) or "TODO" in sentence or "FIXME" in sentence:
                    clipped = clip_words(sentence, MAX_BULLET_WORDS)
                    self.add_ranked(self.tasks, clipped, TASK_SCORE * recency)
                    if not user:
                        self.agent_tasks.add(_norm(clipped))
            elif statement and led_to is not None and is_question_tool(led_to.name):
                continue  # the agent asking: the answer is the decision (``result``)
            elif statement and decide and user and self.choice and picks(sentence):
                # "let's go with option 1": the option's own words are the decision
                score = DECISION_SCORE * USER_DECISION_FACTOR * recency
                self.decided(self.choice, score, user=True, said=self.choice)
                self.choice = None
            elif statement and decide and not user and (fix := announced_fix(sentence)):
                self.tentative.append((fix, DECISION_SCORE * FIX_FACTOR * recency))
            elif statement and decide:
                strength, waits = self.strength(sentence, user, rejecting=rejecting)
                if not strength or (decisions := decisions + 1) > MAX_DECISIONS_PER_MESSAGE:
                    pass
                elif waits:  # an announced choice: a decision once the agent acts on it
                    clipped = clip_words(sentence, MAX_BULLET_WORDS)
                    self.tentative.append((clipped, DECISION_SCORE * strength * recency))
                else:
                    clipped = ("User: " if user else "") + clip_words(sentence, MAX_BULLET_WORDS)
                    if user and (why := self.retried(sentence)):
                        clipped = f"{clipped} {why}"
                    score = DECISION_SCORE * strength * recency * (template if user else 1.0)
                    score *= (SAME_MESSAGE_DECAY ** (decisions - 1)) if user else 1.0
                    self.decided(clipped, score, user=user, said=sentence)
            if not user and _CHANGE_CLAIM.search(sentence):
                for v in extract_values(sentence):
                    if v.kind != "path" or not _MENTIONED_FILE.search(v.text):
                        continue
                    rec = self.tracker.mention(v.text, index)
                    if rec is not None:
                        rec.note = clip_words(sentence, NOTE_MAX_WORDS)

    def retried(self, sentence: str) -> str | None:
        """The failure a retry the person asks for answers (``retry.py``)."""
        last = self.results[-1] if self.results else None
        return retry_why(sentence, last.text if last else None, bool(last and last.error))

    deferred: list[tuple[str, float]] = field(default_factory=list)
    """Fixes the agent announced, then ran a command instead of an edit: they wait for an
    edit only until the agent speaks again (it will say what it does next)."""

    def thought(self, m: Message, recency: float) -> None:
        """A fix the agent announced in its thinking ("Let me fix the credo nesting issue
        in X"): a decision once a call acts on it. Nothing else of its thinking counts: a
        choice it weighed there is not always what it then did (judges found "I'll implement
        it as specified rather than defer it" before a write that deferred it)."""
        for sentence in _sentences(reasoning_text(m)):
            fix = announced_fix(sentence)
            if fix is not None and all(fix != t for t, _ in self.tentative):
                self.tentative.append((fix, DECISION_SCORE * FIX_FACTOR * recency))

    def lists(self, text: str, recency: float, *, agent: bool) -> None:
        """Checkboxes, and list items under a "Remaining:" / "Next steps:" heading; the
        agent's own lapse at the next request (``new_request``)."""
        prose = _FENCED.sub("\n", text)
        self.done.update(_norm(m.group("text")) for m in _CHECKED.finditer(prose))
        found: list[str] = []
        for m in _UNCHECKED.finditer(prose):
            found.append(clip_words(m.group("text"), MAX_BULLET_WORDS))
        in_list = False
        for line in prose.splitlines():
            if _TASK_HEADER.match(line):
                in_list = True
            elif in_list and (item := _LIST_ITEM.match(line)):
                found.append(clip_words(_EMPHASIS.sub("", item.group("text")), MAX_BULLET_WORDS))
            elif line.strip():
                in_list = False
        for task in found:
            self.add_ranked(self.tasks, task, TASK_SCORE * recency)
            if agent:
                self.agent_tasks.add(_norm(task))

    # -- tool calls and results

    def calls(self, calls: Sequence[ToolCall], recency: float, index: int) -> None:
        self.last_calls, self.calls_after_text = list(calls), True
        self.report = None  # the agent went on working: those words did not end the turn
        acting = next((c for c in calls if call_action(c) not in _LOOKUPS), None)
        if acting is not None and self.tentative:
            self.acted_on(acting)
        self.last_command = None
        for call in calls:
            action = call_action(call)
            paths = "command" if action == "shell" else None
            if paths and only_looks(shell_text(call) or ""):
                paths = "lookup"  # ``find``, ``rg --glob``, ``git status``: where it looked
            paths = "lookup" if action in ("read", "search") else paths
            if call.name in SUBAGENT_TOOLS:
                continue  # a subagent's brief: what it names, the agent itself did not touch
            for key, value in call.arguments.items():
                for s in strings(value):
                    self.argument_values(s, key, recency, index, paths)
            if call.raw_arguments:
                self.argument_values(call.raw_arguments, "", recency, index, paths)
            todos = todo_items(call)
            if todos is not None:
                self.todo_list = todos
                self.done.update(_norm(t) for t, status in todos if status in DONE_STATUSES)

    def argument_values(
        self, text: str, key: str, recency: float, index: int, paths: str | None
    ) -> None:
        """Values of an argument; code in it (file content, patches, heredoc bodies) gives none."""
        if is_code_key(key) or is_patch(text):
            return
        if canonical_key(key) in SHELL_ARG_KEYS and "<<" in text:
            text = _HEREDOC_MARKER.sub(" ", split_heredocs(text)[0])
        self.add_values(text, "argument", recency, index, paths=paths)

    def result(self, m: Message, call: ToolCall | None, recency: float, index: int) -> None:
        if m.role == "tool" and rejected(m.text):
            self.turned_down(m, call, recency, index)
            return
        text = _message_text(m)
        why = stated_why(text)
        described = call is not None and call_action(call) != "read"  # a tracker's view, not a file
        rules = stated_rules(text) if described else []
        if call is not None and described and (why or rules):  # a task, as a tracker showed it
            source = clip_words(self._described(call), LED_TO_WORDS)
            if why is not None and self.task_why is None:  # the first: the whole work's
                line = f"Why the work (from {source}): {why}"
                self.book.add(line, DECISION_SCORE * USER_DECISION_FACTOR, user=True)
            for rule in rules:
                line = f"Task rule (from {source}): {rule}"
                self.book.add(line, DECISION_SCORE * TASK_RULE_FACTOR * recency, user=True)
        self.task_why = why or self.task_why
        action = call_action(call) if call is not None else None
        command = self.last_command if m.role == "user" else None
        read = action == "read" or (command or "").startswith(("open ", "goto ", "scroll_"))
        source = "tool_short" if len(text) <= SHORT_RESULT_CHARS else "bulk"
        self.add_values(text, "code" if read else source, recency, index)
        error = bool(m.metadata.get("is_error") or m.metadata.get("error"))
        if call is not None:
            self.verdict(call, text, error, recency)
        name = call.name if call is not None else (command or m.name or "tool")
        self.results.append(_Result(call, name, text, error, read))

    def verdict(self, call: ToolCall, text: str, error: bool, recency: float) -> None:
        """The person's answer to a question or approval of a plan (and its reasoned lines)."""
        score = DECISION_SCORE * USER_DECISION_FACTOR * recency
        if error:  # a call turned down never gets here (``result``: ``turned_down``)
            return
        verdict = answer_decision(call, text)
        if verdict is None:
            return
        self.book.add(clip_words(verdict, MAX_BULLET_WORDS), score, user=True)
        if PLAN_TOOL.match(call.name):
            for line in plan_lines(str(call.arguments.get("plan") or "")):
                self.book.add(f"Approved plan: {line}", score * 0.9, user=True)

    @staticmethod
    def strength(sentence: str, user: bool, *, rejecting: bool) -> tuple[float, bool]:
        """How surely ``sentence`` is a decision (``decisions.py``), and whether it waits for
        the agent to act on it; every statement of a message turning down the agent's
        proposal is a constraint."""
        if user:
            return (USER_DECISION_FACTOR if rejecting else user_strength(sentence)), False
        return agent_strength(sentence)

    def decided(self, text: str, score: float, *, user: bool, said: str) -> None:
        key = self.book.add(text, score, user=user, topics=subject_words(said))
        if user:
            self.user_said.append((key, topic_words(said)))
        else:
            self.proposed.append(key)
            self.agent_chose[key] = topic_words(said)

    def turn_ended(self) -> None:
        """The person spoke (or the window ended): the agent's last words of a turn that
        changed files were its account of what it built (``reports.py``)."""
        if self.report is not None:
            self.reports.add(*self.report, files=self.turn_changed)
        self.report, self.turn_changed = None, []

    def standing(self) -> None:
        """The window ends in the turn that announced these choices: nothing turned them
        down, and the action may be in the messages kept after the cut."""
        for text, score in self.tentative:
            if not text.startswith(ACTED_ONLY):  # a plan or a fix is one once carried out
                self.decided(text, score, user=False, said=text)
        self.tentative = []
        self.turn_ended()
        for rank, (_seq, line) in enumerate(self.reports.latest()):
            score = DECISION_SCORE * BUILT_FACTOR * (1.0 - BUILT_STEP * rank)
            self.book.add(line, score, user=False, topics=subject_words(line))

    def _described(self, call: ToolCall) -> str:
        """``describe_call`` with a path under the session's directory as it is shown."""
        what = describe_call(call)
        root = self.tracker.root
        if root and len(root) > 1:
            what = what.replace(root.rstrip("/") + "/", "")
        return what

    def acted_on(self, call: ToolCall) -> None:
        """The agent acted: the choices it announced this turn are decisions, tied to the call."""
        then = f" (then {clip_words(self._described(call), LED_TO_WORDS)})"
        fixed = False
        edits = bool(call_file_ops(call))
        waiting: list[tuple[str, float]] = []
        for text, score in self.tentative:
            if text.startswith("Fix: "):
                if not edits:  # a command first (a test run): the edit may still come
                    waiting.append((text, score))
                    continue
                if fixed:  # the same fault said twice (thinking and text): one call, one fix
                    continue
                fixed = True
                made = fix_statement(
                    text.removeprefix("Fix: "), call, lambda p: _shown(self.tracker, p)
                )
                self.decided(made, score, user=False, said=text)
            elif text.startswith("Approach: "):
                self.decided(with_why(text, self.task_why) + then, score, user=False, said=text)
            else:
                self.decided(text + then, score, user=False, said=text)
        self.tentative = waiting
        self.deferred = list(waiting)

    # -- the state at the end of the window

    def next_step(self) -> str | None:
        """A concrete next step, or None: never "continue from the result of `Bash`".

        A call still unanswered is waited for; a request last is answered; a failed
        last result names what to make succeed and its error; else the todo item in
        progress, or the step the assistant said it would take after its last reply.
        """
        last = self.last
        if last is None:
            return None
        if last.role == "assistant" and last.tool_calls:
            names = ", ".join(dict.fromkeys(code_span(c.name) for c in last.tool_calls))
            return f"wait for the result of {names}."
        if last.role == "assistant" and self.last_command:
            return f"wait for the output of {code_span(clip_words(self.last_command, 8))}."
        if (last.role == "user" and not self.last_observation) or last is self.asked_by:
            return "answer the last request."
        if last.role in ("tool", "user") and self.results and self.results[-1].error:
            r = self.results[-1]
            what = describe_call(r.call) if r.call is not None else code_span(r.name)
            errors = extract_error_lines(r.text)
            why = f": {clip_words(errors[-1].text, BRIEF_MAX_WORDS)}" if errors else ""
            return f"make {what} succeed{why}"
        active = [
            t for t, status in self.todo_list or [] if status in ("in_progress", "in-progress")
        ]
        if active:
            return f"{clip_words(active[0], BRIEF_MAX_WORDS)} (in progress)"
        if last.role in ("tool", "user"):
            return None  # what follows a result is the agent's to decide; the result is above
        said = [
            s
            for s in _sentences(self.last_text or "")
            if _NEXT_STEP.search(s) and not s.endswith(":")
        ]
        return clip_words(said[-1], BRIEF_MAX_WORDS) if said else None


# -- building the snapshot -----------------------------------------------------------


def _only_said(stat: _ValueStat) -> bool:
    """A path or an error only the agent's prose names: a file it proposed but no call
    touched, a heading of its own report ("CRITICAL ISSUE FOUND"), not the run's values."""
    return stat.value.kind in ("path", "error") and stat.sources <= {"assistant"}


TOOL_OUTPUT = frozenset({"tool_short", "bulk"})


def _elsewhere(stat: _ValueStat, root: str | None) -> bool:
    """An absolute path outside the session's directory that only tool output printed (a
    ``find`` hit in another project, a shell profile's warning, a background task's log
    file): nothing the participants handle."""
    text = stat.value.text
    if stat.value.kind != "path" or not root or not stat.sources <= TOOL_OUTPUT:
        return False
    return text.startswith("/") and not text.startswith(root.rstrip("/") + "/")


PROSE = frozenset({"user", "assistant"})
_NEEDS_PROSE = frozenset({"setting"})
"""A ``key=value`` is a value when a participant says it: one only a command's script
assigns (``status=$?`` printing ``status=2``) or a tool prints is plumbing. A bare name
(``toggle_debug``) needs the person: the agent's prose names code symbols in passing."""
_NEEDS_USE = frozenset({"version", "port", "address", "email", "id"})
"""A version, an address or a tracker id is a value when a participant says it or a command
uses it; one only a tool printed (``bd ready`` listing other items) is not. (A URL a tool
returned is kept: the API answered with it.)"""
BOILERPLATE_COUNT = 2
"""A URL only tools printed, this many times or more, is their boilerplate (a linter's
"report issues at" link in every run), not an answer."""
_REFERRED = frozenset({"user", "assistant", "command"})
"""A path is a value when a participant names it or a command uses it; one only read,
searched, passed to a tool or printed is where the agent looked, not what it must carry."""
_USED_URL = PROSE | {"command"}
"""A URL is a value when a participant names it or a command that changed something used
it (``lookups``); one the agent only fetched or a tool only printed is where it read."""
_SCRATCH = re.compile(r"^(?:/private)?/(?:tmp|var/tmp|var/folders)/")
"""The system's scratch directories: a background task's output file lives there."""


_CODE_NAME = re.compile(
    r"(?<![\w./-])(?:[a-z]+(?:[A-Z][a-z0-9]+)+|[a-z]+(?:_[a-z0-9]+)+)(?![\w/-]|\.\w)"
)
"""A code name in the person's words, camelCase or snake_case (``lastProcessedLine``)."""
_NAME_WORD = re.compile(r"[A-Za-z_][\w.]*\w")
"""A word that may be a code name (``lastSyncedMessageUuid``, ``SessionLive.mount``)."""


def _unreferred(stat: _ValueStat, user_words: Collection[str] = ()) -> bool:
    """A value the run never refers to as one (``values.py``: referred to in prose or in a
    command): a setting or name no participant said, a version only a tool printed,
    a scratch file no participant named."""
    kind, sources = stat.value.kind, stat.sources
    if kind == "identifier":  # a bare name says not what it is unless the person gave it
        return "user" not in sources and stat.value.text.rstrip("()") not in user_words
    if kind in _NEEDS_PROSE:
        return not sources & PROSE
    if kind in _NEEDS_USE:
        return not sources & (PROSE | {"argument", "command"})
    if kind == "url" and not sources & _USED_URL:
        # printed by tools only: boilerplate when repeated; passed to a tool (fetched,
        # searched) without a participant naming it: where the agent read, not a value
        return stat.count >= BOILERPLATE_COUNT if sources <= TOOL_OUTPUT else True
    if kind == "path" and _SCRATCH.match(stat.value.text):
        return not sources & PROSE
    if kind == "path":
        return not sources & _REFERRED  # merely read, searched or printed: not a value
    return False


_PATH_USES = (
    ("user", "named by the user"),
    ("command", "used in a command"),
    ("lookup", "read"),
    ("argument", "passed to a tool"),
    ("assistant", "named by the agent"),
    ("tool_short", "printed by a tool"),
    ("bulk", "printed by a tool"),
)
"""How the run used a path that Files Modified does not name, most telling first."""


def _use_note(stat: _ValueStat) -> str | None:
    """What a path was to the run (read, used in a command, named by the user): a path is
    a value for what was done with it. A name is kept only when the person said it
    (``_unreferred``): so it says."""
    if stat.value.kind == "identifier":
        return "named by the user"
    if stat.value.kind != "path":
        return None
    return next((note for source, note in _PATH_USES if source in stat.sources), None)


def _previous_weight(position: int, count: int) -> float:
    return PREVIOUS_FACTOR * (1.0 - PREVIOUS_POSITION_DECAY * position / max(1, count))


def _file_score(rec: FileEdit, total: int) -> float:
    factor = MENTIONED_FILE_FACTOR if rec.mentioned_only else 1.0
    frequency = 1.0 + FREQUENCY_WEIGHT * math.log(max(1, rec.count))
    return FILE_SCORE * _recency(rec.last, total) * frequency * factor


NOTED_SYMBOLS = 3
"""Definitions said after the words of a file's one change ("update the interface
(`TranscriptAnalyzer`)"): the words say why, the names what (judges read "update the
interface with clearer documentation" of an edit that added an interface). Of several
changes the words are one change's, and the names would be all of theirs: none."""


def file_bullet(rec: FileEdit, *, noted: bool) -> str:
    """``path: edited: what changed`` (of several changes, ``e.g.`` one change's
    words), else the definitions changed; a move says where to, a failure what went wrong."""
    text = f"{code_span(rec.path)}: {rec.describe()}"
    if rec.other:
        text += f" {'from' if 'copied' in rec.actions else 'to'} {code_span(rec.other)}"
    gone = rec.last_action == "deleted"  # what an edit did no longer matters
    symbols = ", ".join(code_span(s) for s in rec.symbols[-MAX_SYMBOLS:])
    what = None
    if noted and not gone:  # of several changes, the words are one change's: say so
        what = rec.note or symbols or None
    if what:
        several = rec.count > 1 and what == rec.note
        named = rec.symbols[-NOTED_SYMBOLS:] if what == rec.note and not several else []
        names = ", ".join(code_span(n) for n in named if n not in what)
        text += (f"; e.g. {what}" if several else f": {what}") + (f" ({names})" if names else "")
    if rec.failed:
        text += f"; last attempt failed: {rec.failed}"
    return clip_words(text, MAX_BULLET_WORDS)


@dataclass(slots=True)
class _OldFile:
    """A Files Modified bullet of the previous snapshot, its path in today's form."""

    path: str
    position: int
    counts: dict[str, int]
    full: str
    short: str


def _shown(tracker: FileTracker, path: str) -> str:
    key = tracker.key(path)
    return tracker.shown(key) if key else path


def _old_files(old: Snapshot, tracker: FileTracker) -> dict[str, _OldFile]:
    """The previous snapshot's files by path, "Also changed:" lines unfolded."""
    out: dict[str, _OldFile] = {}
    for position, b in enumerate(old.files_modified):
        text = b.text
        if _FOLDED.match(text):
            for raw in code_spans(text):
                path = _shown(tracker, raw)
                out.setdefault(path, _OldFile(path, position, {}, code_span(path), code_span(path)))
            continue
        m = _OLD_FILE.match(text)
        if m is None:
            quoted = code_spans(text)
            path = _shown(tracker, quoted[0]) if quoted else _norm(text)
            out.setdefault(path, _OldFile(path, position, {}, text, clip_words(text, 6)))
            continue
        path = _shown(
            tracker, m.group("path").strip() if len(m.group("tick")) > 1 else m.group("path")
        )
        counts: dict[str, int] = {}
        for action, n in _ACTION_COUNT.findall(m.group("acts")):
            counts[action] = counts.get(action, 0) + int(n or 1)
        acts, tail = m.group("acts").strip().rstrip(","), m.group("tail")
        head = f"{code_span(path)}: {acts}"
        moved = re.match(r"\s*((?:to|from) `[^`]+`)", tail)
        short = f"{head} {moved.group(1)}" if moved else head
        out.setdefault(path, _OldFile(path, position, counts, f"{head}{tail}", short))
    return out


def _old_cwd(old: Snapshot) -> str | None:
    for b in old.current_state:
        if b.text.startswith(f"{WORKING_DIRECTORY}:"):
            quoted = re.search(r"`([^`]+)`", b.text)
            return quoted.group(1) if quoted else None
    return None


def _value_key(value: Value, tracker: FileTracker) -> str:
    """What a value names: one path however written, one commit however abbreviated."""
    text = value.text
    if value.kind == "path":
        return _shown(tracker, text[2:] if text[:2] in ("a/", "b/") else text)
    if value.kind == "hex" and len(text) >= 7:
        return text[:7].lower()
    if value.kind == "url":
        return text.rstrip("/")
    return text


def _state_label(text: str) -> str:
    head, sep, _ = text.partition(":")
    label = head.strip().lower()
    return label.split(" (")[0] if sep and len(head) <= 40 else ""


def _cap(snapshot: Snapshot, name: SectionName, limit: int) -> None:
    """Keep the ``limit`` best bullets of a section (in their order)."""
    bullets = snapshot.section(name)
    if len(bullets) > limit:
        best = sorted(range(len(bullets)), key=lambda i: -bullets[i].score)[:limit]
        bullets[:] = [bullets[i] for i in sorted(best)]


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


def _found(messages: Sequence[Message], snapshot: Snapshot) -> None:
    """What the run found (causes, answers, what a terse follow-up meant) in Current State,
    above earlier results; the design settled on the person's correction in Key Decisions;
    the signatures its edits wrote in Important Values."""
    for rank, line in enumerate(findings(messages)):
        snapshot.add("current_state", line.text, FOUND_SCORE - rank * FOUND_STEP)
    for rank, line in enumerate(answers(messages)):
        snapshot.add("current_state", line.text, ANSWER_SCORE - rank * FOUND_STEP)
    if (design := settled(messages)) is not None:
        snapshot.add("key_decisions", design.text, SETTLED_SCORE)
    top = max((b.score for b in snapshot.section("important_values")), default=1.0)
    for rank, sig in enumerate(signatures(messages)):
        snapshot.add("important_values", sig.bullet(), top * (SIGNATURE_SHARE - rank * FOUND_STEP))


class ExtractiveSummarizer:
    """Offline, deterministic snapshots; the default when no model is configured."""

    name = SUMMARIZER_NAME

    def __init__(
        self,
        *,
        shares: Mapping[SectionName, float] | None = None,
        max_values: int | None = None,
    ) -> None:
        self.shares: dict[SectionName, float] = dict(DEFAULT_SHARES if shares is None else shares)
        self.max_values = max_values
        """Important Values kept, best first; None: as many as the word limit allows (a
        compactor caps them at ``ContextPolicy.summary_max_values`` when it reconciles)."""

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
        old = parse(previous) if previous and previous.strip() else Snapshot()
        tracker = FileTracker(_old_cwd(old))
        p = _Pass(total=len(messages), tracker=tracker).read(messages)
        snapshot = Snapshot()
        files = self._files(p, old, snapshot)
        self._decisions(p, old, snapshot)
        ranked = self._values(p, old, snapshot, max_words, files, self.max_values)
        self._state(p, old, snapshot)
        _found(messages, snapshot)
        self._tasks(p, old, snapshot)
        if focus:
            _boost_focus(snapshot, focus)
        _diminish(snapshot)
        text = snapshot.render(max_words, shares=self.shares)
        shown = [Value("path", path) for path in files]
        carried = [v for b in old.important_values for v in extract_values(bullet_value(b.text)[1])]
        values = unique_values([*ranked, *shown, *carried])
        return SummaryResult.counted(
            text,
            snapshot,
            values,
            summarizer=SUMMARIZER_NAME,
        )

    @staticmethod
    def _files(p: _Pass, old: Snapshot, snapshot: Snapshot) -> list[str]:
        """One bullet per file, best first; the rest named in "Also changed:" lines.

        Returns every path named, for Important Values to leave out.
        """
        fresh = p.tracker.files()
        olds = _old_files(old, p.tracker)
        entries: list[tuple[float, str, FileEdit | None, _OldFile | None]] = []
        for path, rec in fresh.items():
            if path in olds:
                for action, n in olds[path].counts.items():
                    rec.actions[action] = rec.actions.get(action, 0) + n
            entries.append((_file_score(rec, p.total), path, rec, None))
        n = len(old.files_modified)
        for path, o in olds.items():
            if path not in fresh:
                entries.append((FILE_SCORE * _previous_weight(o.position, n), path, None, o))
        entries.sort(key=lambda e: -e[0])
        folded: list[tuple[str, float]] = []
        own = 0
        for score, path, edit, carried in entries:
            noted = own < NOTED_FILES
            if own >= FILE_BULLETS or (carried is not None and not carried.counts):
                folded.append((path, score))
                continue
            own += 1
            if edit is not None:
                snapshot.add("files_modified", file_bullet(edit, noted=noted), score)
            elif carried is not None:
                snapshot.add("files_modified", carried.full if noted else carried.short, score)
        for start in range(0, len(folded), FOLD_SIZE):
            group = folded[start : start + FOLD_SIZE]
            names = ", ".join(code_span(path) for path, _ in group)
            snapshot.add("files_modified", f"{ALSO_CHANGED}: {names}", group[0][1] * FOLD_FACTOR)
        return [path for _, path, _, _ in entries]

    @classmethod
    def _decisions(cls, p: _Pass, old: Snapshot, snapshot: Snapshot) -> None:
        """Key Decisions: this window's, then the previous snapshot's (a user's choice this
        window replaced is marked so)."""
        carried = [
            b.model_copy(update={"text": p.book.carried(b.text)})
            for b in old.key_decisions
            if states_decision(b.text)
        ]
        cls._ranked(p.book.ranked(), carried, snapshot, "key_decisions", set())

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
    def _values(
        p: _Pass,
        old: Snapshot,
        snapshot: Snapshot,
        max_words: int,
        files: Sequence[str],
        max_values: int | None = None,
    ) -> list[Value]:
        """Important values: merged by what they name, ranked, without what Files Modified says.

        Returns the values in rank order (files included), for retention accounting.
        """
        named = set(files) | ({p.tracker.root} if p.tracker.root else set())
        basenames = {posixpath.basename(f) for f in files}
        groups: dict[str, list[_ValueStat]] = {}
        for s in p.values.values():
            groups.setdefault(_value_key(s.value, p.tracker), []).append(s)
        merged: list[tuple[str, _ValueStat]] = []
        for key, members in groups.items():
            best = max(members, key=lambda s: (s.value.text == key, s.count, s.ranked, -s.first))
            stat = _ValueStat(
                best.value,
                max(s.score for s in members),
                max(s.source for s in members),
                min(s.first for s in members),
                sum(s.count for s in members),
                set().union(*(s.sources for s in members)),
            )
            if (
                _only_said(stat)
                or _elsewhere(stat, p.tracker.root)
                or _unreferred(stat, p.user_words)
            ):
                continue
            if stat.source >= IMPORTANT_SOURCE_WEIGHT or stat.count >= IMPORTANT_MIN_COUNT:
                merged.append((key, stat))
        merged.sort(key=lambda ks: (-ks[1].ranked, ks[1].first))
        ranked = [s.value for _, s in merged]
        series: dict[tuple[str, str], int] = {}
        for _, s in merged:
            if s.sources <= SERIES_SOURCES:
                shape = (s.value.kind, _SHAPE_DIGITS.sub("#", s.value.text))
                series[shape] = series.get(shape, 0) + 1
        kept: list[tuple[str, _ValueStat]] = []
        seen_shapes: dict[tuple[str, str], int] = {}
        for key, s in merged:
            text = s.value.text
            if key in named or text in named or ("/" not in text and text in basenames):
                continue  # Files Modified or the working directory names it
            if s.sources <= SERIES_SOURCES:
                shape = (s.value.kind, _SHAPE_DIGITS.sub("#", text))
                seen_shapes[shape] = seen_shapes.get(shape, 0) + 1
                if series[shape] >= SERIES_MIN and seen_shapes[shape] > SERIES_KEEP:
                    continue  # one more of a machine-made series
            kept.append((key, s))
        kept = kept[:max_words]
        top = [s for _, s in kept[:CONTAINMENT_WINDOW]]
        old_texts = {bullet_value(b.text)[1] for b in old.important_values}
        per_kind: dict[str, int] = {}
        present: set[str] = set()
        for key, s in kept:
            text = s.value.text
            if max_values is not None and len(present) >= 2 * max_values:
                break
            if not worth_keeping(s.value, s.count):
                continue  # an escape sequence, a flag, a build artefact, an id said once
            if any(
                len(o.value.text) > len(text)
                and o.ranked >= CONTAINER_MIN_SHARE * s.ranked
                and text in o.value.text
                for o in top
            ):
                continue  # inside another value that will show it: a name in its error line
            bonus = 1.0 + FREQUENCY_WEIGHT if text in old_texts else 1.0
            n = per_kind.get(s.value.kind, 0)
            per_kind[s.value.kind] = n + 1
            if s.value.kind == "identifier" and n >= MAX_IDENTIFIERS:
                continue
            bullet = value_bullet(s.value.kind, text, _use_note(s))
            snapshot.add("important_values", bullet, s.ranked * bonus / (1.0 + KIND_DECAY * n))
            present.update({text, key})
        n = len(old.important_values)
        for i, b in enumerate(old.important_values):  # in their old order: a stable prefix
            label, inner = bullet_value(b.text)
            found = [v for v in extract_values(inner) if v.text == inner]
            value = found[0] if found else Value("identifier", inner)
            key = _value_key(value, p.tracker)
            if inner in present or key in present or key in named:
                continue
            if not worth_keeping(value, 2):  # said more than once: it is in two snapshots
                continue
            k = per_kind.get(value.kind, 0)
            per_kind[value.kind] = k + 1
            if value.kind == "identifier" and k >= MAX_IDENTIFIERS:
                continue
            present.update({inner, key})
            score = PREVIOUS_VALUE_SCORE * _previous_weight(i, n)
            text = b.text if label is not None or not found else value_bullet(value.kind, inner)
            snapshot.add("important_values", text, score)
        if max_values is not None:
            _cap(snapshot, "important_values", max_values)
        return ranked

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
        examined = 0
        for r in reversed(p.results):
            brief = brief_result(r.text, read=r.read and not r.error)  # a failed read: why
            if brief is None and (briefs or r.error):
                continue  # a bare confirmation says something only as the very last result
            examined += 1
            if examined > RECENT_RESULTS + 1:
                break
            did = call_action(r.call) if r.call is not None else None
            looked = r.read or (r.call is not None and only_looks(shell_text(r.call) or ""))
            edited = did not in (None, "read", "search", "shell")  # Files Modified says it
            if briefs and (looked or edited) and not r.error:
                continue  # an earlier read, listing or edit ("-> 630 lines") is no state
            hint = describe_call(r.call) if r.call is not None else code_span(r.name)
            briefs.append(f"{hint} -> {'error: ' if r.error else ''}{brief or 'ok'}")
        if briefs:
            fresh.append(("last result", f"Last result: {briefs[0]}"))
        if step := p.next_step():
            fresh.append(("next step", f"Next step: {step}"))
        if p.tracker.root:
            directory = f"{WORKING_DIRECTORY}: {code_span(p.tracker.root)}"
            fresh.append((WORKING_DIRECTORY.lower(), directory))
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
