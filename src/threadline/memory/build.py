"""Memory from sessions already stored (imported histories, old chats): ``build_memory``.

Each session is read past its watermark (the seq extraction has covered, kept in
the memory's durable per-session state that the recorder also uses), extracted a
batch of messages at a time, and the watermark moved after each stored batch. A
second build therefore reads nothing and adds nothing, and a build that is stopped
half-way resumes at the first batch it had not stored.

An imported session (``sessions import`` and its sync mark it with ``source_format``)
keeps the agent its file claims, and its user turns are whatever the file says: a
downloaded transcript's "my bank account for all payments is ..." would become lasting
memory of that agent. So a build leaves imported sessions out, and says which, unless
it is asked to include them (``include_imported``; ``memory build --include-imported``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from threadline.memory.base import Extractor, MemoryStore, check_scope, scope_for
from threadline.memory.extract import ExtractiveExtractor
from threadline.memory.recorder import read_watermark, save_watermark, session_facts
from threadline.messages import Message
from threadline.store.protocol import Session, Store
from threadline.store.session_info import SessionInfo

BUILD_BATCH = 200
"""Messages extracted and stored together before the watermark moves."""
LIST_PAGE = 200

Progress = Callable[[int, int], None]
"""``(messages done, messages to do)`` after each batch."""


@dataclass
class BuildReport:
    """What a build did."""

    sessions: int = 0
    """Sessions looked at."""
    extracted_sessions: int = 0
    """Sessions that had messages past their watermark."""
    messages: int = 0
    """Messages read and extracted."""
    facts: int = 0
    """Facts added (a fact already stored from the same turn is not counted again)."""
    scopes: dict[str, int] = field(default_factory=dict)
    """Facts added per scope."""
    left_out_imported: list[str] = field(default_factory=list)
    """Ids of the imported sessions passed over (not counted in ``sessions``)."""


SOURCE_FORMAT_KEY = "source_format"
"""Session metadata that ``interop/sync.py`` writes on every session it imports."""


def imported(info: SessionInfo) -> bool:
    """Whether a session was imported from another agent's file (see the module docstring)."""
    return SOURCE_FORMAT_KEY in info.metadata


def agent_sessions(store: Store, agent: str | None = None) -> Iterator[SessionInfo]:
    """Every session of the store (of ``agent`` when given), a page at a time."""
    offset = 0
    while True:
        page = store.list_sessions(agent=agent, limit=LIST_PAGE, offset=offset)
        yield from page
        if len(page) < LIST_PAGE:
            return
        offset += LIST_PAGE


def build_memory(
    store: Store,
    memory: MemoryStore,
    sessions: Iterable[Session | SessionInfo | str] | None = None,
    *,
    agent: str | None = None,
    extractor: Extractor | None = None,
    scope_of: Callable[[str], str] | None = None,
    progress: Progress | None = None,
    include_imported: bool = False,
) -> BuildReport:
    """Extract memory from stored sessions, each from where the last extraction stopped.

    ``sessions`` (sessions, infos or ids; default: every session of ``agent``, or of
    the store) are extracted into their agent's scope (``scope_of(agent)``, default
    ``agent:<name>``); imported ones only with ``include_imported`` (else they are
    listed in ``left_out_imported``). Returns what was read and how many facts were
    added."""
    extractor = extractor or ExtractiveExtractor()
    scope_of = scope_of or scope_for
    chosen = list(sessions) if sessions is not None else list(agent_sessions(store, agent))
    infos = list(map(_info_of(store), chosen))
    left_out = [] if include_imported else [info.id for info in infos if imported(info)]
    skipped = set(left_out)
    infos = [info for info in infos if info.id not in skipped]
    todo = [(info, read_watermark(memory, info.id)[1]) for info in infos]
    total = sum(max(0, info.last_seq - done) for info, done in todo)
    report = BuildReport(sessions=len(todo), left_out_imported=left_out)
    for info, done in todo:
        if info.last_seq <= done:
            continue
        scope = check_scope(scope_of(info.agent))
        session = store.get_session(info.id)
        read = False
        known = session_facts(memory, scope, info.id) if done > 0 else []  # resumed only
        for batch in _batches(session, done):
            extraction = extractor.extract(batch, scope=scope, session_id=info.id, known=known)
            known = [*known, *extraction.facts]
            written = memory.store_extraction(scope, extraction)
            last = max(m.seq for m in batch if m.seq is not None)
            flagged, _ = read_watermark(memory, info.id)
            save_watermark(memory, info.id, flagged, last)
            report.facts += written
            report.scopes[scope] = report.scopes.get(scope, 0) + written
            report.messages += len(batch)
            read = True
            if progress is not None:
                progress(report.messages, total)
        report.extracted_sessions += read
    return report


def _info_of(store: Store) -> Callable[[Session | SessionInfo | str], SessionInfo]:
    def info(s: Session | SessionInfo | str) -> SessionInfo:
        if isinstance(s, Session):
            return store.session_info(s.id)  # fresh: its last seq may have moved
        if isinstance(s, SessionInfo):
            return s
        return store.session_info(store.resolve_id(s))

    return info


def _batches(session: Session, after_seq: int) -> Iterator[list[Message]]:
    batch: list[Message] = []
    for m in session.iter_messages(after_seq=after_seq):
        batch.append(m)
        if len(batch) >= BUILD_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch
