"""One truth in every view: a model-based test of the store, on every backend.

A hypothesis state machine drives a store through creates, appends (single and in
batches), forks (of forks, at any seq), rewinds (``/rewind``'s fork), retractions,
checkpoints, memo and scratchpad writes, renames, deletes (with and without
``force``), copies to another store, imports of a JSON export and re-imports of
the same file. A plain reference model below keeps what each session should
show; after every step each view is compared with it: ``Session.read_messages``
and its pages both ways (the history), ``show``'s counts, the JSON and Markdown
exports, the stored messages ``build_context`` puts in the window, search hits,
``list_sessions`` totals and the fork tree, and ``session.get`` of the server's
procedures (called in process, as ``tests/test_server.py`` does).

The model is deliberately naive: a session holds the list of every entry of its
view (a message, or a retraction record naming the seqs it hides); a fork copies
its parent's list up to the fork seq. Nothing in it shares code with the store.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.conformance.backends import cleanup_url, make_url
from threadline import Message, Store, build_context, open_store
from threadline.errors import SessionHasForks
from threadline.interop.export import render_export
from threadline.interop.sync import Syncer, SyncStatus, find_sources
from threadline.server.config import ServerConfig
from threadline.server.procedures import GetInput, Procedures
from threadline.server.runner import AgentRunner
from threadline.store import retraction
from threadline.store.checkpoints import numbered_checkpoints
from threadline.store.copy import copy_sessions
from threadline.store.fork import fork_session, user_turn_seq
from threadline.store.lineage import fork_point
from threadline.store.protocol import RESERVED_MEMO_PREFIX, Session

MODEL = "simulated/gpt-4o"
WORD = "msg"
"""A word every message holds: one search for it lists every hit of the store."""
TITLES = (None, "plan", "Trip to Köln")

MAX_EXAMPLES = int(os.environ.get("THREADLINE_MODEL_EXAMPLES", "12"))
"""Per backend; ``THREADLINE_MODEL_EXAMPLES`` raises it for a longer hunt."""
STEPS = 25
"""Steps per example. 12 examples of 25 found a fork of a fork reading past its fork
point (it takes create, append, fork, fork) for each of 8 seeds tried, and stay small
enough for CI."""


# -- the reference model ------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    seq: int
    text: str | None
    """None for a retraction record."""
    role: str = "user"
    hides: frozenset[int] = frozenset()


@dataclass
class Model:
    id: str
    entries: list[Entry] = field(default_factory=list)
    fork: tuple[str, int] | None = None
    title: str | None = None
    memo: dict[str, Any] = field(default_factory=dict)
    pad: dict[str, str] = field(default_factory=dict)
    checkpoints: list[int] = field(default_factory=list)
    """Its own checkpoints' ``covers_up_to``, oldest first."""
    parent: str | None = None
    """The session it is listed under: a fork's parent, or an import's (below)."""
    source: tuple[str, str | None] | None = None
    """An import's: the exported session's id, and the one that session was listed under
    (an import of that one's export becomes this one's parent, whichever comes first)."""

    @property
    def last_seq(self) -> int:
        return self.entries[-1].seq if self.entries else 0

    @property
    def lower(self) -> int:
        return self.fork[1] if self.fork else 0

    def hidden(self, own_only: bool = False) -> set[int]:
        out: set[int] = set()
        for e in self.entries:
            if e.text is None and (not own_only or e.seq > self.lower):
                out |= e.hides | {e.seq}
        return out

    def visible(self) -> list[tuple[int, str]]:
        hidden = self.hidden()
        return [(e.seq, e.text) for e in self.entries if e.text is not None and e.seq not in hidden]

    def own_hits(self) -> set[tuple[str, int]]:
        """What search finds of it: its own messages its own records do not hide."""
        hidden = self.hidden(own_only=True)
        return {
            (self.id, e.seq)
            for e in self.entries
            if e.text is not None and e.seq > self.lower and e.seq not in hidden
        }


