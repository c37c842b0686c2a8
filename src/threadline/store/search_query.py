"""One search syntax for every backend: parsed once here, mapped to each backend.

What a message is searched by is made here too, so that every backend sees the
same words: the message text, each tool call's name and its arguments *decoded*
(every key and value of the JSON object, not its escaped form, so ``zebrafish``
at the start of a line of code is found), lowercased and cut into tokens. A
token is a run of letters, digits and combining marks, exactly as SQLite's
``unicode61`` tokenizer cuts (underscore and punctuation separate); each CJK
character (Han, kana, Hangul) is a token of its own, so Chinese and Japanese
words, written without spaces, are found as the phrase of their characters.
SQLite's FTS5 indexes ``fts_text`` (the lowercased text, CJK spaced apart) and
cuts it itself; PostgreSQL indexes the tokens joined by spaces
(``array_to_tsvector``, taken as they are); the scanning backends (JSONL,
memory, Redis) match the same joined tokens with ``SearchQuery.matches``.

Syntax (the same text is in ``threadline sessions search --help`` and docs/stores.md):

* words are ANDed: ``parser error`` finds messages holding both;
* ``"exact phrase"``: the words next to each other, in that order;
* ``prefix*``: any word starting with it (``transcr*``);
* ``a OR b``: either (``OR`` in capitals; binds tighter than the AND between words);
* ``NOT word`` or ``-word``: messages without it (a query of negations only
  searches for the negated words: a lone ``-word`` is the word);
* a word that holds punctuation (``foo.bar``, ``x-y``, ``北京``) is the phrase of its
  tokens; text with no letters or digits finds nothing.

Hits come newest first (message time, then session id, then seq descending), the
same order on every backend, so pages (``offset``, ``limit``) and totals agree.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import json
import re
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Unpack

from threadline.errors import SessionNotFound, StoreUnavailable, UsageError
from threadline.store.checks import (
    DEFAULT_PAGE_SIZE,
    search_words,
    validate_agent,
    validate_offset,
    validate_page_size,
)
from threadline.store.retraction import Retractions
from threadline.store.search_records import Mark, SearchHit, SearchOptions, SearchPage
from threadline.store.session_info import SessionInfo

if TYPE_CHECKING:  # messages loads pydantic, which listing sessions must not (issue 13)
    from threadline.messages import Message
    from threadline.store.protocol import Store

MAX_TOKEN_CHARS = 100
"""A query word this long or longer matches every word starting with its first this
many characters (PostgreSQL stores that much of a word: a lexeme holds at most 2,047
bytes, and nobody types a longer word)."""
SNIPPET_CONTEXT_CHARS = 60
"""Characters shown on each side of the first match in a snippet."""
MAX_SNIPPET_SOURCE_CHARS = 1_000_000
"""A snippet looks for the first match in at most this many characters of a message."""
ROLES = ("system", "user", "assistant", "tool")
DEFAULT_SEARCH_TIMEOUT = 10.0
"""Seconds one search may run on any backend: PostgreSQL's server and SQLite's progress
handler cancel it (an error), a scanning backend stops and answers what it found so far
(``SearchPage.exact`` False)."""
MAX_SEARCH_TIMEOUT = 3600.0
SCAN_CHUNK = 256
"""Messages a scan reads at a time: a session is never held whole in memory."""

_CJK = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31a0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003134f"
)
_PRIVATE_USE = "\ue000-\uf8ff\U000f0000-\U0010fffd"

# Patterns are compiled on first use, not at import: every command that opens a store
# imports this module, and most never search (``threadline sessions list``).


@functools.cache
def _cjk_re() -> re.Pattern[str]:
    return re.compile(f"[{_CJK}]")


@functools.cache
def _long_token_re() -> re.Pattern[str]:
    return re.compile(f"\\S{{{MAX_TOKEN_CHARS + 1},}}")


@functools.cache
def _atom_re() -> re.Pattern[str]:
    return re.compile(r'(-?)"([^"]*)"?(\*?)|(\S+)')


# -- index text ----------------------------------------------------------------------


@functools.cache
def _separators_re() -> re.Pattern[str]:
    """Runs of what separates tokens: everything but SQLite's ``unicode61`` token
    characters (letters, numbers, marks, private use); ``_``, which ``\\w`` has, is
    replaced before. ``\\w`` leaves marks out (Devanagari vowel signs, combining
    accents), so they are listed here, once per process."""
    codes = itertools.chain(range(0x20000), range(0xE0000, 0xE0200))
    marks = [c for c in codes if unicodedata.category(chr(c)).startswith("M")]
    ranges = []
    for _, run in itertools.groupby(enumerate(marks), lambda ic: ic[1] - ic[0]):
        span = [c for _, c in run]
        ranges.append(re.escape(chr(span[0])) + "-" + re.escape(chr(span[-1])))
    return re.compile(f"[^\\w{''.join(ranges)}{_PRIVATE_USE}]+")


def tokens(text: str) -> list[str]:
    """The searchable tokens of ``text``, lowercased."""
    return index_text([text]).split()


def _leaves(value: Any, out: list[str]) -> None:
    """Every key and scalar of a JSON value, decoded, in document order."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            out.append(str(key))
            _leaves(item, out)
    elif isinstance(value, list):
        for item in value:
            _leaves(item, out)
    elif value is not None:
        out.append(json.dumps(value))


