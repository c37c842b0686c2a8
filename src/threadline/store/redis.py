"""A Redis store: fast, shared between processes and machines, with optional TTL.

For sessions that are hot and short-lived. Every write that must be atomic is
one Lua script (``redis_scripts``; EVALSHA, loading the script when the server
lacks it) or a WATCH/MULTI transaction when the decision needs Python (lock
staleness checks the holder's pid on this host). The compare-and-set steps
(``add_checkpoint`` on an expected predecessor, ``replace_memo``) read, let the
shared rule decide in Python, and write with a script that first checks that
what was read is still there. Listing, tails and prefix lookups are served
by index structures, never by KEYS or SCAN, so their cost follows the page or
the window, not the number of sessions or messages (invariant 4).

Durability is the server's: an append is acknowledged once Redis holds it in
memory; configure AOF (``appendfsync always``/``everysec``) for more. The
scripts build key names from the prefix, so this backend needs a single Redis
server or primary, not Redis Cluster.

Data layout, every key under the prefix ``P`` (default ``threadline:``):

    P s:<id>        hash: id, agent, model, title, created_at, updated_at, parent_id,
                    message_count, total_tokens, last_seq, metadata (JSON),
                    memo (JSON), lock (LockHolder JSON, absent when free),
                    ttl_ms (absent without TTL)
    P m:<id>        list of message JSON without seq; index = seq - 1 - seq_base (a fork's
                    hash holds seq_base, its fork seq; other sessions have none: 0)
    P i:<id>        hash message id -> seq (idempotent appends)
    P c:<id>        list of checkpoint JSON; checkpoint id = index + 1
    P p:<id>        hash scratchpad name -> ScratchpadEntry JSON
    P n:<id>        sorted set of the scratchpad's names, all scored 0: pages and
                    prefixes are ZRANGEBYLEX ranges (built from ``p:<id>`` when absent)
    P sessions      sorted set of ids, score -updated_at in microseconds, so
                    ZRANGE gives newest first and ties by id ascending
    P agent:<name>  the same, one per agent
    P ids           sorted set of ids, all scored 0, for ZRANGEBYLEX prefixes
    P owner         hash id -> agent, to clean an expired session's indexes
    P expires       sorted set of ids with a TTL, score = expiry (server ms)
    P top           like ``sessions``, the sessions listed under no other (``parent_id``
                    absent), and ``P top-agent:<name>`` the same per agent
    P kids:<id>     like ``sessions``, the sessions listed under ``<id>``
    P up            hash id -> parent id, to clean an expired child's parent index
    P layout        the layout version (``LAYOUT``)

TTL: a store-wide default from the URL (``?ttl=SECONDS``) applies to new
sessions, ``set_ttl`` changes one session. Every write refreshes the TTL on
all of the session's keys at once. An expired session's index entries are
removed lazily: each listing first reaps ``P expires`` entries that are due,
and any read that finds a session hash gone forgets its index entries, so
totals (ZCARD) stay exact.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import re
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, Unpack, cast
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import redis
from redis.backoff import AbstractBackoff
from redis.client import Pipeline
from redis.connection import URL_QUERY_ARGUMENT_PARSERS
from redis.retry import Retry

from threadline.errors import (
    CheckpointConflict,
    CorruptRecord,
    InvalidSessionId,
    NotSupported,
    SessionChanged,
    SessionExists,
    SessionNotFound,
    StoreUnavailable,
    ThreadlineError,
    UsageError,
)
from threadline.messages import Message
from threadline.stamps import utcnow
from threadline.store import core
from threadline.store.alongside import Alongside
from threadline.store.checkpoints import ANY_PREVIOUS, Checkpoint, ExpectPrevious, check_checkpoint
from threadline.store.checks import (
    MAX_BOUND,
    MAX_PAGE_SIZE,
    CorruptRecordWarning,
    format_ts,
    prefix_bounds,
    refuse_unknown_options,
    split_url_options,
    validate_session_id,
)
from threadline.store.decode import decode_message
from threadline.store.encoding import Appending
from threadline.store.listing import ListRequest, SessionPage
from threadline.store.locks import LockHolder
from threadline.store.protocol import MEMO_CAS_ATTEMPTS, same_memo
from threadline.store.records import format_time
from threadline.store.redis_scripts import SCRIPTS
from threadline.store.retry import CONNECTION_RETRY
from threadline.store.search_query import SearchOptions, SearchPage, scan_store
from threadline.store.session_info import (
    FORK_KEY,
    NewSession,
    ScratchpadEntry,
    SessionChange,
    SessionInfo,
)

DEFAULT_PREFIX = "threadline:"
CONNECT_TIMEOUT_SECONDS = 5.0
"""How long opening a connection may take before the server counts as unreachable."""
CHECKPOINT_CAS_ROUNDS = 8
"""Reads and compare-and-sets ``add_checkpoint`` tries; with ``expect_previous`` the second
round already ends in ``CheckpointConflict``, without one the script never refuses."""
LAYOUT = 2
"""The key layout this code writes (``P layout``): 2 added ``parent_id`` and the indexes
of top-level sessions and children (``_upgrade_layout`` brings older keys up to it)."""
UPGRADE_BATCH = 500
"""Sessions read and rewritten per round trip while upgrading the layout."""
PREFIX_MATCH_LIMIT = 20
"""Candidates fetched when resolving an id prefix, as in the SQLite store."""
MAX_TTL_SECONDS = 10 * 365 * 24 * 3600
"""Longer is a mistake (or inf/nan): use no TTL to keep a session for good."""
URL_OPTIONS = ("prefix", "ttl")
"""Query options this store reads itself and hides from redis-py."""
_CONNECTION_CLASSES: dict[str, type[Any]] = {
    "redis": redis.Connection,
    "rediss": redis.SSLConnection,
    "unix": redis.UnixDomainSocketConnection,
}
_DB_PATH = re.compile(r"/[0-9]{1,5}")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_PARTS = ("s", "m", "i", "c", "p", "n")
T = TypeVar("T")


# -- helpers -----------------------------------------------------------------------


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _score(dt: datetime) -> str:
    """Minus microseconds since the epoch: exact in a double, newest sorts first."""
    return str(-((dt - _EPOCH) // timedelta(microseconds=1)))


def _scores(request: ListRequest) -> tuple[str, str] | tuple[()]:
    """The index scores (min, max) of a listing's time range, none without one: the
    score is minus the update time, so ``updated_until`` (excluded) bounds it below."""
    if not request.dated:
        return ()
    low = "-inf" if request.updated_until is None else "(" + _score(request.updated_until)
    high = "+inf" if request.updated_since is None else _score(request.updated_since)
    return low, high


def _legacy_parent(raw: bytes | str | None) -> str | None:
    """The parent a session's metadata named before ``parent_id`` was kept."""
    try:
        meta = json.loads(_text(raw or b"{}"))
    except ValueError:
        return None
    if not isinstance(meta, dict):
        return None
    fork = meta.get(FORK_KEY)
    parent = fork.get("session") if isinstance(fork, dict) else meta.get("parent_session")
    return parent if isinstance(parent, str) else None


