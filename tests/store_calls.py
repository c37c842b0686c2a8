"""Counting what a store's methods give back, to test what a call reads without a clock."""

from __future__ import annotations

from typing import Any


def sizes_returned(store: Any, method: str) -> list[int]:
    """Replace ``store.<method>`` on the instance by one that records, per call, how
    many entries it returned (a list's length; 1 or 0 for one item or None)."""
    original = getattr(store, method)
    sizes: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        found = original(*args, **kwargs)
        sizes.append(len(found) if isinstance(found, list) else int(found is not None))
        return found

    setattr(store, method, counted)
    return sizes


def threads_calling(store: Any, method: str) -> set[int]:
    """Replace ``store.<method>`` on the instance by one that records the thread of
    each call (to show that an async face runs the store off the event loop)."""
    import threading

    original = getattr(store, method)
    threads: set[int] = set()

    def traced(*args: Any, **kwargs: Any) -> Any:
        threads.add(threading.get_ident())
        return original(*args, **kwargs)

    setattr(store, method, traced)
    return threads
