"""Package attributes imported on first use (PEP 562), so importing a package is cheap.

``import threadline.store`` or ``threadline --version`` then loads no agent loop,
compactor or model provider just because a package ``__init__`` re-exports them.
A package lists ``name -> module`` and binds what ``lazy_attributes`` returns to
its ``__getattr__`` and ``__dir__``; type checkers see the real imports in an
``if TYPE_CHECKING:`` block beside it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, whose ``exports`` map names to modules."""

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        vars(importlib.import_module(package))[name] = value  # later lookups skip this
        return value

    def dir_() -> list[str]:
        return sorted(set(vars(importlib.import_module(package))) | set(exports))

    return getattr_, dir_
