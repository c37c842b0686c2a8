"""Codex rollouts: the person's turns are told by their ``user_message`` events, so an
instructions blob in the user role (even redacted) is never the request or the title;
``web_search_call`` items come in as a call and a result (issue 31)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from threadline.interop import codex_rollout
from threadline.requests import first_request, is_harness_text, request_text

TS = "2026-02-23T12:00:00.000Z"


def rec(kind: str, **payload: Any) -> dict[str, Any]:
    return {"timestamp": TS, "type": kind, "payload": payload}


def user_item(text: str) -> dict[str, Any]:
    return rec(
        "response_item", type="message", role="user", content=[{"type": "input_text", "text": text}]
    )


def echo(text: str) -> dict[str, Any]:
    return rec("event_msg", type="user_message", message=text, images=[], local_images=[])


def reply(text: str) -> dict[str, Any]:
    return rec(
        "response_item",
        type="message",
        role="assistant",
        content=[{"type": "output_text", "text": text}],
    )


META = rec("session_meta", id="s1", cwd="/repo", timestamp=TS)


def parse(records: list[dict[str, Any]], tmp_path: Path) -> list[Any]:
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return codex_rollout.parse(path.read_text(), path).runs[0]


def turn(typed: str, *beside: str, event: str | None = None) -> list[dict[str, Any]]:
    """One turn as Codex writes it: the blobs beside the typed text, the typed text, its
    event (the typed text unless a sanitiser's placeholder stands for it) and a reply."""
    items = [user_item(b) for b in beside]
    return [META, *items, user_item(typed), echo(event or typed), reply("On it.")]


def test_an_instructions_blob_beside_a_typed_turn_is_not_the_request(tmp_path: Path) -> None:
    # Codex 0.10x: AGENTS.md and the environment block are user-role items of the first turn
    notes = "Project notes: always run the linters before committing.\nUse pnpm."
    msgs = parse(turn("fix the flaky login test", notes, "Workspace /repo, shell zsh"), tmp_path)
    first = first_request(msgs)
    assert first is not None and first.text == "fix the flaky login test"
    blobs = [m for m in msgs if m.role == "user" and m.metadata.get("codex_context")]
    assert [m.text[:13] for m in blobs] == ["Project notes", "Workspace /re"]
    assert all(request_text(m) is None and is_harness_text(m) for m in blobs)


def test_redacted_turns_are_told_apart_by_the_event_not_the_words(tmp_path: Path) -> None:
    # a sanitiser replaced every text; the event's placeholder shares the typed text's sha
    typed, event = "[REDACTED_TEXT len=32 sha=821fd802]", "[REDACTED_MESSAGE len=32 sha=821fd802]"
    msgs = parse(turn(typed, "[REDACTED_TEXT len=3021 sha=dc9e82a0]", event=event), tmp_path)
    users = [m for m in msgs if m.role == "user"]
    assert [bool(m.metadata.get("codex_context")) for m in users] == [True, False]
    assert is_harness_text(users[0]) and not is_harness_text(users[1])


def test_a_turn_with_no_event_is_left_to_the_text(tmp_path: Path) -> None:
    # older rollouts write no user_message events: nothing is marked, the words decide
    msgs = parse([META, user_item("add a dark mode"), reply("Done.")], tmp_path)
    assert not any(m.metadata.get("codex_context") for m in msgs)
    assert request_text(msgs[0]) == "add a dark mode"


def test_a_typed_turn_with_ide_context_and_an_image_is_the_persons(tmp_path: Path) -> None:
    item = rec(
        "response_item",
        type="message",
        role="user",
        content=[
            {"type": "input_text", "text": "what is wrong here"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
        ],
    )
    msgs = parse([META, item, echo("what is wrong here"), reply("The margin.")], tmp_path)
    assert not msgs[0].metadata.get("codex_context")


@given(st.text(min_size=1).filter(lambda t: t.strip()), st.text(min_size=1))
def test_the_typed_text_is_never_marked_and_a_different_blob_always_is(
    typed: str, other: str
) -> None:
    import tempfile

    blob = "<notes>" + other + "</notes>" + "x" * (len(typed) + 1)
    with tempfile.TemporaryDirectory() as d:
        msgs = parse([META, user_item(blob), user_item(typed), echo(typed), reply("ok")], Path(d))
    users = [m for m in msgs if m.role == "user"]
    assert [bool(m.metadata.get("codex_context")) for m in users] == [True, False]


def test_web_searches_come_in_as_calls_with_a_result(tmp_path: Path) -> None:
    msgs = parse(
        [
            META,
            user_item("which opus is latest"),
            echo("which opus is latest"),
            rec(
                "response_item",
                type="web_search_call",
                id="ws_1",
                status="completed",
                action={"type": "search", "query": "opus model id", "queries": ["opus model id"]},
            ),
            rec(
                "response_item",
                type="web_search_call",
                status="completed",
                action={"type": "open_page", "url": "https://example.org/models"},
            ),
            rec("response_item", type="web_search_call", status="completed"),
            reply("Opus 4.7."),
        ],
        tmp_path,
    )
    calls = [c for m in msgs for c in m.tool_calls]
    assert [c.name for c in calls] == ["web_search"] * 3
    assert calls[0].id == "ws_1" and calls[0].arguments["query"] == "opus model id"
    assert calls[1].arguments["url"] == "https://example.org/models"
    results = {m.tool_call_id: m.text for m in msgs if m.role == "tool"}
    assert set(results) == {c.id for c in calls}  # every call answered, ids unique
    assert "'opus model id'" in results["ws_1"] and "completed" in results["ws_1"]
    assert "https://example.org/models" in results[calls[1].id]
    assert msgs[-1].text == "Opus 4.7."


def test_a_turn_whose_event_matches_no_item_marks_nothing(tmp_path: Path) -> None:
    # the item holds an expanded prompt, the event what was typed: neither tells the other
    msgs = parse(turn("Review the diff against main and list bugs.", event="/review"), tmp_path)
    assert not any(m.metadata.get("codex_context") for m in msgs)


def test_a_web_search_with_odd_fields_still_imports() -> None:
    """Review: a ``queries`` that is not a list (a number, a string) failed the import;
    it names no query, and a plain ``query`` still does."""
    from threadline.interop.codex_search import call_and_result

    for action in ({"type": "search", "queries": 5}, {"type": "search", "queries": "x"}):
        call, result = call_and_result({"type": "web_search_call", "action": action}, 3)
        assert call.name == "web_search" and result.text
    call, result = call_and_result(
        {"type": "web_search_call", "action": {"type": "search", "query": "ruff rules"}}, 4
    )
    assert "ruff rules" in result.text or "ruff rules" in str(call.arguments)
