"""Which clauses of a person's sentence can be rewritten in the third person cleanly.

The rewriting (``statements.third_person``) maps "I" to the speaker and "you" to the
person spoken to. That is wrong for a "you" that means anyone ("Nature can be so
refreshing for your soul"), for advice and cheer ("Push through, you got this"), and
for a "we"/"our"/"us" that is everyone ("moments like these remind us how important
our loved ones are"): rewritten, they become garbled facts ("refreshing for Caroline's
soul", "remind Caroline and others how important Caroline's loved ones are"). Issue
37 asks for the pronoun resolved or the clause dropped: this module drops the clause.

A "we" is kept only where it did or plans something (a past form, "we're going to",
"we'll ... next week"); an "our" only before a thing of the speaker's ("our trip",
not "our hearts": rewritten as anyone's, "within us all is the key to our true
potential" came out "within one all"). A "you" of anyone is kept as "one" ("you
could hear birds" -> "one could hear birds").
"""

from __future__ import annotations

import re

from threadline.memory.statements import REFLEXIVE_IDIOMS, strip_opener, third_person
from threadline.memory.substance import concrete
from threadline.memory.words import MONTHS_BUT_MAY, SEASONS, WEEKDAYS

_SEPARATOR_RE = re.compile(
    r"(,\s+so\s+|,?\s+(?:but|because|['’]?cause|cuz|though|although|which|whenever|while)\s+"
    r"|,\s+and\s+|\s+[-–—]+\s+|;\s+)",
    re.I,
)
"""Where a sentence's clauses meet; the separator is kept to put the rest back together."""
_LEADING_SUBORDINATE_RE = re.compile(
    r"^((?:since|when|whenever|if|after|before|as|while|once)\b[^,]{0,80}),\s+", re.I
)
"""A clause that opens a sentence and ends at its first comma ("Since we last chatted,")."""

_YOU_RE = re.compile(r"\b(?:you|your|yours|yourself|yourselves|y'all|ya)\b", re.I)
_GENERIC_YOU_RE = re.compile(
    r"\b(?:can|could|may|might)\s+(?:\w+\s+)?be\b"
    r"|\b(?:is|are|'s)\s+(?:so\s+|really\s+|super\s+|very\s+)?(?:important|vital|essential)\b"
    r"|\bit'?s\s+(?:so\s+|really\s+)?(?:important|vital|essential|crucial|hard|tough|easy)\s+to\b"
    r"|\bmakes\s+(?:\w+\s+){0,2}difference\b"
    r"|\b(?:when|whenever|if|once)\s+you\b|\bwho\s+you\s+are\b|\bwho\s+\w+\s+you\b"
    r"|\byou\s+(?:could|can|can't|should|might|may|would|'d)\b"
    r"|\byou\s+(?:never|just|always)\s+know\b"
    r"|\bmakes?\s+you\s+(?:feel|realize|think|want|appreciate)\b"
    r"|\b(?:lets|allows)\s+you\b",
    re.I,
)
"""Signs that a "you" means anyone, or that it gives advice: a general statement ("can
be", "is so important", "makes a difference", "when you ..."), a modal ("you could")."""
_PRAISE_RE = re.compile(
    r"\b(?:awesome|amazing|great|wonderful|inspiring|inspired|impressive|incredible|proud|"
    r"kind|brave|strong|talented|lucky|sweet|cool|fantastic|killing\s+it|so\s+\w+ed)\b",
    re.I,
)
_IMPERATIVE_RE = re.compile(
    r"^(?:don'?t|don’t|do|keep|enjoy|push|believe|take|chase|make|remember|try|go|come|stay|"
    r"find|gather|let|let's|let’s|lets|check|give|look|get|be|trust|follow|hang|hold|focus|"
    r"treat|tell|listen|share|reach|never|embrace|celebrate|imagine|consider|join|continue|"
    r"stop|prepare|forget|tackle|savor|savour|capture|spread|aim|rock|here['’]s\s+to|cheers\s+to|have\s+(?:a|fun)|good\s+luck|"
    r"best\s+of|check\s+out|look\s+at)\b",
    re.I,
)
"""A sentence that opens with a verb in the imperative (advice or cheer): no fact."""

