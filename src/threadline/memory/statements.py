"""What a person's turn states, as standalone third-person sentences.

A turn is cut into sentences; greetings and interjections at a sentence's start
("Hey Mel!", "Wow,") are dropped, and so are questions and sentences with no
substance of their own ("Thanks!", "We got this!", "That sounds great."). A
sentence that leans on the one before it ("They've been there through
everything") stays joined to it, so its pronoun keeps its referent. What is left
is rewritten in the third person: "I"/"my"/"me" become the speaker's name,
"we"/"our" the speaker and others, "you"/"your" the person spoken to, and a
verb after a replaced "I" or "you" agrees ("I love" -> "Ana loves").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from threadline.memory.rules import STOPWORDS

CHATTER_WORDS = frozenset(
    """hi hello hey heya hiya yay yes yep nope okay ok sure thanks thank thx welcome great
    awesome amazing wonderful fantastic cool nice good glad happy sounds sound wow whoa
    congrats congratulations haha hahaha lol omg gosh aww awww cheers bye goodbye see soon
    catch later take care totally definitely absolutely exactly agree agreed true right
    indeed love lovely incredible beautiful super fun hear hearing talk talking chat chatting
    keep going luck best wish wishes hope appreciate appreciated means lot much tho though
    mate buddy friend dear sweet pleasure night morning evening day today anytime""".split()  # noqa: SIM905
)
"""Words that carry a greeting, thanks or cheer, not something to remember."""
MIN_CONTENT_WORDS = 2
"""A sentence needs this many words beyond stop words and chatter to state something."""

_INTERJECTION = (
    r"(?:hi|hey|hello|heya|hiya|oh|ooh|ah|aw+|wow|whoa|woah|yeah|yep|yes|no|nope|well|"
    r"so far,? so good|so|ok|okay|"
    r"sure|thanks|thank you|thx|haha(?:ha)*|lol|omg|gosh|hmm+|um+|great|awesome|cool|nice|"
    r"right|totally|definitely|absolutely|exactly|yay|man|dude|"
    r"(?:congrats|congratulations)(?:\s+(?:on|for)\s+[^.!?,]*)?|"
    r"indeed|good to see you|good to hear from you|long time no (?:see|talk|chat)|"
    r"nice to meet you|yup|oops|(?:and\s+)?(?:btw|by the way)|fyi|phew|ugh|guess what|"
    r"you won['’]t believe (?:it|this)|"
    r"(?:a lot|so much)(?:['’]s| has)? (?:happened|changed|going on)"
    r"(?: since (?:we |our |my )?(?:last )?(?:talked|chatted|spoke|time|chat|talk))?)"
)
_OPENER_RE = re.compile(
    rf"^(?:{_INTERJECTION}\b(?:\s+(?!I\b|I['’])(?-i:[A-Z])[\w'’.-]*(?=[,!.:;]))?[\s,!.:;-]+)+",
    re.I,
)
"""Greetings and interjections at a sentence's start, with a name after them ("Hey Mel,")."""
_LEANS_ON_BEFORE = re.compile(
    r"^(?:they|them|their|it|its|it's|this|that|these|those|he|she|his|her|there|"
    r"which|also|and|but|so|plus|because|since|then)\b",
    re.I,
)
_WORD_RE = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")


