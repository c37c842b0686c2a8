"""The embedded default store: one SQLite file, WAL, FTS5.

Durability: WAL journal with ``synchronous=FULL`` by default, so an
acknowledged append survives a process kill *and* a power loss; pass
``?synchronous=normal`` in the URL to trade power-loss durability for speed
(a killed process still loses nothing in WAL mode). Writers take
``BEGIN IMMEDIATE`` and wait up to ``busy_timeout`` (default 60 s) for each
other, so many processes can share one file.

Messages are stored as their JSON form plus the columns that queries need;
``(session_id, seq)`` is the primary access path, so a tail read touches only
the rows it returns, however long the session (invariant 4).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack
from urllib.parse import quote

from threadline.errors import (
    CorruptRecord,
    NotAThreadlineStore,
    SchemaTooNew,
    SessionExists,
    SessionNotFound,
    StoreDamaged,
    StoreNotFound,
    StoreUnavailable,
    ThreadlineError,
    UsageError,
)
from threadline.stamps import utcnow
from threadline.store import core, retraction, sqlite_files
from threadline.store.alongside import Alongside
from threadline.store.checkpoints import Checkpoint, ExpectPrevious, check_checkpoint
from threadline.store.checks import (
    MAX_BOUND,
    format_ts,
    id_prefix_range,
    parse_ts,
    refuse_unknown_options,
    split_url_options,
)
from threadline.store.decode import decode_message, decode_rows
from threadline.store.encoding import Appending
from threadline.store.listing import ListRequest, SessionPage
from threadline.store.locks import LockHolder
from threadline.store.search_query import (
    DEFAULT_SEARCH_TIMEOUT,
    Atom,
    SearchFilters,
    SearchOptions,
    SearchPage,
    SearchQuery,
    body_fts_text,
    hit_from_body,
    search_request,
    search_timed_out,
)
from threadline.store.search_query import search_timeout as search_timeout_checked
from threadline.store.session_info import (
    NewSession,
    ScratchpadEntry,
    SessionChange,
    SessionInfo,
)
from threadline.store.sql_entries import SQLEntries
from threadline.store.sqlite_rows import (
    CHECKPOINT_SELECT,
    ENTRY_SELECT,
    SESSION_SELECT,
    checkpoint_from_row,
    entry_from_row,
    session_from_row,
)
from threadline.store.sqlite_rows import holder as stored_holder

if TYPE_CHECKING:  # messages loads pydantic, which listing sessions must not (issue 13)
    from threadline.messages import Message

APP_ID = "threadline"
DEFAULT_BUSY_TIMEOUT_MS = 60_000
SYNCHRONOUS_LEVELS = ("full", "normal", "extra", "off")
DEFAULT_SYNCHRONOUS = "full"
MAX_BUSY_TIMEOUT_MS = 24 * 3600 * 1000
URL_OPTIONS = ("synchronous", "busy_timeout", "mode", "search_timeout")
PROGRESS_STEPS = 10_000
"""SQLite virtual-machine instructions between two looks at a search's deadline."""
MAX_INDEX_BACKLOG = 50_000
"""An append that leaves more messages than this waiting for the search index brings it up
to date (once in that many appends, about a second's work): appends otherwise never index,
and a read-only handle indexes what waits in a temporary table at every search."""
INDEX_TEXT_FUNCTION = "threadline_index_text"
"""The SQL name of ``search_query.body_fts_text`` on every connection."""
FTS_OPTIONS = "content='', tokenize='unicode61 remove_diacritics 0'"
"""Contentless, and tokens split only where ``search_query.tokens`` split them."""
FTS_AUTOMERGE = 8
"""FTS5 merges a level's segments once this many wait (its default is 4): each catch-up
writes a segment, and merging less often made indexing about a sixth cheaper here."""
OPEN_MODES = ("rwc", "rw", "ro")
"""``?mode=``: create the file when missing (the default), open an existing one, read only."""
SQLITE_MAGIC = b"SQLite format 3\x00"
HEADER_BYTES = 100
SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26
DAMAGE_HINT = (
    "`threadline doctor --store sqlite://{path}` names the sessions that can still be read, "
    "and `--salvage NEW_URL` copies them to a new store"
)


def fts5_atom(atom: Atom) -> str:
    """An atom as an FTS5 phrase: quoted tokens, so user text is never FTS5 syntax."""
    return '"' + atom.phrase.replace('"', '""') + '"' + (" *" if atom.prefix else "")


def fts5_query(q: SearchQuery) -> str:
    """The parsed query in FTS5's syntax: ``(a OR b) AND c NOT (d OR e)``."""
    match = " AND ".join("(" + " OR ".join(fts5_atom(a) for a in g) + ")" for g in q.groups)
    if q.excluded:
        match += " NOT (" + " OR ".join(fts5_atom(a) for a in q.excluded) + ")"
    return match


# -- migrations: one ordered list, applied in one place when the store opens ------


def _run_script(con: sqlite3.Connection, script: str) -> None:
    """Statement by statement: executescript() would COMMIT the migration's transaction."""
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            con.execute(buf)
            buf = ""


def m001_initial(con: sqlite3.Connection) -> None:
    _run_script(
        con,
        """
        CREATE TABLE threadline_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            model TEXT,
            title TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            message_count INTEGER NOT NULL DEFAULT 0,
            total_tokens INTEGER NOT NULL DEFAULT 0,
            last_seq INTEGER NOT NULL DEFAULT 0,
            metadata TEXT NOT NULL DEFAULT '{}',
            memo TEXT NOT NULL DEFAULT '{}',
            lock TEXT
        );
        CREATE INDEX sessions_by_updated ON sessions (updated_at DESC);
        CREATE INDEX sessions_by_agent ON sessions (agent, updated_at DESC);
        CREATE TABLE messages (
            rowid INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            id TEXT NOT NULL,
            role TEXT NOT NULL,
            created_at TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            body TEXT NOT NULL,
            text TEXT NOT NULL,
            UNIQUE (session_id, seq),
            UNIQUE (session_id, id)
        );
        CREATE VIRTUAL TABLE messages_fts USING fts5 (
            text, content='messages', content_rowid='rowid', tokenize='unicode61'
        );
        CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts (rowid, text) VALUES (new.rowid, new.text);
        END;
        CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, text)
            VALUES ('delete', old.rowid, old.text);
        END;
        CREATE TABLE checkpoints (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            covers_up_to INTEGER NOT NULL,
            summary TEXT NOT NULL,
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX checkpoints_by_session ON checkpoints (session_id, id);
        CREATE TABLE scratchpad (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            content TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (session_id, name)
        );
        """,
    )


