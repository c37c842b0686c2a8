"""Sessions in PostgreSQL, for many processes on many machines (psycopg 3 + a pool).

The same contract as the SQLite reference, with PostgreSQL doing the
coordination: an append locks its session's row (``FOR NO KEY UPDATE``), reads
``last_seq``, inserts the batch and bumps the counters in one transaction, so
seqs stay gap-free however many writers race, and a batch is all-or-nothing.
Appends are idempotent on client message ids (unique ``(session_id, id)``): a
retry after a dropped connection returns the stored copies instead of writing
twice. So the store resends idempotent calls itself when their connection drops
(``pg_terminate_backend``, a server restart, a network cut), with the policy the
Redis store uses (``CONNECTION_RETRY``); only a loss that outlasts the
resends reaches the caller, as ``StoreUnavailable``. The warnings psycopg and
its pool log while a dead connection is replaced are filtered out
(``QuietConnectionLoss``) unless the application configures those loggers.
Attach locks are a JSON column changed under the same row lock, and so are the
compare-and-set steps (a checkpoint on an expected predecessor, a memo swap).

Everything lives in one schema (``?schema=``, default ``threadline``) created on
first open; migrations are one ordered list, run under an advisory lock and
recorded in ``threadline_meta``; an open that finds the schema current reads
that table once without the lock, and its connection becomes the pool's first.
Tail, list and prefix lookups are served by btree indexes (ids use the "C"
collation so ordering matches the other backends byte for byte and a prefix is a
range of the primary key), a listing's exact total by the counts a
trigger keeps (``m004_session_counts``); search uses a generated ``tsvector``
column with a GIN index.

Columns that hold caller-supplied JSON or free text (metadata, memo, summary,
scratchpad content) use the ``json`` type, not ``jsonb`` or ``text``: ``json``
keeps the exact text, so NUL characters, key order and float spelling
round-trip as they do in every other backend (``jsonb`` and ``text`` refuse NUL).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import select
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Self, TypeVar, Unpack, cast
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg.conninfo
import psycopg.errors
from psycopg import sql
from psycopg.abc import Params
from psycopg.pq import TransactionStatus
from psycopg.rows import class_row
from psycopg.types.json import Json, set_json_loads
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from threadline import json_scan
from threadline.errors import (
    InvalidMessage,
    NotAThreadlineStore,
    SchemaTooNew,
    SessionChanged,
    SessionExists,
    SessionNotFound,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
    ThreadlineError,
    UsageError,
)
from threadline.stamps import utcnow
from threadline.store import core, retraction
from threadline.store.alongside import Alongside
from threadline.store.checkpoints import Checkpoint, ExpectPrevious, check_checkpoint
from threadline.store.checks import (
    DEFAULT_PAGE_SIZE,
    id_prefix_range,
    split_url_options,
)
from threadline.store.decode import decode_rows
from threadline.store.encoding import Appending
from threadline.store.listing import ListRequest, SessionPage
from threadline.store.locks import LockHolder
from threadline.store.postgres_schema import MIGRATIONS, SCHEMA_VERSION, Conn, search_text
from threadline.store.records import Record
from threadline.store.retry import CONNECTION_RETRY
from threadline.store.search_query import (
    DEFAULT_SEARCH_TIMEOUT,
    Atom,
    SearchOptions,
    SearchPage,
    SearchQuery,
    hit_from_body,
    message_pieces,
    search_request,
    search_timed_out,
)
from threadline.store.search_query import search_timeout as search_timeout_checked
from threadline.store.session_info import (
    Mark,
    NewSession,
    ScratchpadEntry,
    SessionChange,
    SessionInfo,
)
from threadline.store.sql_entries import SQLEntries

if TYPE_CHECKING:  # messages loads pydantic, which listing sessions must not (issue 13)
    from threadline.messages import Message

R = TypeVar("R", bound=Record)
T = TypeVar("T", int, float)
P = ParamSpec("P")
V = TypeVar("V")

APP_ID = "threadline"
DEFAULT_SCHEMA = "threadline"
DEFAULT_POOL_SIZE = 4
"""Most connections one store holds; it keeps one open and grows under concurrency."""
DEFAULT_POOL_TIMEOUT = 10.0
"""Seconds a call waits for a pooled connection before ``StoreUnavailable``."""
RECONNECT_FRACTION = 0.5
"""The pool retries a lost connection in the background for this share of the pool
timeout, then stops and reconnects on the next call: a server that comes back is
used again at once instead of after a long exponential backoff."""
DEFAULT_CONNECT_TIMEOUT = 10
"""Seconds to establish one connection (libpq ``connect_timeout``), unless the URL says."""
DEFAULT_APPLICATION_NAME = "threadline"
"""Shown in ``pg_stat_activity`` unless the URL sets ``application_name``."""
DIAGNOSE_CONNECT_TIMEOUT = 3
"""Seconds for the probe connection that explains a pool timeout."""
MIGRATION_LOCK_KEY = 0x74686C6E
"""First half of the advisory lock key that serialises migrations (second: the schema)."""
STORE_OPTIONS = ("schema", "pool_size", "pool_timeout", "search_timeout")
"""URL query options that are ours; every other option goes to libpq (which refuses
what it does not know)."""
_SCHEMA_NAME_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")
SHUTDOWN_STATES = frozenset({"57P01", "57P02", "57P03", "57P05"})
"""SQLSTATEs of a server that ended the session (admin shutdown or ``pg_terminate_backend``,
crash, starting up, idle timeout): like class 08, the connection is gone, not the statement."""


# -- connection loss: resent, and not narrated on stderr ----------------------------


class ConnectionLost(StoreUnavailable):
    """The connection dropped in the middle of a call. Idempotent calls are resent
    (``CONNECTION_RETRY``), so callers only see this once the resends failed too."""


def connection_lost(conn: Conn, exc: BaseException) -> bool:
    """Whether ``exc`` means the connection is gone rather than that the statement failed."""
    if isinstance(exc, PoolTimeout | PoolClosed):
        return False
    if not isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    if conn.closed or conn.broken:
        return True
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in SHUTDOWN_STATES


def _resent(
    method: Callable[Concatenate[PostgresStore, P], V],
) -> Callable[Concatenate[PostgresStore, P], V]:
    """Resend an idempotent call whose connection dropped, as the Redis store does:
    reads, appends (idempotent on message ids), values set whole, and checkpoints and
    memo swaps (a resend is recognised or re-decided, see ``check_checkpoint``)."""

    @functools.wraps(method)
    def resent(self: PostgresStore, /, *args: P.args, **kwargs: P.kwargs) -> V:
        return CONNECTION_RETRY.call(lambda: method(self, *args, **kwargs), retry_on=ConnectionLost)

    return resent


CONNECTION_NOISE = frozenset(
    {
        # psycopg: a pipeline or transaction cleaning up after the connection died
        "error ignored terminating %r: %s",
        "error ignored exiting %r: %s",
        "error ignored in rollback on %s: %s",
        "error ignored in rollback of %s: %s",
        # psycopg_pool: a dead connection replaced
        "discarding closed connection: %s",
        "discarding broken connection: %s",
        "closing returned connection: %s",
        "rolling back returned connection: %s",
        "rollback failed: %s: %s. Discarding connection %s",
        "error connecting in %r: %s",
        "reconnection attempt in pool %r failed after %s sec",
    }
)
"""Warnings psycopg and its pool log while a lost connection is replaced. The store
resends the call (or raises ``StoreUnavailable`` saying why), so on their own they are
noise: a few lines per dropped connection, hundreds when a server restarts."""
NOISY_LOGGERS = {"psycopg": logging.WARNING, "psycopg.pool": logging.NOTSET}
"""The loggers that report it, and the level each has unless an application sets one
(psycopg sets WARNING on its own logger when it is imported)."""


class QuietConnectionLoss(logging.Filter):
    """Drops ``CONNECTION_NOISE`` unless the application configured the psycopg loggers
    (a level other than their default, or a handler): then it asked to hear them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg not in CONNECTION_NOISE:
            return True
        return any(
            logger.level != default or logger.handlers
            for logger, default in (
                (logging.getLogger(name), default) for name, default in NOISY_LOGGERS.items()
            )
        )


