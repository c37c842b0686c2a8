"""The tool type: what a model may call (``Tool``), what a tool raises for an expected
failure (``ToolError``), what a ``takes_context`` tool receives (``ToolContext``), and
``make_tool``, which derives a tool's JSON schema from a function's signature.

Below both the agent (its ``ToolRegistry`` runs tools) and memory (its three tools are
``Tool``s), so neither imports the other for it; ``threadline.agent.tools`` re-exports
these names.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_type_hints

from threadline.errors import UsageError
from threadline.messages import ToolCall
from threadline.store.protocol import Session, Store

PYTHON_TO_JSON: Mapping[type, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    tuple: "array",
    dict: "object",
}
"""For schemas derived from a function signature."""


class ToolError(Exception):
    """Raised by a tool for an expected failure; the model sees just the message."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a ``takes_context`` tool receives before its arguments."""

    session: Session
    call: ToolCall
    message_seq: int | None = None
    """The seq of the stored reply that made the call, when the agent loop runs it."""

    @property
    def store(self) -> Store:
        return self.session.store


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool returns when its result needs metadata (a subagent's child session, a
    skill result protected from pruning) or is an error it reports without raising; a
    plain value is rendered as text."""

    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    is_error: bool = False
    error_kind: str = "tool_error"


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool: what the model sees (name, description, parameters) and what runs."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    """A JSON schema of type ``object`` (``properties``, ``required``)."""
    func: Callable[..., Any]
    takes_context: bool = False
    """Call ``func(ToolContext, **arguments)`` instead of ``func(**arguments)``."""
    concurrent: bool = False
    """Several calls of it in one reply may run at the same time (the agent loop runs them
    in threads); only for tools that block on something else, like a subagent."""

    def definition(self) -> dict[str, Any]:
        """The provider-neutral definition: ``{name, description, parameters}``."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
        }


# -- schemas from signatures -----------------------------------------------------------


def _json_type(annotation: Any) -> dict[str, Any]:
    """A small JSON schema for a Python annotation; ``{}`` (anything) when unsure."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(options) == 1:
            return _json_type(options[0])
        return {}
    base = origin or annotation
    if base is typing.Literal:
        values = list(typing.get_args(annotation))
        return {"enum": values}
    for py, name in PYTHON_TO_JSON.items():
        if isinstance(base, type) and issubclass(base, py) and not (py is int and base is bool):
            if base is bool:
                return {"type": "boolean"}
            return {"type": name}
    return {}


def schema_from_signature(func: Callable[..., Any], *, skip_first: bool = False) -> dict[str, Any]:
    """Parameters schema from a function's signature: hints give types, defaults optionality."""
    signature = inspect.signature(func)
    try:
        hints = get_type_hints(func)
    except (NameError, TypeError):  # unresolvable forward references: fall back to "anything"
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    params = list(signature.parameters.values())
    if skip_first and params:
        params = params[1:]
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        properties[param.name] = _json_type(hints.get(param.name, param.annotation))
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    return inspect.cleandoc(doc).split("\n\n", 1)[0].replace("\n", " ").strip()


def make_tool(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    takes_context: bool = False,
    concurrent: bool = False,
) -> Tool:
    """A ``Tool`` from a function; name, description and schema default to what it declares."""
    tool_name = name or getattr(func, "__name__", "")
    if not tool_name or not tool_name.replace("_", "").replace("-", "").isalnum():
        raise UsageError(f"tool name {tool_name!r} must be letters, digits, '_' or '-'")
    schema = (
        dict(parameters)
        if parameters is not None
        else schema_from_signature(func, skip_first=takes_context)
    )
    if schema.get("type", "object") != "object":
        raise UsageError(f"tool {tool_name!r}: parameters must be a JSON schema of type object")
    return Tool(
        name=tool_name,
        description=description if description is not None else _first_paragraph(func.__doc__),
        parameters=schema,
        func=func,
        takes_context=takes_context,
        concurrent=concurrent,
    )