def _call_pieces(name: Any, arguments: Any, raw: Any, out: list[str]) -> None:
    out.append(str(name or ""))
    if isinstance(raw, str):
        out.append(raw)
    else:
        _leaves(arguments, out)


def message_pieces(m: Message) -> list[str]:
    """What a message is searched by: its text, and each tool call's name and arguments."""
    out = [m.text]
    for call in m.tool_calls:
        _call_pieces(call.name, call.arguments, call.raw_arguments, out)
    return out


def body_pieces(body: str | bytes) -> list[str]:
    """``message_pieces`` read straight from a message's stored JSON (no model built);
    unreadable JSON has nothing to search."""
    try:
        data = json.loads(body)
    except ValueError:
        return []
    if not isinstance(data, dict):
        return []
    content = data.get("content")
    if isinstance(content, str):
        out = [content]
    elif isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        out = ["\n".join(t for t in texts if isinstance(t, str))]
    else:
        out = [""]
    for call in data.get("tool_calls") or ():
        if isinstance(call, dict):
            _call_pieces(call.get("name"), call.get("arguments"), call.get("raw_arguments"), out)
    return out


def index_text(pieces: Sequence[str]) -> str:
    """The tokens of ``pieces`` joined by single spaces: what the scanning backends
    match and (its words cut to ``MAX_TOKEN_CHARS``) what PostgreSQL indexes. One
    regular-expression pass over ``fts_text``, so FTS5 sees the same tokens."""
    return _separators_re().sub(" ", fts_text(pieces).replace("_", " ")).strip(" ")


def capped_index_text(pieces: Sequence[str]) -> str:
    """``index_text`` with each word cut to ``MAX_TOKEN_CHARS`` characters."""
    text = index_text(pieces)
    if len(text) > MAX_TOKEN_CHARS:
        text = _long_token_re().sub(lambda m: m.group()[:MAX_TOKEN_CHARS], text)
    return text


def fts_text(pieces: Sequence[str]) -> str:
    """What SQLite's FTS5 (``unicode61``) indexes: the display text lowercased, each CJK
    character spaced apart. FTS5 then splits it exactly where ``tokens`` splits, so
    this costs a lowercase pass, not a tokenisation in Python."""
    text = display_text(pieces).lower()
    if not text.isascii() and _cjk_re().search(text):
        text = _cjk_re().sub(" \\g<0> ", text)
    return text


def body_fts_text(body: str | bytes) -> str:
    """``fts_text`` of a stored message body. SQLite calls it from SQL, for indexing
    and for removing a deleted message from the index, so its output for a given body
    must never change without a migration that rebuilds the index."""
    return fts_text(body_pieces(body))


