"""What the run found and settled, as short lines a continuing engineer needs.

A list of files changed does not say why: the cause the agent diagnosed, the answer it gave
a question the person asked, what a terse follow-up ("add that dep") referred to, and the
design the agent restated when it accepted the person's correction. Each is read from the
words in the messages and kept with the number of the message that said it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from threadline.compaction.decisions import NARRATION, SETTLED
from threadline.compaction.prose import sentences
from threadline.compaction.snapshot import clip_words, words
from threadline.messages import Message

FOUND_WORDS = 32
"""A diagnosis, clipped."""
ANSWER_WORDS = 22
"""The gist of an answer or of the reply a follow-up refers to."""
QUESTION_WORDS = 18
FOUND_MIN_WORDS = 8
"""Fewer words name a problem ("Critical bug discovered") without saying what it is."""
MAX_FOUND = 2
"""Diagnoses kept, the latest first: later ones tend to correct earlier guesses."""
MAX_ANSWERS = 3
FOLLOW_UP_MAX_WORDS = 8
"""A request this short that points back ("do that") borrows the reply before it."""

_CAUSE = re.compile(
    r"(?i)\b(?:root[ -]cause|"
    r"the\s+(?:real\s+|actual\s+|core\s+|main\s+|underlying\s+)?(?:problem|issue|bug|cause|culprit)"
    r"\s+(?:is|was|here\s+is)\b|"
    r"(?:is|are|was)\s+(?:failing|broken|empty|missing)\s+because\b|"
    r"(?:happens|happened|fails|failed|breaks|broke)\s+because\b|"
    r"\bcaused\s+by\b|"
    r"\b(?:breaks|broke)\s+(?!down\b|out\b|up\b|into\b)\w)"
    r"|^(?:root\s+cause|cause|problem|core\s+issue)\W{0,4}:\s*\S"
)
"""The agent stating a cause and how it works: "the root cause is", "the test is failing
because", "session-level tracking breaks incremental sync", a "**Problem**:" line."""
_HEADLINE = re.compile(r"(?i)\b(?:fundamental|critical)\s+(?:flaw|issue|bug|problem)")
"""The agent naming a problem's gravity ("a fundamental flaw in X"): a finding when the
message says no more; the cause, where it says one, tells the next engineer more."""
_SETTLED_LATER = re.compile(
    r"(?i)\b(?:is|was|are|were|now|been)\s+(?:fixed|solved|resolved|gone|handled|addressed)\b"
)
"""A cause already dealt with ("the issue is fixed"): an account, not a finding."""
_HEDGE = re.compile(r"(?i)^(?:if|when|whether|unless|maybe|perhaps|possibly|could|might)\b")
_AGREEMENT = re.compile(
    r"(?i)^\W*(?:you(?:'|\u2019)?re\s+(?:absolutely\s+|completely\s+|totally\s+)?right|"
    r"good\s+(?:point|catch|call)|agreed|makes\s+sense|fair\s+point|understood|got\s+it)\b[^.!:]*[.!:]*\s*"
)
"""The agent accepting what the person just said."""
_POINTER = re.compile(r"(?i)\b(?:that|this|those|these|it|them)\b")
_LEAD = re.compile(r"^[^\w`\"'(\[]+")


@dataclass(frozen=True)
class Line:
    """One line for a snapshot section, with the seq of the message it rests on."""

    seq: int
    text: str


def _seq(m: Message, index: int) -> int:
    return m.seq if m.seq is not None else index + 1


def _said(m: Message) -> str:
    return m.text.strip() if m.role in ("user", "assistant") else ""


def _gist(text: str, limit: int) -> str:
    """The first sentences of ``text``'s prose, up to ``limit`` words; it stops before a later
    sentence that only leads into code ("I ran:"), whose words went with the code."""
    kept: list[str] = []
    for sentence in sentences(text):
        flat = _LEAD.sub("", sentence)
        if NARRATION.match(flat) or (flat.endswith("!") and len(flat.split()) <= 3):
            continue  # "Let me check", "Excellent point!": no content
        if kept and flat.endswith(":"):
            break
        if kept and kept[-1][-1:] not in ".!?:;":
            kept[-1] += ";"  # a list item: keep the items apart
        kept.append(flat)
        if len(" ".join(kept).split()) >= limit:
            break
    return clip_words(" ".join(k for k in kept if k), limit)


