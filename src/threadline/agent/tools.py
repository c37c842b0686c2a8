"""Tools an agent can call: Python callables with JSON-schema parameters.

A ``ToolRegistry`` turns a model's ``ToolCall`` into a tool ``Message``. It is
the one place a model's output becomes a function call, so it never lets a
failure out: an unknown tool, arguments that are not a JSON object, a missing
or mistyped required argument, or an exception inside the tool all become an
*error result* (``metadata={"is_error": True}``) that tells the model what went
wrong, and the turn goes on. Only ``KeyboardInterrupt`` and friends
(``BaseException``) pass through.

Argument checking is deliberately minimal (required keys and top-level JSON
types): enough to give the model a precise message for the common mistakes,
without a JSON-schema validator dependency. Deeper checks belong in the tool.

Tools that need the session (the built-in scratchpad tools) declare
``takes_context=True`` and receive a ``ToolContext`` first, so one registry
serves every session an agent talks in. The memory tools (``memory_search``,
``memory_recall``, ``memory_write``) come from ``threadline.memory``; an agent
with ``memory.enabled`` registers them itself (``agent.memory_link``).
"""

from __future__ import annotations

import json
import logging
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from threadline.errors import UsageError
from threadline.messages import Message, ToolCall
from threadline.store.protocol import Session
from threadline.tooling import Tool as Tool
from threadline.tooling import ToolContext as ToolContext
from threadline.tooling import ToolError as ToolError
from threadline.tooling import ToolOutput as ToolOutput
from threadline.tooling import make_tool as make_tool
from threadline.tooling import schema_from_signature as schema_from_signature

logger = logging.getLogger(__name__)

MAX_RESULT_CHARS = 4_000_000
"""A result longer than this is cut before it is stored (the store refuses messages over
64 MiB; pruning keeps big results out of the window, but they must be storable first)."""
RESULT_CUT_NOTICE = "\n[threadline: tool output cut from {total:,} to {kept:,} characters]"
ERROR_PREFIX = "Error: "
NO_OUTPUT = "(no output)"
"""What a tool that returned None (or an empty string) reports to the model."""

JSON_TYPES: Mapping[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}
"""JSON-schema ``type`` names and the Python values that satisfy them."""
F = TypeVar("F", bound=Callable[..., Any])


# -- checking arguments ------------------------------------------------------------------


def _type_ok(value: Any, expected: Any) -> bool:
    names = expected if isinstance(expected, list) else [expected]
    for type_name in names:
        accepted = JSON_TYPES.get(str(type_name))
        if accepted is None:
            return True  # a type we do not know: let the tool decide
        if isinstance(value, bool) and type_name in ("integer", "number"):
            continue
        if isinstance(value, accepted):
            return True
    return False


def _json_kind(value: Any) -> str:
    for name, accepted in JSON_TYPES.items():
        if name in ("integer", "number") and isinstance(value, bool):
            continue
        if isinstance(value, accepted):
            return name
    return type(value).__name__


def check_arguments(tool: Tool, arguments: Mapping[str, Any]) -> str | None:
    """What is wrong with ``arguments`` for ``tool`` (required keys, top-level types), or None."""
    schema = tool.parameters
    properties = schema.get("properties") or {}
    missing = [k for k in schema.get("required") or [] if k not in arguments]
    if missing:
        expected = ", ".join(properties) or "none"
        return (
            f"missing required argument(s) {', '.join(map(repr, missing))} (expected: {expected})"
        )
    for key, value in arguments.items():
        spec = properties.get(key)
        if not isinstance(spec, Mapping):
            continue
        if "type" in spec and not _type_ok(value, spec["type"]):
            return f"argument {key!r} must be {spec['type']}, got {_json_kind(value)}"
        if "enum" in spec and value not in spec["enum"]:
            return f"argument {key!r} must be one of {spec['enum']!r}, got {value!r}"
    return None


# -- results -------------------------------------------------------------------------


def render_result(value: Any) -> str:
    """A tool's return value as the text the model reads: str as is, anything else as JSON."""
    if value is None:
        return NO_OUTPUT
    if isinstance(value, str):
        text = value or NO_OUTPUT
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + RESULT_CUT_NOTICE.format(
            total=len(text), kept=MAX_RESULT_CHARS
        )
    return text


def error_result(call: ToolCall, message: str, *, kind: str) -> Message:
    """An error result the model can act on; ``kind`` says which check failed."""
    return Message.tool(
        ERROR_PREFIX + message,
        tool_call_id=call.id,
        name=call.name,
        metadata={"is_error": True, "error_kind": kind},
    )


def _output_message(call: ToolCall, output: ToolOutput) -> Message:
    text = render_result(output.text)
    if output.is_error:
        result = error_result(call, text, kind=output.error_kind)
        return result.model_copy(update={"metadata": {**result.metadata, **output.metadata}})
    return Message.tool(text, tool_call_id=call.id, name=call.name, metadata=dict(output.metadata))


# -- the registry ----------------------------------------------------------------------