def m002_search_index_catches_up(con: sqlite3.Connection) -> None:
    """The full-text index stops being written row by row inside every append (a third
    of an append's time went to it) and catches up in batches instead.

    ``search_index.indexed_upto`` is the marker: every message with a rowid at or below
    it is in ``messages_fts``, none above it is (appends give new rows rowids above the
    marker). Catching up indexes the rows above it in one statement and moves it, in
    one transaction, so a crash at any point leaves a backlog that the next catch-up
    recomputes from the marker. A v1 store's rows are all indexed already. Written to
    run again harmlessly on a store that has it already (a version number set back).
    """
    _run_script(
        con,
        """
        DROP TRIGGER IF EXISTS messages_fts_insert;
        DROP TRIGGER IF EXISTS messages_fts_delete;
        CREATE TABLE IF NOT EXISTS search_index (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            indexed_upto INTEGER NOT NULL
        );
        INSERT OR IGNORE INTO search_index (id, indexed_upto)
        VALUES (1, (SELECT COALESCE(MAX(rowid), 0) FROM messages));
        CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
        WHEN old.rowid <= (SELECT indexed_upto FROM search_index) BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, text)
            VALUES ('delete', old.rowid, old.text);
        END;
        """,
    )


def m003_index_decoded_text(con: sqlite3.Connection) -> None:
    """The index holds what a message says, decoded (``search_query.body_fts_text``:
    text, tool names, tool arguments' keys and values, CJK split by character), made
    from the message at append or from its stored body, so the search text is no
    longer stored a second time.

    ``messages_fts`` becomes contentless: it keeps the index only. Removing a row from
    it takes the text it was indexed with, which the delete trigger recomputes from the
    body with the same function (``threadline_index_text``, registered on every
    connection). Every stored message is indexed here, in the migration's transaction.
    Runs again harmlessly (a version number set back): the index is rebuilt.
    """
    if any(r[1] == "text" for r in con.execute("PRAGMA table_info(messages)")):
        con.execute("DROP TRIGGER IF EXISTS messages_fts_delete")
        con.execute("ALTER TABLE messages DROP COLUMN text")
    _run_script(
        con,
        f"""
        DROP TRIGGER IF EXISTS messages_fts_delete;
        DROP TABLE IF EXISTS messages_fts;
        CREATE VIRTUAL TABLE messages_fts USING fts5 (text, {FTS_OPTIONS});
        INSERT INTO messages_fts (messages_fts, rank) VALUES ('automerge', {FTS_AUTOMERGE});
        INSERT INTO messages_fts (rowid, text)
        SELECT rowid, {INDEX_TEXT_FUNCTION}(body) FROM messages;
        UPDATE search_index SET indexed_upto = max(
            indexed_upto, (SELECT COALESCE(MAX(rowid), 0) FROM messages));
        CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
        WHEN old.rowid <= (SELECT indexed_upto FROM search_index) BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, text)
            VALUES ('delete', old.rowid, {INDEX_TEXT_FUNCTION}(old.body));
        END;
        """,
    )


def m004_session_parents(con: sqlite3.Connection) -> None:
    """A session names the session it is listed under in ``parent_id`` (a subagent's
    parent, a fork's), which listing filters on by index: ``sessions_by_parent`` serves
    a parent's children and, from its NULL prefix, the top-level sessions in order; a
    partial index serves those of one agent. A page of top-level sessions reads that
    page, never every session's metadata. Deleting a parent makes its children
    top-level (``ON DELETE SET NULL``).

    Existing links move out of the metadata: a fork's point (``forked_from.session``) and
    an imported subagent's ``parent_session``, when that session exists. Runs again
    harmlessly (a version number set back)."""
    if not any(r[1] == "parent_id" for r in con.execute("PRAGMA table_info(sessions)")):
        con.execute(
            "ALTER TABLE sessions ADD COLUMN parent_id TEXT "
            "REFERENCES sessions (id) ON DELETE SET NULL"
        )
    _run_script(
        con,
        """
        UPDATE sessions SET parent_id = (
            SELECT p.id FROM sessions p WHERE p.id <> sessions.id AND p.id = (
                CASE WHEN json_valid(sessions.metadata) THEN coalesce(
                    json_extract(sessions.metadata, '$.forked_from.session'),
                    json_extract(sessions.metadata, '$.parent_session')) END))
        WHERE parent_id IS NULL;
        CREATE INDEX IF NOT EXISTS sessions_top_by_agent ON sessions (agent, updated_at DESC, id)
        WHERE parent_id IS NULL;
        CREATE INDEX IF NOT EXISTS sessions_by_parent ON sessions (parent_id, updated_at DESC, id);
        """,
    )


def m005_listing_indexes_hold_ids(con: sqlite3.Connection) -> None:
    """Listings order by ``updated_at DESC, id``: the index of all sessions holds ``id``
    too, so a page of every session is read from the index in order (no sort of the
    ties) and the rows a deep ``OFFSET`` skips are never read from the table: the page
    at offset 50,000 of 100,000 sessions took 75 ms, now about 2 ms. (``sessions_by_agent``
    stays as it is: with ``id`` in it the planner takes it over the partial index for an
    agent's top-level sessions.)"""
    _run_script(
        con,
        """
        DROP INDEX IF EXISTS sessions_by_updated;
        CREATE INDEX IF NOT EXISTS sessions_by_updated ON sessions (updated_at DESC, id);
        """,
    )


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    m001_initial,
    m002_search_index_catches_up,
    m003_index_decoded_text,
    m004_session_parents,
    m005_listing_indexes_hold_ids,
]
SCHEMA_VERSION = len(MIGRATIONS)


def parse_sqlite_url(url: str) -> tuple[Path, dict[str, str]]:
    """``sqlite:///abs/path.db`` or ``sqlite://relative.db``, with ``?key=value`` options
    (``URL_OPTIONS``; any other is a usage error naming it)."""
    rest = url[len("sqlite://") :] if url.startswith("sqlite://") else url
    rest, _, query = rest.partition("?")
    if not rest:
        raise UsageError(f"no path in store URL {url!r} (expected sqlite:///path/to/file.db)")
    options, unknown = split_url_options(query, URL_OPTIONS, store="sqlite")
    refuse_unknown_options(unknown, URL_OPTIONS, store="sqlite")
    return Path(rest).expanduser(), options


def _seconds(text: str | None, default: float) -> float:
    if text is None:
        return default
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"store URL option search_timeout must be seconds, got {text!r}") from None


