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
from typing import Any

from threadline.memory.base import (
    MAX_STATEMENT_CHARS,
    Entity,
    Episode,
    Extraction,
    Extractor,
    Fact,
    Origin,
    Source,
)
from threadline.memory.instructions import FIX_SLOT, RequestLog, own_words
from threadline.memory.persons import rewritable
from threadline.memory.rules import STOPWORDS, derive_slot, name_key
from threadline.memory.statements import (
    FIRST_PERSON_RE,
    Unit,
    content_words,
    group_once,
    is_chatter,
    strip_opener,
    third_person,
    units,
)
from threadline.memory.substance import concrete, substance_words, with_subject
from threadline.memory.timeexpr import date_labels
from threadline.memory.views import views
from threadline.memory.vocative import called
from threadline.memory.worth import MIN_IMPERSONAL, fits_beside, points_back, worth_a_fact
from threadline.messages import Message
from threadline.requests import request_text

OBJECT_KINDS = frozenset({"place", "person", "organization", "project", "tool"})
"""Entities a fact may point at (its object): not paths, ids or dates."""
SLOT_OBJECTS = {"lives in": "place", "works at": "organization"}
"""The kind of entity a slot's value is, chosen as the fact's object first."""
MIN_EPISODE_CHARS = 12
MAX_EPISODE_CHARS = 2000
MAX_FACT_CHARS = 400
MIN_TURN_WORDS = 7
"""Words of substance (``statements.content_words``) that make a turn's statements a fact
by themselves; fewer need a sign of a fact about the speaker (``_substantial``). Chosen on
LoCoMo's annotated observations (``bench/memory_extraction.py``): a lower bound stores
more reactions ("Caroline said that painting is so beautiful") than facts."""

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
_UPPER = "A-ZÀ-ÖØ-Þ"
_CAPITALISED = rf"[{_UPPER}][^\W\d_]+(?:['’-][^\W\d_]+)*"
_NAME_RE = re.compile(
    rf"(?<![\w.])((?:(?:[{_UPPER}]\.){{1,3}}\s?|(?:St|Mt|Dr|Mr|Mrs|Ms|Ft|Prof)\.\s)?"
    rf"{_CAPITALISED}(?:\.[a-z]{{2,}}\b)*"
    rf"(?:\s+(?:(?:of|de|da|do|dos|del|la|van|von|der)\s+)?{_CAPITALISED}){{0,3}})"
)
"""Capitalised words, accents included (``São Paulo``), with initials or a title before
them (``J.R.R. Tolkien``, ``St. Louis``) and a domain's dotted tail (``Fly.io``)."""
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
    r"(?:\b(?:e\.g|i\.e|etc|vs|approx|Dr|Mr|Mrs|Ms|Prof|St|Mt|Ft|Jr|Sr)|(?<!\w)[A-Z])\.$"
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
    r"|\bi'?m\s+(?:a\s+)?(?:big\s+)?fan\s+of\b"
    r"|\bi(?:'m| am)\s+(?:\w+\s+)?(?:keen on|interested in|passionate about|into|fond of)\b",
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
    r"|\b(?:i|we)\s+(?:want|plan|hope|intend|need)\s+to\b"
    r"|\bmy\s+(?:name|job|role|birthday|address|email|phone|team|company|goal|plan|dog|cat|"
    r"partner|wife|husband|kids?)\b",
    re.I,
)
SIGNAL_RE = re.compile(
    "|".join(p.pattern for p in (PREFERENCE_RE, DECISION_RE, STATEMENT_RE))
    + r"|\bremember\b|\bdeadline\b|\bimportant\b",
    re.I,
)
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


_HARNESS_RE = re.compile(r"<([a-z][\w-]*)>.*?</\1>", re.S)
"""A block a coding tool puts in the user's turn (``<ide_opened_file>``,
``<system-reminder>``, ``<command-name>``): the tool speaking, not the person."""


