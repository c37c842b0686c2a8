"""A Codex ``web_search_call`` item as a tool call and its result, so history shows
what the model searched.

Schema (codex-rs ``ResponseItem::WebSearchCall``): ``id`` (optional), ``status``
(``completed``, ``in_progress``, ...) and ``action``, one of ``{"type": "search",
"query", "queries"}``, ``{"type": "open_page", "url"}`` or ``{"type": "find_in_page",
"url", "pattern"}`` (older rollouts may have no action). The provider ran the search;
its results went to the model only and are not in the rollout, so the result says so
rather than invent them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from threadline.messages import Message, ToolCall

NAME = "web_search"
_ACTION_KEYS = ("query", "queries", "url", "pattern")


def _what(action: Mapping[str, Any]) -> str:
    kind = action.get("type")
    if kind == "open_page" and action.get("url"):
        return f"opened {action['url']}"
    if kind == "find_in_page" and action.get("url"):
        return f"looked for {action.get('pattern')!r} in {action['url']}"
    listed = action.get("queries")
    queries = listed if isinstance(listed, list) else []
    if not queries and isinstance(action.get("query"), str) and action["query"]:
        queries = [action["query"]]
    if queries:
        return "searched for " + "; ".join(repr(q) for q in queries if isinstance(q, str))
    return "searched the web"


def call_and_result(payload: Mapping[str, Any], index: int) -> tuple[ToolCall, Message]:
    """The call (its id, else one from the record's position) and a result naming what was
    done and its status."""
    raw = payload.get("action")
    action: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    given = payload.get("id")
    call_id = given if isinstance(given, str) and given else f"web_search_{index}"
    arguments = {k: action[k] for k in ("type", *_ACTION_KEYS) if action.get(k) is not None}
    call = ToolCall(id=call_id, name=NAME, arguments=arguments)
    status = payload.get("status") or "unknown"
    text = (
        f"[{_what(action)}: {status}; the provider ran it and its results went to the "
        "model only, the rollout does not hold them]"
    )
    return call, Message.tool(text, tool_call_id=call_id, name=NAME)
