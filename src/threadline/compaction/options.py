"""A reply that picks among options the agent just offered, resolved to the option's words.

"let's go with option 1" says nothing to an engineer who never saw the list: the
choice is the option's own text in the agent's message before it, and the agent's
stated reason when it gave one ("Given that the CLI imports strategy, not vice
versa, option 1 seems cleanest"). Options are read by their shape only: numbered or
lettered items (``1.``, ``B)``) or ``Option 2:`` headings, at least two of them, in
one message of the agent's. A reply picks one by number or letter ("option B",
"approach 2", "do 2", a reply that is just "2"), or by position ("the second one").
"""

from __future__ import annotations

import re

from threadline.compaction.decisions import RATIONALE
from threadline.compaction.prose import LIST_ITEM, sentences
from threadline.compaction.snapshot import clip_words, one_line

OPTION_WORDS = 22
"""An option's text, clipped; the agent's reason for it is clipped to ``REASON_WORDS``."""
REASON_WORDS = 26
PICK_CHARS = 400
"""A pick is said near the start of the reply; later words are about something else."""

_NOUN = r"(?:option|approach|alternative|choice|variant|proposal|solution)"
_HEADED = re.compile(
    rf"(?i)^\s{{0,3}}(?:#{{1,6}}\s*)?(?:\*\*)?\s*{_NOUN}\s+(?P<key>\d{{1,2}}|[a-h])\b"
    r"\s*(?:\*\*)?\s*[:.)\-\u2013\u2014]*\s*(?:\*\*)?\s*(?P<text>.*)$"
)
"""``**Option 2: Dispatch by type**`` or ``### Approach B`` (its text on the next line);
a numbered or lettered ``LIST_ITEM`` is the other shape of an offered option."""
_ORDINALS = {"first": "1", "second": "2", "third": "3", "fourth": "4", "fifth": "5"}
_PICKS = (
    re.compile(rf"(?i)\b{_NOUN}\s*#?\s*(?P<key>\d{{1,2}}\b|[a-h]\b)"),
    re.compile(rf"(?i)\bthe\s+(?P<nth>{'|'.join(_ORDINALS)}|last)\s+(?:one|{_NOUN})\b"),
    re.compile(
        r"(?i)(?:^|\b(?:go(?:ing)?\s+with|do|pick|take|choose|prefer|use|let['\u2019]?s\s+do)"
        r"\s+)(?:#|number\s+)?(?P<key>\d{1,2}|[A-H])(?=\s*(?:[.,;!:)]|$|\s+(?:and|but|then|"
        r"please|for\s+now|it\s+is)\b))"
    ),
)
"""How a reply picks: by name ("option B"), by place ("the second one"), by number alone
("do 2", "go with B", a reply opening with just the number); tried in this order."""
_NUMBERED_ANSWERS = re.compile(r"(?is)^\W*(?:1|a)\s*[:.)]\s.*?(?:^|\s)(?:2|b)\s*[:.)]\s")
""""1: yes, 2: no": answers to numbered questions, not a pick."""
_RECOMMENDS = re.compile(
    r"(?i)\b(?:seems?|looks?|is|would\s+be)\s+(?:the\s+)?(?:cleanest|simplest|safest|best|"
    r"most\s+\w+|preferable|better)\b|\brecommend(?:ed)?\b|\bI(?:['\u2019]d|\s+would)\s+"
    r"(?:go\s+with|pick|choose|suggest)\b"
)
"""The agent arguing for an option: its reason, when it names the option."""


def _option(line: str) -> re.Match[str] | None:
    """The offered option a line opens, by heading or as a numbered or lettered item."""
    m = _HEADED.match(line) or LIST_ITEM.match(line)
    return m if m is not None and m.group("key") else None


def offered(text: str) -> dict[str, str]:
    """The options an agent's message offers, by key (``"1"``, ``"b"``), each its text on
    one line; empty when it offers fewer than two."""
    found: dict[str, str] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _option(line)
        if m is None:
            continue
        key, said = m.group("key").lower(), m.group("text").strip()
        if not said.strip("*:").strip():  # a heading: its text is the next line
            said = next((ln.strip() for ln in lines[i + 1 :] if ln.strip()), "")
        said = one_line(said.replace("**", "")).strip(" :")
        if said and key not in found:
            found[key] = said
    keys = list(found)
    if sum(said.endswith("?") for said in found.values()) * 2 > len(found):
        return {}  # numbered questions: their answers are no pick
    if len(keys) < 2 or keys[0] not in ("1", "a") or keys[1] not in ("2", "b"):
        return {}
    return found


def picked(reply: str, options: dict[str, str]) -> str | None:
    """The key of the option ``reply`` picks among ``options``; None when it picks none
    (or names a key the options do not have)."""
    head = reply[:PICK_CHARS]
    m = None if _NUMBERED_ANSWERS.match(head) else _pick(head)
    if m is None:
        return None
    nth = (m.groupdict().get("nth") or "").lower()
    key = (list(options)[-1] if nth == "last" else _ORDINALS.get(nth) or m.group("key")).lower()
    return key if key in options else None


def _pick(head: str) -> re.Match[str] | None:
    """The first way of picking (``_PICKS``) the opening of a reply matches."""
    return next((m for p in _PICKS if (m := p.search(head.strip())) is not None), None)


def _reason(text: str, key: str, option: str) -> str | None:
    """The sentence of the offer that argues for option ``key``, outside the options."""
    name = re.compile(rf"(?i)\b{_NOUN}\s*#?\s*{re.escape(key)}\b|\({re.escape(key)}\)")
    title = option.split(":", 1)[0].strip().lower()
    for line in text.splitlines():
        if _option(line):
            continue
        for sentence in sentences(line):
            names = name.search(sentence) or (len(title) > 8 and title in sentence.lower())
            if names and (_RECOMMENDS.search(sentence) or RATIONALE.search(sentence)):
                return clip_words(one_line(sentence.replace("**", "")), REASON_WORDS)
    return None


def choice_line(reply: str, offer: str | None) -> str | None:
    """``User chose option 1: <its text> (agent's reason: ...)`` when ``reply`` picks one of
    the options ``offer`` (the agent's message before it) made; None otherwise."""
    if not offer:
        return None
    options = offered(offer)
    key = picked(reply, options) if options else None
    if key is None:
        return None
    option = options[key]
    line = f"User chose option {key.upper() if key.isalpha() else key}: "
    line += clip_words(option, OPTION_WORDS)
    why = _reason(offer, key, option)
    return f"{line} (agent's reason: {why})" if why else line


def picks(sentence: str) -> bool:
    """Whether a sentence of the person's picks an option by its number, letter or place
    (its words say nothing else a reader could use)."""
    return _pick(sentence[:PICK_CHARS]) is not None


__all__ = ["choice_line", "offered", "picked", "picks"]
