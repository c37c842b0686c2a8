"""The extractive extractor: entities, facts and episodes from text, with no model.

Patterns, not understanding: capitalised names (people, places, organisations),
projects, tools, file paths, ids, dates; first-person preferences ("I prefer",
"I use", "always", "never", "my favorite"), decisions ("we decided", "let's go
with") and stable statements ("I live in", "I work at", "my X is Y"). Each fact
keeps the turn it came from; first-person words become the speaker's name, so
"I moved to Porto" said by Ana is stored as "Ana moved to Porto" about Ana.
Every substantial turn also becomes an episode, so what was said stays findable
even when no pattern fired.
"""

from __future__ import annotations

import re
from datetime import datetime

from threadline.memory.base import Entity, Episode, Extraction, Extractor, Fact, Origin, Source
from threadline.memory.rules import STOPWORDS, derive_slot, name_key
from threadline.memory.timeexpr import date_labels
from threadline.messages import Message

OBJECT_KINDS = frozenset({"place", "person", "organization", "project", "tool"})
"""Entities a fact may point at (its object): not paths, ids or dates."""
MIN_EPISODE_CHARS = 12
MAX_EPISODE_CHARS = 2000
MAX_FACT_CHARS = 400

KNOWN_TOOLS = frozenset(
    """python javascript typescript rust go java kotlin swift ruby php bash zsh fish git github
    gitlab docker kubernetes terraform ansible postgres postgresql mysql sqlite redis
    mongodb kafka nginx react vue angular svelte django flask fastapi rails node npm pnpm
    yarn pip uv poetry pytest ruff mypy black vim neovim emacs vscode intellij pycharm
    jupyter pandas numpy pytorch tensorflow aws gcp azure linux macos windows ubuntu debian
    slack jira notion figma excel photoshop""".split()  # noqa: SIM905
)
_TOOL_RE = re.compile(r"\b(" + "|".join(sorted(KNOWN_TOOLS, key=len, reverse=True)) + r")\b", re.I)
_PATH_RE = re.compile(
    r"(?<![\w/])(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]+\.\w{1,8}\b|(?<!\w)/(?:[\w.-]+/)+[\w.-]*"
)
_ID_RE = re.compile(
    r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
    r"|\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b|(?<![\w#])#\d{2,7}\b|\b[0-9a-f]{12,40}\b"
)
_PROJECT_RE = re.compile(
    r"\b(?:project|repo|repository|app|library|package)\s+([A-Za-z][\w-]*(?:\.[\w-]+)*)"
)
_NAME_RE = re.compile(
    r"\b([A-Z][a-zA-Z'’-]+(?:\.[a-z]{2,}\b)*(?:\s+(?:of\s+|de\s+|van\s+)?[A-Z][a-zA-Z'’-]+){0,3})"
)
"""Capitalised words, a domain's dotted tail included (``Fly.io``)."""
_PLACE_CUE = re.compile(r"\b(?:in|at|from|to|near|visit(?:ed|ing)?)\s+$", re.I)
_PERSON_CUE = re.compile(
    r"\b(?:my|our|his|her)\s+(?:friend|wife|husband|partner|son|daughter|mom|mother|dad|father|"
    r"brother|sister|boss|colleague|kid|child|cousin|aunt|uncle|grandma|grandpa|neighbor|"
    r"neighbour|mentor|teacher|coach)\s+$",
    re.I,
)
_ORG_WORDS = re.compile(r"\b(?:Inc|Corp|Ltd|LLC|University|College|School|Company|Bank|Club)\b")
_BREAK_RE = re.compile(r"(?<=[.!?])[\"'’”)\]]*\s+|\s*\n\s*")
"""Where a sentence may end: after ``.``/``!``/``?`` and white space, or at a line break; a
dot inside a word (``Fly.io``, ``3.12.1``, ``app.toml``) is not an end."""
_NO_END_RE = re.compile(
    r"(?:\b(?:e\.g|i\.e|etc|vs|approx|Dr|Mr|Mrs|Ms|Prof|St|Jr|Sr)|(?<!\w)[A-Z])\.$"
)
"""A piece ending in an abbreviation or an initial runs on into the next one."""
ACKNOWLEDGEMENT_RE = re.compile(
    r"^(?:(?:ok(?:ay)?|sure|noted|got it|understood|will do|thanks|thank you|great|perfect|"
    r"sounds good|of course|alright|all right)\b[\s,.!]*)+$"
    r"|^(?:(?:ok(?:ay)?|sure|noted|got it)[,.!]?\s*)?i(?:'ll| will|'ve| have)\s+"
    r"(?:remember|noted?|keep|kept|made a note of)\b(?:\s+(?:that|this|it))?(?:\s+in mind)?[.!]?$",
    re.I,
)
"""An assistant's receipt ("Noted. I'll remember that."): it says nothing new."""

