"""Views of a session: the context window sent to a model, never stored history."""

from typing import TYPE_CHECKING

from threadline.lazy_exports import lazy_attributes

if TYPE_CHECKING:
    from threadline.context.builder import ContextReport, ContextWindow, Section, build_context
    from threadline.context.policy import ContextPolicy

__all__ = ["ContextPolicy", "ContextReport", "ContextWindow", "Section", "build_context"]

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        **dict.fromkeys(
            ("ContextReport", "ContextWindow", "Section", "build_context"),
            "threadline.context.builder",
        ),
        "ContextPolicy": "threadline.context.policy",
    },
)
"""Imported on first use: ``context.truncation`` alone (for the CLI) skips the builder."""
