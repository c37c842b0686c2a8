"""What the Agents SDK sends the model, kept within a budgeted session's budget.

A budgeted ``ThreadlineSession`` sizes the stored window, but the model gets more:
the agent's instructions, its tool schemas and the current turn's items, which
``Runner`` adds after the session's. ``fit_model_input`` is the SDK's
``call_model_input_filter`` step (``RunConfig(call_model_input_filter=
session.input_filter)``): it counts all of it with the session model's tokenizer and
drops the oldest whole messages of the history until instructions, tools and input
fit in ``context_limit - response_reserve``; the current turn (from the latest user
message on) is never dropped, and a current turn that cannot fit is refused
(``ContextOverflow``) rather than sent over the budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from threadline.context.policy import ContextPolicy
from threadline.errors import ContextOverflow
from threadline.integrations.turn_window import budget_of
from threadline.interop.responses_format import items_to_messages, messages_to_items
from threadline.messages import Message
from threadline.tokens import counter_for

if TYPE_CHECKING:
    from agents.run_config import CallModelData, ModelInputData

T = TypeVar("T")


def fit_model_input(
    data: CallModelData[Any], *, policy: ContextPolicy, model: str | None
) -> ModelInputData:
    """``data``'s model input, its oldest history dropped (whole messages, no tool
    result without its call) until everything the model gets fits the budget."""
    from agents.run_config import ModelInputData

    counter = counter_for(model)
    budget = budget_of(policy, model)
    instructions = data.model_data.instructions
    fixed = counter.count_tools(tool_schemas(data.agent))
    if instructions:
        fixed += counter.count_message(Message.system(instructions))
    messages = items_to_messages(list(data.model_data.input))
    costs = [counter.count_message(m) for m in messages]
    current = _current_turn(messages)
    total = fixed + counter.count_messages([]) + sum(costs)
    first = 0
    while total > budget and first < current:
        total -= costs[first]
        first += 1
    if total > budget:
        raise ContextOverflow(
            f"the model input needs {total} tokens with the instructions, tools and current "
            f"turn alone, over the budget of {budget} (context_limit - response_reserve)",
            needed=total,
            budget=budget,
        )
    items = without_orphans(messages_to_items(messages[first:]))
    return ModelInputData(input=items, instructions=instructions)  # type: ignore[arg-type]


def tool_schemas(agent: Any) -> list[Mapping[str, Any]]:
    """The agent's function tools as schemas (name, description, parameters)."""
    out: list[Mapping[str, Any]] = []
    for tool in getattr(agent, "tools", None) or []:
        schema = getattr(tool, "params_json_schema", None)
        out.append(
            {
                "name": str(getattr(tool, "name", "")),
                "description": str(getattr(tool, "description", "") or ""),
                "parameters": schema if isinstance(schema, Mapping) else {},
            }
        )
    return out


def _current_turn(messages: Sequence[Message]) -> int:
    """The index of the latest user message (what the turn answers): kept, with all
    after it."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            return index
    return len(messages)


def without_orphans(items: list[T]) -> list[T]:
    """A slice of a window without tool results whose call the slice cut off."""
    called = {_field(i, "call_id") for i in items if _field(i, "type") == "function_call"}
    return [
        i
        for i in items
        if _field(i, "type") != "function_call_output" or _field(i, "call_id") in called
    ]


def _field(item: object, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else None