def display_text(pieces: Sequence[str]) -> str:
    """The pieces as a person reads them, for snippets."""
    return "\n".join(p for p in pieces if p)


# -- the query -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Atom:
    """A word (one token), a phrase (several tokens next to each other), or a prefix."""

    tokens: tuple[str, ...]
    prefix: bool = False

    @property
    def phrase(self) -> str:
        return " ".join(self.tokens)

    def found_in(self, padded: str) -> bool:
        """Whether the atom occurs in an index text given as ``" " + text + " "``."""
        return (" " + self.phrase + ("" if self.prefix else " ")) in padded


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """``groups`` are ANDed, the atoms of a group ORed; no message may hold an
    ``excluded`` atom. Empty ``groups`` (text with no letters or digits) finds nothing."""

    text: str
    groups: tuple[tuple[Atom, ...], ...]
    excluded: tuple[Atom, ...] = ()

    def matches(self, index: str) -> bool:
        """The one matcher of the scanning backends (memory, JSONL)."""
        if not self.groups:
            return False
        padded = " " + index + " "
        return all(any(a.found_in(padded) for a in group) for group in self.groups) and not any(
            a.found_in(padded) for a in self.excluded
        )

    def positive_atoms(self) -> list[Atom]:
        return [a for group in self.groups for a in group]


def _atom(text: str, prefix: bool) -> Atom | None:
    found = tuple(t[:MAX_TOKEN_CHARS] for t in tokens(text))
    if not found:
        return None
    return Atom(found, prefix or len(found[-1]) == MAX_TOKEN_CHARS)


def parse_query(query: object) -> SearchQuery:
    """Parse the documented syntax (module docstring). Limits and emptiness are
    ``search_words``'s, the same as before the syntax existed; anything that is not
    well-formed syntax is taken as words, so a query never fails to parse."""
    search_words(query)
    assert isinstance(query, str)
    items: list[tuple[str, Atom | None, bool]] = []  # (keyword or "", atom, negated)
    for m in _atom_re().finditer(query.replace("\x00", " ")):
        if m.group(4) is None:  # a quoted phrase
            items.append(("", _atom(m.group(2), bool(m.group(3))), bool(m.group(1))))
            continue
        word = m.group(4)
        if word in ("OR", "AND", "NOT"):
            items.append((word, _atom(word, False), False))
        elif word.startswith("-") and len(word) > 1:
            items.append(("", _atom(word[1:].rstrip("*"), word.endswith("*")), True))
        else:
            items.append(("", _atom(word.rstrip("*"), word.endswith("*") and word != "*"), False))
    groups: list[list[Atom]] = []
    excluded: list[Atom] = []
    negate_next = join_next = False
    for i, (keyword, atom, negated) in enumerate(items):
        following = next((it for it in items[i + 1 :] if it[1] is not None), None)
        operand_follows = following is not None and following[0] not in ("OR", "AND")
        if keyword == "NOT" and operand_follows and not negate_next:
            negate_next = True
            continue
        if keyword == "OR" and operand_follows and groups and not negate_next:
            join_next = True
            continue
        if keyword == "AND" and operand_follows and (groups or excluded):
            continue
        if atom is None:
            continue
        if negated or negate_next:
            excluded.append(atom)
        elif join_next:
            groups[-1].append(atom)
        else:
            groups.append([atom])
        negate_next = join_next = False
    if not groups:  # negations only: search for the words themselves
        groups, excluded = [[a] for a in excluded], []
    return SearchQuery(
        text=query, groups=tuple(tuple(dict.fromkeys(g)) for g in groups), excluded=tuple(excluded)
    )