def _diagnosis(m: Message) -> str | None:
    """The message's statement of a cause: its first, or a headline ("a fundamental flaw")
    only when no sentence of it says what the cause is."""
    headline: str | None = None
    for sentence in sentences(m.text):
        flat = _LEAD.sub("", sentence)
        cause = _CAUSE.search(flat) is not None
        if (
            not (cause or _HEADLINE.search(flat))
            or flat.endswith("?")
            or _HEDGE.match(flat)
            or NARRATION.match(flat)  # "Let me check whether the change breaks the tests"
            or _SETTLED_LATER.search(flat)
            or words(flat) < FOUND_MIN_WORDS
        ):
            continue
        if cause:
            return flat
        headline = headline or flat
    return headline


def findings(messages: Sequence[Message]) -> list[Line]:
    """The agent's statements of a cause, latest first, one per message, no repeats."""
    found: list[Line] = []
    seen: set[str] = set()
    for index, m in enumerate(messages):
        if m.role != "assistant" or not m.text.strip():
            continue
        flat = _diagnosis(m)
        if flat is None or flat.lower() in seen:
            continue
        seen.add(flat.lower())
        seq = _seq(m, index)
        found.append(Line(seq, f"Found (#{seq}): " + clip_words(flat, FOUND_WORDS)))
    return list(reversed(found))[:MAX_FOUND]


def _nearest(
    messages: Sequence[Message], index: int, role: str, step: int
) -> tuple[int, Message] | None:
    """The nearest message with words from ``index`` going ``step`` (1 on, -1 back), if it is
    ``role``'s: the reply to a question, the reply a follow-up points to."""
    at = index + step
    while 0 <= at < len(messages):
        m = messages[at]
        if m.role in ("user", "assistant") and m.text.strip():
            return (at, m) if m.role == role else None
        at += step
    return None


def _turn_reply(messages: Sequence[Message], index: int) -> tuple[int, str] | None:
    """The agent's first reply with content after the person's message at ``index``, before
    they speak again: the answer, past any "Let me check" and its tool calls."""
    for at in range(index + 1, len(messages)):
        m = messages[at]
        if m.role == "user" and m.text.strip():
            return None
        if m.role == "assistant" and (gist := _gist(m.text, ANSWER_WORDS)):
            return at, gist
    return None


def answers(messages: Sequence[Message]) -> list[Line]:
    """Questions the person asked with the gist of the answer, and short follow-ups that
    point back ("add that dep") with the gist of the reply they point to; latest first."""
    out: list[Line] = []
    answered: dict[int, int] = {}  # index of an answer -> seq of its question
    for index, m in enumerate(messages):
        said = _said(m) if m.role == "user" else ""
        if not said or "\n" in said:
            continue
        n = len(said.split())
        if said.endswith("?") and n <= QUESTION_WORDS * 2:
            reply = _turn_reply(messages, index)
            if reply is None:
                continue
            at, gist = reply
            answered[at] = _seq(m, index)
            ask = clip_words(said, QUESTION_WORDS)
            text = f'Asked (#{_seq(m, index)}): "{ask}" Answer (#{_seq(messages[at], at)}): {gist}'
            out.append(Line(_seq(m, index), text))
        elif n <= FOLLOW_UP_MAX_WORDS and _POINTER.search(said):
            prior = _nearest(messages, index, "assistant", -1)
            if prior is None:
                continue
            at, r = prior
            head = f'Request #{_seq(m, index)} "{said}" refers to'
            if at in answered:
                text = f"{head} the answer at #{_seq(r, at)} (to #{answered[at]})"
            elif gist := _gist(r.text, ANSWER_WORDS):
                text = f"{head} the reply at #{_seq(r, at)}: {gist}"
            else:
                continue
            out.append(Line(_seq(m, index), text))
    return list(reversed(out))[:MAX_ANSWERS]


def settled(messages: Sequence[Message]) -> Line | None:
    """The latest design the agent restated on accepting the person's correction and then
    acted on (a tool call follows before the person speaks again); it supersedes earlier ones."""
    for index in range(len(messages) - 1, 0, -1):
        m = messages[index]
        if m.role != "assistant" or not _AGREEMENT.match(m.text):
            continue
        before = _nearest(messages, index, "user", -1)
        if before is None or not _acted(messages, index):
            continue
        _, person = before
        rest = _gist(_AGREEMENT.sub("", m.text.strip(), count=1), ANSWER_WORDS)
        if len(rest.split()) < 4:
            continue
        cue = clip_words(person.text.strip(), 12)
        text = f'{SETTLED} (#{_seq(m, index)}, on the person\'s "{cue}"): {rest}'
        return Line(_seq(m, index), text)
    return None


def _acted(messages: Sequence[Message], index: int) -> bool:
    """Whether the agent made a tool call from ``index`` on, before the person spoke again."""
    for at in range(index, len(messages)):
        m = messages[at]
        if at > index and m.role == "user" and m.text.strip():
            return False
        if m.role == "assistant" and m.tool_calls:
            return True
    return False
