"""The server's operations, independent of the wire: ``session.*`` and ``agent.prompt``.

Each procedure takes a validated input model and returns JSON-ready data; the
tRPC-style routes (``/trpc/<name>``) and the REST routes (``/v1``) both call
them, so the two formats cannot drift apart. Field names are camelCase, as a
TypeScript tRPC client expects. ``ERRORS`` maps the library's errors to a tRPC
code, which names the HTTP status.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from threadline.agent import Calibrator
from threadline.errors import (
    CompactionInProgress,
    ConfigError,
    ContextOverflow,
    ModelError,
    NotSupported,
    SessionExists,
    SessionHasForks,
    SessionLocked,
    SessionNotFound,
    StoreUnavailable,
    ThreadlineError,
    UsageError,
)
from threadline.messages import FilePart, Message, TextPart
from threadline.report.context import SessionContext, session_context
from threadline.server.config import (
    DEFAULT_MESSAGE_PAGE,
    MAX_FILES,
    MAX_PROMPT_CHARS,
    ServerConfig,
)
from threadline.server.events import ENDS_STREAM, EventHub
from threadline.server.hooks import HookDispatcher
from threadline.server.runner import AgentRunner, SessionBusy, TurnInProgress, holder_name
from threadline.server.search_gate import SearchGate, TooManySearches
from threadline.server.shared_events import SharedHub
from threadline.session_agent import session_agent
from threadline.store import fork
from threadline.store.checks import (
    DEFAULT_AGENT,
    DEFAULT_PAGE_SIZE,
    MAX_BOUND,
    MAX_MODEL_LENGTH,
    MAX_PAGE_SIZE,
    MAX_SEARCH_QUERY_LENGTH,
    SESSION_ID_PATTERN,
)
from threadline.store.protocol import Session, Store
from threadline.store.session_info import SessionInfo

logger = logging.getLogger(__name__)

NAME_PATTERN: Final = SESSION_ID_PATTERN.replace(r"\Z", "$")
"""Worker, workspace and agent ids follow the session id rule (invariant 6); pydantic's
regex engine has no end-of-text escape, and its ``$`` matches only at the very end."""
MODEL_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:-]*/[^\s/][^\s]{0,250}$"
MAX_TITLE = 500
MAX_FILE_REF = 1024
WORKER_KEY = "workerId"
WORKSPACE_KEY = "workspaceId"


# -- errors --------------------------------------------------------------------------


class ProcedureError(ThreadlineError):
    """An error with its tRPC code and HTTP status, raised by the wire layer itself."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = TRPC_HTTP_STATUS[code]


ERRORS: Final[tuple[tuple[type[Exception], str], ...]] = (
    (SessionNotFound, "NOT_FOUND"),
    (TooManySearches, "TOO_MANY_REQUESTS"),
    (SessionHasForks, "CONFLICT"),
    (UsageError, "BAD_REQUEST"),
    (ConfigError, "BAD_REQUEST"),
    (TurnInProgress, "CONFLICT"),
    (SessionLocked, "CONFLICT"),
    (SessionExists, "CONFLICT"),
    (CompactionInProgress, "CONFLICT"),
    (ContextOverflow, "UNPROCESSABLE_CONTENT"),
    (NotSupported, "NOT_IMPLEMENTED"),
    (ModelError, "BAD_GATEWAY"),
    (StoreUnavailable, "SERVICE_UNAVAILABLE"),
)
"""First match wins: (error class, tRPC code); the HTTP status is the code's
(``TRPC_HTTP_STATUS``)."""


def classify(exc: Exception) -> tuple[str, int, str]:
    """(code, status, message) for an error; unknown ones are 500 with a generic message."""
    if isinstance(exc, ProcedureError):
        return exc.code, exc.status, str(exc)
    if isinstance(exc, ValidationError):
        return "BAD_REQUEST", 400, validation_message(exc.errors())
    for kind, code in ERRORS:
        if isinstance(exc, kind):
            message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
            return code, TRPC_HTTP_STATUS[code], message
    logger.error("internal error: %s", exc, exc_info=exc)
    return "INTERNAL_SERVER_ERROR", 500, f"internal error ({type(exc).__name__})"