REFLEXIVE_IDIOMS = [
    (r"\bbe\s+true\s+to\s+myself\b", "be true to who {s} is"),
    (r"\b(express(?:es|ed|ing)?)\s+myself\b", r"\1 {s}'s feelings"),
    (r"\b(?:all\s+)?by\s+myself\b", "alone"),
    (
        r"\b(believ\w*|belief|faith|confidence|trust\w*)\s+in\s+myself\b",
        r"\1 in {s}'s own abilities",
    ),
    (r"\bproud\s+of\s+myself\b", "proud"),
    (r"\b((?:look\w*|car\w+)\s+(?:after|for))\s+myself\b", r"\1 {s}'s own health"),
    (r"\b(true\s+to)\s+myself\b", r"\1 who {s} is"),
    (r"\b(accept\w*|understand\w*|embrac\w+)\s+myself\b", r"\1 who {s} is"),
    (r"\bexpression\s+of\s+myself\b", "self-expression"),
    (r"\bremind(?:ed)?\s+myself\s+of\b", "recalled"),
    (r"\bremind(?:s)?\s+myself\s+of\b", "recall"),
    (r"\breminding\s+myself\s+of\b", "recalling"),
    (r"\b(push\w*)\s+myself\b", r"\1"),
    (r"\bchallenged\s+myself\b", "took on a challenge"),
    (r"\bchallenging\s+myself\b", "taking on a challenge"),
    (r"\bchallenge\s+myself\b", "take on a challenge"),
    (r"\b(confidence|faith|belief|believ\w*|trust\w*)\s+in\s+yourself\b", r"\1 in oneself"),
    (r"\b(put\w*|push\w*|tak\w+\s+time\s+for)\s+yourself\b", r"\1 oneself"),
    (r"\b(\w+ing)\s+yourself\b", r"\1 oneself"),  # "in being yourself": anyone's
    (r"\b(?<=\w\s)for\s+myself\b", "personally"),
    (r"\b(?<=\w\s)to\s+myself\b", "alone"),
    (r"\b(take|took|taking|takes|taken)\s+care\s+of\s+myself\b", r"\1 care of {s}'s health"),
    (r"\b(it|that|this|them|these|those|everything|all|one)\s+myself\b", r"\1"),
    (
        r"\b((?:the|a|an|my|this|that|these|those)\s+(?:\w+\s+){0,2}?"
        r"(?!(?:for|to|with|about|of|on|at|in|from|by|into|after|like|than|as)\b)\w+)\s+myself\b",
        r"\1",
    ),
    (r"\b(I|me)\s+myself\b", r"\1"),
]
"""A reflexive rewritten so no "themself" is needed: an idiom said another way ("be true
to myself" -> "be true to who Ana is"), an emphatic "myself" dropped ("I made it
myself"). Any other "myself" ("I pushed myself") is left for ``persons`` to drop."""


def _rules(table: list[tuple[str, str]]) -> list[tuple[re.Pattern[str], str]]:
    """Compile a rewrite table; person words match in any case unless a rule says ``(?-i:``."""
    return [(re.compile(pattern, re.I), replacement) for pattern, replacement in table]


_PERFECT_PARTICIPLES = "been|had|sunk|spent|seen|taken|given|written|eaten|gotten|grown"
"""Participles that after "I'm" say "I've" ("I'm sunk tons of time into it")."""
_RULES = _rules(
    [
        (rf"\bI\s*['’]?m\s+(?=(?:{_PERFECT_PARTICIPLES})\b)", "{s} has "),
        (r"\bI\s*['’]?m\b|\bI am\b", "{s} is"),
        (r"\bI\s*['’]ve\b", "{s} has"),
        (r"\bI\s*['’]ll\b", "{s} will"),
        (r"\bI\s*['’]d\b", "{s} would"),
        (r"\bI\s+wanna\b", "{s} wants to"),
        (r"\bI\s+gotta\b", "{s} has to"),
        *REFLEXIVE_IDIOMS,
        (r"\bmyself\b", "themself"),  # left only where ``persons`` could not drop it
        (r"\bmy\b", "{s}'s"),
        (r"\bmine\b", "{s}'s"),
        (r"\bme\b(?![-‐])", "{s}"),  # not "me-time"
    ]
)
"""First-person singular forms and what they become (``{s}``: the speaker)."""
_WE_RULES = _rules(
    [
        (r"\bwe\s*['’]re\b|\bwe are\b", "{s} and others are"),
        (r"\bwe\s*['’]ve\b", "{s} and others have"),
        (r"\bwe\s*['’]ll\b", "{s} and others will"),
        (r"\bwe\s*['’]d\b", "{s} and others would"),
        (r"\bwe\b", "{s} and others"),
        (r"\bours\b", "{s}'s"),
        (
            r"\bour\b(?=\s+(?:own\s+)?(?:lives|hearts|souls|minds|bodies|selves|dreams|stories)\b)",
            "{s} and others'",
        ),
        (r"\bour\b", "{s}'s"),
        (r"\bourselves\b", "themselves"),
        (r"(?-i:(?<=\w\s)us\b(?!\s*[A-Z]))", "them"),
    ]
)
"""First-person plural forms: the speaker and others."""
_YOU_RULES = _rules(
    [
        (
            r"\b(?:all|both|each)\s+of\s+you\b|\byou\s+(?:two|both|guys|all|three)\b|\by['’]all\b",
            "{a} and others",
        ),
        (r"\byou\s*['’]re\b|\byou are\b", "{a} is"),
        (r"\byou\s*['’]ve\b|\byou have\b", "{a} has"),
        (r"\byou\s*['’]ll\b", "{a} will"),
        (r"\byou\s*['’]d\b", "{a} would"),
        (r"\byourself\b", "themself"),
        (r"\byours\b", "{a}'s"),
        (r"\byour\b", "{a}'s"),
    ]
)
_SUBJECT_VERB_RE = re.compile(
    r"\b(I|you)((?:\s+(?:really|usually|always|never|mostly|also|still|often|just|only|"
    r"sometimes|rarely|actually|now|totally|finally|even|recently|definitely|already|"
    r"probably|kinda|sorta|almost|barely|hardly|ever|once|truly|honestly|literally|"
    r"seriously|generally|personally|basically|currently|mainly|genuinely|slowly|"
    r"constantly|occasionally|especially|absolutely|certainly|simply|def|first|later|soon|then|"
    r"(?!(?:apply|reply|rely|supply|comply|multiply|ally|bully|rally|tally)\b)[a-z]{3,}le?y"
    r"))*)\s+"
    r"([a-z]+?(?:n['’]t)?(?:-[a-z]+)?)\b",
    re.I,
)
_NOT_VERBS = frozenset(
    """and or but too also so as at in on to of for with from by about than then there
    here that this the a an all both either neither myself yourself alone""".split()  # noqa: SIM905
)
_THIRD_PERSON = {
    "am": "is",
    "are": "is",
    "have": "has",
    "do": "does",
    "go": "goes",
    "don't": "doesn't",
    "don’t": "doesn’t",
    "haven't": "hasn't",
    "aren't": "isn't",
    "were": "was",
    "weren't": "wasn't",
}
PAST_FORMS = frozenset(
    """was were did had used went got saw made took came gave found thought told became
    left felt brought began kept held wrote stood heard meant met ran paid sat spoke led
    read grew lost fell sent built understood drew broke spent drove bought wore chose
    taught caught sold fought won slept swam sang ate drank flew forgot knew threw hung hid
    rode shot moved said learnt dreamt burnt spelt leapt dealt knelt spilt smelt""".split()  # noqa: SIM905
)
"""Irregular past forms (and "was", "had", "did"): something happened."""
KEEP_VERB = (
    frozenset(
        """will would can could should might must may shall won't wouldn't can't couldn't
        shouldn't mightn't mustn't wasn't didn't hadn't let set cut shut put hit quit hurt
        cost wanna gonna gotta""".split()  # noqa: SIM905
    )
    | PAST_FORMS
) - {"were"}
"""Modals and past forms: the same after "she" as after "I"."""


_PRESENT_IN_ED = frozenset(
    [
        "need",
        "feed",
        "bleed",
        "breed",
        "speed",
        "proceed",
        "succeed",
        "exceed",
        "seed",
        "heed",
        "embed",
        "shred",
        "wed",
    ]
)
"""Verbs in the present that end like a past form: "I need" -> "Ana needs"."""


