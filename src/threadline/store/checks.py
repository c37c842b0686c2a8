"""The limits of what a store takes, and the checks of a caller's values against them:
session, message and call ids, page sizes and offsets, titles, scratchpad names, JSON
objects, times as stored. One place for every backend; each raises a ``ThreadlineError``
(``UsageError``, ``InvalidSessionId``, ...) naming the value."""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeGuard
from urllib.parse import parse_qsl

from threadline.errors import (
    AmbiguousSessionId,
    InvalidMessage,
    InvalidSessionId,
    SessionNotFound,
    UsageError,
)
from threadline.json_limits import value_problem

SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z"
"""Session ids, agent names and message ids: they name files, keys and rows. ``\\Z``,
not ``$``, which also matches before a trailing newline."""


_SESSION_ID_RE = re.compile(SESSION_ID_PATTERN)


MAX_ID_LENGTH = 128


MAX_CALL_ID_LENGTH = 256
"""Tool-call ids are the provider's (``call_...``, ``toolu_...``); they reach no path or
key, so any printable text up to this length is kept as the provider sent it."""


_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


_PLAIN_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"


_MEDIA_REF_RE = re.compile(rf"{_PLAIN_NAME}(?:/{_PLAIN_NAME}){{0,3}}")
"""A stored media reference: a relative path of up to four plain names (``<id>_media/1-0.png``)."""


MAX_MODEL_LENGTH = 256
"""Longer is not a model name (those are ``provider/name``, a few dozen characters)."""


MAX_SHOWN_VALUE = 60
"""Characters of a refused value quoted in an error message."""


MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""A single message larger than this (serialised) is refused."""


MIN_PREFIX_LENGTH = 4
"""Shortest id prefix accepted in place of a full id."""


MAX_PAGE_SIZE = 200


MAX_SEARCH_QUERY_LENGTH = 1000
"""Characters of a search query; see ``search_words``."""


MAX_SEARCH_WORDS = 32
"""Different words in a search query; see ``search_words``."""


MAX_INT = 2**63 - 1
"""The largest integer every backend stores and compares (SQLite, PostgreSQL and Redis
use signed 64 bits); the CLI refuses larger numbers."""


MAX_BOUND = 2**46
"""Library limits, offsets and seqs are clamped to this (see ``bounded``): about 7e13, far
past any real count, and small enough for every backend's arithmetic (Redis scripts
compute in Lua doubles and print them with 14 significant digits)."""


DEFAULT_PAGE_SIZE = 20


DEFAULT_AGENT = "default"


TAIL_BATCH = 1000


RESULT_LOOKBACK = (8, 256)
"""How far back a tool result's call is looked for at append."""


class CorruptRecordWarning(UserWarning):
    """A stored record could not be decoded; it was left in place, skipped, and
    the good records around it were still returned. One class for every backend,
    so callers can filter or escalate it with one ``warnings`` rule."""


def shown(value: str) -> str:
    """A caller's value quoted in an error message: escaped, and cut when long."""
    if len(value) <= MAX_SHOWN_VALUE:
        return repr(value)
    return f"{value[:MAX_SHOWN_VALUE]!r}... ({len(value):,} characters)"


