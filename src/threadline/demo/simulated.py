"""A simulated coding agent: a ``ChatModel`` that plays back ``coding_run`` turns offline.

The demo must drive the real engine (agent loop, store, builder, pruning,
compaction) through hundreds of turns without a network or an API key, so it
needs a model that behaves like a coding agent: it calls tools, reads their
large outputs, hits an error and fixes it. ``SimulatedCodingModel`` does that
by playing back a ``coding_run`` scenario, and says what it is: its model name
is ``simulated-coding-agent`` and every reply carries ``metadata["simulated"]``.

It is stateless on purpose. Given a request, it finds the current turn from
the last user message that a person wrote (its ``TURN_KEY`` metadata, else its
text), counts the assistant replies sent since then, and answers the next
step of that turn: the step's text with its tool calls, or the turn's closing
answer. So a session resumed in a fresh process continues exactly where it
stopped, with nothing but the stored history to go on.

The planned results of those calls come from ``simulated_tools``: ordinary
registered tools that look the call id up, so tool results take the same path
as with a real model (the registry, the store, the pruning of old results).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from threadline.agent.tools import Tool, ToolContext, ToolError, ToolRegistry, make_tool
from threadline.demo.coding_run import Turn
from threadline.llm.base import ChatRequest, ChatResponse
from threadline.messages import Message, Usage
from threadline.tokens import counter_for

SIMULATED_MODEL_NAME = "simulated-coding-agent"
"""The model name on every reply: nobody reading a history should mistake it for an LLM."""
SIMULATED_KEY = "simulated"
"""Reply metadata flag: ``True`` on everything this model says."""
TURN_KEY = "simulated_turn"
"""User-message metadata: which scenario turn the message opens."""
TOKENIZER_MODEL = "gpt-4o"
"""Whose tokenizer counts the usage this model reports (it has none of its own)."""
UNKNOWN_TURN_REPLY = (
    "[simulated model] I only play back the scripted demo run, and this message is not part "
    "of it, so I have no answer. Chat with a real model: threadline chat --model PROVIDER/MODEL."
)
STREAM_PIECE = re.compile(r"\S+\s*|\s+")
"""Streamed text goes out a word (with its trailing space) at a time, as providers send it."""


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


TOOL_SPECS: Mapping[str, tuple[str, dict[str, Any]]] = {
    "read_file": (
        "Read a text file of the repository.",
        {"type": "object", "properties": {"path": _string("File path.")}, "required": ["path"]},
    ),
    "grep": (
        "Search files for a pattern; prints path:line: text for each match.",
        {
            "type": "object",
            "properties": {"pattern": _string("Regular expression."), "path": _string("Where.")},
            "required": ["pattern"],
        },
    ),
    "write_file": (
        "Create or overwrite a file.",
        {
            "type": "object",
            "properties": {"path": _string("File path."), "content": _string("New content.")},
            "required": ["path", "content"],
        },
    ),
    "edit_file": (
        "Replace one piece of text in a file.",
        {
            "type": "object",
            "properties": {
                "path": _string("File path."),
                "old": _string("Text to replace."),
                "new": _string("Replacement."),
            },
            "required": ["path", "old", "new"],
        },
    ),
    "run_tests": (
        "Run the test suite (pytest) and print its log.",
        {
            "type": "object",
            "properties": {
                "target": _string("Test path or node id."),
                "verbose": {"type": "boolean", "description": "One line per test."},
            },
            "required": ["target"],
        },
    ),
}
"""The simulated tools: name -> (description, JSON-schema parameters)."""


def planned_results(turns: Sequence[Turn]) -> dict[str, str]:
    """Call id -> the result the scenario planned for it."""
    return {
        call.id: result
        for turn in turns
        for step in turn.steps
        for call, result in zip(step.calls, step.results, strict=True)
    }


def simulated_tools(turns: Sequence[Turn]) -> ToolRegistry:
    """Tools that answer each scenario call with its planned result.

    An unknown call id is a ``ToolError``: the registry turns it into an error
    result, exactly as it would for a real tool that failed.
    """
    results = planned_results(turns)

    def play(ctx: ToolContext, **arguments: Any) -> str:
        planned = results.get(ctx.call.id)
        if planned is None:
            raise ToolError(
                f"the simulated {ctx.call.name} has no planned result for call {ctx.call.id} "
                "(only calls of the scripted demo run are answered)"
            )
        return planned

    tools: list[Tool] = [
        make_tool(play, name=name, description=description, parameters=schema, takes_context=True)
        for name, (description, schema) in TOOL_SPECS.items()
    ]
    return ToolRegistry(tools)


def user_message(turns: Sequence[Turn], index: int) -> Message:
    """The user message that opens turn ``index``, tagged so the model finds its turn."""
    return Message.user(turns[index].user, metadata={TURN_KEY: index})


class SimulatedCodingModel:
    """A ``ChatModel`` playing back a coding run; see the module docstring.

    Usage is reported as threadline's own count of the request (stored counts
    where the message has them), since a simulated model has no tokenizer: the
    calibration factor stays at 1.0 and nothing pretends to be a provider's number.
    """

    def __init__(
        self,
        turns: Sequence[Turn],
        *,
        model: str = SIMULATED_MODEL_NAME,
        tokenizer_model: str = TOKENIZER_MODEL,
    ) -> None:
        self.model = model
        self.turns = list(turns)
        self._by_text: dict[str, int] = {}
        for i, turn in enumerate(self.turns):
            self._by_text.setdefault(turn.user, i)
        self._counter = counter_for(tokenizer_model)
        self._tools_cost: tuple[int, int] | None = None
        self.request_count = 0

    def __repr__(self) -> str:
        return f"SimulatedCodingModel({self.model!r}, {len(self.turns)} turns)"

    # -- ChatModel -----------------------------------------------------------------

    def complete(self, request: ChatRequest) -> ChatResponse:
        return self._answer(request)

    def stream(self, request: ChatRequest) -> Iterator[str | ChatResponse]:
        response = self._answer(request)
        yield from STREAM_PIECE.findall(response.message.text)
        yield response

    # -- playing back ----------------------------------------------------------------

    def locate(self, messages: Sequence[Message]) -> tuple[int | None, int]:
        """(turn index or None, assistant replies already sent in that turn)."""
        replies = 0
        for m in reversed(messages):
            if m.role == "assistant":
                replies += 1
            elif m.role == "user" and not m.synthetic and not m.summary:
                return self._turn_of(m), replies
        return None, replies

    def _turn_of(self, m: Message) -> int | None:
        tagged = m.metadata.get(TURN_KEY)
        if (
            isinstance(tagged, int)
            and not isinstance(tagged, bool)
            and 0 <= tagged < len(self.turns)
        ):
            return tagged
        return self._by_text.get(m.text)

    def next_reply(self, messages: Sequence[Message]) -> Message:
        """The reply the scenario has for this point of the conversation."""
        index, replies = self.locate(messages)
        meta: dict[str, Any] = {SIMULATED_KEY: True}
        if index is None:
            return Message.assistant(UNKNOWN_TURN_REPLY, metadata=meta)
        turn = self.turns[index]
        meta[TURN_KEY] = index
        if replies < len(turn.steps):
            step = turn.steps[replies]
            return Message.assistant(step.text, tool_calls=step.calls, metadata=meta)
        return Message.assistant(turn.final, metadata=meta)

    def _answer(self, request: ChatRequest) -> ChatResponse:
        self.request_count += 1
        reply = self.next_reply(request.messages)
        usage = Usage(
            input_tokens=self._input_tokens(request),
            output_tokens=self._counter.count_message(reply),
        )
        reply = reply.model_copy(update={"model": self.model, "usage": usage})
        return ChatResponse(
            message=reply,
            model=self.model,
            usage=usage,
            finish_reason="tool_calls" if reply.tool_calls else "stop",
        )

    def _input_tokens(self, request: ChatRequest) -> int:
        family = self._counter.family
        total = 0
        for m in request.messages:
            stored = m.token_counts.get(family)
            total += stored if stored is not None else self._counter.count_message(m)
        if request.tools:
            key = len(request.tools)
            if self._tools_cost is None or self._tools_cost[0] != key:
                self._tools_cost = (key, self._counter.count_tools(request.tools))
            total += self._tools_cost[1]
        return total