def _busy_timeout(text: str | None) -> int:
    if text is None:
        return DEFAULT_BUSY_TIMEOUT_MS
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_BUSY_TIMEOUT_MS:
        raise UsageError(
            f"store URL option busy_timeout must be a whole number of milliseconds from 0 to "
            f"{MAX_BUSY_TIMEOUT_MS}, got {text!r}"
        )
    return value


def _create_private(path: Path) -> None:
    """Create a missing database file readable by its owner only (0600), as exports and
    the server's token are: SQLite would make it 0644, and its ``-wal`` and ``-shm``
    files take the database file's mode. An existing file is left as it is."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        raise StoreUnavailable(f"cannot create store {path}: {exc.strerror}") from exc


def header_problem(path: Path) -> tuple[bool, str | None]:
    """Whether the file at ``path`` is an SQLite database at all, and if it is, what is
    wrong with its header or its length; read without opening it with SQLite, so only
    through ``sqlite_files.hold`` (never while this process holds the file open).

    A file without SQLite's magic is someone else's; one with it but a bad page size,
    a length that is not whole pages, or fewer pages than its header counts (with no
    write-ahead log that could hold the rest) is an SQLite file that was cut or
    overwritten: damaged, not foreign.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER_BYTES)
            size = os.fstat(f.fileno()).st_size
    except FileNotFoundError:
        return True, None
    if size == 0:
        return True, None  # SQLite reads an empty file as an empty database
    if not head.startswith(SQLITE_MAGIC):
        if SQLITE_MAGIC.startswith(head):
            return True, f"it is cut short ({size} bytes)"
        return False, None
    if len(head) < HEADER_BYTES:
        return True, f"it is cut short ({size} bytes, shorter than its header)"
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return True, f"its header is damaged (page size {page_size})"
    if size % page_size:
        return True, f"it is cut short ({size:,} bytes is not a whole number of pages)"
    pages = int.from_bytes(head[28:32], "big")
    counted = head[24:28] == head[92:96]  # the page count is valid for this change counter
    wal = path.with_name(path.name + "-wal")
    log_is_empty = not wal.exists() or wal.stat().st_size == 0
    if counted and log_is_empty and size < pages * page_size:
        return True, f"it is cut short ({size // page_size:,} of its {pages:,} pages are there)"
    return True, None


