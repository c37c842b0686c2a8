"""The memory every backend shares: writes, supersession, recall, export and import.

``Memory`` implements the ``MemoryStore`` protocol on top of a backend's
``Records`` primitives, so a rule (what supersedes what, what a scope may hold,
what provenance a fact keeps) is written once here.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar, Unpack

from pydantic import BaseModel, ValidationError

from threadline.errors import ImportFormatError, UsageError
from threadline.memory.base import (
    Entity,
    EntityReport,
    Episode,
    Extraction,
    Fact,
    FactFields,
    MemoryHit,
    MemoryImport,
    Relation,
    Source,
    check_scope,
    check_scopes,
)
from threadline.memory.ranking import search
from threadline.memory.records import NO_SCOPE, Records, Row, Where, stable_id
from threadline.memory.rules import (
    MAX_SOURCES,
    aware,
    chain_key,
    check_confidence,
    check_name,
    check_statement,
    derive_slot,
    fact_order,
    merge_sources,
    name_key,
    plan_chain,
    relink,
    true_at,
    words,
)
from threadline.stamps import utcnow

T = TypeVar("T")
EXPORT_FORMAT = "threadline-memory"
EXPORT_VERSION = 1
_SECTIONS: dict[str, type[BaseModel]] = {
    "entities": Entity,
    "facts": Fact,
    "relations": Relation,
    "episodes": Episode,
}
_KIND_OF = {"entities": "entity", "facts": "fact", "relations": "relation", "episodes": "episode"}


EXTRACTION_BATCH = 50
"""Records per transaction when an extraction is stored (``store_extraction``)."""
WRITE_SLICE_SECONDS = 0.5
"""How long ``store_extraction`` writes (transaction after transaction) before it pauses."""
WRITE_PAUSE_SECONDS = 0.12
"""How long it pauses then, with no transaction open: longer than the longest sleep
between two tries of SQLite's busy handler (100 ms) and of the JSONL store's file lock
(50 ms), so a writer waiting for the lock takes it in the pause. Small transactions
alone are not enough: the flush takes the lock back at once and a waiter, asleep
between tries, rarely sees it free. SQLite has one writer at a time, and a flush of
1,800 facts in one transaction held the lock for 20 s and kept a ``create_session``
waiting 15 s; ``bench/memory_write_lock.py`` measures the waits with these bounds."""


class _Pacer:
    """Says when a long write has held the lock long enough to let others in."""

    def __init__(self) -> None:
        self.since = time.monotonic()

    def between_transactions(self) -> None:
        if time.monotonic() - self.since >= WRITE_SLICE_SECONDS:
            time.sleep(WRITE_PAUSE_SECONDS)
            self.since = time.monotonic()


def _batches(items: Sequence[T], pacer: _Pacer) -> Iterator[Sequence[T]]:
    """``items`` a transaction's worth at a time, pausing as ``pacer`` says before each."""
    for start in range(0, len(items), EXTRACTION_BATCH):
        pacer.between_transactions()
        yield items[start : start + EXTRACTION_BATCH]


def entity_id(scope: str, name: str) -> str:
    return stable_id("entity", scope, name_key(name))


def entity_row(e: Entity) -> Row:
    text = " ".join([e.name, *e.aliases])
    return Row("entity", e.id, e.scope, name_key(e.name), e.kind, e.model_dump(mode="json"), text)


def alias_rows(e: Entity, aliases: Sequence[str]) -> list[Row]:
    return [
        Row(
            "alias",
            stable_id("alias", e.scope, name_key(a)),
            e.scope,
            name_key(a),
            e.id,
            {"entity_id": e.id, "alias": a},
        )
        for a in aliases
    ]


def fact_row(f: Fact) -> Row:
    # the subject weighs the same whether or not the statement names it ("The bakery
    # opens on Friday" said by Tom is as much Tom's as "Tom moved to Porto")
    named = f.subject is None or name_key(f.subject) in name_key(f.statement)
    text = f"{f.subject or ''} {'' if named else f.subject} {f.statement}"
    return Row(
        "fact",
        f.id,
        f.scope,
        chain_key(f.subject, f.slot),
        name_key(f.subject) if f.subject else "",
        f.model_dump(mode="json"),
        text,
    )


