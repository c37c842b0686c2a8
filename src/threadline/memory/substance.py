"""Whether a statement carries concrete content, or only a mood.

Issue 37: a fact is an event, a named thing, a number, a preference or a constraint.
A turn often says one such thing and then how it felt ("I ran a charity race for
mental health last Saturday. Really made me think about taking care of our minds.");
kept by itself, the feeling is no fact. Content is told by structure, not by topic: a
name written capitalised inside the sentence, a quoted title, a number, a time, or
enough words that are neither stop words, chatter, nor words of feeling, judgement
and encouragement (``MOOD_WORDS``).
"""

from __future__ import annotations

import re

from threadline.memory.statements import content_words
from threadline.memory.words import MONTHS_BUT_MAY, SEASONS, WEEKDAYS

MOOD_WORDS = frozenset(
    """proud happy glad excited thrilled grateful thankful blessed lucky loved loving
    support supported supportive supporting encouragement encouraging encourage encouraged
    courage courageous inspiring inspired inspire inspiration inspires motivate motivated
    motivation motivating motivates strength strong journey dream dreams heart hearts soul
    souls mind minds life lives world universe moment moments memory memories feel feels
    feeling feelings felt think thinking thought thoughts know knowing knew believe believing
    remind reminds reminded reminder reminders mean means meant matter matters mattered
    appreciate appreciated appreciating important special difference impact progress growth
    grow growing change changes acceptance accept accepted accepting understanding understand
    understood hope hoping hoped hopeful positive tough hard easy worth effort efforts passion
    passionate creativity creative joy joyful happiness peace peaceful calm calming relaxing
    relaxed relax blast energy vibe vibes cherish precious care caring kindness power
    powerful wonderful beautiful gorgeous stunning amazing awesome incredible fantastic
    perfect best better bit way ways people others everyone someone somebody anyone stuff
    always keep keeps kept going make makes made making take takes taking took give gives
    giving gave want wants wanted need needs needed let lets seeing see look looks looked
    looking seems seemed sounds sounded awesome brave bravery real true truly totally
    sure wait can't couldn't amazing inspiring rewarding fulfilling meaningful fun excitement
    thankfully hopefully honestly especially whole pretty lately recently reason reasons
    chance sense struggle struggles challenge challenges goal goals success successful
    confidence confident self value values place places part help helps helped helping
    helpful stay staying thing okay alone together each other same different new own
    wish wishes able much many lot lots lovely nice good great enjoy enjoyed enjoying
    worried scared nervous stressful stressed overwhelmed tired key finding sorry bummer
    wild ride ups downs experience experiences awareness environment perspective
    fleeting determined emotional enlightening freeing authentically comfort
    responsibility decision normal thrill magical sucks healing connect unpredictable
    everything nothing ain't story stories talk talking facing even never ever far come
    comes came coming quite rather actually already still soon more less most long process
    ready offer handling ahead sometimes pushing push reach guide discover bring brings
    bringing brought around resilient focused focus gotta cute bet lemme cozy self thankful
    stoked pumped thrilled hopeful optimistic chapter stuff things figure figuring
    details advice""".split()  # noqa: SIM905
)
"""Words of feeling, judgement, encouragement and light verbs: no content by themselves."""
MIN_CONCRETE_WORDS = 3
"""Words of content beyond ``MOOD_WORDS`` that make a statement concrete without a name,
number or time."""

_NAME_INSIDE_RE = re.compile(r"(?<=[\w,;:)'’\"] )(?!I\b|I['’])[A-Z][\w'’.-]*")
"""A capitalised word inside a sentence (not the first word, not "I"): a name."""
DATUM_RE = re.compile(
    r"\d|[\"“][^\"”]{2,60}[\"”]"  # a number, or a quoted title
    rf"|\b(?:yesterday|tomorrow|tonight|ago|next\s+(?:week|weekend|month|year|\w+day)|"
    rf"last\s+(?:week|weekend|month|year|night|time|{SEASONS}|\w+day)|{WEEKDAYS}|"
    rf"{MONTHS_BUT_MAY})\b",
    re.I,
)
"""A number, a quoted title or a time: each a datum by itself."""


def concrete(text: str, names: tuple[str, ...] = ()) -> bool:
    """Whether ``text`` states something concrete: a name inside it (not one of
    ``names``, the speaker's and the addressee's), a quoted title, a number, a time, or
    ``MIN_CONCRETE_WORDS`` words of content that are no words of mood."""
    if DATUM_RE.search(text) or name_inside(text, names):
        return True
    return len(substance_words(text, names)) >= MIN_CONCRETE_WORDS


def name_inside(text: str, names: tuple[str, ...] = ()) -> bool:
    """Whether ``text`` names someone or something inside a sentence (a capitalised word
    not at its start, not "I", not one of ``names``)."""
    left_out = {n.casefold() for name in names for n in name.split()}
    for m in _NAME_INSIDE_RE.finditer(text):
        word = re.sub(r"['’]s$", "", m.group(0)).rstrip(".,!?;:'’").casefold()
        if word and word not in left_out:
            return True
    return False


def substance_words(text: str, names: tuple[str, ...] = ()) -> list[str]:
    """The words of ``text`` that carry content: ``content_words`` less ``MOOD_WORDS``
    and adverbs of degree or manner ("amazingly", "really": ``_ADVERB_RE``)."""
    return [
        w
        for w in content_words(text, names=names)
        if w not in MOOD_WORDS and not (_ADVERB_RE.fullmatch(w) and w not in NOT_ADVERBS)
    ]


_ADVERB_RE = re.compile(r"[a-z]{3,}ly")
NOT_ADVERBS = frozenset(
    "family italy july lily belly rally ally jelly assembly supply reply".split()  # noqa: SIM905
)
"""Words ending in "-ly" that are no adverbs."""