def validate_session_id(
    value: object, *, what: str = "session id", error: type[UsageError] = InvalidSessionId
) -> str:
    """Refuse anything that could reach a path or a query unchecked (invariant 6).

    The one rule for session ids, agent names and message ids: a full match of
    ``SESSION_ID_PATTERN``, so neither a trailing newline nor a 1 MiB id gets through.
    """
    if good_id(value):
        return value  # as on every append: the checks below say what is wrong
    if not isinstance(value, str):
        raise error(f"{what} must be a string, got {type(value).__name__}")
    if len(value) > MAX_ID_LENGTH:
        raise error(f"{what} {shown(value)} is too long: the limit is {MAX_ID_LENGTH} characters")
    if "\x00" in value:
        raise error(f"{what} contains a NUL byte")
    if "/" in value or "\\" in value:
        raise error(f"{what} {shown(value)} contains a path separator")
    if ".." in value:
        raise error(f"{what} {shown(value)} contains '..'")
    if not _SESSION_ID_RE.fullmatch(value):
        raise error(
            f"{what} {shown(value)} is invalid: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return value


def good_id(value: object) -> TypeGuard[str]:
    return type(value) is str and ".." not in value and bool(_SESSION_ID_RE.fullmatch(value))


def good_call_id(value: object) -> TypeGuard[str]:
    """Printable ASCII of a good length: no control character, so no regex needed."""
    return (
        type(value) is str
        and 0 < len(value) <= MAX_CALL_ID_LENGTH
        and value.isascii()
        and value.isprintable()
    )


def validate_agent(value: object) -> str:
    return validate_session_id(value, what="agent name")


def validate_message_id(value: object) -> str:
    return validate_session_id(value, what="message id", error=InvalidMessage)


def validate_call_id(value: object, *, what: str = "tool call id") -> str:
    """A provider's tool-call id: kept as sent, but never empty, huge or with control characters."""
    if good_call_id(value):
        return value
    if not isinstance(value, str):
        raise InvalidMessage(f"{what} must be a string, got {type(value).__name__}")
    if not value or len(value) > MAX_CALL_ID_LENGTH:
        raise InvalidMessage(
            f"{what} {shown(value)} must be 1-{MAX_CALL_ID_LENGTH} characters long"
        )
    if _CONTROL_RE.search(value):
        raise InvalidMessage(f"{what} {shown(value)} contains a control character")
    return value


def validate_media_ref(value: str) -> str:
    """A media reference names a file under the store: no absolute path, no '..'."""
    if not _MEDIA_REF_RE.fullmatch(value) or ".." in value:
        raise InvalidMessage(
            f"media reference {shown(value)} is invalid: use a relative path of plain names "
            "such as <session>_media/<name> (no '..', no leading '/')"
        )
    return value


def validate_page_size(limit: int) -> int:
    if not 1 <= bounded(limit, "page size") <= MAX_PAGE_SIZE:
        raise UsageError(f"page size must be between 1 and {MAX_PAGE_SIZE}, got {limit}")
    return limit


def validate_offset(offset: int) -> int:
    if bounded(offset, "offset") < 0:
        raise UsageError("offset must be >= 0")
    return min(offset, MAX_BOUND)


def search_words(query: object) -> list[str]:
    """The words of a search query, by one rule for every backend: text of at most
    ``MAX_SEARCH_QUERY_LENGTH`` characters holding 1 to ``MAX_SEARCH_WORDS`` different
    words (NUL counts as a space; a word repeated, in any case, counts once).

    The limits bound the work one call can start: PostgreSQL's ranking and
    ``ts_headline`` grow faster than linearly with the words of the query (a 100 KB
    query ran on the server for minutes after its client was gone; 100 words over
    long messages take a minute).
    """
    if not isinstance(query, str):
        raise UsageError(f"a search query must be text, got {type(query).__name__}")
    if len(query) > MAX_SEARCH_QUERY_LENGTH:
        raise UsageError(
            f"the search query is {len(query):,} characters; the limit is "
            f"{MAX_SEARCH_QUERY_LENGTH:,} (search for a few distinctive words instead)"
        )
    firsts: dict[str, str] = {}
    for word in query.replace("\x00", " ").split():
        firsts.setdefault(word.casefold(), word)
    words = list(firsts.values())
    if not words:
        raise UsageError("the search query is empty")
    if len(words) > MAX_SEARCH_WORDS:
        raise UsageError(
            f"the search query has {len(words)} different words; the limit is "
            f"{MAX_SEARCH_WORDS} (search for a few distinctive words instead)"
        )
    return words


def split_url_options(
    query: str, ours: Collection[str], *, store: str
) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """A store URL's ``?key=value`` options: the store's own (``ours``), and the rest in
    order, for a driver that judges its own. An option given twice is refused rather
    than one of the two silently winning."""
    mine: dict[str, str] = {}
    rest: list[tuple[str, str]] = []
    seen: set[str] = set()
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key in seen:
            raise UsageError(f"the {store} store URL gives option {shown(key)} twice")
        seen.add(key)
        if key in ours:
            mine[key] = value
        else:
            rest.append((key, value))
    return mine, rest


def refuse_unknown_options(
    rest: Sequence[tuple[str, str]], known: Collection[str], *, store: str
) -> None:
    """Options a store does not know are a usage error naming them: ignored, a typo such
    as ``?synchronus=off`` would leave the store quietly doing something else."""
    if rest:
        names = ", ".join(shown(key) for key, _ in rest)
        takes = ", ".join(known) if known else "no options"
        raise UsageError(f"unknown option {names} in the {store} store URL (it takes: {takes})")


def bounded(value: int, what: str) -> int:
    """An integer argument (a limit, an offset, a seq) as every backend can take it.

    A bool, float, string or None is refused; a value past ``MAX_BOUND`` is clamped to
    it, far beyond any count or seq a store holds, so ``tail(sid, 10**30)`` means "all"
    everywhere instead of overflowing in SQLite.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{what} must be an integer, got {type(value).__name__}")
    return max(-MAX_BOUND, min(value, MAX_BOUND))


def bounded_or_none(value: int | None, what: str) -> int | None:
    """``bounded`` for an argument where ``None`` means "no limit"."""
    return None if value is None else bounded(value, what)


_NO_OFFSET: Final = timedelta(0)


def format_ts(dt: datetime) -> str:
    """RFC 3339 UTC with microseconds: sorts lexicographically in every backend."""
    if dt.tzinfo is not UTC and dt.utcoffset() != _NO_OFFSET:
        dt = dt.astimezone(UTC)
    # strftime's "%Y-%m-%dT%H:%M:%S.%fZ" at two thirds of isoformat's cost (every append)
    return "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ" % (  # noqa: UP031
        dt.year,
        dt.month,
        dt.day,
        dt.hour,
        dt.minute,
        dt.second,
        dt.microsecond,
    )


def parse_ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def check_title(title: str | None) -> str | None:
    if title is None:
        return None
    if not isinstance(title, str):
        raise UsageError(f"a title must be a string, got {type(title).__name__}")
    if "\x00" in title:
        raise UsageError("a title cannot contain a NUL byte")
    title = title.strip()
    if len(title) > 500:
        raise UsageError("a title is limited to 500 characters")
    return title or None


MAX_SCRATCHPAD_NAME = 256
"""Characters a scratchpad name (or a prefix of one) holds at most."""


def check_scratchpad_name(name: str) -> str:
    if not isinstance(name, str) or not name or len(name) > MAX_SCRATCHPAD_NAME or "\x00" in name:
        raise UsageError("a scratchpad name must be 1-256 characters without NUL")
    return name


def check_scratchpad_prefix(prefix: object) -> str:
    """A ``scratchpad_list`` prefix: text a name could start with (no NUL, at most as
    long as a name)."""
    if not isinstance(prefix, str) or len(prefix) > MAX_SCRATCHPAD_NAME or "\x00" in prefix:
        raise UsageError("a scratchpad name prefix must be text of at most 256 characters")
    return prefix


@functools.lru_cache(maxsize=1024)
def prefix_bounds(prefix: str) -> tuple[str, str | None]:
    """``(low, high)`` with ``low <= name < high`` exactly for the names starting with
    ``prefix``, in code point order (UTF-8 byte order: SQLite's and PostgreSQL's "C"
    collation); ``high`` is None when no string is above them all."""
    if prefix:  # most end in a character with a next one: the answer at once
        after = ord(prefix[-1]) + 1
        if after < 0xD800 or 0xDFFF < after <= 0x10FFFF:
            return prefix, prefix[:-1] + chr(after)
    chars = list(prefix)
    while chars:
        after = ord(chars.pop()) + 1
        if 0xD800 <= after <= 0xDFFF:  # surrogates are not text: the next character is
            after = 0xE000
        if after <= 0x10FFFF:
            return prefix, "".join(chars) + chr(after)
    return prefix, None


def id_prefix_range(prefix: str) -> tuple[str, str]:
    """``(low, high)``: the session ids starting with ``prefix`` are exactly those with
    ``low <= id < high`` (ids are ASCII, so ``high`` always exists)."""
    low, high = prefix_bounds(prefix)
    assert high is not None
    return low, high


def check_scratchpad_entry(name: str, content: str) -> None:
    """What ``scratchpad_write`` stores: a name as above and text (a number written to a
    JSONL store's file would leave it unreadable)."""
    check_scratchpad_name(name)
    if not isinstance(content, str):
        raise UsageError(f"scratchpad content must be text, got {type(content).__name__}")


def check_checkpoint_fields(summary: str, metadata: dict[str, Any] | None) -> None:
    """A checkpoint's summary is text and its metadata a JSON object that reads back."""
    if not isinstance(summary, str):
        raise UsageError(f"a checkpoint summary must be text, got {type(summary).__name__}")
    check_json_object(metadata, "checkpoint metadata")


def check_json_object(value: dict[str, Any] | None, what: str) -> None:
    """``None``, or a dict with string keys whose values JSON holds as they are."""
    if value is None:
        return
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise UsageError(f"{what} must be a JSON object (a dict with string keys)")
    problem = value_problem(value)
    if problem is not None:
        raise UsageError(f"{what}: {problem}")


def pick_unique(prefix: str, matches: list[str]) -> str:
    """The one session a prefix names, or a clear error."""
    if not matches:
        raise SessionNotFound(prefix)
    if len(matches) > 1:
        raise AmbiguousSessionId(prefix, matches)
    return matches[0]
