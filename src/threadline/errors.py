"""Every error threadline raises, in one family.

Library code raises these with messages a user can act on; only the CLI turns
them into one-line errors and exit codes (``exit_code`` on each class).

    ThreadlineError
    ├── UsageError                  the API or CLI was used wrongly (exit 2)
    │   ├── InvalidSessionId        an id that could reach a path or query unchecked
    │   ├── InvalidMessage          a message that cannot be stored as given
    │   │   └── MessageTooLarge
    │   ├── AmbiguousSessionId      a prefix that matches several sessions
    │   └── NotOwned                a framework face reaching a session it did not create
    ├── ConfigError                 a bad agent file, policy or setting (exit 2)
    │   ├── SkillError              a skill folder or SKILL.md that cannot be used
    │   └── UnknownModel            a model string no provider can serve (exit 11)
    ├── ImportFormatError           a file to import is malformed (exit 2)
    │   └── ImportTooLarge          larger than the import size limit
    ├── SessionNotFound             (exit 3)
    ├── SessionExists               (exit 2)
    ├── SessionLocked               another live process is attached (exit 4)
    ├── CompactionInProgress        another process is compacting (exit 4)
    │   └── CheckpointConflict      the checkpoint to build on is no longer the latest
    ├── ContextOverflow             even the protected messages do not fit (exit 5)
    ├── NotSupported                a backend lacks an optional ability (exit 6)
    ├── ModelError                  a chat model provider failed (exit 7)
    │   ├── ContextLengthExceeded   the provider said the prompt was too long
    │   └── MissingCredentials      no API key in the environment
    ├── PortUnavailable             the server's port is taken or not permitted (exit 9)
    ├── HostUnavailable             the server's host is no address of this machine (exit 10)
    └── StoreError                  the storage itself is unusable (exit 8)
        ├── StoreUnavailable        cannot open / connect / write
        ├── StoreNotFound           nothing at the URL, and the caller asked not to create it
        ├── StoreDamaged            a threadline store whose storage is damaged
        ├── NotAThreadlineStore     the file or database belongs to something else
        ├── SchemaTooNew            written by a newer threadline
        └── CorruptRecord           a stored record cannot be read (with where)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError


class ThreadlineError(Exception):
    """Base of every error threadline raises."""

    exit_code = 1


class UsageError(ThreadlineError, ValueError):
    """The API or the CLI was used wrongly; fix the call, not the data."""

    exit_code = 2


class InvalidSessionId(UsageError):
    """A session id, agent name or prefix that fails validation."""


class InvalidMessage(UsageError):
    """A message that cannot be stored as given (bad UTF-8, bad shape)."""


class MessageTooLarge(InvalidMessage):
    """A single message over the size limit (64 MiB serialised)."""


class AmbiguousSessionId(UsageError):
    """A prefix that matches more than one session."""

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        shown = ", ".join(candidates[:5]) + (" ..." if len(candidates) > 5 else "")
        super().__init__(
            f"session id prefix {prefix!r} is ambiguous: "
            f"matches {len(candidates)} sessions ({shown})"
        )
        self.prefix = prefix
        self.candidates = candidates


class ConfigError(ThreadlineError):
    """A configuration file, policy or setting is invalid."""

    exit_code = 2


class SkillError(ConfigError):
    """A skill folder or its ``SKILL.md`` is unusable; the message names the file."""


class UnknownModel(ConfigError):
    """A model string that cannot be resolved: no provider serves it, or its provider
    lacks what it needs (a base URL, an SDK). ``threadline serve`` refuses one at
    start, and a prompt that names one is refused (400) before anything is stored."""

    exit_code = 11


class ImportFormatError(ThreadlineError):
    """A file to import is malformed; names the line when there is one."""

    exit_code = 2

    def __init__(self, message: str, *, line: int | None = None, path: str | None = None) -> None:
        where = ""
        if path is not None:
            where += f"{path}"
        if line is not None:
            where += f"{':' if where else 'line '}{line}"
        super().__init__(f"{where}: {message}" if where else message)
        self.line = line
        self.path = path


class SourceChanged(ImportFormatError):
    """A source imported before no longer begins with what was imported (a record edited
    or gone): refused, or imported as a new version when asked (``--new-version``)."""


class ImportTooLarge(ImportFormatError):
    """A file or stream to import is larger than the limit it is read up to: an import
    is held in memory whole, so ``/dev/zero`` or a runaway pipe must not be read on."""


class SessionNotFound(ThreadlineError, KeyError):
    exit_code = 3

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session not found: {session_id}")
        self.session_id = session_id

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class SessionExists(ThreadlineError):
    exit_code = 2

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session already exists: {session_id}")
        self.session_id = session_id


class NotOwned(UsageError):
    """A framework face (a LangGraph thread, a LangChain history, an ADK session...)
    reaching a session that another face, another key or no face created."""

    def __init__(self, session_id: str, face: str, key: str, owner: str) -> None:
        super().__init__(
            f"session {session_id} belongs to {owner}, not to {face} {key!r}: a framework "
            "face opens only the sessions it created for its key"
        )
        self.session_id = session_id


class SessionHasForks(UsageError):
    """Deleting a session whose forks read their shared history from it."""

    def __init__(self, session_id: str, forks: list[str]) -> None:
        shown = ", ".join(forks[:5]) + (f" and {len(forks) - 5} more" if len(forks) > 5 else "")
        super().__init__(
            f"session {session_id} has {len(forks)} fork{'s' if len(forks) != 1 else ''} "
            f"({shown}) that share its history; delete them first, or pass --force "
            "to delete them with it"
        )
        self.session_id = session_id
        self.forks = forks


class SessionLocked(ThreadlineError):
    """Another live process holds the session's attach lock."""

    exit_code = 4

    def __init__(self, session_id: str, holder: Any) -> None:
        super().__init__(
            f"session {session_id} is locked by {holder} "
            "(another process is attached; close it or wait for its lock to expire)"
        )
        self.session_id = session_id
        self.holder = holder


