"""Views of a session: the context window sent to a model, never stored history."""

from threadline.context.builder import ContextReport, ContextWindow, Section, build_context
from threadline.context.policy import ContextPolicy

__all__ = ["ContextPolicy", "ContextReport", "ContextWindow", "Section", "build_context"]
