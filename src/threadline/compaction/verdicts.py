"""The user's verdicts on what the agent proposed: answers, plan approvals, rejections.

A proposal is not a decision until the person accepts it. Three shapes of the
record say how it went: the result of a question tool (``AskUserQuestion``,
Pi's ``ask_user_question``: ``User has answered your questions: "Q"="A"``),
the result of a plan approval (``ExitPlanMode``: ``User has approved your
plan``), and a user message that turns down or corrects what came before
("it's bad idea, ...", "no, it's not phase 1"). The first two are the user's
decisions; the third voids the agent's proposal of that turn and is itself a
constraint.
"""

from __future__ import annotations

import re

from threadline.messages import ToolCall

_TOOL_NAMES = {
    "question": "ask_?user(?:_?questions?)?|askuserquestion|request_user_input|ask_?followup\\w*",
    "plan": "exit_?plan_?mode",
}
QUESTION_TOOL, PLAN_TOOL = (re.compile(f"(?i)^(?:{names})$") for names in _TOOL_NAMES.values())
_ANSWER = re.compile(r'"(?P<q>[^"\n]{3,300})"\s*=\s*"(?P<a>[^"\n]{1,300})"')
_APPROVED = re.compile(r"(?i)\buser\s+(?:has\s+)?approved\b")
_IT_IS = r"(?:it|that|this)(?:['\u2019]?s|\s+is)\s+(?:not|wrong|a\s+bad|bad)\b"
_OPENINGS = (r"no\b(?!\s+(?:problem|worries|need|rush))", r"nope\b", r"wrong\b", _IT_IS)
_ANYWHERE = (
    r"bad\s+idea",
    r"not\s+what\s+i\s+(?:asked|meant|want(?:ed)?)",
    r"i\s+don['\u2019]?t\s+like",
)
_REJECTION = re.compile(rf"(?i)^\W*(?:{'|'.join(_OPENINGS)})|\b(?:{'|'.join(_ANYWHERE)})\b")
_REDIRECT = re.compile(
    r"(?i)\b(?:go(?:ing)?\s+back|revert|roll\s*back|no\s+longer|replace|get\s+rid\s+of|"
    r"switch\s+back|undo)\b"
)
SHARED_TOPIC = 2
"""Topic words a later redirect must share with an earlier choice to supersede it."""
_WORD = re.compile(r"[a-z]{4,}")
_COMMON = frozenset(
    [
        "that",
        "this",
        "with",
        "have",
        "from",
        "there",
        "they",
        "what",
        "when",
        "will",
        "would",
        "should",
        "about",
        "also",
        "just",
        "make",
        "need",
        "like",
        "into",
        "been",
        "were",
        "your",
        "then",
        "than",
        "them",
        "only",
        "some",
        "more",
        "each",
        "much",
        "very",
        "dont",
        "does",
        "done",
        "here",
        "other",
        "same",
    ]
)


def is_question_tool(name: str) -> bool:
    return QUESTION_TOOL.match(name) is not None


def answer_decision(call: ToolCall, result: str) -> str | None:
    """The user's answer to the agent's question, as a decision bullet; None when the
    result holds no answer (the tool failed, the user dismissed it)."""
    if is_question_tool(call.name):
        pairs = [(m.group("q").strip(), m.group("a").strip()) for m in _ANSWER.finditer(result)]
        if pairs:
            said = "; ".join(f'"{a}" (asked: {q})' for q, a in pairs)
            return f"User chose {said}"
        return None
    if PLAN_TOOL.match(call.name) and _APPROVED.search(result[:400]):
        plan = str(call.arguments.get("plan") or "")
        title = next((ln.strip("# ").strip() for ln in plan.splitlines() if ln.strip()), "")
        return f"User approved the plan{f': {title}' if title else ''}"
    return None


def rejects(text: str) -> bool:
    """Whether a user message turns down or corrects what the agent just proposed."""
    return _REJECTION.search(text[:600]) is not None


def redirects(text: str) -> bool:
    """Whether a request turns the work away from an earlier way ("go back to the version
    where ...", "revert", "no longer", "replace X with Y")."""
    return _REDIRECT.search(text[:600]) is not None


def topic_words(text: str) -> set[str]:
    """Content words (letters only, so ``phase1`` and ``phase 1`` meet) for telling which
    earlier statement a correction is about."""
    return {w for w in _WORD.findall(text.lower()) if w not in _COMMON}


__all__ = [
    "PLAN_TOOL",
    "QUESTION_TOOL",
    "answer_decision",
    "is_question_tool",
    "redirects",
    "rejects",
    "topic_words",
]