# -- filters and pages -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """Which messages a search looks at: all of these that are given must hold.
    ``model`` is the session's model; ``since`` / ``until`` bound the message's time
    (``since`` included, ``until`` excluded)."""

    agent: str | None = None
    model: str | None = None
    role: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    session_id: str | None = None

    def admits_session(self, info: SessionInfo) -> bool:
        return (
            (self.agent is None or info.agent == self.agent)
            and (self.model is None or info.model == self.model)
            and (self.session_id is None or info.id == self.session_id)
        )

    def admits_message(self, m: Message) -> bool:
        return (
            (self.role is None or m.role == self.role)
            and (self.since is None or m.created_at >= self.since)
            and (self.until is None or m.created_at < self.until)
        )


def parse_when(text: str | None, what: str = "time") -> datetime | None:
    """An ISO 8601 date or time for ``since`` / ``until``; without a zone it is UTC."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"{what} must be an ISO 8601 date or time (2026-05-01 or 2026-05-01T12:00), "
            f"got {text!r}"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """A search checked once, before any backend does any work."""

    query: SearchQuery
    filters: SearchFilters
    limit: int
    offset: int

    def nothing(self) -> SearchPage:
        """The page of a query with no words to find."""
        return SearchPage(total=0, offset=self.offset)


def search_timeout(value: float) -> float:
    """A store's ``search_timeout`` (seconds), checked alike on every backend."""
    if not 0 < value <= MAX_SEARCH_TIMEOUT:
        raise UsageError(
            f"search_timeout must be between 0 and {MAX_SEARCH_TIMEOUT:g} seconds, got {value}"
        )
    return float(value)


def search_timed_out(where: str, timeout: float, by: str = "the server") -> StoreUnavailable:
    """The error of a search ``by`` cancelled at ``timeout`` seconds."""
    return StoreUnavailable(
        f"{where}: the search took longer than {timeout:g} s and {by} cancelled it "
        "(search for fewer or rarer words, or raise ?search_timeout= in the store URL)"
    )


def search_request(query: object, **options: Unpack[SearchOptions]) -> SearchRequest:
    """Parse the query and check the options: bad values are usage errors, on every
    backend alike; an unknown option is a ``TypeError``, as for any function."""
    unknown = sorted(set(options) - set(SearchOptions.__annotations__))
    if unknown:
        raise TypeError(f"search() got unexpected keyword arguments: {', '.join(unknown)}")
    q = parse_query(query)
    agent, role = options.get("agent"), options.get("role")
    if agent is not None:
        validate_agent(agent)
    if role is not None and role not in ROLES:
        raise UsageError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
    since, until = options.get("since"), options.get("until")
    for name, value in (("since", since), ("until", until)):
        if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
            raise UsageError(f"{name} must be a datetime with a time zone, got {value!r}")
    filters = SearchFilters(
        agent, options.get("model"), role, since, until, options.get("session_id")
    )
    limit = validate_page_size(options.get("limit", DEFAULT_PAGE_SIZE))
    offset = validate_offset(options.get("offset", 0))
    return SearchRequest(q, filters, limit, offset)


def order_key(created_at: datetime, session_id: str, seq: int) -> tuple[float, str, int]:
    """Sorts hits newest first, then by session id, then by seq from the end."""
    return (-created_at.timestamp(), session_id, -seq)


# -- snippets -------------------------------------------------------------------------------


def _highlighter(q: SearchQuery) -> re.Pattern[str] | None:
    """A pattern for the query's positive tokens in display text (case-insensitive,
    whole words except for prefixes and CJK characters)."""
    alternatives: dict[str, None] = {}
    for atom in q.positive_atoms():
        for i, tok in enumerate(atom.tokens):
            if _cjk_re().fullmatch(tok):
                alternatives[re.escape(tok)] = None
                continue
            last = i == len(atom.tokens) - 1
            tail = r"[^\W_]*" if atom.prefix and last else r"(?![^\W_])"
            alternatives[r"(?<![^\W_])" + re.escape(tok) + tail] = None
    if not alternatives:
        return None
    ordered = sorted(alternatives, key=len, reverse=True)
    return re.compile("|".join(ordered), re.IGNORECASE)


