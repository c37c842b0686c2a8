"""YAML a user wrote (an agent file, a ``SKILL.md``'s front matter), read within bounds.

PyYAML composes nodes recursively, so 50,000 nested brackets (``[[[...``, or ``- - - x``
in block style) ended in ``RecursionError``, and aliases expand by reference, so a few
hundred bytes of ``&a [*b, *b, ...]`` describe more nodes than memory holds for anyone
who walks them (issue 33). ``load_yaml`` counts while it composes, before anything is
built: more than ``MAX_YAML_DEPTH`` levels (the JSON limit) or more than
``MAX_YAML_NODES`` nodes, an alias counting as the nodes it stands for, stops the
parse. Every way the text cannot be read, those limits, a syntax error or a value
the loader cannot build (``2024-13-45`` as a date), is the caller's error class
naming the file, so it is that file's problem and nothing else's.
"""

from __future__ import annotations

from typing import Any

import yaml

from threadline.errors import ThreadlineError
from threadline.json_limits import MAX_JSON_DEPTH

MAX_YAML_DEPTH = MAX_JSON_DEPTH
MAX_YAML_NODES = 100_000
"""Far more than any agent file or front matter holds (a few dozen)."""
MAX_YAML_CHARS = 1024 * 1024


class _Exceeded(yaml.YAMLError):
    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.mark = mark


class _BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` that counts the nodes it composes and how deep it is."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0
        self._sizes: dict[str, int] = {}  # anchor -> the nodes it stands for

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            self._count(self._sizes.get(event.anchor or "", 1), event)
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_YAML_DEPTH:
            raise _Exceeded(f"nests more than {MAX_YAML_DEPTH} levels deep", event.start_mark)
        before = self._nodes
        self._count(1, event)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            self._sizes[anchor] = self._nodes - before
        return node

    def _count(self, nodes: int, event: yaml.Event) -> None:
        self._nodes += nodes
        if self._nodes > MAX_YAML_NODES:
            raise _Exceeded(
                f"holds more than {MAX_YAML_NODES:,} values (aliases counted as what they "
                "stand for)",
                event.start_mark,
            )


def load_yaml(
    text: str,
    *,
    source: str,
    error: type[ThreadlineError],
    what: str = "YAML",
    first_line: int = 1,
) -> Any:
    """``text`` parsed as YAML, or ``error`` naming ``source`` (and the line, counted from
    ``first_line`` for text cut from a larger file): see the module docstring."""
    if len(text) > MAX_YAML_CHARS:
        raise error(f"{source}: {what} of {len(text):,} characters is over {MAX_YAML_CHARS:,}")
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)  # refuses control characters at once
        return loader.get_single_data()
    except _Exceeded as exc:
        raise error(f"{_where(source, exc.mark, first_line)}: {what} {exc.problem}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        raise error(f"{_where(source, mark, first_line)}: {what} syntax error: {problem}") from exc
    except yaml.YAMLError as exc:
        raise error(f"{source}: {what} error: {exc}") from exc
    except RecursionError:  # not expected within the limits; still this file's problem
        raise error(f"{source}: {what} nests too deep to read") from None
    except (ValueError, TypeError, OverflowError) as exc:  # a value the loader cannot build
        raise error(f"{source}: {what} holds a value that cannot be read: {exc}") from exc
    finally:
        if loader is not None:
            loader.dispose()


def _where(source: str, mark: Any, first_line: int) -> str:
    if mark is None:
        return source
    return f"{source}:{mark.line + first_line}:{mark.column + 1}"


__all__ = ["MAX_YAML_DEPTH", "MAX_YAML_NODES", "load_yaml"]
