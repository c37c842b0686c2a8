"""The base of the store's records: plain dataclasses that check their fields and read
and write the JSON shapes the stores keep, so a session listing loads no pydantic.

Every record (``SessionInfo`` in ``store/session_info.py``, ``Checkpoint`` in
``checkpoints.py``, ``LockHolder`` in ``locks.py``, ...) is a ``@dataclass`` subclass of
``Record``. Constructing one checks each field against its annotation and takes the lax
forms stored data holds: a number as text (Redis hash fields), a time as RFC 3339 text,
an ``int`` for a ``float``. Anything else raises ``ValueError`` naming the record and
the field, which the backends report as a ``CorruptRecord`` or skip with a
``CorruptRecordWarning``.

``to_dict`` gives the JSON data the CLI's ``--json`` and the stores have always written
(times as RFC 3339 text, ``Z`` for UTC, microseconds only when there are some);
``from_dict`` / ``from_json`` read it back, ignoring keys they do not know (a record
written by a newer threadline still loads).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Callable, Collection, Mapping
from datetime import datetime, timedelta
from types import NoneType, UnionType
from typing import Any, ClassVar, Self, TypeVar

MAX_SHOWN = 60
"""Characters of a refused value quoted in an error."""

Convert = Callable[[object], object]
_T = TypeVar("_T")


class Record:
    """A store record: see the module docstring. Subclasses are ``@dataclass`` classes."""

    _converters: ClassVar[dict[type, dict[str, tuple[Convert, tuple[type, ...]]]]] = {}

    def __post_init__(self) -> None:
        cls = type(self)
        for name, (convert, as_is) in _field_converters(cls).items():
            value = getattr(self, name)
            if type(value) in as_is:  # already what the field holds: nothing to check
                continue
            try:
                converted = convert(value)
            except ValueError as exc:
                raise ValueError(f"{cls.__name__}.{name}: {exc}") from None
            if converted is not value:
                object.__setattr__(self, name, converted)

    @classmethod
    def from_dict(cls, data: object) -> Self:
        """The record in ``data`` (a mapping of field names; unknown keys are ignored)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{cls.__name__}: expected an object, got {_described(data)}")
        known = _field_converters(cls)
        missing = [
            f.name
            for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            if f.name not in data
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            raise ValueError(f"{cls.__name__}: missing {', '.join(missing)}")
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def from_json(cls, text: str | bytes) -> Self:
        """The record in a JSON document (``to_json``'s output, or any ``to_dict`` shape)."""
        try:
            data = json.loads(text)
        except ValueError as exc:  # bad JSON, or bytes that are not UTF-8
            raise ValueError(f"{cls.__name__}: not JSON: {exc}") from None
        return cls.from_dict(data)

    def to_dict(self, *, exclude: Collection[str] = ()) -> dict[str, Any]:
        """The record as JSON data, fields in declaration order; containers are copies."""
        return {
            f.name: _plain(getattr(self, f.name))
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            if f.name not in exclude
        }

    def to_json(self, *, exclude: Collection[str] = ()) -> str:
        """``to_dict`` as compact JSON text, as the stores keep it."""
        return json.dumps(self.to_dict(exclude=exclude), ensure_ascii=False, separators=(",", ":"))

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (checked like a new record); the rest shared, not copied."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


def format_time(dt: datetime) -> str:
    """A time as JSON text: ISO 8601 with its offset, ``Z`` for UTC."""
    text = dt.isoformat()
    return text[:-6] + "Z" if dt.utcoffset() == timedelta(0) else text


def _plain(value: object) -> Any:
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


# -- field checks -----------------------------------------------------------------


def _field_converters(cls: type) -> dict[str, tuple[Convert, tuple[type, ...]]]:
    """Each field's check, from its annotation, made once per class, with the types a
    value of it passes as it is (the check would return it unchanged)."""
    found = Record._converters.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = {
            f.name: (_converter(hints[f.name]), _as_is(hints[f.name]))
            for f in dataclasses.fields(cls)
        }
        Record._converters[cls] = found
    return found


def _as_is(tp: Any) -> tuple[type, ...]:
    """The exact types whose values ``_converter(tp)`` returns unchanged, unchecked."""
    if tp in (str, int, float, datetime):
        return (tp,)
    args = typing.get_args(tp)
    if typing.get_origin(tp) is UnionType and len(args) == 2 and NoneType in args:
        return (NoneType, *_as_is(next(a for a in args if a is not NoneType)))
    return ()


def _converter(tp: Any) -> Convert:
    simple: dict[Any, Convert] = {
        str: _str,
        int: _int,
        float: _float,
        datetime: _datetime,
    }
    if tp in simple:
        return simple[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is UnionType and len(args) == 2 and NoneType in args:
        inner = _converter(next(a for a in args if a is not NoneType))
        return lambda v: None if v is None else inner(v)
    if origin is dict and args[0] is str:
        return _object
    if origin is list and isinstance(args[0], type) and issubclass(args[0], Record):
        return _records(args[0])
    raise TypeError(f"records have no check for fields of type {tp!r}")


def _described(value: object) -> str:
    text = repr(value)
    if len(text) > MAX_SHOWN:
        text = text[:MAX_SHOWN] + "..."
    return f"{type(value).__name__} {text}"


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected text, got {_described(value)}")
    return value


def _int(value: object) -> int:
    """An integer, or one written as text (a Redis hash field); never a bool or a fraction."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return _from_text(value, int, "an integer")


def _float(value: object) -> float:
    if isinstance(value, float):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return _from_text(value, float, "a number")


def _from_text(value: object, parse: Callable[[str], _T], what: str) -> _T:
    """A value written as text, which ``parse`` reads; anything else names ``what``."""
    if isinstance(value, str):
        try:
            return parse(value)
        except ValueError:
            pass
    raise ValueError(f"expected {what}, got {_described(value)}")


def _datetime(value: object) -> datetime:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    raise ValueError(f"expected an RFC 3339 time, got {_described(value)}")


def _object(value: object) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ValueError(f"expected a JSON object, got {_described(value)}")
    return value


def _records(record: type[Record]) -> Convert:
    def convert(value: object) -> list[Record]:
        if not isinstance(value, list):
            raise ValueError(f"expected a list, got {_described(value)}")
        return [v if isinstance(v, record) else record.from_dict(v) for v in value]

    return convert