_WE_RE = re.compile(r"\bwe\b(?:\s*['’](?:re|ve|ll|d))?", re.I)
_HABIT = r"(?:\w+ly|all|also|even|just|finally|still|both|last|then|once|ever)"
_DONE_RE = re.compile(
    rf"\bwe\s*(?:['’]ll|\s+will|\s+are\s+going\s+to|['’]re\s+going\s+to)\s+(?P<plan>[a-z]+)\b"
    rf"|\bwe\s*(?:['’]re|\s+are|\s+were)(?:\s+{_HABIT})*\s+(?P<ing>[a-z]+ing)\b"
    rf"|\bwe\s*(?:['’]ve|\s+have|['’]d)(?:\s+{_HABIT})*\s+(?P<perfect>[a-z]+)\b"
    rf"|\bwe(?:\s+{_HABIT})*\s+(?P<verb>[a-z]+)\b",
    re.I,
)
_CHAT_VERBS = frozenset(["talked", "chatted", "spoke", "met", "caught", "messaged", "texted"])
"""Verbs of the conversation itself: "since we last chatted" says nothing to keep."""
_WHEN_RE = re.compile(
    rf"\b(?:yesterday|tomorrow|tonight|ago|last|next|{WEEKDAYS}|may|{MONTHS_BUT_MAY}|"
    rf"this\s+(?:week|weekend|month|year|{SEASONS}|morning|evening)|\d{{4}})\b",
    re.I,
)
_OUR_RE = re.compile(r"\bour\s+(?:own\s+)?(\w+)(?:\s+(\w+))?", re.I)
ABSTRACT_OURS = frozenset(
    """lives life hearts heart minds mind souls soul dreams dream stories story paths path
    loved selves bodies voices voice feelings experiences journey journeys differences world
    future past struggles challenges goals passions community society time bond bonds
    friendship relationship love way ways health wellbeing well peace happiness growth
    differences potential""".split()  # noqa: SIM905
)
"""What everyone has ("our hearts", "our stories"): an "our" before them is anyone's."""
SHARED_OURS = frozenset(
    "world future past community society time bond bonds friendship relationship love".split()  # noqa: SIM905
)
"""Of ``ABSTRACT_OURS``, what the speaker shares with people near them ("our community",
"our friendship"): the speaker's, not everyone's; the clause is kept."""


def _we_done(clause: str) -> bool:
    """Whether every "we" in ``clause`` did, does or plans something ("we went", "we
    bond over campfires", "we're going", "we'll ... next week"); not "since we last
    chatted", nor "we'll make it" with no time said."""
    found = 0
    for m in _DONE_RE.finditer(clause):
        verb = (m["verb"] or "").lower()
        if m["verb"] and verb in _CHAT_VERBS:
            return False
        if m["plan"] and not _WHEN_RE.search(clause):
            return False
        found += 1
    return found == len(_WE_RE.findall(clause))


_MINE_RE = re.compile(r"\b(?:I|my|me|mine)\b|\bI['’]", re.I)
_ADVICE_RE = re.compile(r"\byou\s+(?:could|should|might|may|can)\b(?!\s+(?:hear|see|smell))", re.I)


def _dropped(bare: str, addressee: bool, first: bool) -> bool:
    """Whether a clause is advice, cheer or praise: a sentence opening in the imperative
    ("Push through", ``first``: the sentence's first clause) unless it shows something of
    the speaker's ("Check out these kids I met"), praise of the person spoken to ("Your
    passion is awesome", unless it says what they did or will do), or a "you" that
    advises ("You could also ...")."""
    if first and _IMPERATIVE_RE.match(bare) and not _MINE_RE.search(bare):
        return True
    if not addressee or not _YOU_RE.search(bare) or re.search(r"\bI\b|\bI['’]", bare):
        return False
    if _ADVICE_RE.search(bare) is not None:
        return True
    return _PRAISE_RE.search(bare) is not None and not concrete(bare)