def quiet_connection_loss() -> None:
    """Install ``QuietConnectionLoss`` on the psycopg loggers, once."""
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, QuietConnectionLoss) for f in logger.filters):
            logger.addFilter(QuietConnectionLoss())


# -- the queries that indexes must serve (tests EXPLAIN these very strings) --------

SESSION_COLUMNS = (
    "id, agent, model, title, created_at, updated_at, message_count, total_tokens, "
    "last_seq, metadata, parent_id"
)


def list_sql(request: ListRequest) -> tuple[str, str, dict[str, Any]]:
    """A listing's count query, page query and parameters (``ListRequest.where``)."""
    where, args = request.where("%({})s")
    count = f"SELECT count(*) FROM sessions{where}"
    if request.parent is None and not request.dated:  # the deltas its trigger keeps (m004)
        kept = ["agent = %(agent)s"] if request.agent is not None else []
        kept += ["top"] if request.top_level else []
        counted = " WHERE " + " AND ".join(kept) if kept else ""
        count = f"SELECT coalesce(sum(n), 0)::bigint FROM session_counts{counted}"
    # the page's ids first, from the index alone (an index-only scan skips the offset
    # without reading 50,000 rows), then those rows: a deep page costs what the index costs
    return (
        count,
        f"SELECT {SESSION_COLUMNS} FROM sessions JOIN (SELECT id AS page_id FROM sessions"
        f"{where} ORDER BY updated_at DESC, id LIMIT %(limit)s OFFSET %(offset)s) page "
        "ON id = page_id ORDER BY updated_at DESC, id",
        {**args, "limit": request.limit, "offset": request.offset},
    )


def _listing(agent: str | None = None, *, top_level: bool = False) -> str:
    return list_sql(ListRequest(agent, DEFAULT_PAGE_SIZE, 0, top_level, None))[1]


LIST_SQL = _listing()
LIST_BY_AGENT_SQL = _listing("a")
LIST_TOP_SQL = _listing(top_level=True)
LIST_TOP_BY_AGENT_SQL = _listing("a", top_level=True)
TAIL_SQL = (
    "SELECT seq, body FROM messages WHERE session_id = %(sid)s AND seq < %(before)s "
    "ORDER BY seq DESC LIMIT %(limit)s"
)
READ_SQL = (
    "SELECT seq, body FROM messages WHERE session_id = %(sid)s AND seq > %(after)s "
    "ORDER BY seq LIMIT %(limit)s"
)
RESOLVE_PREFIX_SQL = (
    "SELECT id FROM sessions WHERE id >= %(low)s AND id < %(high)s ORDER BY id LIMIT 20"
)
_INSERT_MESSAGE = (
    "INSERT INTO messages (session_id, seq, id, role, created_at, tokens, body, search_text) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
_SESSION_SQL = f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = %s"
_MARK_SQL = (
    "SELECT 1 / (CASE WHEN created_at = %s AND last_seq = %s THEN 1 ELSE 0 END) "
    "FROM sessions WHERE id = %s FOR NO KEY UPDATE"
)
"""Lock a session's row (as an append does) and fail with a division by zero when it is
not as a writer's ``Mark`` says: the check travels in the same pipeline as the write
it guards, and its failure rolls that write back. No row (no session): the inserts
after it fail their foreign key."""
_CHECKPOINT_COLUMNS = "id, session_id, covers_up_to, summary, created_at, metadata"
_CHECKPOINT_SQL = f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE session_id = %s"
_ENTRY_COLUMNS = "name, content, created_at, updated_at"
_ENTRY_SQL = f"SELECT {_ENTRY_COLUMNS} FROM scratchpad WHERE session_id = %s"
_RANGE_SQL = (
    "SELECT name, content FROM scratchpad WHERE session_id = %s AND name >= %s AND name < %s"
)
_NO_SESSION_SQL = "SELECT NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM sessions WHERE id = %s)"
"""Entries in ranges of names: one SELECT a range, each an index scan of the primary
key, joined by UNION ALL (an array of ranges unnested in a LATERAL join cost four times
as long a call), and a row of NULLs when the session does not exist, so no second query
tells a missing session from one holding none of the entries."""
_NO_SEQ_LIMIT = 2**63 - 1


# -- URLs ------------------------------------------------------------------------


def split_postgres_url(url: str) -> tuple[str, dict[str, str]]:
    """The libpq URL (our options removed) and our options (``schema``, ``pool_size``...)."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("postgresql", "postgres"):
        raise UsageError(f"not a PostgreSQL URL: {redact_url(url)}")
    ours, theirs = split_url_options(parts.query, STORE_OPTIONS, store="PostgreSQL")
    # %20, not '+': libpq does not read '+' as a space (options=-c%20statement_timeout%3D5)
    return urlunsplit(parts._replace(query=urlencode(theirs, quote_via=quote))), ours


def redact_url(url: str) -> str:
    """The URL with its password replaced, safe to print and to keep as ``store.url``."""
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{hostport}"))


def check_schema_name(name: str) -> str:
    """A schema name we create and quote ourselves: lower-case letters, digits, '_'."""
    if not _SCHEMA_NAME_RE.fullmatch(name):
        raise UsageError(
            f"schema name {name!r} is invalid: use 1-63 lower-case letters, digits or '_', "
            "not starting with a digit"
        )
    return name


def _positive(options: dict[str, str], key: str, default: T, kind: Callable[[str], T]) -> T:
    if key not in options:
        return default
    with contextlib.suppress(ValueError):
        if (value := kind(options[key])) > 0:
            return value
    raise UsageError(f"store URL option {key} must be a positive number, got {options[key]!r}")


# -- the store ---------------------------------------------------------------------


class PostgresStore(SQLEntries, core.StoreCore):
    """Sessions in one PostgreSQL schema, shared safely by any number of processes."""

    MARK = "%s"

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        pool_size: int = DEFAULT_POOL_SIZE,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
        search_timeout: float = DEFAULT_SEARCH_TIMEOUT,
        url: str | None = None,
        create: bool = True,
    ) -> None:
        self.schema = check_schema_name(schema)
        self.search_timeout = search_timeout_checked(search_timeout)
        if pool_size < 1:
            raise UsageError(f"pool_size must be at least 1, got {pool_size}")
        self._pool_size = pool_size
        self._password = urlsplit(conninfo).password or ""
        try:
            params = psycopg.conninfo.conninfo_to_dict(conninfo)
        except psycopg.ProgrammingError as exc:
            raise UsageError(f"invalid PostgreSQL connection string: {self._clean(exc)}") from None
        self._password = str(params.get("password") or "")
        extra: dict[str, Any] = {}
        if "connect_timeout" not in params:
            extra["connect_timeout"] = DEFAULT_CONNECT_TIMEOUT
        if "application_name" not in params:
            extra["application_name"] = DEFAULT_APPLICATION_NAME
        self._conninfo = psycopg.conninfo.make_conninfo(conninfo, **extra)
        host, port = params.get("host") or "localhost", params.get("port") or "5432"
        user = params.get("user") or "(default user)"
        place = f"{user}@{host}:{port}/{params.get('dbname') or user}"
        self._where = f"PostgreSQL {place}"
        self.url = redact_url(url) if url else f"postgresql://{place}?schema={schema}"
        quiet_connection_loss()
        checked = self._migrate(create)
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            self._conninfo,
            connection_class=_handing_over(checked),
            kwargs={"autocommit": True},
            min_size=1,
            max_size=pool_size,
            timeout=pool_timeout,
            reconnect_timeout=pool_timeout * RECONNECT_FRACTION,
            configure=self._configure,
            name=f"threadline-{schema}",
            open=False,
        )
        try:
            with self._translate():  # at once: the connection is there, only configured
                self._pool.open(wait=True, timeout=pool_timeout)
        except BaseException:
            self._pool.close()
            raise

    @classmethod
    def from_url(cls, url: str, *, create: bool = True) -> PostgresStore:
        """``postgresql://user@host:port/db?schema=NAME&pool_size=N&pool_timeout=S
        &search_timeout=S``; other options go to libpq. ``create=False``: the schema
        must exist already (``StoreNotFound``)."""
        conninfo, options = split_postgres_url(url)
        return cls(
            conninfo,
            schema=options.get("schema") or DEFAULT_SCHEMA,
            pool_size=_positive(options, "pool_size", DEFAULT_POOL_SIZE, int),
            pool_timeout=_positive(options, "pool_timeout", DEFAULT_POOL_TIMEOUT, float),
            search_timeout=_positive(options, "search_timeout", DEFAULT_SEARCH_TIMEOUT, float),
            url=url,
            create=create,
        )

    # -- opening ----------------------------------------------------------------

    def _connect(self, *, timeout: int | None = None) -> Conn:
        """One direct connection; a failure says what and where, never the password."""
        conninfo = self._conninfo
        if timeout is not None:
            conninfo = psycopg.conninfo.make_conninfo(conninfo, connect_timeout=timeout)
        try:
            return psycopg.connect(conninfo, autocommit=True)
        except psycopg.ProgrammingError as exc:
            raise UsageError(f"invalid PostgreSQL URL: {self._clean(exc)}") from None
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot connect to {self._where}: {self._clean(exc)}") from exc

    def _configure(self, conn: Conn) -> None:
        conn.execute(
            sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)), prepare=False
        )
        conn.execute("SET TIME ZONE 'UTC'", prepare=False)
        set_json_loads(json_scan.loads, conn)  # each row's json read at once

    def _migrate(self, create: bool = True) -> Conn:
        """Create or upgrade the schema, serialised by an advisory lock across processes;
        with ``create=False`` a schema that is not there (or holds no store) is
        ``StoreNotFound`` and nothing is created. A store already at this version is
        seen without the lock (``_is_current``), as most opens find it. Returns the
        connection it used, for the pool to start with."""
        conn = self._connect()
        try:
            with self._translate():
                if not self._is_current(conn):
                    self._migrate_locked(conn, create)
        except BaseException:
            conn.close()
            raise
        return conn

    def _is_current(self, conn: Conn) -> bool:
        """Whether the schema's ``threadline_meta`` already names this app and version:
        one read, no lock. Anything else (no schema, an older or newer version, another
        app's tables) goes to the locked path, which decides and says why."""
        try:
            meta: dict[str, str] = dict(
                conn.execute(
                    sql.SQL("SELECT key, value FROM {}.threadline_meta").format(
                        sql.Identifier(self.schema)
                    )
                ).fetchall()
            )
        except psycopg.Error:
            return False
        return meta.get("app") == APP_ID and meta.get("schema_version") == str(SCHEMA_VERSION)

    def _migrate_locked(self, conn: Conn, create: bool) -> None:
        with conn.transaction():
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                (MIGRATION_LOCK_KEY, self.schema),
            )
            exists = conn.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)
            ).fetchone()
            missing = StoreNotFound(
                f"no store in {self._where} schema {self.schema}: nothing was stored there "
                "yet, and this opens a store without creating it (a command that writes "
                "creates it)"
            )
            if not exists:
                if not create:
                    raise missing
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))
            conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(self.schema)))
            version = self._schema_version(conn)
            if version == 0 and not create:
                raise missing
            for number, migration in enumerate(MIGRATIONS[version:], start=version + 1):
                migration(conn)
                conn.execute(
                    "INSERT INTO threadline_meta (key, value) VALUES ('app', %s), "
                    "('schema_version', %s) ON CONFLICT (key) DO UPDATE "
                    "SET value = excluded.value",
                    (APP_ID, str(number)),
                )

    def _schema_version(self, conn: Conn) -> int:
        where = f"{self._where} schema {self.schema}"
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')",
                (self.schema,),
            )
        }
        if "threadline_meta" not in tables:
            if tables:
                shown = ", ".join(sorted(tables)[:5])
                raise NotAThreadlineStore(
                    f"{where} holds tables threadline did not create ({shown}); "
                    "choose another schema with ?schema=NAME"
                )
            return 0
        meta: dict[str, str] = dict(
            conn.execute("SELECT key, value FROM threadline_meta").fetchall()
        )
        if meta.get("app") != APP_ID:
            raise NotAThreadlineStore(f"{where} is not a threadline store")
        try:
            version = int(meta.get("schema_version", ""))
        except ValueError:
            raise NotAThreadlineStore(f"{where} has no readable schema version") from None
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"{where} has schema version {version}, newer than this threadline "
                f"understands ({SCHEMA_VERSION}); upgrade threadline to open it"
            )
        return version

    # -- plumbing ---------------------------------------------------------------

    def _clean(self, exc: BaseException) -> str:
        text = " ".join(str(exc).split())
        return text.replace(self._password, "***") if self._password else text

    def _driver_error(self, exc: Exception) -> ThreadlineError | None:
        if isinstance(exc, PoolClosed):
            return StoreUnavailable(f"store {self.url} is closed")
        if isinstance(exc, PoolTimeout):
            return StoreUnavailable(
                f"no connection to {self._where} became available: {self._diagnose()}"
            )
        if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            return StoreUnavailable(f"{self._where}: {self._clean(exc)}")
        if isinstance(exc, psycopg.DataError):
            return UsageError(f"PostgreSQL cannot store this value: {self._clean(exc)}")
        if isinstance(exc, psycopg.Error):
            return StoreError(f"{self._where} schema {self.schema}: {self._clean(exc)}")
        return None

    def _diagnose(self) -> str:
        """Why the pool has no connection: try one directly and report what happened."""
        try:
            probe = self._connect(timeout=DIAGNOSE_CONNECT_TIMEOUT)
        except ThreadlineError as exc:
            return str(exc)
        probe.close()
        return "the server accepts connections, but the pool is exhausted or stuck"

    def _checkout(self) -> Conn:
        """A pooled connection not known to be dead.

        A server restart or ``pg_terminate_backend`` leaves dead connections idle in
        the pool; each is closed and handed back (the pool replaces it) until a live
        one or a fresh one comes, without the pool's back-off between checks.
        """
        for _ in range(self._pool_size):
            conn = self._pool.getconn()
            if _looks_alive(conn):
                return conn
            conn.close()
            self._pool.putconn(conn)
        return self._pool.getconn()

    @contextlib.contextmanager
    def _read(self) -> Iterator[Conn]:
        with self._translate():
            conn = self._checkout()
            try:
                yield conn
            except psycopg.Error as exc:
                if not connection_lost(conn, exc):
                    raise
                conn.close()  # whatever state it is in, it goes back to the pool closed
                raise ConnectionLost(f"{self._where}: {self._clean(exc)}") from exc
            finally:
                self._pool.putconn(conn)

    @contextlib.contextmanager
    def _write(self) -> Iterator[Conn]:
        with self._read() as conn, conn.transaction():
            yield conn

    def connection_string(self) -> str:
        """The libpq connection string this store connects with (password included),
        for what keeps its own connections to the same database and ``schema``: the
        server's event table, memory records."""
        return self._conninfo

    def shared_place(self) -> tuple[str, Any, str]:
        return "postgres", self._conninfo, self.schema

    def close(self) -> None:
        self._pool.close()

    # -- sessions ---------------------------------------------------------------

    def _insert_session(self, new: NewSession, lock: LockHolder | None) -> SessionInfo:
        with self._write() as conn:
            if new.parent is not None:
                _require(conn, new.parent)
            try:
                info = _one(
                    conn,
                    SessionInfo,
                    "INSERT INTO sessions (id, agent, model, title, created_at, updated_at, "
                    "metadata, lock, parent_id, last_seq, message_count, total_tokens) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    f"RETURNING {SESSION_COLUMNS}",
                    (
                        new.id,
                        new.agent,
                        new.model,
                        new.title,
                        new.created_at,
                        new.updated_at,
                        Json(new.metadata),
                        Json(lock.to_dict()) if lock else None,
                        new.parent,
                        new.last_seq,
                        new.message_count,
                        new.total_tokens,
                    ),
                )
            except psycopg.errors.UniqueViolation as exc:
                raise SessionExists(new.id) from exc
            except psycopg.errors.ForeignKeyViolation as exc:  # the parent went meanwhile
                raise SessionNotFound(str(new.parent)) from exc
        assert info is not None
        return info

    @_resent
    def _matching_ids(self, id_or_prefix: str, *, prefix: bool) -> list[str]:
        # a range of the primary key ("C" collation): the id sorts before those it prefixes
        with self._read() as conn:
            if not prefix:
                rows = conn.execute("SELECT id FROM sessions WHERE id = %s", (id_or_prefix,))
            else:
                low, high = id_prefix_range(id_or_prefix)
                rows = conn.execute(RESOLVE_PREFIX_SQL, {"low": low, "high": high})
            return [r[0] for r in rows.fetchall()]

    @_resent
    def session_info(self, session_id: str) -> SessionInfo:
        with self._read() as conn:
            info = _one(conn, SessionInfo, _SESSION_SQL, (session_id,))
        if info is None:
            raise SessionNotFound(session_id)
        return info

    @_resent
    def _list_page(self, request: ListRequest) -> SessionPage:
        count, page, args = list_sql(request)
        with self._read() as conn:
            total_row = conn.execute(count, args).fetchone()
            items = _all(conn, SessionInfo, page, args)
        total = total_row[0] if total_row else 0
        return SessionPage(items=items, total=total, offset=request.offset, limit=request.limit)

    @_resent
    def _count_children(self, parent_ids: list[str]) -> dict[str, int]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT parent_id, count(*) FROM sessions WHERE parent_id = ANY(%s) "
                "GROUP BY parent_id",
                (parent_ids,),
            ).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    @_resent
    def _set_title(self, session_id: str, title: str | None, now: datetime) -> SessionInfo:
        with self._write() as conn:
            info = _one(
                conn,
                SessionInfo,
                f"UPDATE sessions SET title = %s, updated_at = %s WHERE id = %s "
                f"RETURNING {SESSION_COLUMNS}",
                (title, now, session_id),
            )
        if info is None:
            raise SessionNotFound(session_id)
        return info

    @_resent
    def _update_session(self, session_id: str, change: SessionChange) -> SessionInfo:
        with self._write() as conn:
            head = conn.execute(
                "SELECT metadata, parent_id FROM sessions WHERE id = %s FOR NO KEY UPDATE",
                (session_id,),
            ).fetchone()
            if head is None:
                raise SessionNotFound(session_id)
            new_parent = change.new_parent(session_id, head[1])
            if new_parent is not None:
                _require(conn, new_parent)
            info = _one(
                conn,
                SessionInfo,
                "UPDATE sessions SET model = COALESCE(%s, model), title = COALESCE(%s, title), "
                "parent_id = COALESCE(%s, parent_id), metadata = %s WHERE id = %s "
                f"RETURNING {SESSION_COLUMNS}",
                (change.model, change.title, new_parent, Json(change.merged(head[0])), session_id),
            )
        assert info is not None
        return info

    def _delete(self, session_ids: list[str], check: Callable[[str, object], None]) -> int:
        with self._write() as conn:
            # lock in id order, so two deleters never deadlock on each other
            locks = dict(
                conn.execute(
                    "SELECT id, lock FROM sessions WHERE id = ANY(%s) ORDER BY id FOR UPDATE",
                    (session_ids,),
                ).fetchall()
            )
            for sid in session_ids:
                if sid in locks:
                    check(sid, locks[sid])
            if locks:
                conn.execute("DELETE FROM sessions WHERE id = ANY(%s)", (list(locks),))
        return len(locks)

    def _session_ids(self, agent: str | None) -> list[str]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT id FROM sessions WHERE %(agent)s::text IS NULL OR agent = %(agent)s",
                {"agent": agent},
            ).fetchall()
        return [r[0] for r in rows]

    # -- messages ---------------------------------------------------------------

    @_resent
    def _append(self, session_id: str, batch: Appending) -> int | list[Message]:
        extra = batch.alongside
        if not batch.ids and extra.expect is not None and extra.scratchpad and not extra.metadata:
            return self._write_on_mark(session_id, extra)
        prepared = _prepared_rows(batch)  # before the session is locked
        with self._read() as conn:
            try:
                # one pipeline: BEGIN, lock and lookup travel together, then the inserts,
                # the counters, the companions and COMMIT; two round trips whatever the
                # size (one on a mark: the lock fails the transaction when the mark is off)
                with _pipelined_transaction(conn):
                    if extra.expect is not None and batch.ids and not extra.metadata:
                        return self._append_on(conn, batch, prepared, extra.expect)
                    return self._append_in(conn, batch, prepared)
            except psycopg.errors.DivisionByZero as exc:  # _MARK_SQL: the mark is off
                raise SessionChanged(session_id) from exc
            except psycopg.errors.UniqueViolation as exc:
                raise batch.already_stored() from exc
            except psycopg.errors.ForeignKeyViolation as exc:
                missing = session_id if exc.diag.table_name == "messages" else extra.pad_of
                raise SessionNotFound(missing or session_id) from exc
            except psycopg.DataError as exc:
                raise InvalidMessage(
                    f"a message in this batch cannot be stored: {self._clean(exc)}"
                ) from exc

    def _append_in(
        self,
        conn: Conn,
        batch: Appending,
        prepared: Sequence[tuple[str, str, datetime, int, str, str]],
    ) -> int | list[Message]:
        """The first seq given to the batch, or the stored copies of a batch already
        stored; the session checked against the batch's mark first."""
        session_id = batch.session_id
        # the row lock serialises appenders of this session: seqs stay gap-free
        extra = batch.alongside
        head_cur = conn.execute(
            "SELECT last_seq, created_at, "
            + ("metadata" if extra.metadata else "NULL")
            + " FROM sessions WHERE id = %s FOR NO KEY UPDATE",
            (session_id,),
        )
        # a separate statement: under READ COMMITTED it sees what committed while we waited
        known_cur = conn.execute(
            "SELECT id, seq, body FROM messages WHERE session_id = %s AND id = ANY(%s)",
            (session_id, batch.ids),
        )
        head = head_cur.fetchone()
        if head is None:
            raise SessionNotFound(session_id)
        if extra.expect is not None:
            extra.expect.holds(session_id, head[1], head[0])
        known = {r[0]: (r[1], r[2]) for r in known_cur.fetchall()}
        if batch.ids and batch.ids[0] in known:
            missing = [mid for mid in batch.ids if mid not in known]
            if missing:
                raise batch.partly_stored(missing[0])
            return decode_rows(session_id, [known[mid] for mid in batch.ids])
        if known:
            raise batch.already_stored()
        # metadata (with the batch's companions) as read under the row lock taken above
        metadata = Json(extra.merged(head[2])) if extra.metadata else None
        return _store_rows(conn, batch, prepared, int(head[0]) + 1, metadata)

    def _append_on(
        self,
        conn: Conn,
        batch: Appending,
        prepared: Sequence[tuple[str, str, datetime, int, str, str]],
        expect: Mark,
    ) -> int:
        """The batch after ``expect.last_seq``, sent without waiting for an answer: the
        session's row locked and checked against the mark first (``_MARK_SQL``), so
        an off mark fails the transaction and nothing is written. A resend cannot be
        stored already: its first store moved the mark."""
        conn.execute(_MARK_SQL, (expect.created_at, expect.last_seq, batch.session_id))
        return _store_rows(conn, batch, prepared, expect.last_seq + 1, None)

    def _write_on_mark(self, session_id: str, extra: Alongside) -> int:
        """No messages, only entries on a mark: one statement that checks it."""
        assert extra.expect is not None
        pad = extra.pad(session_id)
        with self._read() as conn:
            try:
                if _put_entries(conn, pad, extra.scratchpad, expect=(session_id, extra.expect)):
                    return extra.expect.last_seq + 1
            except psycopg.errors.ForeignKeyViolation as exc:
                raise SessionNotFound(pad) from exc
            info = _one(conn, SessionInfo, _SESSION_SQL, (session_id,))
        if info is None:
            raise SessionNotFound(session_id)
        extra.expect.holds(session_id, info.created_at, info.last_seq)
        raise SessionChanged(session_id)  # held after all: changed and back meanwhile

    @_resent
    def _tail_range(self, session_id: str, limit: int, before_seq: int | None) -> list[Message]:
        before = _NO_SEQ_LIMIT if before_seq is None else before_seq
        return self._messages(TAIL_SQL, {"sid": session_id, "before": before, "limit": limit})

    @_resent
    def _read_range(self, session_id: str, after_seq: int, limit: int | None) -> list[Message]:
        return self._messages(READ_SQL, {"sid": session_id, "after": after_seq, "limit": limit})

    def _messages(self, query: str, args: dict[str, Any]) -> list[Message]:
        """The messages ``query`` reads of session ``args["sid"]``, which must exist."""
        with self._read() as conn:
            rows = conn.execute(query, args).fetchall()
            if not rows:
                _require(conn, args["sid"])
        return decode_rows(args["sid"], rows)

    # -- checkpoints ------------------------------------------------------------

    def _add_checkpoint(self, new: Checkpoint, expect_previous: ExpectPrevious) -> Checkpoint:
        # ``new`` is stamped once (store core): a resend is recognised as the same checkpoint
        return CONNECTION_RETRY.call(
            lambda: self._add_checkpoint_once(new, expect_previous), retry_on=ConnectionLost
        )

    def _add_checkpoint_once(self, new: Checkpoint, expect_previous: ExpectPrevious) -> Checkpoint:
        """One transaction: the session's row lock orders checkpoint writers, so the
        latest checkpoint read here is still the latest when the insert commits."""
        with self._write() as conn:
            head = conn.execute(
                "SELECT last_seq FROM sessions WHERE id = %s FOR NO KEY UPDATE", (new.session_id,)
            ).fetchone()
            if head is None:
                raise SessionNotFound(new.session_id)
            latest = _one(
                conn,
                Checkpoint,
                _CHECKPOINT_SQL + " ORDER BY id DESC LIMIT 1",
                (new.session_id,),
            )
            stored = check_checkpoint(
                new, last_seq=head[0], latest=latest, expect_previous=expect_previous
            )
            if stored is not None:
                return stored
            checkpoint = _one(
                conn,
                Checkpoint,
                "INSERT INTO checkpoints (session_id, covers_up_to, summary, created_at, "
                f"metadata) VALUES (%s, %s, %s, %s, %s) RETURNING {_CHECKPOINT_COLUMNS}",
                (
                    new.session_id,
                    new.covers_up_to,
                    Json(new.summary),
                    new.created_at,
                    Json(new.metadata),
                ),
            )
        assert checkpoint is not None
        return checkpoint

    @_resent
    def latest_checkpoint(self, session_id: str) -> Checkpoint | None:
        with self._read() as conn:
            sql_text = _CHECKPOINT_SQL + " ORDER BY id DESC LIMIT 1"
            latest = _one(conn, Checkpoint, sql_text, (session_id,))
            if latest is None:
                _require(conn, session_id)
        return latest

    @_resent
    def list_checkpoints(self, session_id: str) -> list[Checkpoint]:
        with self._read() as conn:
            found = _all(conn, Checkpoint, _CHECKPOINT_SQL + " ORDER BY id", (session_id,))
            if not found:
                _require(conn, session_id)
        return found

    # -- scratchpad and memo ----------------------------------------------------

    @_resent
    def _scratchpad_write(self, session_id: str, name: str, content: str) -> ScratchpadEntry:
        now = utcnow()
        with self._write() as conn:
            try:
                entry = _one(
                    conn,
                    ScratchpadEntry,
                    "INSERT INTO scratchpad (session_id, name, content, created_at, updated_at) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (session_id, name) DO UPDATE SET "
                    f"content = excluded.content, updated_at = excluded.updated_at "
                    f"RETURNING {_ENTRY_COLUMNS}",
                    (session_id, name, Json(content), now, now),
                )
            except psycopg.errors.ForeignKeyViolation as exc:
                raise SessionNotFound(session_id) from exc
        assert entry is not None
        return entry

    @_resent
    def scratchpad_read(self, session_id: str, name: str) -> ScratchpadEntry | None:
        with self._read() as conn:
            entry = _one(conn, ScratchpadEntry, _ENTRY_SQL + " AND name = %s", (session_id, name))
            if entry is None:
                _require(conn, session_id)
        return entry

    @_resent
    def _select_entries(
        self, session_id: str, condition: str, args: tuple[str | int, ...]
    ) -> list[ScratchpadEntry]:
        with self._read() as conn:
            sql = _ENTRY_SQL + condition
            entries = _all(conn, ScratchpadEntry, sql, (session_id, *args))
            if not entries:
                _require(conn, session_id)
        return entries

    @_resent
    def _select_rows(self, session_id: str, query: str, args: tuple[str | int, ...]) -> list[Any]:
        with self._read() as conn:
            rows: list[Any] = conn.execute(query, args).fetchall()
            if not rows:
                _require(conn, session_id)
        return rows

    @_resent
    def _select_ranges(
        self, session_id: str, ranges: list[tuple[str, str]]
    ) -> list[tuple[str, str]]:
        with self._read() as conn:
            # one text per count of ranges, each prepared by the driver once it repeats
            query = " UNION ALL ".join([_RANGE_SQL] * len(ranges) + [_NO_SESSION_SQL])
            args = [a for low, high in ranges for a in (session_id, low, high)]
            rows: list[tuple[str, str]] = conn.execute(query, [*args, session_id]).fetchall()
        if any(row[0] is None for row in rows):
            raise SessionNotFound(session_id)
        return rows

    @_resent
    def _scratchpad_write_many(
        self, session_id: str, entries: dict[str, str], keep_existing: bool
    ) -> None:
        # one statement, atomic by itself: one round trip however many entries (a
        # missing session fails its foreign key)
        with self._read() as conn:
            try:
                _put_entries(conn, session_id, entries, keep_existing=keep_existing)
            except psycopg.errors.ForeignKeyViolation as exc:
                raise SessionNotFound(session_id) from exc

    def scratchpad_delete(self, session_id: str, name: str) -> bool:
        with self._write() as conn:
            gone = conn.execute(
                "DELETE FROM scratchpad WHERE session_id = %s AND name = %s RETURNING 1",
                (session_id, name),
            ).fetchone()
            if gone is None:
                _require(conn, session_id)
        return gone is not None

    @_resent
    def get_memo(self, session_id: str) -> dict[str, Any]:
        with self._read() as conn:
            row = conn.execute("SELECT memo FROM sessions WHERE id = %s", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        memo: dict[str, Any] = row[0]
        return memo

    @_resent
    def _memos(self, session_ids: list[str]) -> dict[str, dict[str, Any]]:
        with self._read() as conn:
            rows = conn.execute(
                "SELECT id, memo FROM sessions WHERE id = ANY(%s)", (session_ids,)
            ).fetchall()
        return {r[0]: r[1] for r in rows}

    @_resent
    def set_memo(self, session_id: str, memo: dict[str, Any]) -> None:
        with self._write() as conn:
            done = conn.execute(
                "UPDATE sessions SET memo = %s WHERE id = %s RETURNING 1", (Json(memo), session_id)
            ).fetchone()
        if done is None:
            raise SessionNotFound(session_id)

    replace_memo = _resent(core.StoreCore.replace_memo)
    """Resent after a lost connection: a resend after a lost COMMIT answers False;
    ``update_memo`` then decides again on the memo as stored, in which the compaction
    mark recognises its own token."""

    def _swap_memo(
        self, session_id: str, decide: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> bool:
        """Compare and set under the session's row lock."""
        with self._write() as conn:
            row = conn.execute(
                "SELECT memo FROM sessions WHERE id = %s FOR NO KEY UPDATE", (session_id,)
            ).fetchone()
            if row is None:
                raise SessionNotFound(session_id)
            memo = decide(row[0])
            if memo is None:
                return False
            conn.execute("UPDATE sessions SET memo = %s WHERE id = %s", (Json(memo), session_id))
        return True

    # -- locks ------------------------------------------------------------------

    acquire_lock = _resent(core.StoreCore.acquire_lock)
    """Resent after a lost connection: the same holder renews (``LockHolder.claim``)."""

    def _swap_lock(
        self, session_id: str, decide: Callable[[LockHolder | None], LockHolder | None]
    ) -> LockHolder | None:
        with self._write() as conn:
            current = _holder_for_update(conn, session_id)
            new = decide(current)
            if new is not current:
                conn.execute(
                    "UPDATE sessions SET lock = %s WHERE id = %s",
                    (Json(new.to_dict()) if new else None, session_id),
                )
        return new

    @_resent
    def lock_holder(self, session_id: str) -> LockHolder | None:
        with self._read() as conn:
            row = conn.execute("SELECT lock FROM sessions WHERE id = %s", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return _holder(session_id, row[0])

    # -- search -----------------------------------------------------------------

    @_resent
    def search(self, query: str, **options: Unpack[SearchOptions]) -> SearchPage:
        """The parsed query as SQL over the GIN-indexed ``search`` (``_search_condition``);
        snippets are made for the page only.

        The server cancels a search that runs longer than ``search_timeout``
        (``statement_timeout`` for this transaction only), so a search its client gave
        up on does not keep running there.
        """
        request = search_request(query, **options)
        q, f, limit, offset = request.query, request.filters, request.limit, request.offset
        if not q.groups:
            return request.nothing()
        condition, args = _search_condition(q)
        filters: list[sql.Composable] = [sql.SQL(f" AND {retraction.POSTGRES_SHOWN}")]
        for column, key, value in (
            ("s.agent", "agent", f.agent),
            ("s.model", "model", f.model),
            ("m.role", "role", f.role),
            ("m.session_id", "sid", f.session_id),
        ):
            if value is not None:
                args[key] = value
                filters.append(sql.SQL(f" AND {column} = %({key})s"))
        if f.since is not None:
            args["since"] = f.since
            filters.append(sql.SQL(" AND m.created_at >= %(since)s"))
        if f.until is not None:
            args["until"] = f.until
            filters.append(sql.SQL(" AND m.created_at < %(until)s"))
        found = sql.SQL(
            "FROM messages m JOIN sessions s ON s.id = m.session_id WHERE {cond}{filters}"
        ).format(cond=sql.SQL(condition), filters=sql.Composed(filters))
        page = sql.SQL(
            "SELECT m.session_id, m.seq, m.role, s.agent, m.body, s.parent_id {found} "
            "ORDER BY m.created_at DESC, m.session_id, m.seq DESC "
            "LIMIT %(limit)s OFFSET %(offset)s"
        ).format(found=found)
        timeout = f"{max(1, round(self.search_timeout * 1000))}ms"
        with self._read() as conn, conn.transaction():
            conn.execute("SELECT set_config('statement_timeout', %s, true)", (timeout,))
            try:
                total = conn.execute(sql.SQL("SELECT count(*) {}").format(found), args).fetchone()
                rows = conn.execute(page, {**args, "limit": limit, "offset": offset}).fetchall()
            except psycopg.errors.QueryCanceled as exc:
                raise search_timed_out(self._where, self.search_timeout) from exc
        return SearchPage(
            (hit_from_body(r[0], r[1], r[2], r[3], r[4], q, r[5]) for r in rows),
            total=total[0] if total else 0,
            offset=offset,
        )


def _lexeme(token: str, prefix: bool) -> str:
    """A tsquery lexeme, quoted: a token is never tsquery syntax."""
    quoted = "'" + token.replace("\\", "\\\\").replace("'", "''") + "'"
    return quoted + (":*" if prefix else "")


def _search_condition(q: SearchQuery) -> tuple[str, dict[str, Any]]:
    """The query as a SQL condition with named parameters. Each atom's tokens must all be
    in ``search`` (the index finds them); a phrase must also appear in ``search_text``
    as written, its tokens next to each other (``strpos`` on the space-joined tokens)."""
    args: dict[str, Any] = {}

    def atom_sql(atom: Atom) -> str:
        key = f"a{len(args)}"
        last = len(atom.tokens) - 1
        args[key] = " & ".join(
            _lexeme(t, atom.prefix and i == last) for i, t in enumerate(atom.tokens)
        )
        test = f"m.search @@ %({key})s::tsquery"
        if len(atom.tokens) == 1:
            return test
        phrase = f"p{len(args)}"
        args[phrase] = " " + atom.phrase + ("" if atom.prefix else " ")
        return f"({test} AND strpos(' ' || m.search_text || ' ', %({phrase})s) > 0)"

    condition = " AND ".join(
        "(" + " OR ".join(atom_sql(a) for a in group) + ")" for group in q.groups
    )
    if q.excluded:
        condition += " AND NOT (" + " OR ".join(atom_sql(a) for a in q.excluded) + ")"
    return condition, args


def _handing_over(first: Conn) -> type[Conn]:
    """The pool's connection class: its first connection is ``first`` (the one that
    checked the schema), so opening a store connects once, not twice."""
    spare = [first]

    class HandedOver(psycopg.Connection[tuple[Any, ...]]):
        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
            with contextlib.suppress(IndexError):
                conn = spare.pop()
                if not conn.closed:
                    return cast(Self, conn)
            return super().connect(conninfo, **kwargs)

    return HandedOver


@contextlib.contextmanager
def _pipelined_transaction(conn: Conn) -> Iterator[None]:
    """A transaction in a pipeline that syncs only where a result is read and at its end:
    BEGIN travels with the first statements and COMMIT with the last. psycopg's
    ``transaction()`` syncs at BEGIN, before COMMIT and at COMMIT, so a row lock taken
    inside was held for three round trips, each a wake-up of a writer that waits its turn
    on a busy machine, while the session's other appenders queue behind it. Whatever
    fails, the transaction is rolled back once the pipeline has synced."""
    try:
        with conn.pipeline():
            conn.execute("BEGIN")
            yield
            conn.execute("COMMIT")
    except BaseException:
        idle = conn.closed or conn.broken or conn.info.transaction_status == TransactionStatus.IDLE
        if not idle:
            with contextlib.suppress(psycopg.Error):  # the first failure is the one to tell
                conn.rollback()
        raise


def _looks_alive(conn: Conn) -> bool:
    """Free when healthy: an idle connection has nothing to read, so a readable
    socket means the server hung up (or sent something worth a real round trip)."""
    if conn.closed or conn.broken:
        return False
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
        if readable:
            conn.execute("")
    except (psycopg.Error, OSError, ValueError):
        return False
    return True


def _one(conn: Conn, record: type[R], query: str, args: Params) -> R | None:
    """One row as a record: the selected columns are named like the record's fields."""
    return conn.cursor(row_factory=class_row(record)).execute(query, args).fetchone()


def _all(conn: Conn, record: type[R], query: str, args: Params) -> list[R]:
    return conn.cursor(row_factory=class_row(record)).execute(query, args).fetchall()


def _store_rows(
    conn: Conn,
    batch: Appending,
    prepared: Sequence[tuple[str, str, datetime, int, str, str]],
    first: int,
    metadata: Json | None,
) -> int:
    """Insert the batch's rows from seq ``first``, move the session's counters (its
    row locked by the caller) and write the batch's companions (``metadata``: merged
    already); ``first``."""
    session_id = batch.session_id
    rows = [(session_id, first + i, *p) for i, p in enumerate(prepared)]
    if rows:
        with conn.cursor() as cur:
            cur.executemany(_INSERT_MESSAGE, rows)
        conn.execute(
            "UPDATE sessions SET last_seq = %s, message_count = message_count + %s, "
            "total_tokens = total_tokens + %s, updated_at = GREATEST(updated_at, %s), "
            "metadata = COALESCE(%s, metadata) WHERE id = %s",
            (first + len(rows) - 1, len(rows), sum(batch.tokens), batch.at, metadata, session_id),
        )
    elif metadata is not None:
        conn.execute("UPDATE sessions SET metadata = %s WHERE id = %s", (metadata, session_id))
    extra = batch.alongside
    pad = extra.pad(session_id)
    if extra.scratchpad:
        _put_entries(conn, pad, extra.scratchpad)
    elif pad != session_id:
        _require(conn, pad)
    return first


def _prepared_rows(batch: Appending) -> list[tuple[str, str, datetime, int, str, str]]:
    return [
        _message_row(m, b, t)
        for m, b, t in zip(batch.messages, batch.bodies, batch.tokens, strict=True)
    ]


def _message_row(m: Message, body: bytes, tokens: int) -> tuple[str, str, datetime, int, str, str]:
    """A message's columns but session and seq; search sees a bounded, NUL-free text."""
    text = search_text(message_pieces(m))
    return (m.id, m.role, m.created_at, tokens, body.decode("utf-8"), text)


def _holder_for_update(conn: Conn, session_id: str) -> LockHolder | None:
    """The attach lock's holder, the session's row locked until the transaction ends."""
    row = conn.execute(
        "SELECT lock FROM sessions WHERE id = %s FOR NO KEY UPDATE", (session_id,)
    ).fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    return _holder(session_id, row[0])


def _holder(session_id: str, lock: object) -> LockHolder | None:
    """The session's attach lock from its ``lock`` column."""
    return LockHolder.stored(lock, where=f"session {session_id}")


def _require(conn: Conn, session_id: str) -> None:
    if not conn.execute("SELECT 1 FROM sessions WHERE id = %s", (session_id,)).fetchone():
        raise SessionNotFound(session_id)


def _put_entries(
    conn: Conn,
    session_id: str,
    entries: dict[str, str],
    *,
    keep_existing: bool = False,
    expect: tuple[str, Mark] | None = None,
) -> bool:
    """Scratchpad entries in one statement (in the caller's transaction, if any);
    ``keep_existing`` leaves the entries that exist as they are; with ``expect`` (a
    session and its mark), only if that session is so when it runs. False when the
    mark kept it from writing."""
    if not entries:
        return True
    now = utcnow()
    update = (
        "NOTHING"
        if keep_existing
        else "UPDATE SET content = excluded.content, updated_at = excluded.updated_at"
    )
    rows = ", ".join(["(%s, %s::json)"] * len(entries))  # not unnested arrays: slower
    args: list[Any] = [session_id, now, now]
    for name, content in entries.items():
        args += [name, Json(content)]
    where = ""
    if expect is not None:
        where = (
            " WHERE EXISTS (SELECT 1 FROM sessions WHERE id = %s AND created_at = %s"
            " AND last_seq = %s)"
        )
        args += [expect[0], expect[1].created_at, expect[1].last_seq]
    cur = conn.execute(
        "INSERT INTO scratchpad (session_id, name, content, created_at, updated_at) "
        f"SELECT %s, name, content, %s, %s FROM (VALUES {rows}) "
        f"AS e (name, content){where} ON CONFLICT (session_id, name) DO {update}",
        args,
    )
    return expect is None or cur.rowcount > 0
