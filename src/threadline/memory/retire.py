"""Which earlier instruction a new one retires by what it says, not by a shared word.

A spec is revised in words that share little with the version it replaces: "for now
there is no AI" ends "there is only one mode where you play against the computer";
"there is also no concept of check" ends "have a red highlight when a king is in
check"; "export_development_history.py only writes prompt_history.md" ends "the script
first writes exported-session.jsonl". Two readings, each strict, so that a shared
word alone never retires anything:

- negation (``negated``): a clause saying there is no X (no more X, without X, remove X)
  retires the earlier clause that says every word of X, the one X is most of;
- exclusivity (``exclusive``): a clause saying its subject only <does> Y retires the
  earlier clauses in which that subject (named, or "the script" standing for it) does
  the same to something that is not Y.

Words are compared as index terms (``rules.terms``) with a few synonyms folded
together (``SAME``): "the computer" and "an AI" are one opponent, "writes" and
"generates" one act.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from threadline.memory.rules import terms

SAME: tuple[frozenset[str], ...] = (
    frozenset({"ai", "computer", "bot", "cpu"}),
    frozenset({"writ", "generat", "creat", "produc", "output", "sav"}),
)
"""Terms (stemmed, as ``rules.terms`` gives them) that name one thing in a spec."""
_CANON = {t: min(group) for group in SAME for t in group}
GENERIC = frozenset(
    "concept notion idea need way more longer any support option feature ability".split()  # noqa: SIM905
)
"""Words that head what a negation denies ("no concept of check"): not what it is about."""

MAX_DENIED_TERMS = 3
"""What a negation denies is a thing ("no AI", "no concept of check"), a few words; a
longer denial is a sentence of its own, not a value of an earlier clause."""
_NEGATION_RE = re.compile(
    r"(?i)\b(?:there\s+(?:is|are|will\s+be)\s+(?:also\s+|still\s+)?no|no\s+more|without|"
    r"remove|get\s+rid\s+of)\s+(?:the\s+|any\s+|an?\s+)?"
    r"(?P<what>[^,.;:()]+?)(?=\s*(?:[,.;:()!]|\b(?:but|and|when|if|so|for)\b|$))"
)
"""A denial and what it denies, up to a stop or the next clause ("no AI, but ...")."""
_EXCLUSIVE_RE = re.compile(
    r"(?i)^(?P<subject>.+?)\s+(?:(?:is|are)\s+\w+\s+and\s+)?only\s+(?P<verb>[a-z]+)\s+"
    r"(?P<what>(?:[^,.;()]|\.(?=\w))+)"
)
"""``<subject> [is minimal and] only <verb> <what>``; a dot inside a name stays in it."""
_NAMED_RE = re.compile(r"[\w.-]+\.[a-z]{1,6}\b")
_STANDS_FOR_RE = re.compile(r"\bthe\s+(?:script|program|tool|app|file|module|service)\b", re.I)
"""How an earlier clause may name the subject of a later one without its name."""


def canonical(text: str) -> set[str]:
    """The terms of ``text``, synonyms folded to one."""
    return {_CANON.get(t, t) for t in terms(text)}


def _denied(clause: str) -> set[str]:
    """The terms of what ``clause`` says there is none of, or an empty set."""
    found: set[str] = set()
    for m in _NEGATION_RE.finditer(clause):
        found |= canonical(m["what"]) - GENERIC
    return found


def negated(clause: str, earlier: Sequence[tuple[str, str]], taken: set[str]) -> str | None:
    """The slot of the earlier clause ``clause`` denies (``earlier``: ``(clause, slot)``,
    oldest first), if any: it holds every term of what is denied, and of those the one
    it is most of (the latest on a tie); never a clause that denies it too."""
    denied = _denied(clause)
    if not denied or len(denied) > MAX_DENIED_TERMS:
        return None  # "no need to track the existing session for sso": too much to match
    best: tuple[float, int, str] | None = None
    for i, (old, slot) in enumerate(earlier):
        have = canonical(_NAMED_RE.sub(" ", old))  # "ai.js" names a file, not an AI
        if slot in taken or not denied <= have or denied <= _denied(old):
            continue
        score = (len(denied) / len(have), i, slot)
        best = max(best, score) if best is not None else score
    return best[2] if best is not None else None


def exclusive(clause: str, earlier: Sequence[tuple[str, str]], taken: set[str]) -> list[str]:
    """The slots of the earlier clauses ``clause`` rules out by saying its subject *only*
    does something (``earlier`` as for ``negated``), newest first."""
    m = _EXCLUSIVE_RE.match(clause)
    if m is None:
        return []
    verb = canonical(m["verb"])
    what = set(_NAMED_RE.findall(m["what"]))
    names = set(_NAMED_RE.findall(m["subject"]))
    if not verb or not what or not names:
        return []  # "the script only writes the file": too vague to rule anything out
    out: list[str] = []
    for old, slot in reversed(earlier):
        if slot in taken or re.search(r"\bonly\b", old, re.I):
            continue
        about = any(n in old for n in names) or _STANDS_FOR_RE.search(old) is not None
        if about and verb <= canonical(old) and not any(w in old for w in what):
            out.append(slot)
    return out
