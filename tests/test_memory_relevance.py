"""Injection only of what helps: a relevance floor, the session's project, no entity cards."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.test_memory_wiring import tell
from threadline import open_store
from threadline.agent import Agent, AgentConfig, MemoryConfig
from threadline.llm.scripted import ScriptedChatModel
from threadline.memory.project import PROJECT_KEY, project_root, session_project
from threadline.memory.relevance import relevance
from threadline.store.protocol import Session, Store

CHESS = (
    "The exporter changelog for the chess board now lists the PGN builds.",
    "We fixed the board CSS so the chess pieces line up on small screens.",
    "I prefer PostgreSQL for new databases and always run pytest before a build.",
)
CI_REQUEST = "Fix the failing CI build in the payments service"


def _agent(store: Store, model: ScriptedChatModel | None = None, **memory: Any) -> Agent:
    config = AgentConfig(
        name="codex",
        model="openai/gpt-4o",
        summarizer="extractive",
        memory=MemoryConfig(enabled=True, **memory),
    )
    return Agent(config, store=store, model=model or ScriptedChatModel(default="ok"))


def _asked(project: str, request: str, **memory: Any) -> tuple[Agent, Session]:
    """An agent told ``CHESS`` in the chess project, asked ``request`` in ``project``."""
    a = _agent(open_store("memory://"), **memory)
    tell(a, CHESS, "/src/chess")
    session = a.new_session(metadata={PROJECT_KEY: project})
    a.run_turn(session, request)
    return a, session


def test_a_session_in_one_project_gets_nothing_from_another_projects_sessions() -> None:
    ask = "Which database do I prefer, and do I run pytest?"
    a, in_chess = _asked("/src/chess", ask)
    assert a.memory is not None and a.memory.memory.list_facts(a.memory.scope)
    assert any("PostgreSQL" in line for line in a.memory.lines(in_chess))  # its own project
    elsewhere = a.new_session(metadata={PROJECT_KEY: "/src/payments"})
    a.run_turn(elsewhere, ask)
    assert a.memory.lines(elsewhere) == []
    assert a.memory.injected(elsewhere) == []


def test_a_user_scope_is_for_every_project() -> None:
    a, elsewhere = _asked("/src/payments", "Which database do I prefer?", scope="user:dana")
    assert a.memory is not None
    assert any("PostgreSQL" in line for line in a.memory.lines(elsewhere))


def test_a_request_no_memory_bears_on_injects_nothing() -> None:
    a, session = _asked("/src/chess", CI_REQUEST)  # same project: only relevance keeps out
    assert a.memory is not None
    assert a.memory.memory.search(CI_REQUEST, scopes=a.memory.scopes, k=10)  # search finds some
    assert a.memory.lines(session) == []
    window = a.build(session.refresh())
    assert window.report.memories == []


def test_the_injected_memories_say_why_and_no_entity_card_takes_a_slot() -> None:
    a, session = _asked("/src/chess", "Which database do I prefer?")
    assert a.memory is not None
    injected = a.memory.injected(session)
    assert injected and all(i.hit.kind != "entity" for i in injected)
    for i in injected:
        assert i.relevance >= a.config.memory.relevance_floor
        assert f"scope {a.memory.scope}" in i.reason() and "relevance" in i.reason()


def test_a_new_session_records_its_project_and_imports_carry_their_cwd(tmp_path: Any) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "pkg").mkdir()
    assert project_root(tmp_path / "repo" / "pkg") == str((tmp_path / "repo").resolve())
    assert project_root(tmp_path) == str(tmp_path.resolve())  # no git root: the directory
    store = open_store("memory://")
    a = _agent(store)
    assert session_project(a.new_session()) == project_root()
    imported = store.create_session(agent="codex", metadata={"cwd": str(tmp_path / "repo" / "pkg")})
    assert session_project(imported) == str((tmp_path / "repo").resolve())


@given(
    request=st.text(min_size=1, max_size=80),
    text=st.text(max_size=200),
)
def test_relevance_is_a_share_and_an_unrelated_text_scores_zero(request: str, text: str) -> None:
    score = relevance(request, text)
    assert 0.0 <= score <= 1.0
    assert relevance(request, "") == 0.0


def test_the_context_report_lists_what_was_injected_and_why() -> None:
    from threadline.report.context import session_context

    a, session = _asked("/src/chess", "Which database do I prefer?")
    report = session_context(session.refresh(), a)
    r = report.window.report
    assert r.memories and len(r.memory_reasons) == len(r.memories)
    text = report.text(width=200)
    assert "Injected memories" in text
    assert a.memory is not None and f"scope {a.memory.scope}" in text
    assert "relevance " in text and "score " in text