def episode_row(e: Episode) -> Row:
    text = f"{e.speaker or ''} {e.text}"
    key = f"{e.session_id}:{e.seq}"
    return Row("episode", e.id, e.scope, key, e.session_id, e.model_dump(mode="json"), text)


def relation_row(r: Relation) -> Row:
    return Row(
        "relation", r.id, r.scope, name_key(r.source), name_key(r.target), r.model_dump(mode="json")
    )


class Memory:
    """The ``MemoryStore`` over one backend's records."""

    def __init__(self, records: Records, *, where: str) -> None:
        self.records = records
        self.where = where

    def __repr__(self) -> str:
        return f"<Memory {self.where}>"

    def close(self) -> None:
        self.records.close()

    # -- writing ------------------------------------------------------------------

    def write_fact(self, scope: str, statement: str, **fields: Unpack[FactFields]) -> Fact:
        """Store one fact; a fact with the same subject and slot is superseded by it.

        Returns the stored fact, or the existing one when it says the same thing
        (which then gains this source)."""
        fact = self._new_fact(scope, statement, fields)
        with self.records.transaction():
            return self._add_fact(fact)

    def _new_fact(self, scope: str, statement: str, fields: FactFields) -> Fact:
        check_scope(scope)
        statement = check_statement(statement)
        subject, obj = fields.get("subject"), fields.get("object")
        subject = check_name(subject, "subject") if subject is not None else None
        obj = check_name(obj, "object") if obj is not None else None
        session_id, seq = fields.get("session_id"), fields.get("seq")
        if (session_id is None) != (seq is None):
            raise UsageError("a fact's provenance needs both session_id and seq, or neither")
        if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int) or seq < 1):
            raise UsageError(f"seq must be a positive integer, got {seq!r}")
        slot = fields.get("slot")
        if slot is None and subject is not None:
            slot = derive_slot(statement)
        sources = [Source(session_id=session_id, seq=seq)] if session_id and seq else []
        return Fact(
            scope=scope,
            subject=subject,
            statement=statement,
            object=obj,
            kind=fields.get("kind", "fact"),
            slot=slot,
            session_id=session_id,
            seq=seq,
            sources=sources,
            observed_at=aware(fields.get("observed_at")) or utcnow(),
            confidence=check_confidence(fields.get("confidence", 1.0)),
        )

    def _add_fact(self, fact: Fact) -> Fact:
        """Inside a transaction: store ``fact`` in its chain and its subject and object.

        A fact from a turn gets an id derived from the turn and what it says, so
        extracting the same turn again stores nothing new."""
        if fact.session_id is not None and fact.seq is not None:
            fact.id = stable_id(
                "fact",
                fact.scope,
                fact.subject or "",
                " ".join(words(fact.statement)),
                fact.session_id,
                str(fact.seq),
            )
            found = self.records.get("fact", [fact.id])
            if found:
                return Fact.model_validate(found[0])
        for name in (fact.subject, fact.object):
            if name is not None:
                self._touch_entity(
                    Entity(scope=fact.scope, name=name, sources=fact.sources[:1]), fact.observed_at
                )
        key = chain_key(fact.subject, fact.slot)
        chain = (
            [Fact.model_validate(b) for b in self.records.find("fact", Where(keys=[key]))]
            if key
            else []
        )
        chain = [f for f in chain if f.scope == fact.scope]
        duplicate, changed = plan_chain(chain, fact)
        if duplicate is not None:
            duplicate.sources = merge_sources(duplicate.sources, fact.sources)
            duplicate.confidence = max(duplicate.confidence, fact.confidence)
            self.records.put([fact_row(duplicate)])
            return duplicate
        rows = [fact_row(f) for f in changed]
        if fact.subject is not None and fact.object is not None:
            label = fact.slot or "related to"
            rel = Relation(
                id=stable_id("relation", fact.scope, name_key(fact.subject), label, fact.id),
                scope=fact.scope,
                source=fact.subject,
                label=label,
                target=fact.object,
                fact_id=fact.id,
                observed_at=fact.observed_at,
            )
            rows.append(relation_row(rel))
        self.records.put(rows)
        return fact

    def _touch_entity(self, seen: Entity, when: datetime) -> Entity:
        """Inside a transaction: create the entity or merge a new sighting into it."""
        eid = entity_id(seen.scope, seen.name)
        found = self.records.get("entity", [eid])
        if found:
            entity = Entity.model_validate(found[0])
            if entity.kind == "thing" and seen.kind != "thing":
                entity.kind = seen.kind
            new_aliases = [a for a in seen.aliases if a not in entity.aliases and a != entity.name]
            entity.aliases += new_aliases
            entity.mentions += max(1, seen.mentions)
            entity.sources = merge_sources(entity.sources, seen.sources)
            entity.first_seen = min(filter(None, [entity.first_seen, when]))
            entity.last_seen = max(filter(None, [entity.last_seen, when]))
        else:
            entity = seen.model_copy(
                update={
                    "id": eid,
                    "first_seen": when,
                    "last_seen": when,
                    "mentions": max(1, seen.mentions),
                    "sources": seen.sources[-MAX_SOURCES:],
                }
            )
            new_aliases = list(entity.aliases)
        self.records.put([entity_row(entity), *alias_rows(entity, new_aliases)])
        return entity

    def store_extraction(self, scope: str, extraction: Extraction) -> int:
        """Store what an extractor found; returns facts written.

        Everything is checked first, so a bad extraction stores nothing; then it is
        written in transactions of at most ``EXTRACTION_BATCH`` records each, with a
        pause every ``WRITE_SLICE_SECONDS`` that lets other writers in, so a large
        flush never holds the store's write lock for its whole length. A crash
        between two of them leaves whole records: re-extracting the same turns writes
        no fact twice (facts, turns and relations have ids derived from what they are)."""
        check_scope(scope)
        for f in extraction.facts:
            f.scope = scope
            f.statement = check_statement(f.statement)
            if f.slot is None and f.subject is not None:
                f.slot = derive_slot(f.statement)
            if f.session_id and f.seq and not f.sources:
                f.sources = [Source(session_id=f.session_id, seq=f.seq)]
        pacer = _Pacer()
        for entities in _batches(extraction.entities, pacer):
            with self.records.transaction():
                for e in entities:
                    e.scope = scope
                    self._touch_entity(e, e.last_seen or e.first_seen or utcnow())
        for episodes in _batches(extraction.episodes, pacer):
            for ep in episodes:
                ep.scope = scope
                ep.id = stable_id("episode", scope, ep.session_id, str(ep.seq))
            with self.records.transaction():
                self.records.put([episode_row(ep) for ep in episodes])
        written = 0
        for facts in _batches(extraction.facts, pacer):
            with self.records.transaction():
                for f in facts:
                    written += self._add_fact(f) is f
        for relations in _batches(extraction.relations, pacer):
            for r in relations:
                r.scope = scope
                r.id = stable_id("relation", scope, name_key(r.source), r.label, name_key(r.target))
            with self.records.transaction():
                self.records.put([relation_row(r) for r in relations])
        return written

    def forget(self, fact_id: str) -> bool:
        """Mark a fact retracted (never deleted); the fact it superseded is current again."""
        if not isinstance(fact_id, str) or not fact_id:
            raise UsageError("forget needs a fact id")
        with self.records.transaction():
            found = self.records.get("fact", [fact_id])
            if not found:
                return False
            fact = Fact.model_validate(found[0])
            if fact.retracted:
                return False
            fact.retracted, fact.retracted_at = True, utcnow()
            fact.superseded_by = fact.superseded_at = None
            rows = [fact_row(fact)]
            key = chain_key(fact.subject, fact.slot)
            if key:
                chain = [
                    Fact.model_validate(b)
                    for b in self.records.find("fact", Where(scopes=[fact.scope], keys=[key]))
                    if b["id"] != fact.id
                ]
                rows += [fact_row(f) for f in relink(chain)]
            self.records.put(rows)
        return True

    # -- reading ------------------------------------------------------------------

    def get_fact(self, fact_id: str) -> Fact | None:
        found = self.records.get("fact", [fact_id])
        return Fact.model_validate(found[0]) if found else None

    def list_facts(
        self, scope: str, *, include_superseded: bool = False, as_of: datetime | None = None
    ) -> list[Fact]:
        """Facts true now (or at ``as_of``); with ``include_superseded``, every fact kept."""
        check_scope(scope)
        as_of = aware(as_of)
        facts = [Fact.model_validate(b) for b in self.records.find("fact", Where(scopes=[scope]))]
        if not include_superseded:
            facts = [f for f in facts if true_at(f, as_of)]
        return sorted(facts, key=fact_order)

    def list_entities(self, scope: str) -> list[Entity]:
        check_scope(scope)
        found = [
            Entity.model_validate(b) for b in self.records.find("entity", Where(scopes=[scope]))
        ]
        return sorted(found, key=lambda e: (-e.mentions, e.name.casefold()))

    def find_entities(self, names: Sequence[str], scopes: Sequence[str]) -> list[Entity]:
        """Entities whose name or an alias has one of these keys."""
        keys = list(dict.fromkeys(k for k in (name_key(n) for n in names) if k))
        if not keys:
            return []
        bodies = self.records.find("entity", Where(scopes=scopes, keys=keys))
        aliased = {
            a["entity_id"] for a in self.records.find("alias", Where(scopes=scopes, keys=keys))
        }
        have = {b["id"] for b in bodies}
        if aliased - have:
            bodies += self.records.get("entity", sorted(aliased - have))
        return [Entity.model_validate(b) for b in bodies]

    def recall(self, entity: str, *, scopes: Sequence[str]) -> EntityReport | None:
        """What is known about one entity: its facts (current first) and relations."""
        scopes = check_scopes(scopes)
        check_name(entity)
        found = self.find_entities([entity], scopes)
        if not found:
            return None
        chosen = min(found, key=lambda e: (scopes.index(e.scope), -e.mentions))
        key = name_key(chosen.name)
        facts = [
            Fact.model_validate(b)
            for b in self.records.find("fact", Where(scopes=scopes, key2=[key]))
        ]
        relations = [
            Relation.model_validate(b)
            for b in self.records.find("relation", Where(scopes=scopes, keys=[key]))
            + self.records.find("relation", Where(scopes=scopes, key2=[key]))
        ]
        facts = [f for f in facts if not f.retracted]
        relations.sort(key=lambda r: r.observed_at, reverse=True)
        return EntityReport(entity=chosen, facts=sorted(facts, key=fact_order), relations=relations)

    def search(
        self, query: str, *, scopes: Sequence[str], k: int = 10, now: datetime | None = None
    ) -> list[MemoryHit]:
        """Facts, entities and remembered turns for ``query``, best first, with sources."""
        return search(self, query, scopes=check_scopes(scopes), k=k, now=aware(now) or utcnow())

    # -- pending extraction (per session, durable) -----------------------------------

    def pending(self, session_id: str) -> dict[str, Any]:
        found = self.records.get("pending", [session_id])
        return dict(found[0].get("state", {})) if found else {}

    def pending_sessions(self) -> list[str]:
        """Sessions with flagged messages not yet extracted (a process that ended without
        flushing, killed or crashed, leaves them; the next run of the agent flushes them)."""
        out = []
        for body in self.records.find("pending", Where(scopes=[NO_SCOPE])):
            state = body.get("state", {})
            done = int(state.get("extracted_to", 0))
            if any(int(s) > done for s in state.get("flagged", [])):
                out.append(str(body.get("session_id") or ""))
        return sorted(s for s in out if s)

    def set_pending(self, session_id: str, state: dict[str, Any]) -> None:
        body = {"session_id": session_id, "state": state}
        row = Row("pending", session_id, NO_SCOPE, session_id, "", body)
        with self.records.transaction():
            self.records.put([row])

    def scopes(self) -> list[str]:
        """Every scope that holds a record (facts, entities, relations, episodes), sorted:
        what a search that names no scope spans (``memory build`` writes each session's
        facts to its own agent's scope). It reads every record once."""
        found = {
            str(body["scope"])
            for kind in _KIND_OF.values()
            for body in self.records.find(kind)
            if isinstance(body.get("scope"), str)
        }
        return sorted(found)

    # -- export / import -------------------------------------------------------------

    def export(self, scope: str | None = None) -> dict[str, Any]:
        """Everything in ``scope`` (or every scope) as JSON-able data for ``import_``."""
        scopes = [check_scope(scope)] if scope is not None else None
        out: dict[str, Any] = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION}
        for section, kind in _KIND_OF.items():
            bodies = self.records.find(kind, Where(scopes=scopes))
            out[section] = sorted(bodies, key=lambda b: b["id"])
        return out

    def import_(
        self, data: dict[str, Any], *, scope: str | None = None, replace: bool = False
    ) -> MemoryImport:
        """Load an ``export``: the records of ``scope`` (None: of every scope in it).

        Records keep their ids. One already stored is kept as it is (importing twice
        changes nothing, and an edited export cannot overwrite what a scope holds);
        ``replace`` overwrites those stored in the same scope, never a record of
        another scope. Bad data raises ``ImportFormatError`` and stores nothing."""
        if scope is not None:
            check_scope(scope)
        parsed = _parse_export(data)
        report = MemoryImport(scope=scope)
        other: Counter[str] = Counter()
        rows: list[Row] = []
        with self.records.transaction():
            for section, kind in _KIND_OF.items():
                chosen = []
                for record in parsed[section]:
                    if scope is None or record.scope == scope:
                        chosen.append(record)
                    else:
                        other[record.scope] += 1
                stored = {b["id"]: b for b in self.records.get(kind, [r.id for r in chosen])}
                for record in chosen:
                    old = stored.get(record.id)
                    if old is None:
                        report.added += 1
                    elif replace and old.get("scope") == record.scope:
                        report.replaced += 1
                    else:
                        report.kept += 1
                        continue
                    rows += _rows_of(record)
            self.records.put(rows)
        report.other_scopes = dict(sorted(other.items()))
        return report