def is_damage(exc: sqlite3.Error) -> bool:
    """SQLite says the file is corrupt (``SQLITE_CORRUPT``, any extended code) or not a
    database at all (``SQLITE_NOTADB``) while its header is SQLite's: damage."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)
    msg = str(exc)
    return "malformed" in msg or "not a database" in msg


class SQLiteStore(SQLEntries, core.StoreCore):
    """Sessions in one SQLite file. Safe to share across threads and processes."""

    MARK = "?"

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: str = DEFAULT_SYNCHRONOUS,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        mode: str = "rwc",
        search_timeout: float = DEFAULT_SEARCH_TIMEOUT,
    ) -> None:
        # ``sqlite:////abs/x.db`` (SQLAlchemy's spelling) reaches here as ``//abs/x.db``:
        # one file, and a double slash in a ``file:`` URI would read as a host name.
        self.path = Path(re.sub(r"^/{2,}", "/", str(path)))
        self.url = f"sqlite://{self.path}"
        if synchronous.lower() not in SYNCHRONOUS_LEVELS:
            raise UsageError(f"synchronous must be one of {', '.join(SYNCHRONOUS_LEVELS)}")
        if mode not in OPEN_MODES:
            raise UsageError(
                f"store URL option mode must be one of {', '.join(OPEN_MODES)}, got {mode!r}"
            )
        self.search_timeout = search_timeout_checked(search_timeout)
        """Seconds one search may run before its statement is interrupted (a progress
        handler), as PostgreSQL's ``statement_timeout`` cancels one there."""
        self.read_only = mode == "ro"
        """Opened for reading only: asked for (``?mode=ro``), or the file or its directory
        cannot be written and the store was opened not to create (``create=False``)."""
        self._creates = mode == "rwc"
        self._damage: str | None = None
        """What SQLite said when this handle first met damaged pages; writes stop then."""
        self._lock = threading.RLock()
        self._closed = False
        self._con = self._connect(synchronous.lower(), busy_timeout_ms, mode)
        self._migrate()

    @classmethod
    def from_url(cls, url: str, *, create: bool = True) -> SQLiteStore:
        """Options: ``synchronous``, ``busy_timeout`` (ms), ``mode`` (``rwc`` creates the
        file if missing, ``rw`` opens an existing one, ``ro`` only reads it),
        ``search_timeout`` (seconds, default 10).
        ``create=False`` turns ``rwc`` into ``rw``."""
        path, options = parse_sqlite_url(url)
        mode = options.get("mode", "rwc")
        return cls(
            path,
            synchronous=options.get("synchronous", DEFAULT_SYNCHRONOUS),
            busy_timeout_ms=_busy_timeout(options.get("busy_timeout")),
            mode="rw" if mode == "rwc" and not create else mode,
            search_timeout=_seconds(options.get("search_timeout"), DEFAULT_SEARCH_TIMEOUT),
        )

    # -- opening ----------------------------------------------------------------

    def _damaged(self, problem: str) -> StoreDamaged:
        return StoreDamaged(
            f"store {self.path} is damaged: {problem}", hint=DAMAGE_HINT.format(path=self.path)
        )

    def _connect(self, synchronous: str, busy_timeout_ms: int, mode: str) -> sqlite3.Connection:
        if mode == "rwc":
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreUnavailable(
                    f"cannot create the store's directory {self.path.parent}: {exc.strerror}"
                ) from exc
            sqlite_files.read_unheld(self.path, _create_private)
        elif not self.path.exists():
            raise StoreNotFound(
                f"no store at {self.path}: nothing was stored there yet, and this opens a "
                "store without creating it (a command that writes creates it)"
            )
        elif self.path.is_file() and self.path.stat().st_size == 0:
            raise StoreNotFound(  # before SQLite writes a header into it
                f"{self.path} holds no threadline store yet (an empty file), and this opens "
                "a store without creating it"
            )
        # the header is read with a plain descriptor only while no connection of this
        # process holds the file (sqlite_files); otherwise SQLite's errors classify it
        self._hold, header = sqlite_files.hold(self, self.path, header_problem)
        try:
            return self._connect_held(header, synchronous, busy_timeout_ms, mode)
        except BaseException:
            self._hold.release()
            raise

    def _connect_held(
        self,
        header: tuple[bool, str | None] | None,
        synchronous: str,
        busy_timeout_ms: int,
        mode: str,
    ) -> sqlite3.Connection:
        is_sqlite, problem = header if header is not None else (True, None)
        if not is_sqlite:
            raise NotAThreadlineStore(
                f"{self.path} is not a threadline store (not an SQLite database)"
            )
        if problem is not None:
            raise self._damaged(problem)
        # rw and ro fall back to reading when writing is impossible: a read-only file or
        # directory (where SQLite cannot make its -shm file), then an immutable open,
        # which is safe only with no write-ahead log holding changes
        attempts = {"rwc": ["rwc"], "rw": ["rw", "ro", "immutable"], "ro": ["ro", "immutable"]}
        for attempt in attempts[mode]:
            try:
                return self._open(attempt, synchronous, busy_timeout_ms)
            except sqlite3.DatabaseError as exc:
                msg = str(exc)
                if is_damage(exc):
                    raise self._damaged(msg) from exc
                cannot_write = "readonly" in msg or "read-only" in msg or "unable to open" in msg
                if cannot_write and attempt != attempts[mode][-1]:
                    if attempt == "ro" and self._log_has_changes():
                        raise StoreUnavailable(
                            f"cannot read store {self.path} where it is: its write-ahead log "
                            "holds changes and SQLite cannot create its shared-memory file "
                            "beside it (a read-only directory); copy the store somewhere "
                            "writable"
                        ) from exc
                    continue
                if cannot_write:
                    raise StoreUnavailable(f"store {self.path} is not writable: {msg}") from exc
                raise StoreUnavailable(f"cannot open store {self.path}: {msg}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _log_has_changes(self) -> bool:
        wal = self.path.with_name(self.path.name + "-wal")
        return wal.exists() and wal.stat().st_size > 0

    def _open(self, mode: str, synchronous: str, busy_timeout_ms: int) -> sqlite3.Connection:
        """One connection in SQLite's URI ``mode`` (``immutable``: read, and trust that
        nobody writes, which holds for a store nobody can write)."""
        query = "mode=ro&immutable=1" if mode == "immutable" else f"mode={mode}"
        uri = f"file:{quote(str(self.path.absolute()))}?{query}"
        con = sqlite3.connect(
            uri,
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            timeout=busy_timeout_ms / 1000,
        )
        try:
            con.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            con.create_function(INDEX_TEXT_FUNCTION, 1, _index_text_sql, deterministic=True)
            if mode in ("ro", "immutable"):
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens the file
                self.read_only = True
            else:
                journal = con.execute("PRAGMA journal_mode = WAL").fetchone()
                if journal is None or str(journal[0]).lower() != "wal":
                    raise StoreUnavailable(
                        f"cannot switch {self.path} to WAL mode (got {journal!r})"
                    )
                con.execute(f"PRAGMA synchronous = {synchronous}")
            con.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            con.close()
            raise
        return con

    def _migrate(self) -> None:
        with self._translate(), self._lock:
            con = self._con
            version = con.execute("PRAGMA user_version").fetchone()[0]
            tables = {
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if version == 0 and tables:
                raise NotAThreadlineStore(
                    f"{self.path} is an SQLite database that threadline did not create "
                    f"(it has tables: {', '.join(sorted(tables)[:5])})"
                )
            if version > 0:
                app = None
                if "threadline_meta" in tables:
                    row = con.execute(
                        "SELECT value FROM threadline_meta WHERE key = 'app'"
                    ).fetchone()
                    app = row[0] if row else None
                if app != APP_ID:
                    raise NotAThreadlineStore(f"{self.path} is not a threadline store")
            if version > SCHEMA_VERSION:
                raise SchemaTooNew(
                    f"{self.path} has schema version {version}, newer than this threadline "
                    f"understands ({SCHEMA_VERSION}); upgrade threadline to open it"
                )
            if version == SCHEMA_VERSION:
                return
            if version == 0 and not self._creates:
                raise StoreNotFound(
                    f"{self.path} holds no threadline store yet (an empty database), and "
                    "this opens a store without creating it"
                )
            if self.read_only:
                raise StoreUnavailable(
                    f"{self.path} has schema version {version} and needs an upgrade to "
                    f"{SCHEMA_VERSION}, which a read-only store cannot take"
                )
            con.execute("BEGIN IMMEDIATE")
            try:
                # re-read under the write lock: another process may have migrated meanwhile
                version = con.execute("PRAGMA user_version").fetchone()[0]
                for number, migration in enumerate(MIGRATIONS[version:], start=version + 1):
                    migration(con)
                    con.execute(f"PRAGMA user_version = {number}")
                con.execute(
                    "INSERT OR REPLACE INTO threadline_meta (key, value) VALUES ('app', ?)",
                    (APP_ID,),
                )
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    # -- plumbing ---------------------------------------------------------------

    def _driver_error(self, exc: Exception) -> ThreadlineError | None:
        if not isinstance(exc, sqlite3.Error):
            return None
        msg = str(exc)
        if is_damage(exc):
            self._damage = self._damage or msg
            return self._damaged(msg)
        if isinstance(exc, sqlite3.OperationalError):
            if "readonly" in msg or "read-only" in msg:
                return StoreUnavailable(f"store {self.path} is read-only: {msg}")
            if "locked" in msg or "busy" in msg:
                return StoreUnavailable(f"store {self.path} is busy: {msg}")
            return StoreUnavailable(f"store {self.path}: {msg}")
        return CorruptRecord(f"database error: {exc}", where=str(self.path))

    def _read(self) -> _Reading:
        """The connection, under the store's lock, its errors ours (``_translate``)."""
        return _Reading(self)

    def _write(self) -> _Writing:
        """One transaction (``BEGIN IMMEDIATE``) under the store's lock, rolled back when
        the block raises, its errors ours (``_translate``)."""
        if self._damage is not None:  # what is written now may be lost with the damage
            raise self._damaged(f"{self._damage} (seen earlier); not writing to it")
        return _Writing(self)

    def close(self) -> None:
        """Brings the search index up to date first (in one statement: what appends left),
        so the next search, or a reader that cannot index (read-only), meets no backlog."""
        with self._lock:
            if self._closed:
                return
            if not self.read_only and self._damage is None:
                with contextlib.suppress(ThreadlineError, sqlite3.Error):
                    # only if the store is free now: a busy one leaves the catch-up to the
                    # next search rather than hold up the close for the busy timeout
                    self._con.execute("PRAGMA busy_timeout = 0")
                    self.update_search_index()
            self._closed = True
            self._con.close()
            self._hold.release()

    # -- sessions ---------------------------------------------------------------

    def _insert_session(self, new: NewSession, lock: LockHolder | None) -> SessionInfo:
        with self._write() as con:
            if new.parent is not None:
                self._require(con, new.parent)
            try:
                con.execute(
                    "INSERT INTO sessions (id, agent, model, title, created_at, updated_at, "
                    "metadata, lock, parent_id, last_seq, message_count, total_tokens) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        new.id,
                        new.agent,
                        new.model,
                        new.title,
                        new.created,
                        new.updated,
                        json.dumps(new.metadata),
                        lock.to_json() if lock else None,
                        new.parent,
                        new.last_seq,
                        new.message_count,
                        new.total_tokens,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise SessionExists(new.id) from exc
        return self.session_info(new.id)

    def _matching_ids(self, id_or_prefix: str, *, prefix: bool) -> list[str]:
        # a range of the primary key, case-sensitive (LIKE is not): the id itself sorts
        # before every id it prefixes
        with self._read() as con:
            if not prefix:
                rows = con.execute("SELECT id FROM sessions WHERE id = ?", (id_or_prefix,))
            else:
                rows = con.execute(
                    "SELECT id FROM sessions WHERE id >= ? AND id < ? ORDER BY id LIMIT 20",
                    id_prefix_range(id_or_prefix),
                )
            return [r[0] for r in rows]

    def session_info(self, session_id: str) -> SessionInfo:
        return session_from_row(self._session_row(SESSION_SELECT, session_id))

    def session_mark(self, session_id: str) -> tuple[datetime, int]:
        row = self._session_row("SELECT created_at, last_seq FROM sessions", session_id)
        return parse_ts(row[0]), int(row[1])

    def _session_row(self, select: str, session_id: str) -> tuple[Any, ...]:
        """The session's row as ``select`` (``SELECT ... FROM sessions``) reads it."""
        with self._read() as con:
            row = con.execute(select + " WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return tuple(row)

    def _list_page(self, request: ListRequest) -> SessionPage:
        where, args = request.where(":{}", format_ts)
        with self._read() as con:
            total = con.execute("SELECT count(*) FROM sessions" + where, args).fetchone()[0]
            rows = con.execute(
                f"{SESSION_SELECT}{where} ORDER BY updated_at DESC, id LIMIT :limit OFFSET :offset",
                {**args, "limit": request.limit, "offset": request.offset},
            ).fetchall()
        return SessionPage(
            items=[session_from_row(r) for r in rows],
            total=total,
            offset=request.offset,
            limit=request.limit,
        )

    def _count_children(self, parent_ids: list[str]) -> dict[str, int]:
        marks = ", ".join("?" * len(parent_ids))
        with self._read() as con:
            rows = con.execute(
                f"SELECT parent_id, count(*) FROM sessions WHERE parent_id IN ({marks}) "
                "GROUP BY parent_id",
                parent_ids,
            ).fetchall()
        return dict(rows)

    def _set_title(self, session_id: str, title: str | None, now: datetime) -> SessionInfo:
        with self._write() as con:
            cur = con.execute(
                "UPDATE sessions SET title = ?, updated_at = ? WHERE id = ?",
                (title, format_ts(now), session_id),
            )
            if cur.rowcount == 0:
                raise SessionNotFound(session_id)
        return self.session_info(session_id)

    def _update_session(self, session_id: str, change: SessionChange) -> SessionInfo:
        with self._write() as con:
            row = con.execute(
                "SELECT metadata, parent_id FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise SessionNotFound(session_id)
            new_parent = change.new_parent(session_id, row[1])
            if new_parent is not None:
                self._require(con, new_parent)
            con.execute(
                "UPDATE sessions SET model = COALESCE(?, model), title = COALESCE(?, title), "
                "parent_id = COALESCE(?, parent_id), metadata = ? WHERE id = ?",
                (
                    change.model,
                    change.title,
                    new_parent,
                    json.dumps(change.merged(json.loads(row[0]))),
                    session_id,
                ),
            )
        return self.session_info(session_id)

    def _delete(self, session_ids: list[str], check: Callable[[str, object], None]) -> int:
        deleted = 0
        with self._write() as con:
            for sid in session_ids:
                row = con.execute("SELECT lock FROM sessions WHERE id = ?", (sid,)).fetchone()
                if row is None:
                    continue
                check(sid, row[0])
                con.execute("DELETE FROM sessions WHERE id = ?", (sid,))
                deleted += 1
        return deleted

    def _session_ids(self, agent: str | None) -> list[str]:
        where, args = ("", []) if agent is None else (" WHERE agent = ?", [agent])
        with self._read() as con:
            return [r[0] for r in con.execute("SELECT id FROM sessions" + where, args)]

    # -- messages ---------------------------------------------------------------

    def _append(self, session_id: str, batch: Appending) -> int | list[Message]:
        """One transaction of plain inserts: the full-text index catches up before a
        search answers and on close (``update_search_index``), never row by row here,
        and here only when ``MAX_INDEX_BACKLOG`` messages wait."""
        with self._write() as con:
            return self._append_in(con, session_id, batch)

    def _append_in(
        self, con: sqlite3.Connection, session_id: str, batch: Appending
    ) -> int | list[Message]:
        """``_append`` within the caller's transaction: the mark checked first, then
        the batch, then its companions."""
        extra = batch.alongside
        head = con.execute(
            _APPEND_HEAD if batch.ids else _MARK_HEAD,
            (session_id, batch.ids[0] if batch.ids else None),
        ).fetchone()
        if head is None:
            raise SessionNotFound(session_id)
        seq, created_at, indexed_upto, top, stored_already = head
        if extra.expect is not None:
            extra.expect.holds(session_id, parse_ts(created_at), seq)
        if stored_already:  # a retried batch: batches are atomic, so all of it is
            return self._stored_copies(con, batch)
        n = len(batch.ids)
        if n:
            # new rows go above the index marker even when the newest rows were deleted
            # (SQLite would reuse their rowids, which the marker says are indexed)
            rowid = max(top, indexed_upto)
            tokens = batch.tokens
            rows = list(  # column by column: zip makes the rows' tuples in C
                zip(
                    range(rowid + 1, rowid + n + 1),
                    repeat(session_id, n),
                    range(seq + 1, seq + n + 1),
                    batch.ids,
                    [m.role for m in batch.messages],
                    batch.times,
                    tokens,
                    map(bytes.decode, batch.bodies),
                    strict=True,
                )
            )
            try:
                con.executemany(
                    "INSERT INTO messages "
                    "(rowid, session_id, seq, id, role, created_at, tokens, body) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
            except sqlite3.IntegrityError as exc:
                raise batch.already_stored() from exc
            con.execute(
                "UPDATE sessions SET last_seq = ?, message_count = message_count + ?, "
                "total_tokens = total_tokens + ?, updated_at = max(updated_at, ?) WHERE id = ?",
                (seq + n, n, sum(tokens), format_ts(batch.at), session_id),
            )
            if rowid + n - indexed_upto > MAX_INDEX_BACKLOG:
                self._index_pending(con)
        self._write_alongside(con, session_id, extra)
        return int(seq) + 1

    def _write_alongside(self, con: sqlite3.Connection, session_id: str, extra: Alongside) -> None:
        """An append's companions (``store/alongside.py``), in its transaction."""
        if extra.metadata:
            (stored,) = con.execute(
                "SELECT metadata FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            con.execute(
                "UPDATE sessions SET metadata = ? WHERE id = ?",
                (json.dumps(extra.merged(json.loads(stored))), session_id),
            )
        pad = extra.pad(session_id)
        if pad != session_id:
            self._require(con, pad)
        if extra.scratchpad:
            _put_entries(con, pad, extra.scratchpad, keep_existing=False)

    def _stored_copies(self, con: sqlite3.Connection, batch: Appending) -> list[Message]:
        out = []
        for mid in batch.ids:
            row = con.execute(
                "SELECT seq, body FROM messages WHERE session_id = ? AND id = ?",
                (batch.session_id, mid),
            ).fetchone()
            if row is None:
                raise batch.partly_stored(mid)
            decoded = decode_message(batch.session_id, row[0], row[1])
            if decoded is not None:
                out.append(decoded)
        return out

    def _tail_range(self, session_id: str, limit: int, before_seq: int | None) -> list[Message]:
        with self._read() as con:
            rows = con.execute(
                "SELECT seq, body FROM messages WHERE session_id = ? AND seq < ? "
                "ORDER BY seq DESC LIMIT ?",
                (session_id, MAX_BOUND + 1 if before_seq is None else before_seq, limit),
            ).fetchall()
            if not rows:
                self._require(con, session_id)
        return decode_rows(session_id, rows)

    def _read_range(self, session_id: str, after_seq: int, limit: int | None) -> list[Message]:
        with self._read() as con:
            rows = con.execute(
                "SELECT seq, body FROM messages WHERE session_id = ? AND seq > ? "
                "ORDER BY seq LIMIT ?",
                (session_id, after_seq, -1 if limit is None else limit),
            ).fetchall()
            if not rows:
                self._require(con, session_id)
        return decode_rows(session_id, rows)

    def session_bytes(self, session_id: str) -> int:
        """Stored size of the session's messages, for retention's storage cap."""
        with self._read() as con:
            self._require(con, session_id)
            row = con.execute(
                "SELECT COALESCE(SUM(length(CAST(body AS BLOB))), 0) FROM messages "
                "WHERE session_id = ?",
                (session_id,),
            ).fetchone()
        return int(row[0])

    def _require(self, con: sqlite3.Connection, session_id: str) -> None:
        if not con.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone():
            raise SessionNotFound(session_id)

    # -- checkpoints ------------------------------------------------------------

    def _add_checkpoint(self, new: Checkpoint, expect_previous: ExpectPrevious) -> Checkpoint:
        session_id = new.session_id
        with self._write() as con:  # BEGIN IMMEDIATE: the check and the insert are one step
            head = con.execute(
                "SELECT last_seq FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if head is None:
                raise SessionNotFound(session_id)
            row = con.execute(
                CHECKPOINT_SELECT + " WHERE session_id = ? ORDER BY id DESC LIMIT 1", (session_id,)
            ).fetchone()
            latest = checkpoint_from_row(row) if row is not None else None
            stored = check_checkpoint(
                new, last_seq=head[0], latest=latest, expect_previous=expect_previous
            )
            if stored is not None:
                return stored
            cur = con.execute(
                "INSERT INTO checkpoints (session_id, covers_up_to, summary, created_at, metadata) "
                "VALUES (?, ?, ?, ?, ?)",
                (
                    session_id,
                    new.covers_up_to,
                    new.summary,
                    format_ts(new.created_at),
                    json.dumps(new.metadata),
                ),
            )
            cid = int(cur.lastrowid or 0)
        return new.replace(id=cid)

    def latest_checkpoint(self, session_id: str) -> Checkpoint | None:
        with self._read() as con:
            row = con.execute(
                CHECKPOINT_SELECT + " WHERE session_id = ? ORDER BY id DESC LIMIT 1", (session_id,)
            ).fetchone()
            if row is None:
                self._require(con, session_id)
                return None
        return checkpoint_from_row(row)

    def list_checkpoints(self, session_id: str) -> list[Checkpoint]:
        with self._read() as con:
            rows = con.execute(
                CHECKPOINT_SELECT + " WHERE session_id = ? ORDER BY id", (session_id,)
            ).fetchall()
            if not rows:
                self._require(con, session_id)
        return [checkpoint_from_row(r) for r in rows]

    # -- scratchpad and memo ----------------------------------------------------

    def _scratchpad_write(self, session_id: str, name: str, content: str) -> ScratchpadEntry:
        now = format_ts(utcnow())
        with self._write() as con:
            self._require(con, session_id)
            con.execute(
                "INSERT INTO scratchpad (session_id, name, content, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, name) DO UPDATE SET "
                "content = excluded.content, updated_at = excluded.updated_at",
                (session_id, name, content, now, now),
            )
        entry = self.scratchpad_read(session_id, name)
        assert entry is not None
        return entry

    def scratchpad_read(self, session_id: str, name: str) -> ScratchpadEntry | None:
        with self._read() as con:
            row = con.execute(
                ENTRY_SELECT + " WHERE session_id = ? AND name = ?",
                (session_id, name),
            ).fetchone()
            if row is None:
                self._require(con, session_id)
                return None
        return entry_from_row(row)

    def _select_entries(
        self, session_id: str, condition: str, args: tuple[str | int, ...]
    ) -> list[ScratchpadEntry]:
        query = f"{ENTRY_SELECT} WHERE session_id = ?{condition}"
        return [
            entry_from_row(r) for r in self._select_rows(session_id, query, (session_id, *args))
        ]

    def _select_ranges(
        self, session_id: str, ranges: list[tuple[str, str]]
    ) -> list[tuple[str, str]]:
        # one SELECT a range, joined by UNION ALL: an OR of them would have SQLite read
        # every entry of the session; and a row of NULLs when the session does not
        # exist, so no second statement tells a missing session from one without them
        args = [a for low, high in ranges for a in (session_id, low, high)]
        with self._read() as con:
            rows: list[tuple[str, str]] = con.execute(
                _ranges_query(len(ranges)), (*args, session_id)
            ).fetchall()
        for row in rows:
            if row[0] is None:
                raise SessionNotFound(session_id)
        return rows

    def _select_rows(self, session_id: str, query: str, args: tuple[str | int, ...]) -> list[Any]:
        with self._read() as con:
            rows = con.execute(query, args).fetchall()
            if not rows:
                self._require(con, session_id)
        return rows

    def _scratchpad_write_many(
        self, session_id: str, entries: dict[str, str], keep_existing: bool
    ) -> None:
        with self._write() as con:
            try:  # a missing session fails the foreign key: no lookup first
                _put_entries(con, session_id, entries, keep_existing=keep_existing)
            except sqlite3.IntegrityError:
                self._require(con, session_id)
                raise

    def scratchpad_delete(self, session_id: str, name: str) -> bool:
        with self._write() as con:
            self._require(con, session_id)
            cur = con.execute(
                "DELETE FROM scratchpad WHERE session_id = ? AND name = ?", (session_id, name)
            )
        return cur.rowcount > 0

    def get_memo(self, session_id: str) -> dict[str, Any]:
        with self._read() as con:
            row = con.execute("SELECT memo FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        memo: dict[str, Any] = json.loads(row[0])
        return memo

    def _memos(self, session_ids: list[str]) -> dict[str, dict[str, Any]]:
        with self._read() as con:
            rows = con.execute(
                "SELECT id, memo FROM sessions WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(session_ids),),
            ).fetchall()
        return {r[0]: json.loads(r[1]) for r in rows}

    def set_memo(self, session_id: str, memo: dict[str, Any]) -> None:
        text = json.dumps(memo)
        with self._write() as con:
            cur = con.execute("UPDATE sessions SET memo = ? WHERE id = ?", (text, session_id))
            if cur.rowcount == 0:
                raise SessionNotFound(session_id)

    def _swap_memo(
        self, session_id: str, decide: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> bool:
        with self._write() as con:  # BEGIN IMMEDIATE: compare and set in one step
            row = con.execute("SELECT memo FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise SessionNotFound(session_id)
            memo = decide(json.loads(row[0]))
            if memo is None:
                return False
            con.execute("UPDATE sessions SET memo = ? WHERE id = ?", (json.dumps(memo), session_id))
        return True

    # -- locks ------------------------------------------------------------------

    def _swap_lock(
        self, session_id: str, decide: Callable[[LockHolder | None], LockHolder | None]
    ) -> LockHolder | None:
        with self._write() as con:
            row = con.execute("SELECT lock FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise SessionNotFound(session_id)
            current = stored_holder(session_id, row[0])
            new = decide(current)
            if new is not current:
                con.execute(
                    "UPDATE sessions SET lock = ? WHERE id = ?",
                    (new.to_json() if new else None, session_id),
                )
        return new

    def lock_holder(self, session_id: str) -> LockHolder | None:
        with self._read() as con:
            row = con.execute("SELECT lock FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return stored_holder(session_id, row[0])

    # -- search -----------------------------------------------------------------

    def search(self, query: str, **options: Unpack[SearchOptions]) -> SearchPage:
        """FTS5 finds the rows (the whole parsed query, see ``fts5_query``); the filters,
        the order and the page are SQL; snippets are made for the page only."""
        request = search_request(query, **options)
        q, f, limit, offset = request.query, request.filters, request.limit, request.offset
        if not q.groups:
            return request.nothing()
        match = fts5_query(q)
        where, args = _search_where(f)
        if not self.read_only and self._damage is None:
            # every message appended so far is found: indexed here, or when the index
            # cannot be written now (busy, read-only file), in a temporary one below
            with contextlib.suppress(StoreUnavailable):
                self.update_search_index()
        with self._read() as con:
            con.execute("BEGIN")  # one snapshot for the marker, the backlog and the queries
            try:
                with self._interrupted_after(con, self.search_timeout):
                    hits = _HITS.format(schema="main", table="messages_fts")
                    matches = [match]
                    marker = con.execute("SELECT indexed_upto FROM search_index").fetchone()[0]
                    if self._index_temporarily(con, marker):
                        hits += " UNION ALL " + _HITS.format(schema="temp", table="pending_fts")
                        matches.append(match)
                    found = (
                        f"FROM ({hits}) h JOIN messages m ON m.rowid = h.rowid "
                        f"JOIN sessions s ON s.id = m.session_id WHERE 1{where}"
                    )
                    total = con.execute(f"SELECT count(*) {found}", [*matches, *args]).fetchone()[0]
                    rows = con.execute(
                        f"SELECT m.session_id, m.seq, m.role, s.agent, m.body, s.parent_id "
                        f"{found} ORDER BY m.created_at DESC, m.session_id, m.seq DESC "
                        "LIMIT ? OFFSET ?",
                        [*matches, *args, limit, offset],
                    ).fetchall()
            finally:
                con.execute("COMMIT")
        return SearchPage(
            (hit_from_body(r[0], r[1], r[2], r[3], r[4], q, r[5]) for r in rows),
            total=total,
            offset=offset,
        )

    @contextlib.contextmanager
    def _interrupted_after(self, con: sqlite3.Connection, seconds: float) -> Iterator[None]:
        """Statements run in the block are interrupted after ``seconds`` (SQLite calls the
        progress handler every ``PROGRESS_STEPS`` instructions) and the search fails as a
        timed-out PostgreSQL one does."""
        deadline = time.monotonic() + seconds
        con.set_progress_handler(lambda: int(time.monotonic() > deadline), PROGRESS_STEPS)
        try:
            yield
        except sqlite3.OperationalError as exc:
            if time.monotonic() > deadline and "interrupt" in str(exc):
                raise search_timed_out(f"SQLite store {self.path}", seconds, "SQLite") from exc
            raise
        finally:
            con.set_progress_handler(None, 0)

    def _index_temporarily(self, con: sqlite3.Connection, marker: int) -> bool:
        """Index the messages above ``marker`` in a temporary table, for a search on a
        handle that cannot bring the index up to date (read-only, or it met damage) or
        that raced an append; whether there were any."""
        if not con.execute("SELECT 1 FROM messages WHERE rowid > ? LIMIT 1", (marker,)).fetchone():
            return False
        con.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.pending_fts USING fts5 (text, {FTS_OPTIONS})"
        )
        con.execute("INSERT INTO temp.pending_fts (pending_fts) VALUES ('delete-all')")
        con.execute(
            f"INSERT INTO temp.pending_fts (rowid, text) "
            f"SELECT rowid, {INDEX_TEXT_FUNCTION}(body) FROM messages WHERE rowid > ?",
            (marker,),
        )
        return True

    def update_search_index(self) -> int:
        """Index the messages appended since the index last caught up, in one statement
        and one transaction; returns how many. Searches call it first, and ``close``;
        appends only past ``MAX_INDEX_BACKLOG``, so they cost plain inserts. Nothing to do
        costs one read."""
        if self.read_only:
            return 0
        with self._read() as con:
            marker, top = con.execute(_INDEX_STATE).fetchone()
        if top <= marker:
            return 0
        with self._write() as con:
            return self._index_pending(con)

    def index_backlog(self) -> int:
        """Messages stored but not yet in the full-text index (searches still find them)."""
        with self._read() as con:
            return int(
                con.execute(
                    "SELECT count(*) FROM messages "
                    "WHERE rowid > (SELECT indexed_upto FROM search_index)"
                ).fetchone()[0]
            )

    def _index_pending(self, con: sqlite3.Connection) -> int:
        """Inside a write transaction: index every row above the marker from its body,
        in one statement, then move the marker."""
        marker, top = con.execute(_INDEX_STATE).fetchone()
        if top <= marker:
            return 0
        indexed = con.execute(_INDEX_FROM_BODIES + " WHERE rowid > ?", (marker,)).rowcount
        con.execute("UPDATE search_index SET indexed_upto = ?", (top,))
        return max(indexed, 0)


def _index_text_sql(body: str) -> str:
    """``body_fts_text`` for SQL: never raises (an exception would abort the statement,
    a delete among them), and the same body always gives the same text."""
    try:
        return body_fts_text(body)
    except Exception:  # a body that is not text: nothing to index, every time
        return ""


def _search_where(f: SearchFilters) -> tuple[str, list[Any]]:
    where, args = f" AND {retraction.SQLITE_SHOWN}", []
    for column, value in (
        ("s.agent", f.agent),
        ("s.model", f.model),
        ("m.role", f.role),
        ("m.session_id", f.session_id),
    ):
        if value is not None:
            where += f" AND {column} = ?"
            args.append(value)
    if f.since is not None:
        where += " AND m.created_at >= ?"
        args.append(format_ts(f.since))
    if f.until is not None:
        where += " AND m.created_at < ?"
        args.append(format_ts(f.until))
    return where, args


_INDEX_STATE = (
    "SELECT indexed_upto, (SELECT COALESCE(MAX(rowid), 0) FROM messages) FROM search_index"
)
_INDEX_FROM_BODIES = (
    f"INSERT INTO messages_fts (rowid, text) SELECT rowid, {INDEX_TEXT_FUNCTION}(body) "
    "FROM messages"
)
_HITS = "SELECT rowid FROM {schema}.{table} WHERE {table} MATCH ?"
_APPEND_HEAD = (
    "SELECT last_seq, created_at, (SELECT indexed_upto FROM search_index), "
    "(SELECT COALESCE(MAX(rowid), 0) FROM messages), "
    "EXISTS (SELECT 1 FROM messages WHERE session_id = ?1 AND id = ?2) "
    "FROM sessions WHERE id = ?1"
)
"""What an append reads first: the session's end, the index marker, the top rowid and
whether the batch's first id is stored already."""
_MARK_HEAD = "SELECT last_seq, created_at, 0, 0, ?2 IS NOT NULL FROM sessions WHERE id = ?1"
"""The same for a batch of no messages (companions on a mark): the session's end alone."""
_RANGE_SQL = "SELECT name, content FROM scratchpad WHERE session_id = ? AND name >= ? AND name < ?"
_NO_SESSION_SQL = "SELECT NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM sessions WHERE id = ?)"


@functools.lru_cache(maxsize=64)
def _ranges_query(count: int) -> str:
    """``_select_ranges``' query of ``count`` ranges (made once a count)."""
    return " UNION ALL ".join([_RANGE_SQL] * count + [_NO_SESSION_SQL])


class _Reading:
    """``SQLiteStore._read``: what ``_translate`` and the lock do, as a class (a read of
    a few rows is a few microseconds; two generator context managers were as many)."""

    __slots__ = ("store",)

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def __enter__(self) -> sqlite3.Connection:
        self.store._lock.acquire()
        return self.store._con

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        self.store._lock.release()
        if exc is not None:
            _raise_ours(self.store, exc)


class _Writing:
    """``SQLiteStore._write`` as a class, as ``_Reading`` is (each write of one
    LangGraph ``put_writes`` went through two generator context managers)."""

    __slots__ = ("store",)

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def __enter__(self) -> sqlite3.Connection:
        store = self.store
        store._lock.acquire()
        try:
            store._con.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            store._lock.release()
            _raise_ours(store, exc)
            raise
        return store._con

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        store = self.store
        try:
            store._con.execute("COMMIT" if exc is None else "ROLLBACK")
        except BaseException as failed:
            _raise_ours(store, failed)
            raise
        finally:
            store._lock.release()
        if exc is not None:
            _raise_ours(store, exc)


def _raise_ours(store: SQLiteStore, exc: BaseException) -> None:
    """What ``_translate`` does: a driver error raised as ours (from it); anything
    else is left to go on as it is."""
    if isinstance(exc, Exception) and not isinstance(exc, ThreadlineError):
        ours = store._driver_error(exc)
        if ours is not None:
            raise ours from exc


def _put_entries(
    con: sqlite3.Connection, session_id: str, entries: dict[str, str], *, keep_existing: bool
) -> None:
    """Scratchpad entries in the caller's transaction, ``ENTRIES_A_STATEMENT`` rows a
    statement (each statement a step, each step a release of the GIL, which a busy
    thread beside may keep for its switch interval); ``keep_existing`` leaves the
    entries that exist as they are."""
    now = format_ts(utcnow())
    update = (
        "NOTHING"
        if keep_existing
        else "UPDATE SET content = excluded.content, updated_at = excluded.updated_at"
    )
    items = list(entries.items())
    for start in range(0, len(items), ENTRIES_A_STATEMENT):
        chunk = items[start : start + ENTRIES_A_STATEMENT]
        con.execute(
            "INSERT INTO scratchpad (session_id, name, content, created_at, updated_at) "
            f"VALUES {', '.join(['(?, ?, ?, ?, ?)'] * len(chunk))} "
            f"ON CONFLICT (session_id, name) DO {update}",
            [v for name, content in chunk for v in (session_id, name, content, now, now)],
        )


ENTRIES_A_STATEMENT = 199
"""Rows of one scratchpad insert: 995 parameters, under the 999 an older SQLite allows."""