def snippet_pieces(text: str, q: SearchQuery) -> list[tuple[str, bool]]:
    """The first place any word of the query appears, with ``SNIPPET_CONTEXT_CHARS``
    around it, as pieces of text, each True where it is a match; the message's start
    when none is found."""
    source = text[:MAX_SNIPPET_SOURCE_CHARS]
    pattern = _highlighter(q)
    found = pattern.search(source) if pattern is not None else None
    at, end = (found.start(), found.end()) if found else (0, 0)
    start = max(0, at - SNIPPET_CONTEXT_CHARS)
    stop = min(len(text), end + SNIPPET_CONTEXT_CHARS)
    shown = " ".join(text[start:stop].split())
    pieces: list[tuple[str, bool]] = [("…", False)] if start > 0 else []
    done = 0
    for m in pattern.finditer(shown) if pattern is not None else ():
        if m.start() > done:
            pieces.append((shown[done : m.start()], False))
        pieces.append((m.group(), True))
        done = m.end()
    if done < len(shown):
        pieces.append((shown[done:], False))
    if stop < len(text):
        pieces.append(("…", False))
    return pieces


def snippet(text: str, q: SearchQuery) -> str:
    """The first place any word of the query appears, with ``SNIPPET_CONTEXT_CHARS``
    around it and matches in brackets; the message's start when none is found."""
    return marked_snippet(text, q)[0]


def marked_snippet(text: str, q: SearchQuery) -> tuple[str, list[Mark]]:
    """``snippet`` and where its bracketed matches are (``Mark``: brackets included), so
    a page can highlight them without reading brackets the text itself holds."""
    out: list[str] = []
    marks: list[Mark] = []
    at = 0
    for piece, matched in snippet_pieces(text, q):
        if matched:
            piece = f"[{piece}]"
            marks.append(Mark(start=at, end=at + len(piece)))
        out.append(piece)
        at += len(piece)
    return "".join(out), marks


# -- the scan every backend without an index shares ----------------------------------------


def scan_store(
    store: Store,
    query: str,
    options: SearchOptions,
    every_session: Callable[[str | None], Iterable[SessionInfo]],
    skipped: tuple[type[Exception], ...] = (SessionNotFound,),
    timeout: float = DEFAULT_SEARCH_TIMEOUT,
) -> SearchPage:
    """``Store.search`` for a backend with no full-text index: ``scan_search`` over the
    session the filters name, or else every session (of the agent they name) that
    ``every_session`` yields, each read ``SCAN_CHUNK`` messages at a time. A session
    whose messages or memo raise one of ``skipped`` while it is read (deleted meanwhile,
    expired) has no hits."""
    request = search_request(query, **options)
    session_id = request.filters.session_id
    if session_id is not None:
        try:
            infos: Iterable[SessionInfo] = [store.session_info(session_id)]
        except SessionNotFound:
            infos = []
    else:
        infos = every_session(request.filters.agent) if request.query.groups else []

    def read(info: SessionInfo) -> Iterator[Message]:
        after = 0
        while True:
            try:
                chunk = store.read_messages(info.id, after_seq=after, limit=SCAN_CHUNK)
            except skipped:
                return
            yield from chunk
            if len(chunk) < SCAN_CHUNK or chunk[-1].seq is None:
                return
            after = chunk[-1].seq

    def fetch(info: SessionInfo, seq: int) -> Message | None:
        try:
            found = store.read_messages(info.id, after_seq=seq - 1, limit=1)
        except skipped:
            return None
        return found[0] if found and found[0].seq == seq else None

    def memo(info: SessionInfo) -> dict[str, Any]:
        try:
            return store.get_memo(info.id)
        except skipped:
            return {}

    return scan_search(request, infos, read, memo, fetch=fetch, timeout=timeout)


class _Newest:
    """A hit's place in a bounded max-heap: the heap's top is the oldest hit kept."""

    __slots__ = ("info", "key")

    def __init__(self, key: tuple[float, str, int], info: SessionInfo) -> None:
        self.key = key
        self.info = info

    def __lt__(self, other: _Newest) -> bool:
        return self.key > other.key