_ADVERBS = r"(?:(?:really|just|also|still|totally|definitely|honestly|so|and|but)\s+)*"
_GERUND_OPENING_RE = re.compile(rf"^{_ADVERBS}[a-z]+ing\b", re.I)
_IT_VERB_RE = re.compile(
    rf"^({_ADVERBS})(made|makes|reminds?|reminded|feels|felt|means|meant|sounds|looks|seems|"
    r"gonna\s+be|gotta\s+be)\b",
    re.I,
)
"""A verb whose dropped subject is "it" ("Really made me think", "Gonna be a great night")."""
_REACTION_RE = re.compile(
    rf"^{_ADVERBS}(?:(?:thanks|thank\s+you)?\s*for\s+\w+ing\b|(?:love|loving)\s+(?:the|that|this|these|those|your|it|how|what)\b|glad|happy|so\s+glad|excited|thankful|grateful|sorry|"
    r"must|would|could|always\s+here|congrats)\b",
    re.I,
)
"""A reaction with its subject left out ("Love the colors", "Glad you liked it", "Must
have been scary"): said to the other person, no fact."""
_I_VERB_RE = re.compile(
    rf"^({_ADVERBS})(gonna|gotta|going\s+to|hoping|planning|thinking|trying|working|"
    r"looking|getting|heading|off\s+to|wish|hope|can't\s+wait|been|(?:love|loving)(?=\s+(?:to|\w+ing)\b)"
    r"|(?:lost|got|went|took|had|found|bought|started|finished|joined|moved|visited|tried|"
    r"signed|launched|built)(?=\s+(?:my|a|an|some|the|that|this|these|those|lots|to|back|up|into|\w+ing)\b))\b",
    re.I,
)
"""A verb whose dropped subject is the speaker ("Gonna continue my edu")."""
_FINITE_RE = re.compile(
    r"\b(?:is|are|was|were|has|have|had|does|did|will|would|can|could|should|must|might|"
    r"lets|makes|made|helps|helped|brings|brought|gives|gave|keeps|kept|takes|took|means|"
    r"meant|reminds|reminded|feels|felt|gets|got|goes|went|shows|showed|needs|needed|sounds|"
    r"seems|looks|works|matters|requires|allows|costs|need|give|take|bring|keep|make|help|"
    r"mean|let)\b"
    r"|['’](?:s|re|ve|ll|d)\b"
)


_OWN_SUBJECT_RE = re.compile(
    r"\b(?:I|we|he|she|they)\b(?!['’]s)|\b[a-z]+s\s+(?:me|us|him|her|them|my|our)\b"
)
"""A subject of its own after an "-ing" phrase ("Growing up, I saw ...", "Inspiring 💪 I
emailed ...") or a verb of the phrase's own ("Seeing my students succeed motivates me")."""


ING_ADJECTIVES = frozenset(
    """exciting amazing interesting inspiring relaxing refreshing challenging rewarding
    fulfilling satisfying boring tiring exhausting surprising overwhelming terrifying
    stunning charming calming annoying frustrating encouraging touching heartwarming
    thrilling humbling freeing depressing disappointing worrying amusing fascinating
    breathtaking""".split()  # noqa: SIM905
)
"""Words in "-ing" that open a sentence as an adjective ("Exciting but kinda scary"):
said of "it", not of the speaker."""
_ME_RE = re.compile(r"\b(?:me|myself)\b", re.I)


def with_subject(sentence: str) -> tuple[str, bool]:
    """A sentence with the subject it left out put back, and whether it points back
    ("it", said of what came before); "" for a reaction (``_REACTION_RE``).

    "Gonna continue my edu" -> "I'm gonna continue my edu"; "Really made me think ..."
    -> "It really made me think ..."; "Just creating an experience ..." (an "-ing"
    phrase with no verb after it) -> "I'm just creating an experience ..."; "Dancing
    lets us be ourselves" has its subject."""
    if _REACTION_RE.match(sentence):
        return "", False
    m = _IT_VERB_RE.match(sentence)
    if m is not None:
        it = "It's" if m.group(2).lower().startswith(("gonna", "gotta")) else "It"
        return f"{it} {sentence[:1].lower()}{sentence[1:]}", True
    lower = f"{sentence[:1].lower()}{sentence[1:]}"
    adjective = _GERUND_OPENING_RE.match(sentence)
    if adjective is not None and adjective[0].split()[-1].lower() in ING_ADJECTIVES:
        return f"It's {lower}", True  # "Exciting but kinda nerve-wracking"
    verb = _I_VERB_RE.match(sentence)
    if verb is not None and verb.group(2).lower() == "been" and _ME_RE.search(sentence):
        return f"It's {lower}", True  # "Been hectic for me lately": it has, not I
    if verb is not None:
        word = verb.group(2).lower()
        if word in ("gotta", "been"):
            be = "I've"
        elif word.endswith(("ing", "gonna")) or word in ("going to", "off to"):
            be = "I'm"
        else:
            be = "I"  # "I wish", "I love to", "I lost my job", "I can't wait"
        return f"{be} {sentence[:1].lower()}{sentence[1:]}", False
    gerund = _GERUND_OPENING_RE.match(sentence)
    if gerund is None or len(sentence.split()) < 3:
        return sentence, False
    rest = re.sub(  # the verb of a relative clause or after "to" is not the main one
        r"\b(?:(?:that|which|who)(?:['’]\w+|\s+(?:will|would|can|could))?|to)\s+\w+",
        "",
        sentence[gerund.end() :],
    )
    if _FINITE_RE.search(rest) is not None or _OWN_SUBJECT_RE.search(rest) is not None:
        return sentence, False
    return f"I'm {sentence[:1].lower()}{sentence[1:]}", False
