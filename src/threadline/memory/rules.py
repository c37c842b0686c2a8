"""Rules every memory backend applies, kept once: keys, slots, supersession, validity.

Backends store and index records; what a name's key is, which facts form one
chain, which fact of a chain is current and what was true at a given time are
decided here, so SQLite, PostgreSQL, JSONL and the in-memory backend agree.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from threadline.errors import UsageError
from threadline.memory.base import (
    MAX_NAME_CHARS,
    MAX_STATEMENT_CHARS,
    Fact,
    Source,
)
from threadline.memory.patterns import pattern_table

MAX_SOURCES = 20
"""Sources kept per fact or entity (the newest); provenance, not an index of every mention."""

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours
    yourself yourselves s t don ll re ve d m o y also yeah oh hey hi wow really like just
    got get gonna lot much thing things something anything kind sort ever""".split()  # noqa: SIM905
)

_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)


def fold(text: str) -> str:
    """Lower case without accents: the form names and words are compared in."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def words(text: str) -> list[str]:
    """Folded words, possessives cut (``Ana's`` -> ``ana``)."""
    out = []
    for w in _WORD_RE.findall(fold(text)):
        w = re.sub(r"['’]s$", "", w).replace("’", "'")
        out.append(w)
    return out


def stem(word: str) -> str:
    """A light suffix stripper, so ``paintings``/``painting``/``painted`` meet."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def terms(text: str) -> list[str]:
    """Index terms: folded, stop words out, stemmed."""
    return [stem(w) for w in words(text) if (w not in STOPWORDS and len(w) > 1) or w.isdigit()]


def query_terms(text: str) -> list[str]:
    """The distinct terms of a query, in order."""
    return list(dict.fromkeys(terms(text)))


def name_key(name: str) -> str:
    """The key an entity is found by: folded words joined by one space."""
    return " ".join(words(name))


def check_name(name: object, what: str = "entity name") -> str:
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"{what} must be a non-empty string")
    name = " ".join(name.split())
    if len(name) > MAX_NAME_CHARS:
        raise UsageError(f"{what} is longer than {MAX_NAME_CHARS} characters")
    if not name_key(name):
        raise UsageError(f"{what} {name!r} has no letters or digits")
    return name


def check_statement(statement: object) -> str:
    if not isinstance(statement, str) or not statement.strip():
        raise UsageError("a fact's statement must be a non-empty string")
    statement = " ".join(statement.split())
    if len(statement) > MAX_STATEMENT_CHARS:
        raise UsageError(
            f"a fact's statement is {len(statement):,} characters; the limit is "
            f"{MAX_STATEMENT_CHARS:,} (store one statement, not a document)"
        )
    return statement


def check_confidence(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise UsageError(f"confidence must be a number between 0 and 1, got {value!r}")
    return float(value)


def aware(dt: datetime | None) -> datetime | None:
    if dt is None:
        return None
    if not isinstance(dt, datetime):
        raise UsageError(f"expected a datetime, got {type(dt).__name__}")
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


# -- slots: which facts are values of the same thing ---------------------------------

_SLOT_PATTERNS = pattern_table(
    [
        (r"\b(?:lives?|living|resides?) in\b", "lives in"),
        (r"\bmoved to\b", "lives in"),
        (
            r"(?<!that )(?<!which )\b(?:works?|working) (?:at|for)\b"
            r"(?! (?:it|them|this|that|everyone|everybody|all)\b)",
            "works at",
        ),
        (r"\b(?:is|am) (?:married to|dating|engaged to)\b", "partner"),
        (r"\brelationship status\b", "relationship status"),
        (r"\b(?:favou?rite) (\w+(?: \w+)?)\b", "favorite {0}"),
        (r"\bprefers? (?:\S+ )+?(?:over|to|instead of) (\w+)", "prefers over {0}"),
        (r"\bprefers? (?:\S+ )*?for (\w+(?: \w+)?)", "prefers for {0}"),
        (r"\buses? (?:\S+ )*?for (\w+(?: \w+)?)", "uses for {0}"),
        (
            r"(?:^|[.!?;:,–—-]\s+|\b(?:and|but|so)\s+)(?:[\w-]+'s|my|our) (\w+(?: \w+)?) "
            r"(?:is|are|was|=)\b",
            "{0}",
        ),
    ]
)
"""Patterns of single-valued attributes. The last is an attribute of someone's opening a
clause ("Ana's editor is vim"), never of "the" thing a clause names ("the weather was
nice", "the dogs are outside" are no attribute of the speaker) nor one inside a phrase
("Losing Jon's job was tough", "a brand image for Gina's store is something ...": no
new value of Jon's job or Gina's store); one must not supersede another fact of theirs
for sharing that word."""


def derive_slot(statement: str) -> str | None:
    """The slot a statement fills, when a pattern says so (``lives in``, ``favorite food``).

    Only single-valued things get a slot: "Ana lives in Lisbon" and "Ana lives in
    Porto" cannot both be current, while "Ana likes tea" and "Ana likes jazz" can."""
    text = fold(statement).replace("’", "'")
    for pattern, slot in _SLOT_PATTERNS:
        m = pattern.search(text)
        if m:
            groups = [" ".join(w for w in words(g) if w not in STOPWORDS) or g for g in m.groups()]
            return slot.format(*groups).strip() or None
    return None


def chain_key(subject: str | None, slot: str | None) -> str:
    """Facts with one chain key succeed each other; ``""`` is no chain."""
    if subject is None or slot is None:
        return ""
    return f"{name_key(subject)}|{' '.join(words(slot))}"


def same_statement(a: str, b: str) -> bool:
    return words(a) == words(b)


def merge_sources(existing: Sequence[Source], new: Iterable[Source]) -> list[Source]:
    seen = {(s.session_id, s.seq) for s in existing}
    out = list(existing)
    for s in new:
        if (s.session_id, s.seq) not in seen:
            seen.add((s.session_id, s.seq))
            out.append(s)
    return out[-MAX_SOURCES:] if len(out) > MAX_SOURCES else out


def plan_chain(chain: Sequence[Fact], new: Fact) -> tuple[Fact | None, list[Fact]]:
    """Place ``new`` in the chain of facts sharing its chain key.

    Returns ``(duplicate, changed)``: ``duplicate`` is the live fact that records the
    same observation (same statement, same time: ``new`` is then not stored, it only
    adds its sources), and ``changed`` the facts whose supersession marks must be
    rewritten, ``new`` included. Facts are ordered by ``observed_at`` (ties by when
    they were recorded); each live fact is superseded by the next one, so a fact
    learned late about an earlier time slots into the past instead of overriding the
    present, and a statement made again later is a new observation that wins again.
    """
    for f in chain:
        if (
            not f.retracted
            and f.observed_at == new.observed_at
            and same_statement(f.statement, new.statement)
        ):
            return f, []
    changed = relink([*chain, new])
    if new not in changed:
        changed.append(new)
    return None, changed


def relink(facts: Sequence[Fact]) -> list[Fact]:
    """Order a chain's live facts by time and point each at its successor; returns the
    facts whose marks changed."""
    ordered = sorted(
        (f for f in facts if not f.retracted), key=lambda f: (f.observed_at, f.recorded_at, f.id)
    )
    changed: list[Fact] = []
    for i, f in enumerate(ordered):
        nxt = ordered[i + 1] if i + 1 < len(ordered) else None
        by, at = (nxt.id, nxt.observed_at) if nxt is not None else (None, None)
        if f.superseded_by != by or f.superseded_at != at:
            f.superseded_by, f.superseded_at = by, at
            changed.append(f)
    return changed


def true_at(fact: Fact, as_of: datetime | None) -> bool:
    """Whether ``fact`` held at ``as_of`` (now when None), as far as memory knows."""
    if fact.retracted:
        return False
    if as_of is None:
        return fact.superseded_by is None
    if fact.observed_at > as_of:
        return False
    return fact.superseded_at is None or fact.superseded_at > as_of


def fact_order(fact: Fact) -> tuple[bool, float]:
    """Current facts first, newest first."""
    return (not fact.current, -fact.observed_at.timestamp())