def scan_search(
    request: SearchRequest,
    infos: Iterable[SessionInfo],
    read: Callable[[SessionInfo], Iterable[Message]],
    memo: Callable[[SessionInfo], dict[str, Any]],
    *,
    fetch: Callable[[SessionInfo, int], Message | None] | None = None,
    timeout: float = DEFAULT_SEARCH_TIMEOUT,
    clock: Callable[[], float] = time.monotonic,
) -> SearchPage:
    """Search by reading messages: every session of ``infos`` that the filters admit is
    read (``read`` yields its own messages, ``memo`` gives its memo) and each message in
    its view matched by ``SearchQuery.matches``.

    Memory stays flat however many messages match: only the keys of the newest
    ``offset + limit`` hits are kept (a bounded heap) besides the count, and the page's
    messages are read again by ``fetch`` (by default, kept while they can still be on
    the page). Snippets are made for the returned page only. After ``timeout`` seconds
    the scan stops: the page is the newest of the hits found so far and ``total`` a
    lower bound (``exact`` False).

    Search finds what the views show: a message its session retracted, and the
    retraction records themselves, are never hits (``Retractions.hides`` on the
    session's own index; the indexed backends say the same in SQL over the memo).
    A fork's own index is enough: what it inherits hides only shared messages, which
    are hits of the session that owns them."""
    q, filters = request.query, request.filters
    keep = request.offset + request.limit
    kept: list[_Newest] = []
    held: dict[tuple[str, int], Message] = {}
    """The kept hits' messages, when there is no ``fetch`` to read them again."""
    total = 0
    exact = True
    deadline = clock() + timeout
    if q.groups:
        for info in infos:
            if not filters.admits_session(info):
                continue
            hidden = Retractions.from_memo(memo(info))
            for m in read(info):
                if clock() > deadline:
                    exact = False
                    break
                if (
                    m.seq is None
                    or hidden.hides(m.seq)
                    or not filters.admits_message(m)
                    or not q.matches(index_text(message_pieces(m)))
                ):
                    continue
                total += 1
                entry = _Newest(order_key(m.created_at, info.id, m.seq), info)
                if len(kept) < keep:
                    heapq.heappush(kept, entry)
                elif entry.key < kept[0].key:
                    dropped = heapq.heapreplace(kept, entry)
                    held.pop((dropped.info.id, -dropped.key[2]), None)
                else:
                    continue
                if fetch is None:
                    held[(info.id, m.seq)] = m
            if not exact:
                break
    ordered = sorted(kept, key=lambda e: e.key)[request.offset :]
    hits = []
    for entry in ordered:
        seq = -entry.key[2]
        found = held.get((entry.info.id, seq)) if fetch is None else fetch(entry.info, seq)
        if found is not None:
            hits.append(_hit(entry.info, found, q))
    return SearchPage(hits, total=total, offset=request.offset, exact=exact)


def _hit(info: SessionInfo, m: Message, q: SearchQuery) -> SearchHit:
    assert m.seq is not None
    text, marks = marked_snippet(display_text(message_pieces(m)), q)
    return SearchHit(
        session_id=info.id,
        seq=m.seq,
        role=m.role,
        snippet=text,
        agent=info.agent,
        marks=marks,
        parent_id=info.parent_id,
    )


def hit_from_body(
    session_id: str,
    seq: int,
    role: str,
    agent: str | None,
    body: str,
    q: SearchQuery,
    parent_id: str | None = None,
) -> SearchHit:
    """A hit of an indexed backend, its snippet made from the stored body."""
    text, marks = marked_snippet(display_text(body_pieces(body)), q)
    return SearchHit(
        session_id=session_id,
        seq=seq,
        role=role,
        snippet=text,
        agent=agent,
        marks=marks,
        parent_id=parent_id,
    )


__all__ = [
    "Atom",
    "SearchFilters",
    "SearchOptions",
    "SearchPage",
    "SearchQuery",
    "body_fts_text",
    "index_text",
    "message_pieces",
    "parse_query",
    "parse_when",
    "scan_search",
    "search_request",
    "snippet",
]