def said(message: Message) -> str:
    """What a message says, less an assistant's acknowledgements ("Noted. I'll remember
    that.": a receipt repeats the user, it is no signal, fact or entity of its own) and
    less the blocks a coding tool adds to a user's turn; nothing of a user-role message no
    person typed (a tool's caveat, a command's output: ``requests.request_text``)."""
    if message.role != "assistant":
        if message.role == "user" and (
            request_text(message) is None or message.metadata.get("sidechain")
        ):
            return ""  # a subagent's prompt is its parent model's words, not a person's
        return _HARNESS_RE.sub(" ", message.text).strip()
    return " ".join(s for s in sentences(message.text) if not ACKNOWLEDGEMENT_RE.match(s))


FORWARDED_CHARS = 200
"""A user turn that opens with this much of the reply before it, word for word, is that
reply handed on."""


def forwarded(text: str, reply: str) -> bool:
    """Whether a user-role turn is the assistant's reply before it handed on by the tool
    (aider's architect mode sends the architect's plan to the editor model as the user):
    the model's draft, not the person's words."""
    said_, before = " ".join(text.split()), " ".join(reply.split())
    if not said_ or not before:
        return False
    return said_ == before or (
        len(before) >= FORWARDED_CHARS and said_[:FORWARDED_CHARS] == before[:FORWARDED_CHARS]
    )


def is_signal(message: Message) -> bool:
    """Whether a message probably holds something worth remembering: what the extractor
    would write a fact for (a person's statement, a decision, a preference, an id)."""
    if message.role not in ("user", "assistant") or message.synthetic or message.summary:
        return False
    text = said(message)
    if not text:
        return False
    if SIGNAL_RE.search(text) is not None or _ID_RE.search(text) is not None:
        return True
    return is_person(message) and bool(units(sentences(text)))


def _kind_of(name: str, before: str) -> str:
    if _PERSON_CUE.search(before):
        return "person"
    if _ORG_WORDS.search(name):
        return "organization"
    if _PLACE_CUE.search(before):
        return "place"
    return "thing"


_SHOUTED_RE = re.compile(r"[A-Z]{2,}")
"""One word in capitals, no digit or dot: emphasis ("NEW", "HIGH") or a label; a real
identifier with digits or a path is found by ``_ID_RE`` / ``_PATH_RE``, a tool by name."""


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
        if m.group(1).casefold() not in STOPWORDS:  # "the repository or the app": no project
            add(m.group(1), "project")
    for m in _TOOL_RE.finditer(text):
        if m.group(1) != "go":  # the verb; the language is written "Go"
            add(m.group(1).lower(), "tool")
    for chunk in sentences(text):
        for m in _NAME_RE.finditer(chunk):
            name = re.sub(r"['’]s$", "", m.group(1).rstrip("'’-"))
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
            if _SHOUTED_RE.fullmatch(name):
                continue  # "NEW", "HIGH": emphasis or a label, not a name
            opener = at_start and " " not in name
            if opener and len(re.findall(rf"\b{re.escape(name)}\b", text)) < 2:
                continue  # a capitalised sentence opener is a name only if it recurs
            add(name, _kind_of(name, chunk[: m.start()]))
    return list(found.values())


_FILE_RE = re.compile(
    r"(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\.(?:py|js|mjs|ts|tsx|jsx|json|jsonl|md|toml|ya?ml|css|"
    r"scss|html|rs|go|java|kt|rb|sh|sql|txt|cfg|ini|lock|svg|c|h|cpp|swift)\b"
)
_IDENTIFIER_RE = re.compile(
    r"(?<![\w.])(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+|"
    r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w]|\.[a-z])"
)
"""``SessionOrchestrator``, ``lastSyncedMessageUuid``, ``export_codex_session`` (not the
stem of a file named whole: ``export_codex_session.py`` is the entity)."""
EVERYDAY_TOOLS = frozenset(
    "go black rust swift ruby node react notion slack excel fish rails".split()  # noqa: SIM905
)
"""Tools named by an everyday word: in a coding turn's prose, lower case, they are the
word ("white and black", "go back"); in a code span or capitalised, the tool."""
_URL_RE = re.compile(r"\bhttps?://[^\s)>\]\"'`]+")
_CODE_SPAN_RE = re.compile(r"`([^`\n]{1,120})`")
_FENCE_RE = re.compile(r"```[\w+-]*")
"""A code fence and its language tag (```bash): no name the reply cites."""