def _parse_export(data: dict[str, Any]) -> dict[str, list[Any]]:
    """Every record of an export, validated (``ImportFormatError`` on the first bad one)."""
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        raise ImportFormatError(f"not a threadline memory export (format {EXPORT_FORMAT!r})")
    if not isinstance(data.get("version"), int) or data["version"] > EXPORT_VERSION:
        raise ImportFormatError(
            f"memory export version {data.get('version')!r} is not one this threadline reads"
        )
    parsed: dict[str, list[Any]] = {}
    for section, model in _SECTIONS.items():
        items = data.get(section, [])
        if not isinstance(items, list):
            raise ImportFormatError(f"{section} must be a list")
        try:
            parsed[section] = [model.model_validate(item) for item in items]
        except ValidationError as exc:
            raise ImportFormatError(f"bad record in {section}: {exc.errors()[0]}") from None
        for record in parsed[section]:
            check_scope(record.scope)
            if isinstance(record, Fact):
                check_statement(record.statement)
    return parsed


def _rows_of(record: BaseModel) -> list[Row]:
    """The rows that store one exported record (an entity's aliases with it)."""
    if isinstance(record, Entity):
        return [entity_row(record), *alias_rows(record, record.aliases)]
    if isinstance(record, Fact):
        return [fact_row(record)]
    if isinstance(record, Relation):
        return [relation_row(record)]
    assert isinstance(record, Episode)
    return [episode_row(record)]
