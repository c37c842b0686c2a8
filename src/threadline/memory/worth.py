"""Whether a statement of a conversation is worth a fact: what a person would write down.

Issue 37: judged fact by fact, half the facts of a conversation were true but trivial:
reactions, opinions of the other person ("You're so talented"), truths about anyone
("Life's too short"), captions of a shared picture ("Here's a pic of Oliver"), filler
("Things have been hectic lately"). A fact is kept when it says something concrete of
someone: the speaker's own event, plan, preference or thing (first person), or a named
person, place or thing, or a time or number, with enough words of content beside it.
Told by structure, not topic, so the rule holds on conversations nobody has read.
"""

from __future__ import annotations

import re

from threadline.memory.persons import ABSTRACT_OURS
from threadline.memory.statements import PAST_FORMS
from threadline.memory.substance import DATUM_RE, MOOD_WORDS, name_inside, substance_words

MIN_SUBSTANCE = 2
"""Words of content (``substance.substance_words``; a name or a time counts as one) a
kept statement needs: "We did it yesterday" has one, "I painted a lake sunrise" three."""

MIN_IMPERSONAL = 4
"""Words of content a statement with no person, name or time in it needs ("It was a
transgender poetry reading where ..."); fewer make a truth about anyone ("Good
flooring's crucial", "Life's too short")."""

_YOURS_RE = re.compile(r"\b(?:you|your|yours|yourself|yourselves|ya|y['’]all)\b", re.I)
_AS_ADJECTIVE = "".join(
    f"(?<!{w} )"
    for w in "be been is are am so very really too feel felt get got".split()  # noqa: SIM905
)
_PAST_RE = re.compile(rf"\b(?:{'|'.join(sorted(PAST_FORMS))}|{_AS_ADJECTIVE}[a-z]{{2,}}ed)\b", re.I)
"""A verb in the past: something happened; not a form in "-ed" after "be" or "so", an
adjective ("they will be so supported")."""
_RESOLVE_RE = re.compile(
    r"\b(?:will|['’]ll|gonna|going\s+to|gotta|have\s+to|must|won['’]t|never|not)\s+"
    r"(?:\w+\s+)?(?:keep|stay|continue|give\s+up|quit|stop|let\s+anything|giving\s+up)\b",
    re.I,
)
"""A resolve ("I'll keep plugging away", "I won't quit on my dreams"): no fact by
itself, unless it names a time or a thing or says more (``MIN_IMPERSONAL`` words)."""
_SPEAKER_RE = re.compile(r"\b(?:I|my|me|mine|myself|we|our|ours)\b|\bI['’]", re.I)
"""The speaker in a statement; an "us" alone is often everyone ("Nature seems to refresh
us")."""
_LIKING_RE = re.compile(
    r"(?<!would )(?<!['’]d )\b(?:love|loves|enjoy|enjoys|like|likes|prefer|prefers|hate|hates|"
    r"favou?rite|fave|"
    r"fan\s+of)\b",
    re.I,
)
"""A preference of the speaker's ("I will always love reading"): content by itself."""
_MY_THING_RE = re.compile(r"\b(?:my|our)\s+(?:own\s+|new\s+|old\s+)?([a-z]{3,})", re.I)
"""Something of the speaker's ("my new job", "our dog"): content by itself, unless
everyone has it ("my dreams", "my journey")."""
_POINTING_RE = re.compile(
    r"^(?:it|they|he|she)\b(?!\s+(?:and|or)\b)"
    r"|^(?:this|that|these|those)(?:['’]s|\s+(?:is|was|are|were|has|had|will|would|really|just|"
    r"also|looks?|seems?|means|made|makes|brings|helps|gives|reminds|keeps|shows)\b)",
    re.I,
)
"""A statement opening with a pronoun for what was said or shown before ("It helps me
keep track", "They're my biggest motivation"): out of its turn it names nothing."""
_SOMEONE_RE = re.compile(r"^(?:they|he|she)\b", re.I)
_IDENTIFIES_RE = re.compile(
    r"^(?:it|this|that|these|those)(?:['’]s|['’]re|\s+(?:is|are|was|were))\s+(?:my|our)\s", re.I
)
"""A pointing opening that says what the thing is, the speaker's ("These are my lucky
basketball shoes"): it names the thing."""
_TOWARD_YOU_RE = re.compile(
    r"\b(?:proud|awe|happy|glad|grateful|thankful|excited|pumped|stoked|thrilled|impressed|"
    r"amazed|sorry|inspired|jealous)\s+(?:of|for|about|by|at|with)\s+(?:you|your)\b"
    r"|\b(?:love|loves|like|likes|admire|admires)\s+(?:\w+ing\s+|how\s+)?(?:you|your)\b"
    r"|\bwish(?:ing|es)?\s+(?:you|your)\b",
    re.I,
)
"""A feeling about the person spoken to ("I'm in awe of your courage"): a reaction."""
_SHOWING_RE = re.compile(
    r"^(?:here(?:['’]s|\s+is|\s+are)|check\s+(?:out|it\s+out|this\s+out)|take\s+a\s+look|"
    r"look\s+at|see\s+(?:this|that)|this\s+is\s+(?:a|the|my)\s+(?:pic|photo|picture|snap|shot)|"
    r"(?:that|this|the)\s+(?:pic|photo|picture|snap|shot)\b)",
    re.I,
)
"""A statement that shows a shared picture ("Here's our latest work", "That pic was from
a show"): the picture is not in the memory, so the statement points at nothing."""