class ToolRegistry:
    """Named tools; turns tool calls into tool result messages, never raising for them."""

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> typing.Iterator[Tool]:
        return iter(self._tools.values())

    def __repr__(self) -> str:
        return f"ToolRegistry({', '.join(self._tools)})"

    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def register(self, tool: Tool | Callable[..., Any], *, replace: bool = False) -> Tool:
        """Add a ``Tool`` (or a plain function, described by its signature and docstring)."""
        if not isinstance(tool, Tool):
            tool = make_tool(tool)
        if tool.name in self._tools and not replace:
            raise UsageError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def unregister(self, name: str) -> bool:
        return self._tools.pop(name, None) is not None

    def tool(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        takes_context: bool = False,
    ) -> Callable[[F], F]:
        """Decorator: ``@registry.tool()`` registers the function and returns it unchanged."""

        def decorate(func: F) -> F:
            self.register(
                make_tool(
                    func,
                    name=name,
                    description=description,
                    parameters=parameters,
                    takes_context=takes_context,
                )
            )
            return func

        return decorate

    def definitions(self) -> list[dict[str, Any]]:
        """Neutral ``{name, description, parameters}`` definitions, in registration order."""
        return [t.definition() for t in self._tools.values()]

    def run(
        self, call: ToolCall, *, session: Session | None = None, message_seq: int | None = None
    ) -> Message:
        """Run one call; every failure becomes an error result, never an exception.
        ``message_seq`` (the stored reply's) reaches a ``takes_context`` tool."""
        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            return error_result(
                call, f"unknown tool {call.name!r} (available tools: {known})", kind="unknown_tool"
            )
        if call.raw_arguments is not None:
            shown = call.raw_arguments[:200]
            return error_result(
                call,
                f"the arguments for {call.name} are not a JSON object: {shown!r}",
                kind="bad_arguments",
            )
        problem = check_arguments(tool, call.arguments)
        if problem is not None:
            return error_result(call, f"{call.name}: {problem}", kind="bad_arguments")
        if tool.takes_context and session is None:
            return error_result(
                call, f"{call.name} needs a session and none was given", kind="no_session"
            )
        try:
            if tool.takes_context:
                assert session is not None
                context = ToolContext(session=session, call=call, message_seq=message_seq)
                value = tool.func(context, **call.arguments)
            else:
                value = tool.func(**call.arguments)
            if isinstance(value, ToolOutput):
                return _output_message(call, value)
            text = render_result(value)
        except ToolError as exc:
            return error_result(call, str(exc), kind="tool_error")
        except Exception as exc:  # a tool's bug must not end the turn
            logger.debug("tool %s raised", call.name, exc_info=exc)
            return error_result(call, f"{type(exc).__name__}: {exc}", kind="exception")
        return Message.tool(text, tool_call_id=call.id, name=call.name)

    def run_all(
        self, calls: Sequence[ToolCall], *, session: Session | None = None
    ) -> list[Message]:
        """Results in call order (the order providers expect them back)."""
        return [self.run(call, session=session) for call in calls]


# -- built-in tools: the session's scratchpad --------------------------------------------


def scratchpad_write(ctx: ToolContext, name: str, content: str) -> str:
    """Save a note in this session's scratchpad under a name (replacing any note of that name).

    Notes survive compaction: use them for plans, findings and values you must not lose.
    """
    entry = ctx.session.scratchpad_write(name, content)
    return f"saved scratchpad note {entry.name!r} ({len(entry.content):,} characters)"


def scratchpad_read(ctx: ToolContext, name: str) -> str:
    """Read a note from this session's scratchpad by name."""
    entry = ctx.session.scratchpad_read(name)
    if entry is None:
        names = [e.name for e in ctx.session.scratchpad_list()]
        known = ", ".join(repr(n) for n in names) or "the scratchpad is empty"
        raise ToolError(f"no scratchpad note named {name!r} (notes: {known})")
    return entry.content


def scratchpad_list(ctx: ToolContext) -> list[dict[str, Any]]:
    """List the notes in this session's scratchpad: names, sizes and when they were updated."""
    return [
        {"name": e.name, "characters": len(e.content), "updated_at": e.updated_at.isoformat()}
        for e in ctx.session.scratchpad_list()
    ]


SCRATCHPAD_TOOLS: tuple[Tool, ...] = tuple(
    make_tool(f, takes_context=True) for f in (scratchpad_write, scratchpad_read, scratchpad_list)
)
BUILTIN_TOOLS: Mapping[str, Tool] = {t.name: t for t in SCRATCHPAD_TOOLS}
"""Tools an agent file can enable by name (``tools: [scratchpad_write, ...]``)."""


def builtin_registry(names: Iterable[str]) -> ToolRegistry:
    """A registry of the named built-in tools; an unknown name is a ``UsageError``."""
    registry = ToolRegistry()
    for name in names:
        tool = BUILTIN_TOOLS.get(name)
        if tool is None:
            raise UsageError(
                f"unknown built-in tool {name!r} (built-in tools: {', '.join(BUILTIN_TOOLS)})"
            )
        registry.register(tool)
    return registry
