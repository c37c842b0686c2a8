"""What a short turn of advice, cheer or show-and-tell says, when nothing else in it is a fact.

The statement rules drop advice ("Keep going!"), praise of the person spoken to and
rating ("It's awesome ..."), so a turn made only of them yields no fact. Yet some of
them carry content a person would remember (issue 37: the judge's missed
observations): a piece of advice given ("My advice: stay focused"), a thing of the
speaker's shown ("Here's one of my trophies from a dance contest"), what
the speaker enjoys ("It's awesome seeing my vision happen"). Each becomes one short
statement naming who holds the view. Praise of the person spoken to ("You're so
talented") stays a reaction, no fact (``worth``); so does a general truth offered as
a reminder ("remember that stumbling blocks can be opened doors"): kept as a fact, it
took the place of evidence turns in search (LoCoMo recall@10 0.689 -> 0.687)."""

from __future__ import annotations

import re

from threadline.memory.statements import strip_opener, third_person

_END = r"(?P<rest>[^.!?]{8,160})"
_ADVICE_RE = re.compile(
    rf"^(?:my|one)\s+(?:best\s+)?(?:advice|tip)\s*(?:is|would\s+be)?\s*[:,\-–—]\s*{_END}", re.I
)
"""Advice given as such ("My advice: stay passionate, focused and resilient")."""
_SHOWN_RE = re.compile(
    r"(?i)^(?:here['’]?s|here\s+is|check\s+out|this\s+is)\s+(?P<one>one\s+of\s+)?"
    r"my\s+(?P<thing>[^.!?,;]{3,80})"
)
"""A thing of the speaker's shown ("Here's one of my trophies from a dance contest")."""
_ENJOYS_RE = re.compile(
    r"(?i)^it['’]?s\s+(?:so\s+|really\s+|super\s+)?(?:awesome|amazing|great|wonderful|"
    r"rewarding|fulfilling)\s+(?P<doing>(?:seeing|having|being|getting|watching|doing)\s+"
    r"my\s+[^.!?]{3,80})"
)
"""What the speaker enjoys, said as a rating ("It's awesome seeing my vision happen")."""


def views(sentences: list[str], speaker: str, addressee: str | None) -> list[str]:
    """The views a turn's ``sentences`` state, as third-person statements of
    ``speaker`` (``addressee``: who "you" is)."""
    out: list[str] = []
    for sentence in sentences:
        bare = strip_opener(sentence).strip()
        view = _view(bare, speaker, addressee)
        if view:
            out.append(view)
    return out


def _inner(text: str, speaker: str, addressee: str | None = None) -> str:
    """``text`` in the third person, as the inside of a sentence (its case kept)."""
    text = text.strip()
    out = third_person(text, speaker, addressee)
    return out if text[:1].isupper() else out[:1].lower() + out[1:]


def _view(bare: str, speaker: str, addressee: str | None) -> str | None:
    if m := _ADVICE_RE.match(bare):
        return f"{speaker}'s advice: {_inner(m['rest'], speaker, addressee)}."
    if (m := _SHOWN_RE.match(bare)) and not re.search(r"\b(?:one|ones|it|this|that)\b", m["thing"]):
        thing = _inner(m["thing"], speaker, addressee)
        return f"{speaker} has {thing}." if m["one"] else f"{speaker} showed {speaker}'s {thing}."
    if m := _ENJOYS_RE.match(bare):
        return f"{speaker} enjoys {_inner(m['doing'], speaker, addressee)}."
    return None