PREFERENCE_RE = re.compile(
    r"\b(?:i|we)\s+(?:really\s+|usually\s+|always\s+|never\s+|mostly\s+)?"
    r"(?:prefer|use|like|love|enjoy|hate|dislike|can't stand|avoid)\b"
    r"|\b(?:always|never)\b|\bmy\s+fav(?:ou)?rite\b"
    r"|\bi'?m\s+(?:a\s+)?(?:big\s+)?fan\s+of\b",
    re.I,
)
DECISION_RE = re.compile(
    r"\b(?:we|i)\s+(?:have\s+|'ve\s+)?"
    r"(?:decided|chose|chosen|agreed|settled|will go with|'ll go with)"
    r"|\blet'?s\s+(?:go with|use|stick with|switch to)\b|\b(?:decision|going forward)\b",
    re.I,
)
STATEMENT_RE = re.compile(
    r"\b(?:i|we)\s+(?:live|lived|moved|work|worked|started|joined|quit|bought|adopted|married|"
    r"graduated|studied|study|teach|volunteer|run|ran|play|went|visited|finished|became|got)\b"
    r"|\b(?:i|we)\s*(?:'m|am|are)\s+(?:a|an|from|in|at|working|going|planning|learning)\b"
    r"|\bmy\s+(?:name|job|role|birthday|address|email|phone|team|company|goal|plan|dog|cat|"
    r"partner|wife|husband|kids?)\b",
    re.I,
)
SIGNAL_RE = re.compile(
    "|".join(p.pattern for p in (PREFERENCE_RE, DECISION_RE, STATEMENT_RE))
    + r"|\bremember\b|\bdeadline\b|\bimportant\b",
    re.I,
)
_FIRST_PERSON = [
    (re.compile(r"\bI'm\b|\bI am\b", re.I), "{s} is"),
    (re.compile(r"\bI've\b", re.I), "{s} has"),
    (re.compile(r"\bI'll\b", re.I), "{s} will"),
    (re.compile(r"\bI'd\b", re.I), "{s} would"),
    (re.compile(r"\bmy\b", re.I), "{s}'s"),
    (re.compile(r"\bmine\b", re.I), "{s}'s"),
    (re.compile(r"\bme\b", re.I), "{s}"),
]
_I_VERB_RE = re.compile(
    r"\bI((?:\s+(?:really|usually|always|never|mostly|also|still|often|just|only|sometimes|"
    r"rarely|actually|now))*)\s+([a-z]+?(?:n't)?)\b"
)
"""``I`` and the verb it governs (adverbs between): the verb takes the third person."""
_KEEP_VERB = frozenset(
    """will would can could should might must may shall was did had used won't wouldn't
    can't couldn't shouldn't mightn't mustn't wasn't didn't hadn't went got saw made took
    came gave found thought told became left felt brought began kept held wrote stood heard
    let meant set met ran paid sat spoke led read grew lost fell sent built understood drew
    broke spent cut drove bought wore chose taught caught sold fought won slept swam sang
    ate drank flew forgot knew threw hung hid rode shot shut put hit quit hurt cost said
    moved""".split()  # noqa: SIM905
)
"""Modals and past forms: the same after "she" as after "I"."""
_THIRD_PERSON = {
    "am": "is",
    "have": "has",
    "do": "does",
    "go": "goes",
    "don't": "doesn't",
    "haven't": "hasn't",
    "am not": "is not",
}
COMMON_CAPITALISED = frozenset(
    """i i'm i've i'll i'd ok okay yes no thanks thank hello hi hey wow oh yeah sure great cool
    awesome nice good well so and but also just really what when where why how who which
    that this these those there here it its my your our their his her we you they he she me
    us them monday tuesday wednesday thursday friday saturday sunday today tomorrow
    yesterday lol omg congrats congratulations sorry please let let's definitely absolutely
    totally glad love""".split()  # noqa: SIM905
)


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped; names, domains, versions and paths stay whole."""
    out: list[str] = []
    for piece in _BREAK_RE.split(text.strip()):
        if not piece.strip():
            continue
        if out and _NO_END_RE.search(out[-1]):
            out[-1] = f"{out[-1]} {piece.strip()}"
        else:
            out.append(piece.strip())
    return out


def said(message: Message) -> str:
    """What a message says, less an assistant's acknowledgements ("Noted. I'll remember
    that."): a receipt repeats the user, it is no signal, fact or entity of its own."""
    if message.role != "assistant":
        return message.text
    return " ".join(s for s in sentences(message.text) if not ACKNOWLEDGEMENT_RE.match(s))