def find_code_entities(text: str) -> list[tuple[str, str]]:
    """The entities of a coding session's turn: paths, files, ids, known tools and code
    identifiers, never capitalised words (``New``, ``Phase``, ``Promise``)."""
    found: dict[str, tuple[str, str]] = {}
    for m in _URL_RE.finditer(text):
        found.setdefault(name_key(m.group(0)), (m.group(0).rstrip(".,:;"), "thing"))
    text = _URL_RE.sub(" ", text)  # no path or file inside a URL
    rules = (
        (_PATH_RE, "path"),
        (_FILE_RE, "path"),
        (_ID_RE, "id"),
        (_IDENTIFIER_RE, "thing"),
    )
    for pattern, kind in rules:
        for m in pattern.finditer(text):
            name = m.group(0).rstrip(".,:;)")
            key = name_key(name)
            if key and len(name) > 2 and key not in found:
                found[key] = (name, kind)
    spans = set(_CODE_SPAN_RE.findall(text))
    for m in _TOOL_RE.finditer(text):
        word = m.group(1)
        if word in EVERYDAY_TOOLS and word not in spans:
            continue
        found.setdefault(name_key(word), (word.lower(), "tool"))
    return list(found.values())


def _fact(origin: Origin, m: Message, when: datetime, **fields: Any) -> Fact:
    """A fact turn ``m`` states (``fields``: what it says), with where and when it was said."""
    return Fact(
        scope=origin.scope,
        session_id=origin.session_id,
        seq=m.seq,
        sources=[Source(session_id=origin.session_id, seq=m.seq)],
        observed_at=when,
        confidence=0.7,
        **fields,
    )


def _coding_subject(statement: str, slot: str | None, m: Message) -> str | None:
    """Whose chain a coding fact continues: a fix is the assistant's (the user saying it
    did not work continues it), an instruction its speaker's unless it opens with a name."""
    if slot is None:
        return None
    if slot.startswith(FIX_SLOT):
        return "assistant"
    return _opening_name(statement) or speaker_of(m)


def _mid_sentence(name: str, text: str) -> bool:
    """Whether ``name`` is written capitalised inside a sentence ("deploy Orbit on ..."),
    not only where any word is (after a colon or a stop: "rules.js: Pure game logic")."""
    return re.search(rf"(?<=[\w,)] ){re.escape(name)}\b", text) is not None


