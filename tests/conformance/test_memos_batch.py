"""Many sessions' memos in one read, on every backend (issue 26, point 4).

``get_memos`` is what a listing reads a page's memos with (one query on the SQL
backends, a loop over ``get_memo`` elsewhere): the same memos ``get_memo`` gives, by
id, an unknown id left out. The visible counts a listing computes from them
(``retraction.visible_counts``) are the ones each session's own view gives, forks
(whose views hide their ancestors' records too) included.
"""

from __future__ import annotations

from typing import Any

import pytest

from threadline import Message, Session
from threadline.errors import InvalidSessionId, UsageError
from threadline.store import retraction
from threadline.store.fork import fork_session
from threadline.store.protocol import Store


def chat(n: int, tag: str) -> list[Message]:
    return [Message.user(f"{tag} {i}") for i in range(n)]


def test_get_memos_gives_what_get_memo_gives_by_id(store: Store) -> None:
    memo: dict[str, Any] = {"strategy": "trim", "nested": {"l": [1, None, "é", 2.5]}, "": "\x00"}
    a, b, c = (store.create_session() for _ in range(3))
    a.set_memo(memo)
    b.set_memo({"other": True})
    got = store.get_memos([a.id, b.id, c.id, "no-such-session", a.id])
    assert got == {a.id: memo, b.id: {"other": True}, c.id: {}}
    assert got == {s.id: store.get_memo(s.id) for s in (a, b, c)}
    got[a.id]["nested"]["l"].append("mutated")
    assert store.get_memo(a.id) == memo  # callers get copies
    assert store.get_memos([]) == {}
    assert store.get_memos(["no-such-session"]) == {}


def test_get_memos_refuses_a_bare_id_and_bad_ids(store: Store) -> None:
    session = store.create_session()
    with pytest.raises(UsageError):
        store.get_memos(session.id)
    with pytest.raises(InvalidSessionId):
        store.get_memos([session.id, "../etc/passwd"])


def test_visible_counts_match_each_sessions_own_view(store: Store) -> None:
    plain = store.create_session()
    plain.append(chat(6, "plain"))
    plain.retract([2, 3])
    untouched = store.create_session()
    untouched.append(chat(3, "untouched"))
    empty = store.create_session()
    cleared = store.create_session()
    cleared.append(chat(4, "cleared"))
    cleared.retract_all()
    parent = store.create_session()
    parent.append(chat(5, "parent"))
    parent.retract([2])
    child = fork_session(parent)  # inherits the retraction of 2 (and its record, 6)
    child.append(chat(2, "child"))
    child.retract([4])
    grandchild = fork_session(child)
    parent.retract([1])  # after the forks: not in their views

    sessions = [
        Session(store, store.session_info(s.id))
        for s in (plain, untouched, empty, cleared, parent, child, grandchild)
    ]
    counts = retraction.visible_counts(sessions, store.get_memos)
    assert counts == {s.id: retraction.visible_count(s) for s in sessions}
    assert counts == {s.id: len(s.messages()) for s in sessions}
    assert counts[plain.id] == 4 and counts[empty.id] == 0 and counts[cleared.id] == 0
    assert counts[child.id] == counts[grandchild.id] == 5  # seqs 1 3 5 7 8