class _Procedures(Procedures):
    """The server's procedures without the context report ``session.get`` adds: that is
    ``build_context``'s window, checked below directly (building the agent each step
    would double the run time)."""

    def _context(self, session: Session) -> dict[str, Any]:
        return {}


class StoreMachine(RuleBasedStateMachine):
    store: Store
    """One store per backend for all examples, emptied as each begins (a schema or
    directory per example would spend most of the run creating them)."""
    root: Path

    def __init__(self) -> None:
        super().__init__()
        self.dir = self.root / uuid.uuid4().hex[:12]
        self.dir.mkdir()
        self.store.delete_all(force=True)
        assert self.store.list_sessions().total == 0
        self.model: dict[str, Model] = {}
        self.counter = 0
        self.touched: str | None = None
        self.exports: dict[str, tuple[Path, str]] = {}
        """Source session id -> (its export file, the session importing it made)."""
        self.runner = AgentRunner(self.store, ServerConfig(token="t" * 32))
        self.procs = _Procedures(
            self.store, self.runner.config, self.runner, self.runner.hooks, self.runner.hub
        )

    def teardown(self) -> None:
        self.runner.close()

    # -- helpers
    def _new_text(self) -> str:
        self.counter += 1
        return f"{WORD} w{self.counter:04d}"

    def _new_id(self, kind: str) -> str:
        """Ids in the order made (a counterexample reads s1, f2, ...): hypothesis must
        draw the same way each time it replays a case."""
        self.counter += 1
        return f"{kind}{self.counter}"

    def _pick(self, data: st.DataObject, label: str = "session") -> str:
        return data.draw(st.sampled_from(list(self.model)), label=label)

    def _handle(self, sid: str) -> Session:
        return self.store.get_session(sid)

    def _chain(self, m: Model) -> list[tuple[Model, int]]:
        """Ancestors root first, each with the last seq this session's view takes of it."""
        out: list[tuple[Model, int]] = []
        bound: int | None = None
        current = m
        while current.fork is not None:
            parent_id, seq = current.fork
            bound = seq if bound is None else min(bound, seq)
            current = self.model[parent_id]
            out.append((current, bound))
        return list(reversed(out))

    def _view_checkpoints(self, m: Model) -> list[int]:
        found: list[int] = []
        for ancestor, bound in self._chain(m):
            found = [c for c in found + ancestor.checkpoints if c <= bound]
        return found + m.checkpoints

    def _latest(self, m: Model) -> int | None:
        if m.checkpoints:
            return m.checkpoints[-1]
        inherited = self._view_checkpoints(m)
        return inherited[-1] if inherited else None

    def _descendants(self, sid: str) -> list[str]:
        out: list[str] = []
        for other in self.model.values():
            if other.fork is not None and other.fork[0] == sid:
                out += [*self._descendants(other.id), other.id]
        return out

    def _add(self, session: Session, m: Model) -> None:
        self.model[m.id] = m
        self.touched = session.id

    # -- rules
    @initialize()
    def first(self) -> None:
        self.create(title=None)

    @rule(title=st.sampled_from(TITLES))
    def create(self, title: str | None) -> None:
        session = self.store.create_session(model=MODEL, title=title, id=self._new_id("s"))
        self._add(session, Model(session.id, title=title))

    @rule(
        data=st.data(),
        roles=st.lists(st.sampled_from(["user", "assistant"]), min_size=1, max_size=4),
    )
    def append(self, data: st.DataObject, roles: list[str]) -> None:
        sid = self._pick(data)
        m = self.model[sid]
        texts = [self._new_text() for _ in roles]
        make = {"user": Message.user, "assistant": Message.assistant}
        batch = [make[r](t) for r, t in zip(roles, texts, strict=True)]
        stored = self._handle(sid).append(batch[0] if len(batch) == 1 else batch)
        for r, t in zip(roles, texts, strict=True):
            m.entries.append(Entry(m.last_seq + 1, t, r))
        assert [x.seq for x in stored] == [e.seq for e in m.entries[-len(roles) :]]
        self.touched = sid

    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        forks = [sid for sid, m in self.model.items() if m.fork is not None]
        if forks and data.draw(st.booleans(), label="of a fork"):  # the chains that go wrong
            sid = data.draw(st.sampled_from(forks), label="parent")
        else:
            sid = self._pick(data, "parent")
        parent = self.model[sid]
        at = data.draw(st.integers(0, parent.last_seq), label="at")
        child = fork_session(self._handle(sid), at=at, id=self._new_id("f"))
        entries = [e for e in parent.entries if e.seq <= at]
        self._add(child, Model(child.id, entries, (sid, at), title=parent.title, parent=sid))

    @rule(data=st.data())
    def rewind(self, data: st.DataObject) -> None:
        """``/rewind N``: fork just before the N-th last request."""
        sid = self._pick(data)
        m = self.model[sid]
        requests = [seq for seq, _ in m.visible() if self._role(m, seq) == "user"]
        if not requests:
            return
        back = data.draw(st.integers(1, len(requests)), label="back")
        handle = self._handle(sid)
        at = user_turn_seq(handle, back)
        assert at == requests[-back] - 1
        child = fork_session(handle, at=at, id=self._new_id("r"))
        entries = [e for e in m.entries if e.seq <= at]
        self._add(child, Model(child.id, entries, (sid, at), title=m.title, parent=sid))

    @staticmethod
    def _role(m: Model, seq: int) -> str:
        return next(e.role for e in m.entries if e.seq == seq)

    @rule(data=st.data())
    def retract(self, data: st.DataObject) -> None:
        sid = self._pick(data)
        m = self.model[sid]
        seqs = [seq for seq, _ in m.visible()]
        if not seqs:
            return
        chosen = data.draw(st.lists(st.sampled_from(seqs), min_size=1, max_size=3, unique=True))
        self._handle(sid).retract(chosen)
        record = Entry(m.last_seq + 1, None, "system", frozenset(chosen))
        m.entries.append(record)
        latest = self._latest(m)
        if latest is not None and min(chosen) <= latest < record.seq:
            m.checkpoints.append(record.seq)  # an empty one, so no window shows the old summary
        self.touched = sid

    @rule(data=st.data())
    def checkpoint(self, data: st.DataObject) -> None:
        sid = self._pick(data)
        m = self.model[sid]
        covers = data.draw(st.integers(0, m.last_seq), label="covers_up_to")
        self._handle(sid).add_checkpoint(covers_up_to=covers, summary=f"up to {covers}")
        m.checkpoints.append(covers)
        self.touched = sid

    @rule(data=st.data(), value=st.integers(0, 9))
    def memo(self, data: st.DataObject, value: int) -> None:
        sid = self._pick(data)
        self._handle(sid).set_memo({"k": value})
        self.model[sid].memo = {"k": value}
        self.touched = sid

    @rule(data=st.data(), name=st.sampled_from(["a", "b/c"]), content=st.sampled_from(["x", "y z"]))
    def scratchpad(self, data: st.DataObject, name: str, content: str) -> None:
        sid = self._pick(data)
        self._handle(sid).scratchpad_write(name, content)
        self.model[sid].pad[name] = content
        self.touched = sid

    @rule(data=st.data(), title=st.sampled_from(TITLES))
    def rename(self, data: st.DataObject, title: str | None) -> None:
        sid = self._pick(data)
        self._handle(sid).rename(title)
        self.model[sid].title = title
        self.touched = sid

    @precondition(lambda self: len(self.model) > 1)
    @rule(data=st.data(), force=st.booleans())
    def delete(self, data: st.DataObject, force: bool) -> None:
        sid = self._pick(data)
        forks = self._descendants(sid)
        if len(forks) + 1 == len(self.model):
            return  # the rules need a session to work on
        handle = self._handle(sid)
        if forks and not force:
            with pytest.raises(SessionHasForks):
                handle.delete()
            return
        handle.delete(force=force)
        for gone in [*forks, sid]:
            del self.model[gone]
        for other in self.model.values():
            if other.parent in (*forks, sid):
                other.parent = None  # listed under it no more: top level
        self.exports = {k: v for k, v in self.exports.items() if v[1] in self.model}
        self.touched = None

    @rule(data=st.data())
    def copy(self, data: st.DataObject) -> None:
        """A copy to another store materializes the view: it shows what the model shows."""
        sid = self._pick(data)
        m = self.model[sid]
        with open_store("memory://") as dst:
            report = copy_sessions(self.store, dst, session_ids=[sid])
            assert report.ok, [s.error for s in report.failed]
            copied = dst.get_session(sid)
            assert [(x.seq, x.text) for x in copied.messages()] == m.visible()
            assert [c.covers_up_to for c in copied.checkpoints()] == self._view_checkpoints(m)
            assert {e.name: e.content for e in copied.scratchpad_list()} == m.pad
            assert retraction.visible_count(copied) == len(m.visible())

    @rule(data=st.data())
    def import_export(self, data: st.DataObject) -> None:
        """Import of a JSON export: a plain session of the view's messages, seqs from 1."""
        fresh = list(s for s, m in self.model.items() if m.visible() and s not in self.exports)
        if not fresh:
            return
        sid = data.draw(st.sampled_from(fresh), label="exported")
        m = self.model[sid]
        path = self.dir / f"{sid}.json"
        path.write_text(self._export(sid, "json"), encoding="utf-8")
        report = Syncer(self.store).sync(find_sources([str(path)]))
        (result,) = report.results
        assert result.status is SyncStatus.NEW, result
        assert result.session_id is not None
        visible = m.visible()
        entries = [Entry(i, text, self._role(m, seq)) for i, (seq, text) in enumerate(visible, 1)]
        covers = [sum(1 for seq, _ in visible if seq <= c) for c in self._view_checkpoints(m)]
        imported = Model(
            result.session_id, entries, title=m.title, checkpoints=covers, source=(sid, m.parent)
        )
        by_source = {x.source[0]: x.id for x in self.model.values() if x.source}
        imported.parent = by_source.get(m.parent) if m.parent else None
        for other in self.model.values():  # imported before their parent: adopted now
            if other.source and other.source[1] == sid and other.parent is None:
                other.parent = imported.id
        self.exports[sid] = (path, result.session_id)
        self._add(self._handle(result.session_id), imported)

    @precondition(lambda self: bool(self.exports))
    @rule(data=st.data())
    def reimport(self, data: st.DataObject) -> None:
        """The same file again changes nothing."""
        source = data.draw(st.sampled_from(list(self.exports)), label="reimported")
        path, imported = self.exports[source]
        (result,) = Syncer(self.store).sync(find_sources([str(path)])).results
        assert (result.status, result.session_id) == (SyncStatus.UNCHANGED, imported), result
        self.touched = imported

    def _export(self, sid: str, fmt: str) -> str:
        session = self._handle(sid)
        checkpoints = numbered_checkpoints(session.checkpoints())
        text, _ = render_export(fmt, session.info.to_dict(), session.iter_messages(), checkpoints)
        return text

    # -- every view agrees with the model
    @invariant()
    def sessions_listed(self) -> None:
        page = self.store.list_sessions(limit=200)
        assert page.total == len(self.model)
        tree = {i.id: (fork_point(i), i.parent_id) for i in page.items}
        assert set(tree) == set(self.model)
        for sid, (fork, parent_id) in tree.items():
            want = self.model[sid].fork
            assert (fork.parent, fork.seq) == want if fork else want is None
            assert parent_id == self.model[sid].parent, sid
        counts = retraction.visible_counts(
            [self._handle(sid) for sid in sorted(self.model)], self.store.get_memos
        )
        assert counts == {sid: len(m.visible()) for sid, m in self.model.items()}

    @invariant()
    def every_session_reads_as_modelled(self) -> None:
        for sid, m in self.model.items():
            session = self._handle(sid)
            info = session.info
            assert (info.message_count, info.last_seq) == (len(m.entries), m.last_seq), sid
            assert info.title == m.title
            assert [(x.seq, x.text) for x in session.read_messages()] == m.visible(), sid
            assert retraction.visible_count(session) == len(m.visible())
            assert [c.covers_up_to for c in session.checkpoints()] == self._view_checkpoints(m)
            assert (session.latest_checkpoint() or _NONE).covers_up_to == self._latest(m)
            memo = {
                k: v
                for k, v in session.get_memo().items()
                if not k.startswith(RESERVED_MEMO_PREFIX)
            }
            assert memo == m.memo
            assert {e.name: e.content for e in session.scratchpad_list()} == m.pad

    @invariant()
    def search_finds_what_the_views_show(self) -> None:
        hits = self.store.search(WORD, limit=200)
        want = set().union(*(m.own_hits() for m in self.model.values()))
        assert hits.total == len(want)
        assert {(h.session_id, h.seq) for h in hits} == want

    @invariant()
    def the_touched_session_in_every_view(self) -> None:
        if self.touched is None or self.touched not in self.model:
            return
        sid, m = self.touched, self.model[self.touched]
        session, visible = self._handle(sid), m.visible()
        # history pages, newest first (``sessions history``) and oldest first
        assert _pages_back(session) == visible
        assert _pages_forward(session) == visible
        # exports
        exported = json.loads(self._export(sid, "json"))
        assert _dumped(exported["messages"]) == visible
        markdown = self._export(sid, "md")
        shown = [t for e in m.entries if e.text is not None and (t := e.text) in markdown]
        assert shown == [t for _, t in visible], (shown, visible)
        # the window: every stored message after the latest checkpoint's cover
        floor = self._latest(m) or 0
        window = build_context(session)
        assert [(x.seq, x.text) for x in window.messages if x.seq is not None] == [
            (seq, t) for seq, t in visible if seq > floor
        ]
        # the server's session.get
        got = self.procs.get(GetInput(sessionId=sid, limit=50))
        assert _dumped(got["messages"]) == visible[-50:]
        assert got["session"]["messageCount"] == len(m.entries)