def third_person_verb(verb: str) -> str:
    """``prefer`` -> ``prefers``, ``watch`` -> ``watches``; past forms, modals and "-ing"
    forms ("I remember you mentioning it") as they are."""
    low = verb.lower()
    if low in _THIRD_PERSON:
        return _THIRD_PERSON[low]
    past = low.endswith("ed") and low not in _PRESENT_IN_ED
    if low in KEEP_VERB or past or low.endswith(("n't", "n’t")) or low in _NOT_VERBS:
        return verb
    if len(low) > 4 and low.endswith("ing"):
        return verb
    if low.endswith("s") and not low.endswith(("ss", "us", "is", "as", "os")):
        return verb  # already the third person ("i looks like"): no "lookses"
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(low) > 2 and low.endswith("y") and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


_APOSTROPHE_RE = re.compile(r"(?<=[^\W\d_])[`´‘ʼ](?=[^\W\d_])")
"""Apostrophes typed as a backtick, an acute accent or an opening quote ("I`m")."""
_GENERIC_YOU_RE = re.compile(
    r"\byou\s+(?:could|can|can't|would|might|'d)\s+(?:\w+\s+)?"
    r"(?:hear|see|smell|feel|taste|tell|sense|spot)\b"
    r"|\byou\s+(?:never|just|always)\s+know\b|\bmakes?\s+you\s+(?:feel|realize|think|want|appreciate)\b",
    re.I,
)
"""Sentences whose "you" means anyone ("you could hear birds", "it makes you feel alive")."""


_OBJECT_YOU_RE = re.compile(
    r"\b(?!(?:and|but|or|so|that|because|if|when|while|since|as|then|which|who|where|"
    r"how|what|why|until|unless|though|although|whether|once|before|after|cause|'cause|"
    r"know|knew|think|thought|hope|bet|guess|believe|feel|felt|said|say|says|sure|glad|"
    r"wish|hear|heard|see|saw|noticed|remember|realize|realized|like|bet|mean|proud)\b)"
    r"[a-z]+\s+$"
)
"""A "you" right after a verb or preposition ("bring you joy", "for you"): an object."""
_BARE_INFINITIVE_RE = re.compile(
    r"\b(?:help|helps|helped|helping|let|lets|make|makes|made|making|watch|watched|see|saw|"
    r"hear|heard|have|has|had|bid)\s+$",
    re.I,
)
"""Verbs after which "you"/"me" is followed by a bare infinitive, never conjugated."""


def third_person(
    sentence: str,
    subject: str,
    addressee: str | None = None,
    *,
    keep_we: bool = False,
    anyone: bool = False,
) -> str:
    """ "I moved to Porto" said by Ana -> "Ana moved to Porto"; "I always use pytest" ->
    "Ana always uses pytest"; "you" becomes ``addressee`` when one is known. With
    ``keep_we`` "we"/"our" stay as said (a coding user's team: "we use pnpm", not "the
    user and others use pnpm"). With ``anyone`` a generic "you" ("you could hear
    birds") becomes ``addressee`` too (``persons`` passes "one")."""

    def subject_verb(m: re.Match[str]) -> str:
        who = subject if m[1] in ("I", "i") else addressee
        if who is None:
            return m[0]
        if who is addressee and _OBJECT_YOU_RE.search(m.string, 0, m.start()):
            return f"{who}{m[2]} {m[3]}"  # "bring you joy": "you" is no subject here
        if _BARE_INFINITIVE_RE.search(m.string, 0, m.start()):
            return f"{who}{m[2]} {m[3]}"  # "help you reach": no "help Gina reaches"
        return f"{who}{m[2]} {third_person_verb(m[3])}"

    out = _APOSTROPHE_RE.sub("'", sentence)
    if addressee is not None:  # "tough for you, Caroline" -> not "for Caroline, Caroline"
        out = re.sub(rf",\s*{re.escape(addressee)}(?=\s*[.!?,;]|\s*$)", "", out)
        out = re.sub(rf"^{re.escape(addressee)},\s*(?=you)", "", out, flags=re.I)
    if addressee is not None and not anyone and _GENERIC_YOU_RE.search(out):
        addressee = None  # "you could hear birds": anyone, not the person spoken to
    out = _MINE_AND_I_RE.sub(lambda m: f"I and {m[1][:1].lower()}{m[1][1:]}", out)
    if not keep_we and _GROUP_RE.search(out):  # "we made our own pots": their pots, not
        out = re.sub(r"[^.!?]+[.!?]*", _group_ours, out)  # the speaker's; a sentence without
        # the group keeps "our" for the speaker ("here's our cat! They brighten our day")
    if (
        not keep_we
        and (us := _FIRST_US_RE.search(out))
        and not _GROUP_RE.search(out, 0, us.start())
    ):
        # "it reminds us ... where we least expect it": the group named where it first
        # comes, not a "them" that points nowhere
        out = f"{out[: us.start()]}{subject} and others{out[us.end() :]}"
    rules = [(p, r.format(s=subject)) for p, r in (_RULES if keep_we else _RULES + _WE_RULES)]
    if addressee is not None:
        rules += [(p, r.format(a=addressee)) for p, r in _YOU_RULES]
    for pattern, replacement in rules:
        out = pattern.sub(replacement, out)
    out = _SUBJECT_VERB_RE.sub(subject_verb, out)
    out = re.sub(r"\bI\b", subject, out)
    out = re.sub(  # "reminding me I'm not alone": "reminding Maria that Maria is ..."
        rf"\b({re.escape(subject)}) (?={re.escape(subject)}\b)", r"\1 that ", out
    )
    if not keep_we:
        out = group_once(out, f"{subject} and others")
    if addressee is not None:
        out = re.sub(r"\byou\b", addressee, out, flags=re.I)
    if subject.startswith("the "):  # "as the user drags their piece", not "the user's piece"
        out = _their_after(out, subject)
        out = re.sub(  # "... blue. The user likes", not "blue. the user likes"
            rf"(?<=[.!?]\s){re.escape(subject)}", subject[:1].upper() + subject[1:], out
        )
    return out[:1].upper() + out[1:]


def _group_ours(m: re.Match[str]) -> str:
    """In a sentence naming a group with the speaker in it, its "our" is "their"."""
    part = m[0]
    if not _GROUP_RE.search(part):
        return part
    return re.sub(r"\bour\b", lambda o: "Their" if o[0][0] == "O" else "their", part, flags=re.I)


def _their_after(text: str, subject: str) -> str:
    """``subject``'s possessive as "their" once ``subject`` is named in the sentence."""
    again = re.compile(rf"\b{re.escape(subject)}'s\b")

    def one(m: re.Match[str]) -> str:
        part = m[0]
        first = part.find(subject)
        if first < 0:
            return part
        cut = first + len(subject) + (2 if part.startswith("'s", first + len(subject)) else 0)
        return part[:cut] + again.sub("their", part[cut:])

    return re.sub(r"[^.!?]+[.!?]*", one, text)


_MINE_AND_I_RE = re.compile(
    r"\b((?:my|me)\s+(?:[a-z]+\s+){0,2}?[a-z]+)\s+and\s+I\b(?!\s*['’])", re.I
)
""""my kids and I": put as "I and my kids", so it becomes "Ana and Ana's kids"."""
_FIRST_US_RE = re.compile(r"(?<=\w\s)us\b(?!\s*[A-Z])")
"""An object "us" (not "US" the country, not a name's initials)."""
_GROUP_RE = re.compile(r"\bwe\b|\b(?:and\s+I|I\s+and|me\s+and)\b", re.I)
"""A group with the speaker in it ("we", "Mark and I"): its "our" is "their"."""


def group_once(text: str, group: str) -> str:
    """``group`` ("Ana and others") named once; after that "they" / "their", "They" at a
    sentence's start (issue 37: "Jon and others have put Jon and others' hearts into
    ..." is garbled)."""
    first = text.find(group)
    if first < 0:
        return text
    cut = first + len(group)

    def pronoun(m: re.Match[str]) -> str:
        word = "their" if m.group(1) else "they"
        at_start = re.search(r"(?:^|[.!?]\s+)$", m.string[: m.start()]) is not None
        return word.capitalize() if at_start else word

    rest = re.sub(rf"{re.escape(group)}(['’])?", pronoun, text[cut:])
    return text[:cut] + rest


