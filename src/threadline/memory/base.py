"""The memory protocol and its records: entities, facts, relations, episodes, hits.

Memory outlives sessions: it keeps what was learned in them (who and what was
mentioned, what is true about them, what was said where) in a scope (one agent's
by default, or a named user / project scope several agents share). Every record
that came from a conversation keeps its provenance (session id and seq), so a
search result can always be traced back to the turn that said it.

A fact never disappears: a newer fact about the same subject and slot
*supersedes* it (``superseded_by`` / ``superseded_at``), and ``forget`` only marks
it retracted, so the graph answers both "what is true now" and "what was true
then" (``list_facts(as_of=...)``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, TypedDict, Unpack, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from threadline.errors import UsageError
from threadline.messages import Message
from threadline.stamps import new_id, utcnow

EntityKind = Literal[
    "person", "place", "project", "tool", "path", "id", "date", "organization", "thing"
]
FactKind = Literal["fact", "preference", "decision", "event", "note"]
HitKind = Literal["fact", "entity", "episode"]

SCOPE_RE = re.compile(r"(agent|user|project):[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")
"""``agent:<name>``, ``user:<name>`` or ``project:<name>``: a scope is a key, never a path."""
MAX_STATEMENT_CHARS = 4000
"""A fact is one statement, not a document; longer ones are refused (the tool says why)."""
MAX_NAME_CHARS = 200
MAX_QUERY_CHARS = 2000


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Source(_Record):
    """One turn a record came from."""

    session_id: str
    seq: int


class Entity(_Record):
    """A person, place, project, tool, path, id... mentioned in a scope."""

    id: str = Field(default_factory=new_id)
    scope: str
    name: str
    kind: str = "thing"
    aliases: list[str] = Field(default_factory=list)
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    mentions: int = 0
    sources: list[Source] = Field(default_factory=list)
    """The most recent turns that mention it (bounded, newest last)."""


class Fact(_Record):
    """One statement about a subject, with where and when it was learned."""

    id: str = Field(default_factory=new_id)
    scope: str
    subject: str | None = None
    """The entity the fact is about (its name), if any."""
    statement: str
    object: str | None = None
    """An entity the statement points at (``lives in`` -> the place)."""
    kind: str = "fact"
    slot: str | None = None
    """What the fact is the value of (``lives in``, ``prefers editor``): a newer fact with
    the same subject and slot supersedes this one. None: never superseded."""
    session_id: str | None = None
    seq: int | None = None
    sources: list[Source] = Field(default_factory=list)
    """Every turn that stated it (the first is ``session_id``/``seq``)."""
    observed_at: datetime = Field(default_factory=utcnow)
    recorded_at: datetime = Field(default_factory=utcnow)
    confidence: float = 1.0
    superseded_by: str | None = None
    superseded_at: datetime | None = None
    retracted: bool = False
    retracted_at: datetime | None = None

    @property
    def current(self) -> bool:
        return self.superseded_by is None and not self.retracted


class Relation(_Record):
    """A directed, labelled edge between two entities of one scope."""

    id: str = Field(default_factory=new_id)
    scope: str
    source: str
    """Entity name."""
    label: str
    target: str
    fact_id: str | None = None
    observed_at: datetime = Field(default_factory=utcnow)


class Episode(_Record):
    """One remembered turn: what was said, by whom, when, and what it mentions.

    Episodes make every extracted turn retrievable by itself; facts and entities
    found in it link back to it and lift it in search."""

    id: str = Field(default_factory=new_id)
    scope: str
    session_id: str
    seq: int
    speaker: str | None = None
    text: str
    observed_at: datetime = Field(default_factory=utcnow)
    entities: list[str] = Field(default_factory=list)
    dates: list[str] = Field(default_factory=list)
    """ISO dates (``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY``) the turn refers to."""


class EntityReport(_Record):
    entity: Entity
    facts: list[Fact]
    """Current facts first (newest first), then superseded ones."""
    relations: list[Relation]


class MemoryHit(_Record):
    """One search result: a line to show the model, and where it came from."""

    kind: str
    id: str
    text: str
    """The line to show: a fact's statement (marked when no longer current), an episode's
    turn with its date and speaker, or an entity with its kind, aliases and mentions."""
    score: float
    scope: str | None = None
    """The scope the record is in (a search may span several)."""
    session_id: str | None = None
    seq: int | None = None
    observed_at: datetime | None = None
    sources: list[Source] = Field(default_factory=list)
    """Every turn this hit stands for (``session_id``/``seq`` is the first)."""


class Extraction(_Record):
    """What an extractor found in some messages (not yet stored)."""

    entities: list[Entity] = Field(default_factory=list)
    facts: list[Fact] = Field(default_factory=list)
    relations: list[Relation] = Field(default_factory=list)
    episodes: list[Episode] = Field(default_factory=list)

    def extend(self, other: Extraction) -> None:
        self.entities += other.entities
        self.facts += other.facts
        self.relations += other.relations
        self.episodes += other.episodes


class MemoryImport(_Record):
    """What ``import_`` did with an export's records."""

    scope: str | None
    """The scope imported (None: every scope in the export)."""
    added: int = 0
    """Records that were absent and are stored now."""
    kept: int = 0
    """Records already present (by id), left as they are: without ``replace``, or whose
    stored copy belongs to another scope (never moved or overwritten from here)."""
    replaced: int = 0
    """Records present in the same scope, overwritten because ``replace`` was asked."""
    other_scopes: dict[str, int] = Field(default_factory=dict)
    """Records of other scopes in the export, passed over (scope -> count)."""

    @property
    def written(self) -> int:
        return self.added + self.replaced


