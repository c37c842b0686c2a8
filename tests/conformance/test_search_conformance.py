"""Search means the same on every backend (issue 13): one corpus, one table of queries in
the documented syntax (``store/search_query.py``), and every backend must return exactly
the expected hits, in the same order, with the same totals, page by page.

The corpus holds what agents write: code inside tool-call arguments (a word at the start
of a line of a shell command), tool results, CJK text without spaces, identifiers with
underscores and dots.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from threadline import Message, Store, ToolCall

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def at(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute)


CORPUS: dict[str, tuple[dict[str, Any], list[Message]]] = {
    "sa": (
        {"agent": "alice", "model": "gpt-4o"},
        [
            Message.user("Please fix the transcript parser", created_at=at(1)),
            Message.assistant(
                "",
                tool_calls=[
                    ToolCall(
                        id="c1",
                        name="bash",
                        arguments={"cmd": "cd src\nzebrafish --check\ngrep -rn 'foo.bar' ."},
                    )
                ],
                created_at=at(2),
            ),
            Message.tool("zebrafish: 3 warnings", tool_call_id="c1", created_at=at(3)),
            Message.assistant("The parser error is fixed now.", created_at=at(4)),
        ],
    ),
    "sb": (
        {"agent": "bob", "model": "claude-sonnet-4-5"},
        [
            Message.user("我爱北京天安门", created_at=at(5)),
            Message.assistant("東京タワーへ行きました。parser notes", created_at=at(6)),
            Message.user("transcription OR transcripts, either works", created_at=at(7)),
        ],
    ),
    "sc": (
        {"agent": "alice", "model": "gpt-4o"},
        [
            Message.user("error handling in the parser_error module", created_at=at(8)),
            Message.assistant("error: the parser crashed; no errors here", created_at=at(9)),
        ],
    ),
}

Hit = tuple[str, int]

# (query, filters, expected hits newest first)
CASES: list[tuple[str, dict[str, Any], list[Hit]]] = [
    # code inside tool arguments, decoded: a word at the start of a line, a key, the name
    ("zebrafish", {}, [("sa", 3), ("sa", 2)]),
    ("cmd", {}, [("sa", 2)]),
    ("bash zebrafish", {}, [("sa", 2)]),
    ("foo.bar", {}, [("sa", 2)]),  # punctuation inside a word: the phrase "foo bar"
    ("ZEBRAFISH", {}, [("sa", 3), ("sa", 2)]),
    # words are ANDed; phrases keep order and adjacency
    ("parser error", {}, [("sc", 2), ("sc", 1), ("sa", 4)]),
    ('"parser error"', {}, [("sc", 1), ("sa", 4)]),
    ('"error parser"', {}, []),
    ("parser AND error", {}, [("sc", 2), ("sc", 1), ("sa", 4)]),
    # prefix, whole words otherwise
    ("transcr*", {}, [("sb", 3), ("sa", 1)]),
    ("transcript", {}, [("sa", 1)]),
    ("error", {}, [("sc", 2), ("sc", 1), ("sa", 4)]),
    ("err*", {}, [("sc", 2), ("sc", 1), ("sa", 4)]),
    # OR, NOT, -word
    ("zebrafish OR 北京", {}, [("sb", 1), ("sa", 3), ("sa", 2)]),
    ("transcript OR crashed warnings", {}, []),
    ("crashed OR transcript parser", {}, [("sc", 2), ("sa", 1)]),
    ("parser -error", {}, [("sb", 2), ("sa", 1)]),
    ("parser NOT error", {}, [("sb", 2), ("sa", 1)]),
    ("parser -error -transcript", {}, [("sb", 2)]),
    ("-zebrafish", {}, [("sa", 3), ("sa", 2)]),  # negations only: the words themselves
    ("OR", {}, [("sb", 3)]),  # a keyword with nothing to join is a word
    # CJK: any part of a text written without spaces
    ("北京", {}, [("sb", 1)]),
    ("京天", {}, [("sb", 1)]),
    ("天安门", {}, [("sb", 1)]),
    ("タワー", {}, [("sb", 2)]),
    ("東京 parser", {}, [("sb", 2)]),
    ("京北", {}, []),
    # filters
    ("parser", {"agent": "alice"}, [("sc", 2), ("sc", 1), ("sa", 4), ("sa", 1)]),
    ("parser", {"role": "user"}, [("sc", 1), ("sa", 1)]),
    ("parser", {"model": "claude-sonnet-4-5"}, [("sb", 2)]),
    ("parser", {"since": at(4), "until": at(8)}, [("sb", 2), ("sa", 4)]),
    ("parser", {"session_id": "sc"}, [("sc", 2), ("sc", 1)]),
    ("parser", {"agent": "alice", "role": "assistant", "since": at(5)}, [("sc", 2)]),
    # nothing to find
    ("\\", {}, []),
    ("absent", {}, []),
]


@pytest.fixture
def corpus(store: Store) -> Store:
    for sid, (fields, messages) in CORPUS.items():
        store.create_session(id=sid, **fields).append(messages)
    return store


def found(store: Store, query: str, **filters: Any) -> tuple[list[Hit], int]:
    page = store.search(query, limit=200, **filters)
    return [(h.session_id, h.seq) for h in page], page.total


def test_every_backend_finds_the_same(backend: str, corpus: Store) -> None:
    wrong = []
    for query, filters, expected in CASES:
        hits, total = found(corpus, query, **filters)
        if hits != expected or total != len(expected):
            wrong.append(f"{query!r} {filters}: got {hits} (total {total}), want {expected}")
    assert not wrong, "\n".join(wrong)


def test_pages_and_totals_agree(backend: str, corpus: Store) -> None:
    everything = [("sc", 2), ("sc", 1), ("sb", 2), ("sa", 4), ("sa", 1)]
    pages: list[Hit] = []
    for offset in range(0, 7, 2):
        page = corpus.search("parser", limit=2, offset=offset)
        assert page.total == 5 and page.offset == offset
        pages.extend((h.session_id, h.seq) for h in page)
    assert pages == everything
    beyond = corpus.search("parser", offset=50)
    assert beyond == [] and beyond.total == 5


def test_hits_carry_role_agent_and_a_marked_snippet(backend: str, corpus: Store) -> None:
    hit = corpus.search("zebrafish", role="assistant")[0]
    assert (hit.session_id, hit.seq, hit.role, hit.agent) == ("sa", 2, "assistant", "alice")
    assert "[zebrafish] --check" in hit.snippet  # decoded: no "\n" escape glued to it
    cjk = corpus.search("北京")[0]
    assert "[北][京]" in cjk.snippet
    prefix = corpus.search("transcr*", session_id="sa")[0]
    assert "[transcript]" in prefix.snippet


def test_later_appends_and_deletes_are_seen(backend: str, corpus: Store) -> None:
    corpus.get_session("sb").append(Message.user("zebrafish again", created_at=at(20)))
    assert found(corpus, "zebrafish") == ([("sb", 4), ("sa", 3), ("sa", 2)], 3)
    corpus.delete_session("sa", force=True)
    assert found(corpus, "zebrafish") == ([("sb", 4)], 1)


def test_retracted_messages_and_records_are_not_found(backend: str, corpus: Store) -> None:
    """Search shows what the views show: retracted messages and the retraction records'
    own text are never hits, and totals and pages count only what is in view."""
    sa, sc = corpus.get_session("sa"), corpus.get_session("sc")
    sa.retract([3])  # the tool result; the record is seq 5
    assert found(corpus, "zebrafish") == ([("sa", 2)], 1)
    assert found(corpus, "retracted") == ([], 0)  # the record's text
    assert found(corpus, "parser") == (
        [("sc", 2), ("sc", 1), ("sb", 2), ("sa", 4), ("sa", 1)],
        5,
    )
    sc.retract_all()  # one record over 1-2
    assert found(corpus, "parser") == ([("sb", 2), ("sa", 4), ("sa", 1)], 3)
    page = corpus.search("parser", limit=2, offset=2)
    assert [(h.session_id, h.seq) for h in page] == [("sa", 1)] and page.total == 3
    assert found(corpus, "parser", session_id="sc") == ([], 0)
    sc.append(Message.user("parser is back", created_at=at(30)))  # after the clear: in view
    assert found(corpus, "parser", session_id="sc") == ([("sc", 4)], 1)
    assert [(m.seq) for m in sc.messages()] == [4]  # the view agrees


def test_a_forks_retraction_hides_only_its_own_view(backend: str, corpus: Store) -> None:
    """A fork retracting a shared message leaves the parent's hit (the parent still shows
    it); a message of the fork's own tail it retracts is gone."""
    from threadline.store.fork import fork_session

    child = fork_session(corpus.get_session("sa"), at=4)
    child.append(Message.user("zebrafish in the fork", created_at=at(40)))
    child.retract([3, 5])
    assert found(corpus, "zebrafish") == ([("sa", 3), ("sa", 2)], 2)


def test_a_memo_with_a_broken_index_hides_nothing_it_cannot_read(
    backend: str, corpus: Store
) -> None:
    """An index entry whose seq is not an integer is skipped on every backend, as
    ``Retractions.from_memo`` skips it; a good entry beside it still hides."""
    corpus.get_session("sa").set_memo(
        {"threadline.retractions": {"records": [["x", [[1, 4]]], "junk", [4, [[2, 2]]]]}}
    )
    assert found(corpus, "zebrafish") == ([("sa", 3)], 1)  # 2 retracted, 3 still in view