class SessionChanged(ThreadlineError):
    """A write made on what a writer last knew of a session (``Mark``) found the
    session changed since (appended to, or deleted and made again): nothing was
    written; read the session again and redo the write."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id} changed since it was read; nothing written")
        self.session_id = session_id


class CompactionInProgress(ThreadlineError):
    exit_code = 4


class CheckpointConflict(CompactionInProgress):
    """A checkpoint was to follow one that is no longer the session's latest (or would
    not cover more than it): another compaction got there first, so this one's work is
    discarded rather than moving the session's checkpoints backwards."""

    def __init__(self, message: str, *, expected: int | None, latest: int | None) -> None:
        super().__init__(message)
        self.expected = expected
        self.latest = latest


class ContextOverflow(ThreadlineError):
    """Even the protected messages do not fit after emergency truncation."""

    exit_code = 5

    def __init__(self, message: str, *, needed: int, budget: int) -> None:
        super().__init__(message)
        self.needed = needed
        self.budget = budget
        self.over_by = needed - budget


class NotSupported(ThreadlineError):
    """An optional ability (search, TTL, ...) that this backend does not have."""

    exit_code = 6


class ModelError(ThreadlineError):
    """A chat model provider failed after retries."""

    exit_code = 7


class ContextLengthExceeded(ModelError):
    """The provider rejected the request as longer than the model's window."""


class MissingCredentials(ModelError):
    """The API key a provider needs is not set."""


class PortUnavailable(ThreadlineError):
    """``threadline serve`` cannot bind its port: another process listens on it, or
    binding it is not permitted."""

    exit_code = 9


class HostUnavailable(ThreadlineError):
    """``threadline serve`` cannot bind its host: the name does not resolve, or the
    address is not one of this machine's."""

    exit_code = 10


class StoreError(ThreadlineError):
    exit_code = 8


class StoreUnavailable(StoreError):
    """The store cannot be opened, reached or written."""


class StoreNotFound(StoreError):
    """No store at the URL, and it was opened not to create one (read commands: a
    typo in ``--store`` must not leave an empty store and directories behind)."""


class StoreDamaged(StoreError):
    """A threadline store whose storage is damaged (torn or overwritten pages, a cut
    file): distinct from a file that was never a store. ``threadline doctor`` names
    what is still readable and ``--salvage`` copies it to a new store."""

    def __init__(self, problem: str, *, hint: str | None = None) -> None:
        super().__init__(f"{problem}; {hint}" if hint else problem)
        self.problem = problem
        self.hint = hint


class NotAThreadlineStore(StoreError):
    """The file or database at the URL was not made by threadline."""


class SchemaTooNew(StoreError):
    """The store was written by a newer threadline; upgrade to open it."""


class CorruptRecord(StoreError):
    """A stored record cannot be decoded; says where it is."""

    def __init__(self, message: str, *, where: str | None = None) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where


MAX_SHOWN_INPUT = 60
"""Characters of a refused input quoted when a pydantic error is reworded."""


def validation_problems(exc: ValidationError) -> str:
    """pydantic's errors as one line naming each field and the value it refused.

    Models that callers build directly (``Message``, ``ContextPolicy``) turn their
    ``ValidationError`` into one of ours with this text, so the error tree holds.
    """
    problems: list[str] = []
    for error in exc.errors():
        loc = ".".join(str(p) for p in error["loc"])
        text = str(error["msg"]).removeprefix("Value error, ")
        if loc and error["type"] not in ("missing", "extra_forbidden"):
            got = repr(error["input"])
            if len(got) > MAX_SHOWN_INPUT:
                got = got[:MAX_SHOWN_INPUT] + "..."
            text += f" (got {got})"
        problems.append(f"{loc}: {text}" if loc else text)
    return "; ".join(dict.fromkeys(problems))


MAX_SHOWN_FIELD_INPUT = 100
"""Characters of `` (got X)`` shown per problem when a whole file is reported."""


def file_validation_error(
    exc: ValidationError, source: str, *, what: str, unknown_field: str
) -> str:
    """pydantic's errors for a file a user wrote, one problem a line:
    ``file: field.path: what is expected (got X)``; several under ``file: invalid {what}``.

    The agent file and the settings file report their errors alike through this;
    ``unknown_field`` is what a misspelled key is told (it points at that file's reference).
    """
    lines = []
    for error in exc.errors():
        loc = ".".join(str(p) for p in error["loc"]) or "(top level)"
        message = str(error["msg"])
        if error["type"] == "extra_forbidden":
            message = unknown_field
        elif message.startswith("Value error, "):
            message = message.removeprefix("Value error, ")
        got = error.get("input")
        shown = "" if error["type"] in ("missing", "extra_forbidden") else f" (got {got!r})"
        if len(shown) > MAX_SHOWN_FIELD_INPUT:
            shown = shown[: MAX_SHOWN_FIELD_INPUT - 3] + "...)"
        lines.append(f"{loc}: {message}{shown}")
    if len(lines) == 1:
        return f"{source}: {lines[0]}"
    return f"{source}: invalid {what}\n  " + "\n  ".join(lines)