_GENERIC_WE_RE = re.compile(
    r"\bwe\s*(?:['’]re|\s+are)\s+(?:all|not|never)\b|\bwe\s+all\s+(?:have|need|are|deserve)\b"
    r"|\bwe\s+(?:can|could|should|must|might|may|gotta)\b"
    r"|\b(?:ones|how|who|what)\s+we\b|\bwe\s+(?:[\w'’]+\s+)?(?:talked|chatted|spoke|met)\b"
    r"|\b(?:that|if|when|whenever)\s+we\s+"
    r"(?!(?:all\s+|both\s+|just\s+)?(?:\w+ed|went|saw|had|got|made|did|took|found|ate|were)\b)"
    r"|\b(?:of|between|among)\s+(?:us|we)\b|\bus\s+(?:together|closer|apart)\b",
    re.I,
)
"""A "we" of everyone ("we can tackle life's challenges", "the ones we choose", "we're
all individual"), of the conversation ("since we last chatted") or "both of us"."""
_ANYONE_RULES = [
    (re.compile(pattern, re.I), replacement)
    for pattern, replacement in [
        (r"\bour\b", "one's"),
        (r"(?-i:\bus\b)", "one"),
        (r"\bourselves\b", "oneself"),
    ]
]


def generic(clause: str) -> str | None:
    """How a clause speaking of anyone is kept: ``"drop"`` for a "we" of everyone
    (``_GENERIC_WE_RE``) or an "our" of everyone ("taking care of our minds"),
    ``"you"`` for a "you" of a general statement, ``"us"`` for an "us" of everyone with
    no "we" ("things that bring us joy"); None for a clause about the people in the
    conversation (an "us" alone is the speaker's: "a car hit us")."""
    if _GENERIC_WE_RE.search(clause):
        return "drop"
    if _YOU_RE.search(clause) and _GENERIC_YOU_RE.search(clause) and not _MINE_RE.search(clause):
        return "you"  # "I could help you if you want" is an offer to the person spoken to
    if _WE_RE.search(clause) is not None:
        return None if _we_done(clause) else "drop"
    everyones = ABSTRACT_OURS - SHARED_OURS
    ours = (w.lower() in everyones for m in _OUR_RE.finditer(clause) for w in m.groups(""))
    if any(ours):
        return "drop"
    return "us" if _ANYONE_US_RE.search(clause) else None


_ANYONE_US_RE = re.compile(
    r"\bourselves\b|\b(?:remind|reminds|reminding|help|helps|make|makes|let|lets|bring|"
    r"brings|give|gives|teach|teaches|allow|allows|keep|keeps|show|shows)\s+(?-i:us)\b",
    re.I,
)
"""An "us" of everyone with no "we" beside it ("things that bring us joy", "surrounding
ourselves with ..."): people's; "a car hit us" is the speaker's."""

_ONE_EACH = {"lives": "life", "hearts": "heart", "minds": "mind", "souls": "soul", "bodies": "body"}


def _as_anyone(clause: str, speaker: str) -> str:
    """A clause speaking of anyone with its persons as "one": "you" -> "one" (its verb
    agreed), "your"/"our" -> "one's", "us" -> "one" ("Nature can be so refreshing for
    one's soul", "taking care of one's minds")."""
    out = clause
    for pattern, replacement in _ANYONE_RULES:
        out = pattern.sub(replacement, out)
    out = re.sub(  # "one's lives" -> "one's life"
        rf"\b(one's\s+(?:own\s+)?)({'|'.join(_ONE_EACH)})\b",
        lambda m: m[1] + _ONE_EACH[m[2].lower()],
        out,
        flags=re.I,
    )
    out = re.sub(r"\byou\s+(?:two|both|guys|all)\b|\by['’]all\b", "people", out, flags=re.I)
    out = re.sub(r"\byourselves\b", "themselves", out, flags=re.I)
    out = re.sub(r"\byourself\b", "oneself", out, flags=re.I)
    return third_person(out, speaker, "one", keep_we=True, anyone=True)


def _idioms_put(clause: str) -> str:
    """``clause`` with the reflexive idioms said another way (the speaker as "X")."""
    for pattern, replacement in REFLEXIVE_IDIOMS:
        clause = re.sub(pattern, replacement.format(s="X"), clause, flags=re.I)
    return clause


def rewritable(sentence: str, addressee: bool, speaker: str) -> str:
    """``sentence`` as it can be rewritten in the third person cleanly: advice, cheer
    and praise clauses out (``_dropped``), the persons of a clause that speaks of anyone
    (``generic``) made anyone's; "" when no clause is left."""
    head = ""
    lead = _LEADING_SUBORDINATE_RE.match(sentence)
    body = sentence
    if lead is not None:
        head, body = lead.group(1), sentence[lead.end() :]
        if re.match(r"(?:if|when|whenever)\b", head, re.I) and generic(head) == "drop":
            return ""  # "if we share them, we show people ...": all of it is anyone's
        head = _kept(head, addressee, speaker, first=True)
    pieces = _SEPARATOR_RE.split(body)
    clauses, separators = pieces[0::2], ["", *pieces[1::2]]
    kept: list[str] = []
    for clause, separator in zip(clauses, separators, strict=True):
        clause = _kept(clause, addressee, speaker, first=not head and not separator)
        if clause.strip():
            kept.append(clause if not kept else separator + clause)
    if not kept:
        return ""
    out = (f"{head}, " if head else "") + "".join(kept).strip()
    if not re.search(r"[.!?]['\"’”)]*$", out):
        end = re.search(r"[.!?]+['\"’”)]*$", sentence)
        out = out.rstrip(",;:-–— ") + (end.group(0) if end else "")
    out = re.sub(r"^(?:and|but|so|because|which)\s+", "", out, flags=re.I)
    return out[:1].upper() + out[1:]


_NO_REWRITE_RE = re.compile(
    r"\b(?:myself|yourself)\b"
    r"|\b(?:been|am|is|was|be|become|became|['’]m)\s+one\s*[.!?]*$",
    re.I,
)
"""A clause the rewriting cannot put cleanly: a reflexive no idiom of
``statements.REFLEXIVE_IDIOMS`` takes ("I pushed myself" -> "Ana pushed themself"), a
bare "one" standing for a word of an earlier turn ("I've been one" -> "Gina has been
one")."""
_OUR_CHAT_RE = re.compile(
    r",?\s*\b(?:since|after|from)\s+our\s+last\s+(?:chat|talk|conversation|call)\b",
    re.I,
)
"""The conversation itself as a time ("since our last chat"): rewritten, it would be
the speaker's chat."""


def _kept(clause: str, addressee: bool, speaker: str, *, first: bool) -> str:
    clause = _OUR_CHAT_RE.sub("", clause)
    bare = strip_opener(clause)
    if not bare.strip() or _dropped(bare, addressee, first):
        return ""
    kind = generic(bare)
    if kind == "drop" or (kind != "you" and _NO_REWRITE_RE.search(_idioms_put(bare))):
        return ""
    if kind == "us":  # "things that bring us joy": people, no one in the conversation
        out = re.sub(r"\bourselves\b", "themselves", clause, flags=re.I)
        return re.sub(r"(?-i:\bus\b)", "people", out)
    return clause if kind is None else _as_anyone(clause, speaker)