def _ttl_ms(seconds: float | None) -> int:
    if seconds is None:
        return 0
    if not 0 <= seconds < MAX_TTL_SECONDS:
        raise UsageError(f"a TTL must be between 0 and {MAX_TTL_SECONDS} seconds, got {seconds}")
    ms = round(seconds * 1000)
    if seconds > 0 and ms == 0:
        raise UsageError(f"a TTL of {seconds} s is below Redis's 1 ms resolution")
    return ms


class _PolicyBackoff(AbstractBackoff):
    """redis-py's resends on a dropped connection, paced by the policy every server backend
    shares (``CONNECTION_RETRY``). Every write is safe to resend: appends and checkpoints
    recognise what they already stored, memo swaps are decided again, the rest set values
    or run under WATCH."""

    def compute(self, failures: int) -> float:
        return CONNECTION_RETRY.delay(failures)


def parse_redis_url(url: str) -> tuple[str, dict[str, str]]:
    """Split our own query options (``prefix``, ``ttl``) off a ``redis://`` URL.

    What redis-py would ignore or fail on later is refused here, naming it: a database
    that is not a number (``redis://host/abc`` would quietly use database 0) and an
    option neither this store nor redis-py's connection takes.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _CONNECTION_CLASSES:
        raise UsageError(f"not a Redis URL: {url!r} (expected redis://host:port/db)")
    if scheme != "unix" and parts.path not in ("", "/") and not _DB_PATH.fullmatch(parts.path):
        raise UsageError(
            f"the database in a Redis URL is a number (redis://host:port/0), "
            f"got {parts.path.lstrip('/')!r}"
        )
    ours, theirs = split_url_options(parts.query, URL_OPTIONS, store="redis")
    known = driver_options(scheme)
    refuse_unknown_options(
        [(k, v) for k, v in theirs if k not in known],
        [*URL_OPTIONS, "and redis-py's connection options such as socket_timeout"],
        store="redis",
    )
    return urlunsplit(parts._replace(query=urlencode(theirs, quote_via=quote))), ours


def driver_options(scheme: str) -> set[str]:
    """The URL query options redis-py accepts for ``scheme``: those it parses itself,
    and the keyword arguments of the connection class it passes the others to."""
    names = set(URL_QUERY_ARGUMENT_PARSERS)
    for klass in _CONNECTION_CLASSES[scheme].__mro__:
        init = vars(klass).get("__init__")
        if init is None:
            continue
        names.update(
            p.name
            for p in inspect.signature(init).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"
        )
    return names


class RedisStore(core.StoreCore):
    """Sessions in one Redis database, under a key prefix."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl: float | None = None,
        url: str | None = None,
        owns_client: bool = False,
    ) -> None:
        if not prefix:
            raise UsageError("the Redis key prefix cannot be empty")
        if client.get_connection_kwargs().get("decode_responses"):
            raise UsageError(
                "give the Redis store a client without decode_responses: it decodes values "
                "itself, so that one corrupt value is skipped instead of failing a whole read"
            )
        self._r = client
        self._owns_client = owns_client
        self.prefix = prefix
        self.default_ttl_ms = _ttl_ms(ttl)
        self.url = url or f"redis://{self._where()}?prefix={prefix}"
        self._scripts = {name: client.register_script(src) for name, src in SCRIPTS.items()}
        with self._translate():
            layout = self._r.get(self.prefix + "layout")  # a round trip: reachable?
            if layout is None or int(layout) < LAYOUT:
                self._upgrade_layout()

    def _upgrade_layout(self) -> None:
        """Bring keys written before ``LAYOUT`` 2 up to it: each session's parent (a
        fork's point, an imported subagent's ``parent_session``, when that session is
        here) moves from its metadata to ``parent_id``, and the indexes of top-level
        sessions and of children are built. Safe to run twice or in two processes at
        once: it only writes what the sessions already say."""
        scored = cast(
            list[tuple[bytes, float]],
            self._r.zrange(self.prefix + "sessions", 0, -1, withscores=True),
        )
        every = {_text(raw): score for raw, score in scored}
        ids = list(every)
        for start in range(0, len(ids), UPGRADE_BATCH):
            chunk = ids[start : start + UPGRADE_BATCH]
            reader = self._r.pipeline(transaction=False)
            for sid in chunk:
                reader.hmget(self._key("s", sid), ["agent", "parent_id", "metadata"])
            writer = self._r.pipeline(transaction=False)
            for sid, (agent, parent, meta) in zip(chunk, reader.execute(), strict=True):
                if agent is None:
                    continue  # expired: the next listing forgets it
                found = _text(parent) if parent else _legacy_parent(meta)
                score = {sid: every[sid]}
                if found is not None and found in every and found != sid:
                    writer.hset(self._key("s", sid), "parent_id", found)
                    writer.hset(self.prefix + "up", sid, found)
                    writer.zadd(f"{self.prefix}kids:{found}", score)
                else:
                    writer.zadd(self.prefix + "top", score)
                    writer.zadd(f"{self.prefix}top-agent:{_text(agent)}", score)
            writer.execute()
        self._r.set(self.prefix + "layout", LAYOUT)

    @classmethod
    def from_url(cls, url: str, *, create: bool = True) -> RedisStore:
        """``redis://host:port/db?prefix=threadline:&ttl=SECONDS``; other options go to
        redis-py. ``create`` changes nothing: a Redis store is its keys, made by writes."""
        client_url, options = parse_redis_url(url)
        try:
            ttl = float(options["ttl"]) if options.get("ttl") else None
        except ValueError:
            raise UsageError(f"ttl must be a number of seconds, got {options['ttl']!r}") from None
        try:
            client = redis.Redis.from_url(
                client_url,
                socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
                retry=Retry(_PolicyBackoff(), CONNECTION_RETRY.retries),
            )
        except ValueError as exc:
            raise UsageError(f"bad Redis URL {url!r}: {exc}") from exc
        try:
            return cls(
                client,
                prefix=options.get("prefix", DEFAULT_PREFIX),
                ttl=ttl,
                url=url,
                owns_client=True,
            )
        except BaseException:
            client.close()
            raise

    # -- plumbing ---------------------------------------------------------------

    def _where(self) -> str:
        kw = self._r.connection_pool.connection_kwargs
        if kw.get("path"):
            return f"{kw['path']} db {kw.get('db', 0)}"
        return f"{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"

    def _driver_error(self, exc: Exception) -> ThreadlineError | None:
        """Unreachable -> StoreUnavailable, wrong type -> corrupt."""
        if isinstance(exc, redis.AuthenticationError):
            return StoreUnavailable(f"Redis at {self._where()} refused the credentials: {exc}")
        if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
            return StoreUnavailable(f"Redis at {self._where()} is unreachable: {exc}")
        if isinstance(exc, redis.ResponseError):
            if str(exc).startswith("WRONGTYPE"):
                return CorruptRecord(
                    "a key under this store's prefix holds the wrong type of value "
                    f"(was it written by something else?): {exc}",
                    where=f"redis {self._where()} prefix {self.prefix!r}",
                )
            return StoreUnavailable(f"Redis at {self._where()} refused a command: {exc}")
        if isinstance(exc, redis.RedisError):
            return StoreUnavailable(f"Redis at {self._where()}: {exc}")
        return None

    def _run(self, script: str, *args: str | int) -> Any:
        with self._translate():
            return self._scripts[script](keys=[], args=[self.prefix, *args])

    def _key(self, part: str, session_id: str) -> str:
        return f"{self.prefix}{part}:{session_id}"

    def _keys(self, session_id: str) -> list[str]:
        return [self._key(part, session_id) for part in _PARTS]

    def _atomic(self, fn: Callable[[Pipeline], T], *watch: str) -> T:
        """``fn`` reads, calls ``pipe.multi()`` and queues writes; rerun if a watched key moved."""
        with self._translate():
            run = cast(Callable[..., T], self._r.transaction)
            return run(fn, *watch, value_from_callable=True)

    def _read(self, session_id: str, queue: Callable[[Pipeline], object]) -> list[Any]:
        """One MULTI: does the session exist, then what ``queue`` asks for."""
        key = self._session_key(session_id)
        with self._translate():
            pipe = self._r.pipeline(transaction=True)
            pipe.exists(key)
            queue(pipe)
            exists, *results = pipe.execute()
        if not exists:
            raise SessionNotFound(session_id)
        return results

    def _queue_touch(self, pipe: Pipeline, session_id: str) -> None:
        """Inside MULTI: EVAL, not EVALSHA, since a missing script would fail only at EXEC."""
        pipe.eval(SCRIPTS["touch"], 0, self.prefix, session_id)

    def client(self) -> redis.Redis:
        """The store's client, for what keeps its own keys under ``prefix`` in the same
        database (the server's event streams); closed with the store, if it made it."""
        return self._r

    def shared_place(self) -> tuple[str, Any, str]:
        return "redis", self._r, self.prefix

    def close(self) -> None:
        """Closes the client only if this store created it."""
        if self._owns_client:
            self._r.close()

    # -- sessions ---------------------------------------------------------------

    def _insert_session(self, new: NewSession, lock: LockHolder | None) -> SessionInfo:
        if new.start is not None and self.ttl(new.start.parent) is not None:
            # a write to the fork refreshes only the fork's keys: the shared history
            # would expire under it
            raise NotSupported(
                f"session {new.start.parent} expires (it has a TTL), so a fork could outlive "
                "the history it shares; clear its TTL first (set_ttl(id, None))"
            )
        record: dict[str, str] = {
            "id": new.id,
            "agent": new.agent,
            "created_at": new.created,
            "updated_at": new.updated,
            "message_count": str(new.message_count),
            "total_tokens": str(new.total_tokens),
            "last_seq": str(new.last_seq),
            "metadata": json.dumps(new.metadata),
            **({"seq_base": str(new.last_seq)} if new.start else {}),
            "memo": "{}",
        }
        for name, value in (("model", new.model), ("title", new.title), ("parent_id", new.parent)):
            if value is not None:
                record[name] = value
        if lock is not None:
            record["lock"] = lock.to_json()
        if self.default_ttl_ms:
            record["ttl_ms"] = str(self.default_ttl_ms)
        pairs = [x for kv in record.items() for x in kv]
        done = self._run(
            "create", new.id, new.agent, _score(new.updated_at), new.parent or "", *pairs
        )
        if done == -1:
            raise SessionNotFound(str(new.parent))
        if not done:
            raise SessionExists(new.id)
        return self.session_info(new.id)

    def _matching_ids(self, id_or_prefix: str, *, prefix: bool) -> list[str]:
        with self._translate():
            if self._r.exists(self._key("s", id_or_prefix)):
                return [id_or_prefix]
            if not prefix:
                return []
            low = b"[" + id_or_prefix.encode()
            found = self._r.zrangebylex(
                self.prefix + "ids", low, low + b"\xff", start=0, num=PREFIX_MATCH_LIMIT
            )
            ids = [_text(x) for x in found]
            pipe = self._r.pipeline(transaction=False)
            for sid in ids:
                pipe.exists(self._key("s", sid))
            alive = pipe.execute()
        dead = [sid for sid, ok in zip(ids, alive, strict=True) if not ok]
        if dead:
            self._run("forget", *dead)
        return [s for s, ok in zip(ids, alive, strict=True) if ok]

    def session_info(self, session_id: str) -> SessionInfo:
        key = self._session_key(session_id)
        with self._translate():
            raw = self._r.hgetall(key)
        if not raw:
            raise SessionNotFound(session_id)
        return self._info(key, raw)

    def _session_key(self, session_id: str) -> str:
        """The hash key; an id that fails validation cannot exist, so it is simply not found."""
        try:
            validate_session_id(session_id)
        except InvalidSessionId:
            raise SessionNotFound(str(session_id)) from None
        return self._key("s", session_id)

    def _info(self, key: str, raw: dict[Any, Any]) -> SessionInfo:
        """Hash fields are strings; the record reads the numbers and times back."""
        try:
            f = {_text(k): _text(v) for k, v in raw.items()}
            f["metadata"] = json.loads(f.get("metadata") or "{}")
            return SessionInfo.from_dict(f)
        except ValueError as exc:
            raise CorruptRecord(f"unreadable session record: {exc}", where=key) from exc

    def _list_page(self, request: ListRequest) -> SessionPage:
        if request.parent is not None:
            index = f"kids:{request.parent}"
            if request.agent is not None:  # children of one agent: few, filtered here
                total, items = self._page(index, 0, MAX_BOUND)
                return request.page([i for i in items if request.admits(i)])
        elif request.agent is not None:
            index = f"{'top-agent' if request.top_level else 'agent'}:{request.agent}"
        else:
            index = "top" if request.top_level else "sessions"
        total, items = self._page(index, request.offset, request.limit, _scores(request))
        return SessionPage(items=items, total=total, offset=request.offset, limit=request.limit)

    def _page(
        self, index: str, offset: int, limit: int, scores: tuple[str, str] | tuple[()] = ()
    ) -> tuple[int, list[SessionInfo]]:
        """The total and one page of an index (``redis_scripts._LIST``), of the ids
        scored within ``scores`` (min, max) when given."""
        while True:
            res = self._run("list", index, offset, limit, *scores)
            if res[0] != -1:
                break
        items = []
        for row in res[1]:
            if row and _text(row[0]) == "!corrupt":
                key = self._key("s", _text(row[1]))
                warnings.warn(
                    f"skipping session {_text(row[1])}: {key} is not a hash",
                    CorruptRecordWarning,
                    stacklevel=3,
                )
                continue
            fields = dict(zip(row[::2], row[1::2], strict=True))
            key = self._key("s", _text(fields.get(b"id", b"?")))
            try:
                items.append(self._info(key, fields))
            except CorruptRecord as exc:
                warnings.warn(f"skipping session: {exc}", CorruptRecordWarning, stacklevel=3)
        return int(res[0]), items

    def _count_children(self, parent_ids: list[str]) -> dict[str, int]:
        while True:
            res = self._run("count_children", *parent_ids)
            if not res or res[0] != -1:
                break
        return {sid: int(n) for sid, n in zip(parent_ids, res, strict=True)}

    def _set_title(self, session_id: str, title: str | None, now: datetime) -> SessionInfo:
        self._session_key(session_id)
        if title is None:
            args: list[str | int] = [1, "updated_at", format_ts(now), "title"]
        else:
            args = [2, "updated_at", format_ts(now), "title", title]
        if not self._run("set_fields", session_id, _score(now), *args):
            raise SessionNotFound(session_id)
        return self.session_info(session_id)

    def _update_session(self, session_id: str, change: SessionChange) -> SessionInfo:
        key = self._session_key(session_id)
        if change.parent is not None:
            linked = self._run("link", session_id, change.parent)
            if isinstance(linked, list):  # listed under another already: the rule says so
                change.new_parent(session_id, _text(linked[1]))
            elif linked == 0:
                raise SessionNotFound(session_id)
            elif linked == -1:
                raise SessionNotFound(change.parent)

        def merge(pipe: Pipeline) -> None:
            found, old = pipe.hmget(key, ["id", "metadata"])
            if found is None:
                raise SessionNotFound(session_id)
            try:
                merged = change.merged(json.loads(_text(old or "{}")))
            except ValueError as exc:
                raise CorruptRecord(f"unreadable metadata: {exc}", where=key) from exc
            fields = {"metadata": json.dumps(merged)}
            if change.model is not None:
                fields["model"] = change.model
            if change.title is not None:
                fields["title"] = change.title
            pipe.multi()
            pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
            self._queue_touch(pipe, session_id)

        self._atomic(merge, key)
        return self.session_info(session_id)

    def _delete(self, session_ids: list[str], check: Callable[[str, object], None]) -> int:
        """All or nothing, like one SQL transaction: a refused lock anywhere keeps the lot."""
        ids: list[str] = []
        for sid in session_ids:
            with contextlib.suppress(SessionNotFound):
                self._session_key(sid)
                ids.append(sid)
        if not ids:
            return 0
        watched = [self._key("s", sid) for sid in ids]

        def delete(pipe: Pipeline) -> int:
            reader = self._r.pipeline(transaction=False)
            for key in watched:
                reader.hmget(key, ["agent", "lock"])
            rows = reader.execute()
            for sid, (agent, lock) in zip(ids, rows, strict=True):
                if agent is not None:
                    check(sid, lock)
            pipe.multi()
            for sid in ids:
                pipe.unlink(*self._keys(sid))  # freed in the background
            # then every index, the deleted sessions' children made top-level
            pipe.eval(SCRIPTS["forget"], 0, self.prefix, *ids)
            return sum(1 for agent, _ in rows if agent is not None)

        return self._atomic(delete, *watched)

    def _session_ids(self, agent: str | None) -> list[str]:
        index = "sessions" if agent is None else f"agent:{agent}"
        with self._translate():
            return [_text(x) for x in cast(list[bytes], self._r.zrange(self.prefix + index, 0, -1))]

    # -- TTL (this backend only) ------------------------------------------------

    def set_ttl(self, session_id: str, seconds: float | None) -> None:
        """Expire the session ``seconds`` after its last write; ``None`` or 0 keeps it for good."""
        self._session_key(session_id)
        if not self._run("set_ttl", session_id, _ttl_ms(seconds)):
            raise SessionNotFound(session_id)

    def ttl(self, session_id: str) -> float | None:
        """Seconds until the session expires, or ``None`` when it has no TTL."""
        key = self._session_key(session_id)
        with self._translate():
            left = int(self._r.pttl(key))
        if left == -2:
            raise SessionNotFound(session_id)
        return None if left < 0 else left / 1000

    # -- messages ---------------------------------------------------------------

    def _append(self, session_id: str, batch: Appending) -> int | list[Message]:
        key = self._session_key(session_id)
        args: list[Any] = [
            self.prefix,
            session_id,
            format_ts(batch.at),
            _score(batch.at),
            sum(batch.tokens),
            len(batch.ids),
            *batch.ids,
            *batch.bodies,
        ]
        for _ in range(MEMO_CAS_ATTEMPTS):  # the metadata compare-and-set of the script
            res = self._run_append([*args, *self._alongside_args(session_id, key, batch.alongside)])
            if int(res[0]) != -5:
                return self._appended(session_id, batch, res)
        raise StoreUnavailable(
            f"session {session_id}: the metadata changed under {MEMO_CAS_ATTEMPTS} attempts "
            "in a row to append with it; too many writers at once"
        )

    def _run_append(self, args: list[Any]) -> Any:
        with self._translate():
            return self._scripts["append"](keys=[], args=args)

    def _alongside_args(self, session_id: str, key: str, extra: Alongside) -> list[str]:
        """The append script's arguments after the batch (``_APPEND``): the metadata as
        stored now and merged, the time, the scratchpad's session, the mark, the
        scratchpad entries."""
        if not extra and extra.expect is None and extra.pad_of is None:
            return []
        expected = merged = ""
        if extra.metadata:
            with self._translate():
                raw = self._r.hget(key, "metadata")
            expected = _text(raw or "{}")
            try:
                merged = json.dumps(extra.merged(json.loads(expected)))
            except (ValueError, TypeError) as exc:  # not JSON, or JSON but not an object
                raise CorruptRecord(f"unreadable metadata: {exc}", where=key) from exc
        pairs = [part for item in extra.scratchpad.items() for part in item]
        mark = extra.expect
        created, last = (
            ("", "") if mark is None else (format_ts(mark.created_at), str(mark.last_seq))
        )
        pad = extra.pad(session_id)
        return [expected, merged, format_time(utcnow()), pad, created, last, *pairs]

    def _appended(self, session_id: str, batch: Appending, res: Any) -> int | list[Message]:
        code = int(res[0])
        if code == 1:
            return int(res[1])
        if code == 0:
            out = []
            for seq, body in zip(res[1::2], res[2::2], strict=True):
                decoded = decode_message(session_id, int(seq), body)
                if decoded is not None:
                    out.append(decoded)
            return out
        if code == -1:
            raise SessionNotFound(_text(res[1]))
        if code == -6:
            raise SessionChanged(session_id)
        if code == -2:
            raise batch.partly_stored(_text(res[1]))
        if code == -3:  # stored already, or twice in this batch
            raise batch.already_stored(_text(res[1]))
        raise CorruptRecord(
            f"the message list holds {res[1]} entries but the session's last seq is {res[2]}; "
            "refusing to append",
            where=self._key("m", session_id),
        )

    def _slice(self, session_id: str, mode: str, a: int, b: int | None) -> list[Message]:
        """One atomic read of a run of messages, oldest first (see ``_SLICE``)."""
        self._session_key(session_id)
        first, rows = self._run("slice", session_id, mode, a, "" if b is None else b)
        if first == -1:
            raise SessionNotFound(session_id)
        out = [decode_message(session_id, int(first) + k, body) for k, body in enumerate(rows)]
        return [m for m in out if m is not None]

    def _tail_range(self, session_id: str, limit: int, before_seq: int | None) -> list[Message]:
        return self._slice(session_id, "tail", limit, before_seq)[::-1]

    def _read_range(self, session_id: str, after_seq: int, limit: int | None) -> list[Message]:
        return self._slice(session_id, "read", after_seq, limit)

    # -- checkpoints ------------------------------------------------------------

    def _add_checkpoint(self, new: Checkpoint, expect_previous: ExpectPrevious) -> Checkpoint:
        """Read, decide (``check_checkpoint``), then one script appends the checkpoint only
        if the session still has as many checkpoints as were read: a compare-and-set."""
        session_id, covers_up_to = new.session_id, new.covers_up_to
        key = self._session_key(session_id)
        body = new.to_json(exclude={"id"})
        c = self._key("c", session_id)

        def queue(pipe: Pipeline) -> None:
            pipe.hget(key, "last_seq")
            pipe.llen(c)
            pipe.lindex(c, -1)

        for _ in range(CHECKPOINT_CAS_ROUNDS):
            last_seq, count, newest = self._read(session_id, queue)
            latest = None if newest is None else self._checkpoint(session_id, int(count), newest)
            if latest is None and newest is not None:  # unreadable: as latest_checkpoint does
                good = self.list_checkpoints(session_id)
                latest = good[-1] if good else None
            stored = check_checkpoint(
                new,
                last_seq=int(last_seq or 0),
                latest=latest,
                expect_previous=expect_previous,
            )
            if stored is not None:
                return stored
            anyway = expect_previous is ANY_PREVIOUS
            code, value = self._run(
                "checkpoint", session_id, covers_up_to, body, "" if anyway else int(count)
            )
            if code == -1:
                raise SessionNotFound(session_id)
            if code == -2:
                raise UsageError(
                    f"checkpoint covers_up_to={covers_up_to} is outside the session "
                    f"(last seq {value})"
                )
            if code == 0:
                return new.replace(id=int(value))
        raise CheckpointConflict(
            f"session {session_id}: checkpoints kept being added while this one was written",
            expected=expect_previous if isinstance(expect_previous, int) else None,
            latest=None,
        )

    def _checkpoint(self, session_id: str, cid: int, body: bytes | str) -> Checkpoint | None:
        try:
            cp = Checkpoint.from_json(body)
        except ValueError as exc:
            warnings.warn(
                f"skipping unreadable checkpoint {session_id} #{cid}: {exc}",
                CorruptRecordWarning,
                stacklevel=3,
            )
            return None
        return cp.replace(id=cid, session_id=session_id)

    def latest_checkpoint(self, session_id: str) -> Checkpoint | None:
        key = self._key("c", session_id)

        def queue(pipe: Pipeline) -> None:
            pipe.llen(key)
            pipe.lindex(key, -1)

        length, body = self._read(session_id, queue)
        if body is None:
            return None
        latest = self._checkpoint(session_id, int(length), body)
        if latest is None:  # the newest is unreadable: fall back to the newest good one
            good = self.list_checkpoints(session_id)
            return good[-1] if good else None
        return latest

    def list_checkpoints(self, session_id: str) -> list[Checkpoint]:
        key = self._key("c", session_id)
        (rows,) = self._read(session_id, lambda p: p.lrange(key, 0, -1))
        out = [self._checkpoint(session_id, k + 1, body) for k, body in enumerate(rows)]
        return [cp for cp in out if cp is not None]

    # -- scratchpad and memo ----------------------------------------------------

    def _scratchpad_write(self, session_id: str, name: str, content: str) -> ScratchpadEntry:
        entry = self._pad_entry(session_id, name, self._pad_write(session_id, {name: content}))
        assert entry is not None
        return entry

    def _scratchpad_write_many(
        self, session_id: str, entries: dict[str, str], keep_existing: bool
    ) -> None:
        self._pad_write(session_id, entries, keep_existing)

    def _pad_write(self, session_id: str, entries: dict[str, str], keep: bool = False) -> bytes:
        """The entries in one script (``_PAD_WRITE``); the first as stored."""
        self._session_key(session_id)
        pairs = [part for item in entries.items() for part in item]
        stored = self._run("pad_write", session_id, int(keep), format_time(utcnow()), *pairs)
        if stored == -1:
            raise SessionNotFound(session_id)
        return cast(bytes, stored)

    def scratchpad_read(self, session_id: str, name: str) -> ScratchpadEntry | None:
        pad = self._key("p", session_id)
        (raw,) = self._read(session_id, lambda p: p.hget(pad, name))
        return None if raw is None else self._pad_entry(session_id, name, raw)

    def _scratchpad_page(
        self, session_id: str, prefix: str, limit: int, before: str | None
    ) -> list[ScratchpadEntry]:
        low, high = core.page_range(prefix, before)
        found = self._pad_run("pad_page", session_id, limit, low, high or "")
        return [e for e in (self._pad_entry(session_id, n, v) for n, v in found) if e]

    def _scratchpad_contents(
        self, session_id: str, names: list[str], prefixes: list[str]
    ) -> dict[str, str]:
        ranges = [b or "" for p in prefixes for b in prefix_bounds(p)]
        found = self._pad_run("pad_contents", session_id, len(names), *names, *ranges)
        entries = (self._pad_entry(session_id, n, v) for n, v in found)
        return {e.name: e.content for e in entries if e is not None}

    def _pad_run(self, script: str, session_id: str, *args: str | int) -> list[tuple[str, bytes]]:
        """``(name, stored entry)`` pairs a scratchpad read script gives back."""
        self._session_key(session_id)
        status, *flat = self._run(script, session_id, *args)
        if status == -1:
            raise SessionNotFound(session_id)
        return [(_text(flat[k]), flat[k + 1]) for k in range(0, len(flat), 2)]

    def _scratchpad_list(self, session_id: str, prefix: str) -> list[ScratchpadEntry]:
        pad = self._key("p", session_id)
        if prefix:  # the names, then the values of those that match
            (names,) = self._read(session_id, lambda p: p.hkeys(pad))
            wanted = sorted(n for n in map(_text, names) if n.startswith(prefix))
            with self._translate():
                values = self._r.hmget(pad, wanted) if wanted else []
            raw = {n: v for n, v in zip(wanted, values, strict=True) if v is not None}
        else:
            (raw,) = self._read(session_id, lambda p: p.hgetall(pad))
        entries = [self._pad_entry(session_id, _text(k), v) for k, v in raw.items()]
        return sorted((e for e in entries if e is not None), key=lambda e: e.name)

    def _pad_entry(self, session_id: str, name: str, raw: bytes | str) -> ScratchpadEntry | None:
        try:
            return ScratchpadEntry.from_json(raw).replace(name=name)
        except ValueError as exc:
            warnings.warn(
                f"skipping unreadable scratchpad entry {session_id} {name!r}: {exc}",
                CorruptRecordWarning,
                stacklevel=3,
            )
            return None

    def scratchpad_delete(self, session_id: str, name: str) -> bool:
        self._session_key(session_id)
        gone = self._run("pad_delete", session_id, name)
        if gone == -1:
            raise SessionNotFound(session_id)
        return bool(gone)

    def get_memo(self, session_id: str) -> dict[str, Any]:
        key = self._session_key(session_id)
        with self._translate():
            found, raw = self._r.hmget(key, ["id", "memo"])
        if found is None:
            raise SessionNotFound(session_id)
        try:
            memo: dict[str, Any] = json.loads(raw or "{}")
        except ValueError as exc:
            raise CorruptRecord(f"unreadable memo: {exc}", where=key) from exc
        return memo

    def set_memo(self, session_id: str, memo: dict[str, Any]) -> None:
        self._session_key(session_id)
        if not self._run("set_fields", session_id, "", 1, "memo", json.dumps(memo)):
            raise SessionNotFound(session_id)

    def replace_memo(self, session_id: str, expected: dict[str, Any], memo: dict[str, Any]) -> bool:
        """One script swaps the memo if its stored text is still the expected memo's
        (``_SWAP_MEMO``). When it is not, the stored memo may still be the expected one
        spelled differently (written by another client): compared as JSON, a swap is
        tried once more on its exact text."""
        key = self._session_key(session_id)
        new = json.dumps(memo)
        code = self._run("swap_memo", session_id, json.dumps(expected), new)
        if code == 0:
            with self._translate():
                raw = self._r.hget(key, "memo")
            if raw is None:
                raise SessionNotFound(session_id)
            try:
                same = same_memo(json.loads(raw), expected)
            except ValueError as exc:
                raise CorruptRecord(f"unreadable memo: {exc}", where=key) from exc
            if not same:
                return False
            code = self._run("swap_memo", session_id, _text(raw), new)
        if code == -1:
            raise SessionNotFound(session_id)
        return bool(code == 1)

    # -- locks ------------------------------------------------------------------

    def _holder(self, session_id: str, raw: bytes | str | None) -> LockHolder | None:
        return LockHolder.stored(raw, where=self._key("s", session_id))

    def _swap_lock(
        self, session_id: str, decide: Callable[[LockHolder | None], LockHolder | None]
    ) -> LockHolder | None:
        key = self._session_key(session_id)

        def swap(pipe: Pipeline) -> LockHolder | None:
            found, raw = pipe.hmget(key, ["id", "lock"])
            if found is None:
                raise SessionNotFound(session_id)
            current = self._holder(session_id, raw)
            new = decide(current)
            pipe.multi()
            if new is not current:
                if new is None:
                    pipe.hdel(key, "lock")
                else:
                    pipe.hset(key, "lock", new.to_json())
                self._queue_touch(pipe, session_id)
            return new

        return self._atomic(swap, key)

    def lock_holder(self, session_id: str) -> LockHolder | None:
        key = self._session_key(session_id)
        with self._translate():
            found, raw = self._r.hmget(key, ["id", "lock"])
        if found is None:
            raise SessionNotFound(session_id)
        return self._holder(session_id, raw)

    # -- search -----------------------------------------------------------------

    def search(self, query: str, **options: Unpack[SearchOptions]) -> SearchPage:
        """A scan with the shared matcher (``search_query.scan_store``): Redis core has no
        full-text index, so every admitted session is read. Fine for the hot, short-lived
        sessions this store is for; copy large histories to sqlite:// or postgresql://."""
        return scan_store(self, query, options, self._every_session)

    def _every_session(self, agent: str | None) -> Iterator[SessionInfo]:
        offset = 0
        while True:
            page = self.list_sessions(agent=agent, limit=MAX_PAGE_SIZE, offset=offset)
            yield from page.items
            offset += MAX_PAGE_SIZE
            if offset >= page.total:
                return