class FactFields(TypedDict, total=False):
    """What ``write_fact`` takes beside the scope and the statement, each optional:
    ``subject`` (an entity name), provenance (``session_id`` with ``seq``),
    ``observed_at`` (default: now), ``confidence`` (default 1), ``slot`` (default:
    derived from the statement when there is a subject), ``object`` and ``kind``
    (default ``fact``)."""

    subject: str | None
    session_id: str | None
    seq: int | None
    observed_at: datetime | None
    confidence: float
    slot: str | None
    object: str | None
    kind: str


@runtime_checkable
class MemoryStore(Protocol):
    """Long-term memory over one threadline store (same URL as its sessions)."""

    def search(
        self, query: str, *, scopes: Sequence[str], k: int = 10, now: datetime | None = None
    ) -> list[MemoryHit]: ...

    def recall(self, entity: str, *, scopes: Sequence[str]) -> EntityReport | None: ...

    def write_fact(self, scope: str, statement: str, **fields: Unpack[FactFields]) -> Fact: ...

    def forget(self, fact_id: str) -> bool: ...

    def list_facts(
        self, scope: str, *, include_superseded: bool = False, as_of: datetime | None = None
    ) -> list[Fact]: ...

    def list_entities(self, scope: str) -> list[Entity]: ...

    def get_fact(self, fact_id: str) -> Fact | None: ...

    def store_extraction(self, scope: str, extraction: Extraction) -> int: ...

    def pending(self, session_id: str) -> dict[str, Any]: ...

    def set_pending(self, session_id: str, state: dict[str, Any]) -> None: ...

    def pending_sessions(self) -> list[str]: ...

    def export(self, scope: str | None = None) -> dict[str, Any]: ...

    def scopes(self) -> list[str]: ...

    def import_(
        self, data: dict[str, Any], *, scope: str | None = None, replace: bool = False
    ) -> MemoryImport: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Origin:
    """Where extracted messages come from: the scope they go to, their session, and when
    the conversation happened (None: each message's ``created_at``)."""

    scope: str
    session_id: str
    observed_at: datetime | None = None
    known: tuple[Fact, ...] = ()
    """Current facts already stored from this session's earlier turns: what a later turn
    may revise, undo or repeat, so extracting a session in parts equals extracting it
    whole."""


class Extractor:
    """Turns messages into entities, facts, relations and episodes (subclasses say how)."""

    def extract(
        self,
        messages: Sequence[Message],
        *,
        scope: str,
        session_id: str,
        observed_at: datetime | None = None,
        known: Sequence[Fact] = (),
    ) -> Extraction:
        origin = Origin(scope, session_id, observed_at, tuple(known))
        return self.extract_from(list(messages), origin)

    def extract_from(self, messages: list[Message], origin: Origin) -> Extraction:
        raise NotImplementedError


def check_scope(scope: object) -> str:
    if not isinstance(scope, str) or not SCOPE_RE.fullmatch(scope):
        raise UsageError(
            f"memory scope must look like agent:NAME, user:NAME or project:NAME, got {scope!r}"
        )
    return scope


def check_scopes(scopes: Sequence[str]) -> list[str]:
    if isinstance(scopes, str):
        raise UsageError("scopes must be a list of scope names, not one string")
    out = [check_scope(s) for s in scopes]
    if not out:
        raise UsageError("search needs at least one memory scope")
    return list(dict.fromkeys(out))


def scope_for(agent_name: str, configured: str | None = None) -> str:
    """The scope an agent writes to: ``agent:<name>`` unless a shared one is configured.

    ``configured`` may be a full scope (``user:ana``, ``project:site``) or a bare name,
    which becomes a project scope."""
    if configured:
        full = configured if ":" in configured else f"project:{configured}"
        if not SCOPE_RE.fullmatch(full):
            raise UsageError(
                f"memory scope {configured!r} is not valid: give agent:NAME, user:NAME, "
                "project:NAME or a bare NAME (a project scope); a NAME is letters, digits "
                "and . _ @ -, at most 128"
            )
        return full
    return check_scope(f"agent:{agent_name}")