_PHASES = tuple(Phase) if not os.environ.get("THREADLINE_NO_SHRINK") else tuple(Phase)[:-2]
"""All of hypothesis's phases; without shrinking (and explaining) to count how often a
known bug is found."""


@dataclass(frozen=True)
class _NoCheckpoint:
    covers_up_to: None = None


_NONE: Any = _NoCheckpoint()


def _dumped(messages: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(seq, text) of messages as JSON carries them (an export, the server's reply)."""
    return [(x["seq"], Message.model_validate(x).text) for x in messages]


def _pages_back(session: Session, size: int = 2) -> list[tuple[int, str]]:
    out: list[Message] = []
    before: int | None = None
    while True:
        page = session.tail(size, before_seq=before)
        out += page
        if len(page) < size:
            return [(x.seq or 0, x.text) for x in reversed(out)]
        before = page[-1].seq


def _pages_forward(session: Session, size: int = 2) -> list[tuple[int, str]]:
    out: list[Message] = []
    after = 0
    while True:
        page = session.read_messages(after_seq=after, limit=size)
        out += page
        if len(page) < size:
            return [(x.seq or 0, x.text) for x in out]
        after = page[-1].seq or after


def test_every_view_tells_the_models_story(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the built-in agent, whatever agents/ the caller's folder has
    url = make_url(backend, tmp_path)
    store = open_store(url)
    machine = type(f"StoreMachine_{backend}", (StoreMachine,), {"store": store, "root": tmp_path})
    try:
        _run(machine)
    finally:
        store.close()
        cleanup_url(backend, url)


def _run(machine: type[StoreMachine]) -> None:
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=MAX_EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            phases=_PHASES,
        ),
    )