def _told(text: str, names: tuple[str, ...]) -> bool:
    """Whether a statement with no person in it tells something by itself: a name, a
    time, or something that happened (a past form) in ``MIN_IMPERSONAL`` words of
    content ("It was a poetry reading where trans people shared their stories"), not
    a truth about anyone in the present ("Kids are amazingly resilient")."""
    if name_inside(text, names) or DATUM_RE.search(text):
        return True
    return _PAST_RE.search(text) is not None and len(substance_words(text, names)) >= MIN_IMPERSONAL


def points_back(text: str, names: tuple[str, ...] = ()) -> bool:
    """Whether a statement opens with a pronoun for what came before (``_POINTING_RE``)
    and cannot stand without it: a fact only beside the statement it points at. "It"
    or "this" telling something by itself (``_told``: "It was a poetry reading where
    trans people shared their stories") or saying what the speaker's thing is ("These
    are my lucky shoes") stands; "they", "he", "she" only with a name beside them."""
    if _POINTING_RE.match(text) is None or _IDENTIFIES_RE.match(text):
        return False
    if _SOMEONE_RE.match(text):  # "They were scared but we reassured them": who?
        return not name_inside(text, names)
    return not _told(text, names)


def fits_beside(text: str, first_person: bool, names: tuple[str, ...] = ()) -> bool:
    """Whether a statement may stand in a fact at all, if only as the context of another:
    not a feeling about the person spoken to, nor (unless the speaker's own, or naming a
    time or a name: "You met them at the lake house last summer") a picture being shown
    or what the person spoken to is, has or should do."""
    if _TOWARD_YOU_RE.search(text):
        return False
    if first_person or name_inside(text, names) or DATUM_RE.search(text):
        return True
    return not (_SHOWING_RE.match(text) or _YOURS_RE.search(text))


def worth_a_fact(text: str, first_person: bool, names: tuple[str, ...] = ()) -> bool:
    """Whether a statement (as said, before the person rewriting) is worth a fact by
    itself: it may stand in a fact (``fits_beside``), it is the speaker's or tells
    something by itself (``_told``: not a truth about anyone), it is no caption of a
    shared picture, and it has ``MIN_SUBSTANCE`` words of content. ``names``: the
    speaker's and the person spoken to, no content by themselves."""
    named = name_inside(text, names)
    dated = DATUM_RE.search(text) is not None
    words = len(substance_words(text, names))
    first_person = first_person and _SPEAKER_RE.search(text) is not None
    if not fits_beside(text, first_person, names):
        return False
    if not first_person and not _told(text, names):
        return False
    if _RESOLVE_RE.search(text) and not (named or dated) and words < MIN_IMPERSONAL:
        return False
    if _SHOWING_RE.match(text) and not (named or dated):
        return False  # "Here's a pic of my family at the beach": a caption
    mine = first_person and any(
        m[1].lower() not in ABSTRACT_OURS and m[1].lower() not in MOOD_WORDS
        for m in _MY_THING_RE.finditer(text)
    )
    liked = first_person and _LIKING_RE.search(text) is not None
    return words + named + dated + mine + liked >= MIN_SUBSTANCE