def validation_message(errors: Sequence[Mapping[str, Any]]) -> str:
    """Pydantic's errors as one line: ``field: problem; ...`` (the first five)."""
    parts = []
    for err in errors[:5]:
        where = ".".join(str(x) for x in err.get("loc", ()) if x not in ("body", "query"))
        parts.append(f"{where or 'input'}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid input"


TRPC_ERROR_CODES: Final[Mapping[str, int]] = {
    "PARSE_ERROR": -32700,
    "BAD_REQUEST": -32600,
    "INTERNAL_SERVER_ERROR": -32603,
    "NOT_IMPLEMENTED": -32603,
    "BAD_GATEWAY": -32603,
    "SERVICE_UNAVAILABLE": -32603,
    "GATEWAY_TIMEOUT": -32603,
    "UNAUTHORIZED": -32001,
    "PAYMENT_REQUIRED": -32002,
    "FORBIDDEN": -32003,
    "NOT_FOUND": -32004,
    "METHOD_NOT_SUPPORTED": -32005,
    "TIMEOUT": -32008,
    "CONFLICT": -32009,
    "PRECONDITION_FAILED": -32012,
    "PAYLOAD_TOO_LARGE": -32013,
    "UNSUPPORTED_MEDIA_TYPE": -32015,
    "UNPROCESSABLE_CONTENT": -32022,
    "PRECONDITION_REQUIRED": -32028,
    "TOO_MANY_REQUESTS": -32029,
    "CLIENT_CLOSED_REQUEST": -32099,
}
"""tRPC v11's ``TRPC_ERROR_CODES_BY_KEY``: the JSON-RPC 2.0 number a client reads in
``error.code`` (``@trpc/client`` refuses an error whose code is not a number)."""

TRPC_HTTP_STATUS: Final[Mapping[str, int]] = {
    "PARSE_ERROR": 400,
    "BAD_REQUEST": 400,
    "UNAUTHORIZED": 401,
    "PAYMENT_REQUIRED": 402,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "METHOD_NOT_SUPPORTED": 405,
    "TIMEOUT": 408,
    "CONFLICT": 409,
    "PRECONDITION_FAILED": 412,
    "PAYLOAD_TOO_LARGE": 413,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "UNPROCESSABLE_CONTENT": 422,
    "PRECONDITION_REQUIRED": 428,
    "TOO_MANY_REQUESTS": 429,
    "CLIENT_CLOSED_REQUEST": 499,
    "INTERNAL_SERVER_ERROR": 500,
    "NOT_IMPLEMENTED": 501,
    "BAD_GATEWAY": 502,
    "SERVICE_UNAVAILABLE": 503,
    "GATEWAY_TIMEOUT": 504,
}
"""tRPC v11's ``JSONRPC2_TO_HTTP_CODE`` (``getHTTPStatusCodeFromError``): each name's status."""


def code_for_status(status: int) -> str:
    """tRPC's name for an HTTP status (``HTTP_CODE_TO_JSONRPC2``); 500's for one it lacks."""
    for code, known in TRPC_HTTP_STATUS.items():
        if known == status:
            return code
    return "INTERNAL_SERVER_ERROR"


def error_body(
    code: str,
    status: int,
    message: str,
    path: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """tRPC v11's error shape, on every route (tRPC and REST alike): ``{"error":
    {"message", "code": <JSON-RPC number>, "data": {"code": <name>, "httpStatus",
    "path"?, ...}}}``; ``path`` is the procedure's name."""
    data: dict[str, Any] = {"code": code, "httpStatus": status, **(extra or {})}
    if path is not None:
        data["path"] = path
    return {"error": {"message": message, "code": TRPC_ERROR_CODES[code], "data": data}}


def error_extra(exc: Exception) -> dict[str, Any]:
    """What a client can act on beyond the message: who holds a busy session."""
    if isinstance(exc, SessionLocked):
        return {"holder": holder_name(exc.holder)}
    return {}


# -- inputs ------------------------------------------------------------------------------


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


SessionId = Field(pattern=NAME_PATTERN, max_length=128)


class CreateInput(_Input):
    workerId: str = Field(pattern=NAME_PATTERN, max_length=128)
    workspaceId: str = Field(pattern=NAME_PATTERN, max_length=128)
    agent: str | None = Field(default=None, pattern=NAME_PATTERN, max_length=128)
    title: str | None = Field(default=None, max_length=MAX_TITLE)


class ListInput(_Input):
    workspaceId: str | None = Field(default=None, pattern=NAME_PATTERN, max_length=128)
    agent: str | None = Field(default=None, pattern=NAME_PATTERN, max_length=128)
    limit: int = Field(default=DEFAULT_PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE)
    offset: int = Field(default=0, ge=0, le=MAX_BOUND)


class SearchInput(_Input):
    q: str = Field(min_length=1, max_length=MAX_SEARCH_QUERY_LENGTH)
    """Words to find (full-text, every backend's rule: ``store.checks.search_words``)."""
    sessionId: str | None = Field(default=None, pattern=NAME_PATTERN, max_length=128)
    agent: str | None = Field(default=None, pattern=NAME_PATTERN, max_length=128)
    role: Literal["system", "user", "assistant", "tool"] | None = None
    limit: int = Field(default=DEFAULT_PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE)
    offset: int = Field(default=0, ge=0, le=MAX_BOUND)


class GetInput(_Input):
    sessionId: str = SessionId
    limit: int = Field(default=DEFAULT_MESSAGE_PAGE, ge=1, le=MAX_PAGE_SIZE)
    beforeSeq: int | None = Field(default=None, ge=1, le=MAX_BOUND)
    """Messages with seq below this (the previous page's ``nextBeforeSeq``); newest if unset."""


class RenameInput(_Input):
    sessionId: str = SessionId
    title: str | None = Field(max_length=MAX_TITLE)
    """``""`` or null clears the title."""


class DeleteInput(_Input):
    sessionId: str = SessionId


class CancelInput(_Input):
    sessionId: str = SessionId


class PromptBody(_Input):
    """``agent.prompt``'s input without the session id (REST has it in the path)."""

    text: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    model: str | None = Field(default=None, pattern=MODEL_PATTERN, max_length=MAX_MODEL_LENGTH)
    files: list[str] = Field(default_factory=list, max_length=MAX_FILES)
    """Paths or URIs the turn should look at, stored as file parts of the user message."""


class PromptInput(PromptBody):
    sessionId: str = SessionId


# -- the procedures ------------------------------------------------------------------------


def session_summary(info: SessionInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "agent": info.agent,
        "title": info.title,
        "model": info.model,
        WORKER_KEY: info.metadata.get(WORKER_KEY),
        WORKSPACE_KEY: info.metadata.get(WORKSPACE_KEY),
        "createdAt": info.created_at.isoformat(),
        "updatedAt": info.updated_at.isoformat(),
        "messageCount": info.message_count,
        "totalTokens": info.total_tokens,
        "lastSeq": info.last_seq,
    }


@dataclass
class Procedures:
    """The operations over one store; see the module docstring."""

    store: Store
    config: ServerConfig
    runner: AgentRunner
    hooks: HookDispatcher
    hub: EventHub | SharedHub
    searches: SearchGate = field(init=False)

    def __post_init__(self) -> None:
        self.searches = SearchGate(self.config.search_slots, self.config.search_wait)

    def model_for(self, workspace: str | None, asked: str | None = None) -> str:
        """A new session's model: the asked one > the workspace's > the server default."""
        if asked:
            return asked
        if workspace is not None and workspace in self.config.workspace_models:
            return self.config.workspace_models[workspace]
        return self.config.default_model

    def turn_model(self, info: SessionInfo, asked: str | None = None) -> str:
        """The model a turn of ``info`` runs: the prompt's > the session's stored model >
        its workspace's > the server default. A session ``threadline chat`` made goes on
        with the chat's model; the page names this model before the user sends."""
        return asked or info.model or self.model_for(info.metadata.get(WORKSPACE_KEY))

    def info(self, session_id: str) -> SessionInfo:
        return self.store.session_info(session_id)

    def create(self, inp: CreateInput) -> dict[str, Any]:
        session_id = str(uuid.uuid4())
        metadata = {WORKER_KEY: inp.workerId, WORKSPACE_KEY: inp.workspaceId}
        session = self.store.create_session(
            agent=inp.agent or DEFAULT_AGENT,
            model=self.model_for(inp.workspaceId),
            title=inp.title or None,
            id=session_id,
            metadata=metadata,
        )
        summary = session_summary(session.info)
        self.hooks.fire("session_create", {"sessionId": session_id, "session": summary})
        return {"sessionId": session_id, "session": summary}

    def list_sessions(self, inp: ListInput) -> dict[str, Any]:
        if inp.workspaceId is None:
            page = self.store.list_sessions(agent=inp.agent, limit=inp.limit, offset=inp.offset)
            items, total = list(page.items), page.total
        else:
            # the stores index agents, not metadata: a workspace filter scans (step one)
            matching = [
                info
                for info in self._all_sessions(inp.agent)
                if info.metadata.get(WORKSPACE_KEY) == inp.workspaceId
            ]
            items, total = matching[inp.offset : inp.offset + inp.limit], len(matching)
        return {
            "items": [session_summary(i) for i in items],
            "total": total,
            "offset": inp.offset,
            "limit": inp.limit,
        }

    def _all_sessions(self, agent: str | None) -> list[SessionInfo]:
        found: list[SessionInfo] = []
        offset = 0
        while True:
            page = self.store.list_sessions(agent=agent, limit=MAX_PAGE_SIZE, offset=offset)
            found += page.items
            offset += len(page.items)
            if not page.items or offset >= page.total:
                return found

    def search(self, inp: SearchInput) -> dict[str, Any]:
        """A page of hits across the store (or one session), newest first, with the total
        (``totalExact`` false: a scanning store stopped at its time budget and the total
        is a lower bound). At most ``search_slots`` run at once (``TooManySearches``)."""
        session_id = self.info(inp.sessionId).id if inp.sessionId is not None else None
        with self.searches.slot():
            page = self.store.search(
                inp.q,
                session_id=session_id,
                agent=inp.agent,
                role=inp.role,
                limit=inp.limit,
                offset=inp.offset,
            )
        return {
            "hits": [
                {
                    "sessionId": h.session_id,
                    "seq": h.seq,
                    "role": h.role,
                    "snippet": h.snippet,
                    "agent": h.agent,
                    "parentId": h.parent_id,
                }
                for h in page
            ],
            "total": page.total,
            "totalExact": page.exact,
            "offset": inp.offset,
            "limit": inp.limit,
        }

    def get(self, inp: GetInput) -> dict[str, Any]:
        session = self.store.get_session(self.info(inp.sessionId).id)
        newest_first = session.tail(inp.limit, before_seq=inp.beforeSeq)
        messages = list(reversed(newest_first))
        first_seq = messages[0].seq if messages else None
        more = first_seq is not None and first_seq > 1
        return {
            "session": session_summary(session.info),
            "messages": [m.model_dump(mode="json") for m in messages],
            "hasMore": more,
            "nextBeforeSeq": first_seq if more else None,
            "context": self._context(session),
        }

    def context_report(self, session: Session) -> SessionContext:
        """The report ``threadline context`` prints for the session and its agent, on the
        model its next turn runs (``turn_model``); raises ``ContextOverflow``."""
        model = self.turn_model(session.info)
        agent = session_agent(
            self.store,
            session.info,
            model=None if model == session.info.model else model,
            calibrator=Calibrator(),
            simulated_policy=self.config.simulated_policy,
            fit_only=True,
        )
        with agent:
            return session_context(session, agent)

    def _context(self, session: Session) -> dict[str, Any]:
        """The context report's JSON (``threadline context --json``'s ``report``) with the
        window's total as ``tokens``, or ``{"error"}`` when it cannot fit."""
        try:
            window = self.context_report(session).window
        except ContextOverflow as exc:
            return {"error": str(exc)}
        report: dict[str, Any] = window.report.model_dump(mode="json")
        report["tokens"] = window.tokens
        return report

    def rename(self, inp: RenameInput) -> dict[str, Any]:
        info = self.store.rename_session(self.info(inp.sessionId).id, inp.title or None)
        summary = session_summary(info)
        self.hooks.fire("session_save", {"sessionId": info.id, "session": summary})
        return summary

    def delete(self, inp: DeleteInput) -> dict[str, Any]:
        session_id = self.info(inp.sessionId).id
        self.runner.stop_turn(session_id)  # a turn running here or on another server
        self.runner.evict(session_id)
        try:
            # the fork rule: a session whose forks share its history is not deleted
            fork.delete_session(self.store, session_id)
        except SessionLocked as exc:  # a turn that did not stop in time, or a chat
            raise SessionBusy(session_id, exc.holder) from exc
        self.hub.log(session_id).publish(ENDS_STREAM, {"sessionId": session_id})
        self.hub.drop(session_id)
        self.hooks.fire("session_delete", {"sessionId": session_id})
        return {"sessionId": session_id, "deleted": True}

    def cancel(self, inp: CancelInput) -> dict[str, Any]:
        """Stop the session's running turn (``agent.cancel``), here or on the server running
        it; ``cancelled`` is True only when the cancel reached a running turn."""
        session_id = self.info(inp.sessionId).id
        done = self.runner.cancel_turn(session_id) or self.runner.cancel_elsewhere(session_id)
        return {"sessionId": session_id, "cancelled": done}

    def prompt(self, inp: PromptInput) -> dict[str, Any]:
        info = self.info(inp.sessionId)
        model = self.turn_model(info, inp.model)
        content: str | list[Any] = inp.text
        if inp.files:
            content = [TextPart(text=inp.text)]
            content += [FilePart(uri=_file_ref(f)) for f in inp.files]
        entry = self.runner.reserve(info.id, model)
        try:
            if entry.session.model is None:
                self.store.update_session(info.id, model=model)
                entry.session.refresh()
            stored = entry.session.append(Message.user(content))[0]
        except BaseException:
            self.runner.cancel(entry)
            raise
        before = self.runner.launch(entry, stored)
        return {
            "sessionId": info.id,
            "messageId": stored.id,
            "seq": stored.seq,
            "model": model,
            "lastEventId": before,
            "events": f"/v1/sessions/{info.id}/events",
        }


def _file_ref(ref: str) -> str:
    if not ref or len(ref) > MAX_FILE_REF or not ref.isprintable():
        raise UsageError(f"a file reference must be 1-{MAX_FILE_REF} printable characters")
    return ref


Kind = Literal["query", "mutation"]


@dataclass(frozen=True)
class Procedure:
    name: str
    kind: Kind
    input: type[_Input]
    call: Callable[[Procedures, Any], dict[str, Any]]


PROCEDURES: Final[Mapping[str, Procedure]] = {
    p.name: p
    for p in (
        Procedure("session.create", "mutation", CreateInput, Procedures.create),
        Procedure("session.list", "query", ListInput, Procedures.list_sessions),
        Procedure("session.get", "query", GetInput, Procedures.get),
        Procedure("session.search", "query", SearchInput, Procedures.search),
        Procedure("session.rename", "mutation", RenameInput, Procedures.rename),
        Procedure("session.delete", "mutation", DeleteInput, Procedures.delete),
        Procedure("agent.prompt", "mutation", PromptInput, Procedures.prompt),
        Procedure("agent.cancel", "mutation", CancelInput, Procedures.cancel),
    )
}
"""tRPC name -> procedure; queries are GET, mutations POST (as tRPC's HTTP link sends them)."""