def is_signal(message: Message) -> bool:
    """Whether a message probably holds something worth remembering (cheap: regexes)."""
    if message.role not in ("user", "assistant") or message.synthetic or message.summary:
        return False
    text = said(message)
    return bool(text) and (SIGNAL_RE.search(text) is not None or _ID_RE.search(text) is not None)


def _kind_of(name: str, before: str) -> str:
    if _PERSON_CUE.search(before):
        return "person"
    if _ORG_WORDS.search(name):
        return "organization"
    if _PLACE_CUE.search(before):
        return "place"
    return "thing"


def find_entities(text: str) -> list[tuple[str, str]]:
    """``(name, kind)`` for each entity mentioned in ``text``, in order, without repeats."""
    found: dict[str, tuple[str, str]] = {}

    def add(name: str, kind: str) -> None:
        key = name_key(name)
        if key and key not in found:
            found[key] = (name, kind)
        elif key and found[key][1] == "thing" and kind != "thing":
            found[key] = (found[key][0], kind)

    for m in _PATH_RE.finditer(text):
        add(m.group(0), "path")
    for m in _ID_RE.finditer(text):
        add(m.group(0), "id")
    for m in _PROJECT_RE.finditer(text):
        add(m.group(1), "project")
    for m in _TOOL_RE.finditer(text):
        add(m.group(1).lower(), "tool")
    for chunk in sentences(text):
        for m in _NAME_RE.finditer(chunk):
            name = m.group(1).rstrip("'’-")
            at_start = m.start() == len(chunk) - len(chunk.lstrip())
            first = name.split()[0].casefold().rstrip("'’s")
            if first in COMMON_CAPITALISED or name.casefold() in STOPWORDS:
                # "Thanks Ana" / "Hey Caroline": drop the greeting, keep the name
                parts = name.split()[1:]
                if not parts:
                    continue
                name, at_start = " ".join(parts), False
            if name.casefold() in KNOWN_TOOLS or name.casefold() in COMMON_CAPITALISED:
                continue
            opener = at_start and " " not in name
            if opener and len(re.findall(rf"\b{re.escape(name)}\b", text)) < 2:
                continue  # a capitalised sentence opener is a name only if it recurs
            add(name, _kind_of(name, chunk[: m.start()]))
    return list(found.values())


def third_person_verb(verb: str) -> str:
    """``prefer`` -> ``prefers``, ``watch`` -> ``watches``; past forms and modals as they are."""
    if verb in _THIRD_PERSON:
        return _THIRD_PERSON[verb]
    if verb in _KEEP_VERB or verb.endswith(("ed", "n't")):
        return verb
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(verb) > 2 and verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def third_person(sentence: str, subject: str) -> str:
    """ "I moved to Porto" said by Ana -> "Ana moved to Porto"; "I always use pytest" ->
    "Ana always uses pytest" (the verb agrees)."""
    out = sentence
    for pattern, replacement in _FIRST_PERSON:
        out = pattern.sub(replacement.format(s=subject), out)
    out = _I_VERB_RE.sub(lambda m: f"{subject}{m[1]} {third_person_verb(m[2])}", out)
    out = re.sub(r"\bI\b", subject, out)
    return out[:1].upper() + out[1:]