def _merged(*found: list[tuple[str, str]]) -> list[tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for name, kind in (e for entities in found for e in entities):
        out.setdefault(name_key(name), (name, kind))
    return list(out.values())


def _code_spans(text: str) -> str:
    """What an assistant's reply quotes as code (`app.js`): the names it cites, not
    the headings and bold words of its drafts."""
    return " \n".join(f"`{s}`" for s in _CODE_SPAN_RE.findall(_FENCE_RE.sub("\n", text)))


def _fact_kind(sentence: str) -> str | None:
    """The kind of fact a sentence states (a decision before a preference), if any."""
    rules = ((DECISION_RE, "decision"), (PREFERENCE_RE, "preference"), (STATEMENT_RE, "fact"))
    return next((kind for pattern, kind in rules if pattern.search(sentence)), None)


def speaker_of(message: Message) -> str:
    return message.name or message.role


def _referent(message: Message) -> str:
    """How a statement names its speaker: the name, else "the user" / "the assistant"."""
    return message.name or f"the {message.role}"


def is_person(message: Message) -> bool:
    """A turn a person said: the user's, or a named speaker's in a conversation between
    people (an imported dialogue); an unnamed assistant's replies are the model's."""
    return message.role == "user" or (message.role == "assistant" and bool(message.name))


def _opening_name(sentence: str) -> str | None:
    """The name a sentence opens with, when a verb follows it ("Priya Raman owns ...")."""
    opening = _NAME_RE.match(sentence)
    if opening is None:
        return None
    name = opening.group(1)
    rest = sentence[opening.end() :].split()
    known = dict(find_entities(sentence))
    if rest and rest[0][:1].islower() and known.get(name) in ("person", "thing"):
        return name
    return None


def _dated(statement: str, when: datetime) -> str:
    """The statement with the dates its relative time words stand for ("yesterday" said on
    8 May 2023 -> "(2023-05-07)"), so the event keeps its time out of context."""
    labels = [d for d in date_labels(statement, when) if d[:4] not in statement]
    if not labels:
        return statement
    body = statement.rstrip(".!")
    return f"{body} ({', '.join(labels)}){statement[len(body) :] or '.'}"


def write_statement(unit: Unit, speaker: str, addressee: str | None) -> str:
    """One standalone third-person sentence for a unit a speaker said: what it says,
    not that it was said (no "Ana said ..."; the fact's subject and source keep who)."""
    return third_person(unit.text, speaker, addressee)


class ExtractiveExtractor(Extractor):
    """Sentence rules and capitalisation; fast, offline, deterministic."""

    def __init__(self, *, episodes: bool = True) -> None:
        self.episodes = episodes
        """Keep every substantial turn as an episode (findable even with no fact in it)."""

    def extract_from(self, messages: list[Message], origin: Origin) -> Extraction:
        out = Extraction()
        last_speaker: dict[bool, str] = {}
        """The latest speaker of each kind (named person or not): who "you" is."""
        requests = RequestLog.resumed(origin.session_id, origin.known)
        reply = ""
        """The latest assistant reply, as written."""
        for m in messages:
            if m.seq is None or m.role not in ("user", "assistant") or m.synthetic or m.summary:
                continue
            text = said(m).strip()
            if m.role == "assistant":
                reply = m.text
            elif not m.name and forwarded(m.text, reply):
                continue  # the reply handed on as a "user" turn (aider's architect to editor)
            if text:
                when = origin.observed_at or m.created_at
                if m.name:
                    addressee = _addressee(m, last_speaker) or called(text, m.name)
                    out.extend(self._one(m, text, origin, when, addressee))
                else:
                    out.extend(self._coding(m, text, origin, when, requests))
            if m.name:
                last_speaker[True] = m.name
            last_speaker[False] = _referent(m)
        return out

    def _coding(
        self, m: Message, text: str, origin: Origin, when: datetime, requests: RequestLog
    ) -> Extraction:
        """A turn of a session with an unnamed user and assistant (a coding agent's): the
        user's standing instructions (``instructions``), the fix the assistant found for
        an error the user reported; entities only of real names (paths, files, ids)."""
        assert m.seq is not None
        if m.role == "user":
            typed = own_words(text)
            named = [
                (n, k) for n, k in find_entities(typed) if k != "tool" and _mid_sentence(n, typed)
            ]  # tools come from find_code_entities, which knows "black" from black
            mentions = _merged(named, find_code_entities(typed))
        else:
            mentions = find_code_entities(_code_spans(text))
        out = self._mentioned(m, text, origin, when, mentions)
        stated = (
            requests.user_turn(text, m.seq) if m.role == "user" else requests.reply(text, m.seq)
        )
        for statement, kind, slot in stated:
            out.facts.append(
                _fact(
                    origin,
                    m,
                    when,
                    subject=_coding_subject(statement, slot, m),
                    statement=_dated(statement, when)[:MAX_STATEMENT_CHARS],
                    kind=kind,
                    slot=slot,
                )
            )
        return out

    def _mentioned(
        self,
        m: Message,
        text: str,
        origin: Origin,
        when: datetime,
        mentions: list[tuple[str, str]],
    ) -> Extraction:
        """A turn's entities (``mentions``) and, when it is long enough, the turn as an
        episode: what every kind of turn records before its facts."""
        source = Source(session_id=origin.session_id, seq=m.seq)
        out = Extraction()
        for name, kind in mentions:
            out.entities.append(
                Entity(scope=origin.scope, name=name, kind=kind, sources=[source], last_seen=when)
            )
        if self.episodes and len(text) >= MIN_EPISODE_CHARS:
            out.episodes.append(
                Episode(
                    scope=origin.scope,
                    session_id=origin.session_id,
                    seq=m.seq,
                    speaker=speaker_of(m),
                    text=text[:MAX_EPISODE_CHARS],
                    observed_at=when,
                    entities=[name for name, _ in mentions],
                    dates=date_labels(text, when),
                )
            )
        return out

    def _one(
        self, m: Message, text: str, origin: Origin, when: datetime, addressee: str | None
    ) -> Extraction:
        assert m.seq is not None
        out = self._mentioned(m, text, origin, when, find_entities(text))
        if m.name:
            source = Source(session_id=origin.session_id, seq=m.seq)
            out.entities.append(
                Entity(
                    scope=origin.scope, name=m.name, kind="person", sources=[source], last_seen=when
                )
            )
        for statement, subject, kind in self._statements(m, text, addressee, when):
            slot = derive_slot(statement) if subject else None
            targets = [
                n
                for n, k in sorted(
                    find_entities(statement), key=lambda e: e[1] != SLOT_OBJECTS.get(slot or "")
                )
                if k in OBJECT_KINDS and subject is not None and name_key(n) != name_key(subject)
            ]
            out.facts.append(
                _fact(
                    origin,
                    m,
                    when,
                    subject=subject,
                    statement=statement[:MAX_STATEMENT_CHARS],
                    object=targets[0] if targets and subject else None,
                    kind=kind,
                    slot=slot,
                )
            )
        return out

    def _statements(
        self, m: Message, text: str, addressee: str | None, when: datetime
    ) -> list[tuple[str, str | None, str]]:
        """What a person's turn states (``_stated``); for a turn that states nothing
        else, the views its advice, cheer or show-and-tell carry (``views.views``)."""
        stated = self._stated(m, text, addressee, when)
        if stated:
            return stated
        said_ = sentences(_SHARED_CAPTION_RE.sub("", text))
        return [(v, speaker_of(m), "fact") for v in views(said_, _referent(m), addressee)]

    def _stated(
        self, m: Message, text: str, addressee: str | None, when: datetime
    ) -> list[tuple[str, str | None, str]]:
        """``(statement, subject, kind)`` of what a person's turn states: its statements
        in one fact (together they keep each other's context, and what is worth keeping
        from a conversation often spans two of them), less commentary with nothing of
        its own ("It's awesome to see it all coming together!")."""
        speaker = _referent(m)
        names = tuple(n for n in (m.name, addressee) if n)
        as_said = units([s for s in sentences(text) if not _commentary(s)], names)
        said_ = _clean_sentences(text, addressee is not None, speaker, names)
        found = [u for u in units(said_, names) if len(u.text) <= MAX_FACT_CHARS * 2]
        if not as_said or not found:
            return []
        if not _substantial(as_said, names) and not any(u.first_person for u in found):
            return []  # a short turn says something only of the speaker ("Just got back")
        if _DANGLING_RE.match(found[0].text) and not found[0].first_person:
            found = found[1:]  # "He loves the new trails": who "he" is was said before
        elif _POINTING_RE.match(found[0].text) and not _kept(found[0], names):
            found = found[1:]  # "It was made for a local church": "it" is the picture
        groups = _grouped(found, names)
        out: list[tuple[str, str | None, str]] = []
        for group in groups:
            first = next((u for u in group if u.first_person), group[0])
            subject = _opening_name(first.text) or speaker_of(m)
            statement = group_once(
                " ".join(_dated(write_statement(u, speaker, addressee), when) for u in group),
                f"{speaker} and others",
            )
            whole = " ".join(u.text for u in group)
            kind = _fact_kind(whole) or ("event" if date_labels(whole, when) else "fact")
            out.append((statement, subject, kind))
        return out


_YOU_RE = re.compile(r"\b(?:you|your|yours|yourself)\b", re.I)


def _kept(unit: Unit, names: tuple[str, ...]) -> bool:
    """Whether a statement is worth a fact of its own: something concrete
    (``substance.concrete``), or the speaker's own (a preference, a plan, how they
    are) but not what they feel about the person spoken to ("I'm always proud of
    you"); a mood ("Life's unpredictable") only as context beside such a statement."""
    if concrete(unit.text, names):
        return True
    if not unit.first_person:
        return False
    return _YOU_RE.search(unit.text) is None or len(content_words(unit.text, names=names)) > 3


def _clean_sentences(text: str, addressee: bool, speaker: str, names: tuple[str, ...]) -> list[str]:
    """A person's sentences as they can become facts: commentary out, clauses the
    person rewriting would garble out (``persons.rewritable``; "" where nothing is
    left, so no later sentence leans across it), a sentence with no subject ("Really
    made me think ...") joined to the one before it, else left out."""
    out: list[str] = []
    for sentence in sentences(_SHARED_CAPTION_RE.sub("", text)):
        thanks = _THANKS_RE.match(sentence)
        if thanks is not None:  # "thanks for asking, they're good- we got a cat": the rest
            rest = sentence[thanks.end() :].partition(",")[2].strip()
            sentence = rest[:1].upper() + rest[1:]
        if not sentence or _commentary(sentence):
            continue
        bare = _unaddressed(strip_opener(sentence), names)
        if len(names) == 2:  # "a special meaning to both of us": the two speaking
            bare = _BOTH_OF_US_RE.sub(f"{names[0]} and {names[1]}", bare)
        kept, leans = with_subject(rewritable(bare, addressee, speaker))
        if kept and leans:
            if out and out[-1] and not is_chatter(out[-1], names):
                out[-1] = f"{out[-1]} {kept}"
            continue
        out.append(kept)
    return out


_BOTH_OF_US_RE = re.compile(r"\b(?:both|the\s+two)\s+of\s+us\b|\bus\s+both\b", re.I)
""""Both of us" said to the person spoken to: the speaker and them."""


def _unaddressed(sentence: str, names: tuple[str, ...]) -> str:
    """A sentence less the name it calls someone by ("Caroline, they're ...", "... for
    you, Mel!"): a name, or the start of one (a nickname), before or after a comma."""

    def calls(word: str) -> bool:
        w = word.casefold()
        return len(w) >= 3 and any(n.casefold().startswith(w) for n in names)

    lead = re.match(r"([A-Z][a-z]+)\s*(?:,|\s[-–—])\s+", sentence)
    if lead is not None and calls(lead.group(1)):
        sentence = sentence[lead.end() :]
        sentence = sentence[:1].upper() + sentence[1:]
    tail = re.search(r",\s*([A-Z][a-z]+)(?=\s*[.!?]*$)", sentence)
    if tail is not None and calls(tail.group(1)):
        sentence = sentence[: tail.start()] + sentence[tail.end() :]
    return sentence


_THANKS_RE = re.compile(
    r"^(?:[^\W\d_]+[,!]?\s+)?(?:thanks|thank\s+you)\s+(?:so\s+much\s+)?for\b", re.I
)
"""Thanks for something the other person did ("Thank you for using your voice ..."):
a reaction, never the speaker's own fact."""
_SHARED_CAPTION_RE = re.compile(r"\s*\[shares? an? (?:image|photo|picture)[^\]]*\]")
"""A shared picture's caption as a dialogue importer writes it: what it shows, not said."""


_POINTING_RE = re.compile(
    r"^(?:it|this|that|these|those)(?:\s*['’]s|\s+(?:is|was|are|were|has|had|will|would|"
    r"really|just|also|looks?|seems?|means|shows|stands|reminds|made|makes|brings))\b",
    re.I,
)
"""A turn opening with "it"/"this" as a subject points at what was said or shown before
("It was made for a local church", "This is my favourite"): no standalone fact."""
_DANGLING_RE = re.compile(r"^(?:he|she|they|him|her|his|their|them)\b", re.I)
"""A turn's first statement opening with a pronoun points at someone named in an earlier
turn: out of context the fact would name no one (issue 37: "he" was the dog)."""
MAX_GROUP_WORDS = 40
"""Statements of one turn share a fact up to about this many words; a longer turn is cut
into several facts, each a whole statement (with the ones leaning on it)."""


def _grouped(found: list[Unit], names: tuple[str, ...]) -> list[list[Unit]]:
    """A turn's statements in facts of up to about ``MAX_GROUP_WORDS`` words, each with
    one worth a fact (``_kept`` and ``worth.worth_a_fact``); a statement only of mood
    ("It was so special") goes right before or after such a statement, as its context,
    one pointing back ("It helps me keep track") only right after it."""
    out: list[list[Unit]] = []
    size = 0
    going = False
    """Whether the statement before went into ``out[-1]``."""
    waiting: list[Unit] = []
    """Statements of mood right before: the context of the next fact, if one comes."""
    for u in found:
        n = len(u.text.split())
        fits = going and size + n <= MAX_GROUP_WORDS
        core = _kept(u, names) and not points_back(u.text, names)
        if core and worth_a_fact(u.text, u.first_person, names):
            if not fits:
                out.append([])
                size = 0
                while waiting and size + n + len(waiting[-1].text.split()) <= MAX_GROUP_WORDS:
                    size += len(waiting[-1].text.split())
                    out[-1].insert(0, waiting.pop())
            out[-1].append(u)
            size += n
            going, waiting = True, []
            continue
        if not fits_beside(u.text, u.first_person, names):
            going, waiting = False, []
        elif fits:
            out[-1].append(u)
            size += n
        else:
            going = False
            waiting = [] if points_back(u.text, names) else [*waiting, u]
    return out


_RATING = (
    r"(?:so\s+|really\s+|very\s+|super\s+|totally\s+|just\s+)?(?:awesome|amazing|great|"
    r"wonderful|cool|nice|empowering|inspiring|incredible|beautiful|lovely|fantastic|"
    r"rewarding|important|tough|hard|crazy|good|fun|sweet|gorgeous|stunning|cute|adorable|"
    r"impressive|perfect|neat|fancy|special|breathtaking|magical|unreal)\b"
)
_COMMENTARY_RE = re.compile(
    rf"^(?:it'?s|it’s|that'?s|that’s|this\s+is|what\s+a|how|such|so)\s+(?:\w+\s+)?{_RATING}"
    rf"|^(?:that|this|these|those|the|your)\s+(?:\w+\s+){{0,3}}(?:is|are|was|were|looks?|"
    rf"sounds?|seems?)\s+{_RATING}[.!]*$"
    r"|^let'?s\s+(?:keep|do|make|go|chase|never|always|hope)\b",
    re.I,
)
"""A statement that only rates something ("That's great news", "It's empowering to ...")."""


def _commentary(sentence: str) -> bool:
    """Whether a sentence only rates something, with nothing of the speaker's in it nor
    much else ("It's a great story about religion and human control over ecology" says
    what the story is about)."""
    bare = strip_opener(sentence)
    if not _COMMENTARY_RE.match(bare) or FIRST_PERSON_RE.search(bare) is not None:
        return False
    return len(substance_words(bare)) < MIN_IMPERSONAL


def _substantial(group: list[Unit], names: tuple[str, ...]) -> bool:
    """Whether a turn's statements are worth a fact: enough words of substance, or fewer
    with a sign of a fact (a preference, a plan, a decision, "remember", an id; from a
    speaker about themself, a number or something of theirs: "My daughter is 7")."""
    text = " ".join(u.text for u in group)
    n = len(content_words(text, names=names))
    if n >= MIN_TURN_WORDS:
        return True
    if _NOTE_RE.search(text) or DECISION_RE.search(text) or _ID_RE.search(text):
        return True  # "Remember that the staging database is orbit-db", a decision, an id
    mine = any(u.first_person for u in group)
    sign = SIGNAL_RE.search(text) or _NUMBER_RE.search(text) or _MY_THING_RE.search(text)
    return mine and sign is not None


_NOTE_RE = re.compile(r"\b(?:remember|important|deadline|note that|keep in mind)\b", re.I)
_MY_THING_RE = re.compile(r"\b(?:my|our)\s+\w+", re.I)
_NUMBER_RE = re.compile(r"\d")


def _addressee(m: Message, last_speaker: dict[bool, str]) -> str | None:
    """Who "you" is in ``m``: the latest other named speaker in a conversation between
    people; else no one (a user's "you" in an instruction or spec is not the assistant)."""
    if m.name:
        other = last_speaker.get(True)
        return other if other and other != m.name else None
    return None
