"""An imported JSON export is listed under the session its export names, on every backend.

A threadline JSON export names the session it was listed under (``parent_id``); its
import waits for that session's own import and is listed under it then. The metadata
an export carries may also hold the parent the exported session's *own* source named
(``parent_source_id``, when that session is itself an import): that is an id of
another store, and it must not link the new import anywhere. The model-based test
(``test_model_based.py``) found an import of an import listed under the import of its
original's fork parent; these are its steps, without hypothesis.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from threadline import Message
from threadline.interop.export import render_export
from threadline.interop.sync import Syncer, SyncStatus, find_sources
from threadline.store.checkpoints import numbered_checkpoints
from threadline.store.fork import fork_session
from threadline.store.protocol import Store


def export_and_import(store: Store, sid: str, folder: Path) -> str:
    """``sessions export -f json`` of ``sid``, then ``sessions import`` of the file: the
    new session's id."""
    session = store.get_session(sid)
    checkpoints = numbered_checkpoints(session.checkpoints())
    text, _ = render_export("json", session.info.to_dict(), session.iter_messages(), checkpoints)
    path = folder / f"{sid}.json"
    path.write_text(text, encoding="utf-8")
    (result,) = Syncer(store).sync(find_sources([str(path)])).results
    assert result.status is SyncStatus.NEW, result
    assert result.session_id is not None
    return result.session_id


@pytest.mark.parametrize("copies", [0, 1, 2], ids=["fork", "copy-of-fork", "copy-of-copy"])
def test_an_import_is_listed_under_the_parent_its_export_names(
    store: Store, tmp_path: Path, copies: int
) -> None:
    """Fork s1 at seq 1; export the fork and import it (and export that import and import
    it again, ``copies`` times); then export s1 and import it. s1's import is top-level,
    the fork's import is listed under it, and a copy of an import is listed under nothing:
    its export (of a session listed under nothing yet) names no parent."""
    s1 = store.create_session(model="simulated/gpt-4o", id="s1")
    s1.append(Message.user("msg one"))
    fork = fork_session(s1, at=1, id="f2")
    fork_import = export_and_import(store, fork.id, tmp_path)
    chain = [fork_import]
    for _ in range(copies):
        chain.append(export_and_import(store, chain[-1], tmp_path))
    s1_import = export_and_import(store, s1.id, tmp_path)

    parents = {i.id: i.parent_id for i in store.list_sessions(limit=50).items}
    want = {
        s1.id: None,
        fork.id: s1.id,
        s1_import: None,  # s1 was never a fork, nor listed under anything
        fork_import: s1_import,
        **{copy: None for copy in chain[1:]},
    }
    assert parents == want
    assert [s.id for s in store.list_sessions(parent=s1_import)] == [fork_import]
    for copy in chain[1:]:
        assert "parent_source_id" not in store.session_info(copy).metadata
    for sid in [s1_import, *chain]:  # each holds the view it was exported with
        assert [m.text for m in store.get_session(sid).messages()] == ["msg one"]


def test_an_import_of_a_linked_import_names_its_listed_parent(store: Store, tmp_path: Path) -> None:
    """An import already listed under its parent's import, exported and imported again,
    waits for that parent's export (by the id it was listed under), not for its source's."""
    s1 = store.create_session(model="simulated/gpt-4o", id="s1")
    s1.append(Message.user("msg one"))
    fork = fork_session(s1, at=1, id="f2")
    s1_import = export_and_import(store, s1.id, tmp_path)
    fork_import = export_and_import(store, fork.id, tmp_path)
    assert store.session_info(fork_import).parent_id == s1_import
    copy = export_and_import(store, fork_import, tmp_path)
    assert store.session_info(copy).metadata["parent_source_id"] == s1_import
    assert store.session_info(copy).parent_id is None  # s1_import's export is not imported
    s1_copy = export_and_import(store, s1_import, tmp_path)
    assert store.session_info(copy).parent_id == s1_copy
    assert store.session_info(s1_copy).parent_id is None