_CLITIC_RE = re.compile(r"'(?:s|re|ll|ve|m|d|t)$|n't$")


def content_words(text: str, *, names: tuple[str, ...] = ()) -> list[str]:
    """The words of ``text`` that say something: not stop words, chatter or ``names`` (the
    speaker's, the addressee's: "Mel, that's awesome!" says nothing)."""
    left_out = {n.casefold() for name in names for n in name.split()}
    out = []
    for w in _WORD_RE.findall(text):
        w = _CLITIC_RE.sub("", w.casefold().replace("’", "'"))
        if len(w) > 2 and w not in STOPWORDS and w not in CHATTER_WORDS and w not in left_out:
            out.append(w)
    return out


_TAG_RE = re.compile(
    r"(?:,|\s[-–—])\s*(?:[\w'’]+\s+){0,2}[\w'’]*,?\s*"
    r"(?:huh|right|eh|isn['’]t it|ain['’]t it|don['’]t you think|you know|"
    r"wanna see(?: it| them)?|want to see(?: it| them| (?:a|the|some) (?:pic|photo)s?)?)\s*\?+$",
    re.I,
)
"""A tag question after a statement ("I started a store - pretty cool, huh?"): the
sentence is no question."""


def strip_opener(sentence: str) -> str:
    """``"Hey Mel! I got a dog"`` -> ``"I got a dog"``: greetings and interjections off,
    and a tag question at the end ("..., huh?")."""
    out = _TAG_RE.sub("!", _OPENER_RE.sub("", sentence)).strip()
    return out[:1].upper() + out[1:] if out else out


def is_question(sentence: str) -> bool:
    return sentence.rstrip(" )\"'’”").endswith("?")


def is_chatter(sentence: str, names: tuple[str, ...] = ()) -> bool:
    """A question, a greeting, thanks or cheer: nothing to remember."""
    if is_question(sentence) or _SHARED_RE.fullmatch(sentence):
        return True
    words = len(content_words(sentence, names=names))
    return words + _names_a_place(sentence, names) < MIN_CONTENT_WORDS


_INSIDE_NAME_RE = re.compile(r"(?<=[\w,] )(?!I\b)[A-Z][a-z]+")


def _names_a_place(sentence: str, names: tuple[str, ...]) -> bool:
    """Whether a sentence names someone or something other than ``names`` inside it ("I
    was in Chicago"): a name is something to remember."""
    left_out = {n.casefold() for name in names for n in name.split()}
    return any(m[0].casefold() not in left_out for m in _INSIDE_NAME_RE.finditer(sentence))


@dataclass(frozen=True, slots=True)
class Unit:
    """Sentences of one turn that state something together (a later one leans on the first)."""

    text: str
    """As said (greetings off)."""
    first_person: bool
    """Whether the speaker speaks of themself (``I``, ``my``, ``we``)."""


FIRST_PERSON_RE = re.compile(r"\b(?:I|I'm|I’m|my|me|mine|myself|we|our|us)\b", re.I)


_SHARED_RE = re.compile(r"\[shares? an? (?:image|photo|picture)[^\]]*\]")
"""A shared picture's caption as a dialogue importer writes it: what it shows, not said."""


def units(sentences: list[str], names: tuple[str, ...] = ()) -> list[Unit]:
    """The statements among a turn's sentences, a leaning sentence joined to the one before
    (``names``: the speaker's and the addressee's, no substance by themselves)."""
    out: list[str] = []
    joinable = False
    for raw in sentences:
        sentence = strip_opener(raw)
        if not sentence or is_chatter(sentence, names):
            joinable = False
            continue
        if out and joinable and _LEANS_ON_BEFORE.match(sentence):
            out[-1] = f"{out[-1]} {sentence}"
        else:
            out.append(sentence)
        joinable = True
    return [Unit(u, FIRST_PERSON_RE.search(u) is not None) for u in out]