def subject_of(sentence: str, speaker: str) -> tuple[str | None, bool]:
    """Who a sentence is about, and whether it is said in the first person.

    A sentence that opens with a name and a verb ("Priya Raman owns the invoices
    module") is about that name; else one in the first person is about the speaker."""
    opening = _NAME_RE.match(sentence)
    if opening is not None:
        name = opening.group(1)
        rest = sentence[opening.end() :].split()
        known = dict(find_entities(sentence))
        if rest and rest[0][:1].islower() and known.get(name) in ("person", "thing"):
            return name, False
    if re.search(r"\b(?:I|my|me|I'm|we|our)\b", sentence, re.I) is not None:
        return speaker, True
    return None, False


def _fact_kind(sentence: str) -> str | None:
    """The kind of fact a sentence states (a decision before a preference), if any."""
    rules = ((DECISION_RE, "decision"), (PREFERENCE_RE, "preference"), (STATEMENT_RE, "fact"))
    return next((kind for pattern, kind in rules if pattern.search(sentence)), None)


def speaker_of(message: Message) -> str:
    return message.name or message.role


def _referent(message: Message) -> str:
    """How a statement names its speaker: the name, else "the user" / "the assistant"."""
    return message.name or f"the {message.role}"


class ExtractiveExtractor(Extractor):
    """Regex and capitalisation rules; fast, offline, deterministic."""

    def __init__(self, *, episodes: bool = True) -> None:
        self.episodes = episodes
        """Keep every substantial turn as an episode (findable even with no fact in it)."""

    def extract_from(self, messages: list[Message], origin: Origin) -> Extraction:
        out = Extraction()
        for m in messages:
            if m.seq is None or m.role not in ("user", "assistant") or m.synthetic or m.summary:
                continue
            text = said(m).strip()
            if text:
                when = origin.observed_at or m.created_at
                out.extend(self._one(m, text, origin.scope, origin.session_id, when))
        return out

    def _one(
        self, m: Message, text: str, scope: str, session_id: str, when: datetime
    ) -> Extraction:
        assert m.seq is not None
        source = Source(session_id=session_id, seq=m.seq)
        speaker = speaker_of(m)
        mentions = find_entities(text)
        out = Extraction()
        for name, kind in mentions:
            out.entities.append(
                Entity(scope=scope, name=name, kind=kind, sources=[source], last_seen=when)
            )
        if m.name:
            out.entities.append(
                Entity(scope=scope, name=m.name, kind="person", sources=[source], last_seen=when)
            )
        if self.episodes and len(text) >= MIN_EPISODE_CHARS:
            out.episodes.append(
                Episode(
                    scope=scope,
                    session_id=session_id,
                    seq=m.seq,
                    speaker=speaker,
                    text=text[:MAX_EPISODE_CHARS],
                    observed_at=when,
                    entities=[name for name, _ in mentions],
                    dates=date_labels(text, when),
                )
            )
        for sentence in sentences(text):
            fact_kind = _fact_kind(sentence)
            if fact_kind is None or len(sentence) > MAX_FACT_CHARS or len(sentence.split()) < 3:
                continue
            subject, first_person = subject_of(sentence, speaker)
            statement = third_person(sentence, _referent(m)) if first_person else sentence
            targets = [
                n
                for n, k in find_entities(sentence)
                if k in OBJECT_KINDS and subject is not None and name_key(n) != name_key(subject)
            ]
            fact = Fact(
                scope=scope,
                subject=subject,
                statement=statement,
                object=targets[0] if targets and subject else None,
                kind=fact_kind,
                slot=derive_slot(statement) if subject else None,
                session_id=session_id,
                seq=m.seq,
                sources=[source],
                observed_at=when,
                confidence=0.7,
            )
            out.facts.append(fact)
        return out
