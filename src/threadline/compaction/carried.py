"""State a checkpoint carries in its metadata as JSON, read back one way.

A checkpoint written by an older version, or damaged, may hold anything where the state
should be: reading it must give an empty state rather than fail the whole trail."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Self


class Carried(ABC):
    """A book kept across compactions as a JSON object: ``from_json`` is an empty one for
    anything but an object, and ``load`` reads in what an object holds."""

    __slots__ = ()

    @abstractmethod
    def to_json(self) -> dict[str, Any]:
        """What the checkpoint's metadata keeps."""

    @abstractmethod
    def load(self, data: Mapping[str, Any]) -> None:
        """Fills this (empty) book from what ``to_json`` wrote."""

    @classmethod
    def from_json(cls, data: Any) -> Self:
        book = cls()
        if isinstance(data, Mapping):
            book.load(data)
        return book


__all__ = ["Carried"]
