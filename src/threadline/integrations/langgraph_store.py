"""A LangGraph long-term memory store (``BaseStore``) over any threadline store.

``ThreadlineStore(store_or_url, name="default")`` is what LangGraph's
``InMemoryStore``, ``SqliteStore`` and ``PostgresStore`` are: items (a JSON object)
under a namespace (a tuple of labels) and a key, with ``put`` / ``get`` /
``delete``, ``search`` under a namespace prefix (a value ``filter``, ``limit`` and
``offset``, a ``query``), ``list_namespaces`` (prefix, suffix, ``*`` wildcards,
``max_depth``), ``batch``, and their ``a*`` forms. It passes LangGraph's own
``BaseStore`` tests (``tests/third_party/test_langgraph_store.py``) on SQLite,
PostgreSQL and Redis.

- Items persist as documents of one threadline session the store owns
  (``lgs-<name>``, ``integrations/documents.py``), so every backend keeps them,
  each with its created and updated time.
- ``search(query=...)`` ranks with threadline memory's lexical search
  (``integrations/doc_search.py``: BM25 over memory's terms), not embeddings: every
  item the namespace and filter admit is returned, best first, with its score; an
  item put with ``index=False`` is never scored and comes last, one put with
  ``index=["field", ...]`` is scored on those fields (LangGraph's path syntax);
  ``index_fields`` sets the default (else every text of the value).
- No TTL (``supports_ttl`` is False): a put with a ``ttl`` is refused, as
  LangGraph's base class does for such stores.
- ``abatch`` runs ``batch`` in a worker thread: one implementation, and the event
  loop never waits on the database.

A batch runs its operations in order: a read sees the puts before it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Iterator
from typing import Any, cast

from threadline.errors import UsageError
from threadline.integrations.binding import Face, missing_extra
from threadline.integrations.doc_search import best_first, scores
from threadline.integrations.documents import Document, Documents, check_name, encode
from threadline.store import Store

try:
    from langgraph.store import base as lg
    from langgraph.store.base.embed import get_text_at_path
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise missing_extra("LangGraph", "langgraph", exc) from exc

FACE = Face("langgraph-store", "lgs")
"""The session a store keeps its items in: ``lgs-<name>``."""

FIELD_VALUE = "v"
FIELD_INDEX = "i"
"""A stored item: ``{"v": value, "i": fields}`` (``i``: None, False or a field list)."""


def item_name(namespace: tuple[str, ...], key: str) -> str:
    """The document name of an item: its labels and key as one JSON array, so a
    namespace prefix is a name prefix (``["a","b",`` holds ``("a", "b", ...)``)."""
    return check_name(encode([*namespace, key], "a namespace"), f"item {key!r} in {namespace}")


def prefix_name(labels: tuple[str, ...]) -> str:
    """The name prefix of every item under the namespace prefix ``labels``."""
    return "[" if not labels else encode(list(labels), "a namespace")[:-1] + ","


def _parts(doc: Document) -> tuple[tuple[str, ...], str]:
    labels = json.loads(doc.name)
    return tuple(labels[:-1]), labels[-1]


def _matches(value: Any, wanted: Any) -> bool:
    """LangGraph's filter: equal values, nested objects matched key by key, and the
    operators ``$eq $ne $gt $gte $lt $lte``."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_compare(value, op, arg) for op, arg in wanted.items())
        return isinstance(value, dict) and all(_matches(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_matches(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _compare(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(value == arg)
    if op == "$ne":
        return bool(value != arg)
    if op not in ("$gt", "$gte", "$lt", "$lte"):
        raise UsageError(f"unsupported filter operator {op!r}: use $eq $ne $gt $gte $lt $lte")
    try:
        a, b = float(value), float(arg)
    except (TypeError, ValueError):
        return False
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


def _texts(value: Any) -> Iterator[str]:
    """Every text of a JSON value (the default for what a query is matched on)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _texts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _texts(v)


def _label_matches(labels: tuple[str, ...], path: tuple[str, ...]) -> bool:
    return len(labels) >= len(path) and all(
        p in ("*", a) for a, p in zip(labels[: len(path)], path, strict=True)
    )


def _namespace_matches(namespace: tuple[str, ...], condition: lg.MatchCondition) -> bool:
    path = tuple(condition.path)
    if condition.match_type == "prefix":
        return _label_matches(namespace, path)
    if condition.match_type == "suffix":
        return _label_matches(namespace[::-1], path[::-1])
    raise UsageError(f"unknown namespace match type {condition.match_type!r}")


class ThreadlineStore(lg.BaseStore):
    """LangGraph's ``BaseStore`` kept in a threadline store (see the module doc)."""

    supports_ttl = False

    def __init__(
        self,
        store: str | Store | None = None,
        *,
        name: str = "default",
        index_fields: list[str] | None = None,
    ) -> None:
        self._docs = Documents(FACE, name, store)
        self.name = name
        self.index_fields = list(index_fields) if index_fields is not None else None

    @property
    def store(self) -> Store:
        return self._docs.store

    def close(self) -> None:
        """Close the store if it was opened here from a URL."""
        self._docs.close()

    # -- the one implementation ---------------------------------------------

    def batch(self, ops: Iterable[lg.Op]) -> list[lg.Result]:
        results: list[lg.Result] = []
        pending: dict[tuple[tuple[str, ...], str], lg.PutOp] = {}
        for op in ops:
            if isinstance(op, lg.PutOp):
                if op.ttl is not None:
                    raise NotImplementedError(
                        "ThreadlineStore does not support TTL: put with ttl=None"
                    )
                pending[(tuple(op.namespace), op.key)] = op
                results.append(None)
                continue
            self._write(pending)
            results.append(self._read(op))
        self._write(pending)
        return results

    async def abatch(self, ops: Iterable[lg.Op]) -> list[lg.Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # -- writes ---------------------------------------------------------------

    def _write(self, pending: dict[tuple[tuple[str, ...], str], lg.PutOp]) -> None:
        """Store the puts (last one per item wins) and deletes gathered so far."""
        if not pending:
            return
        puts: dict[str, str] = {}
        deletes: list[str] = []
        for (namespace, key), op in pending.items():
            name = item_name(namespace, key)
            if op.value is None:
                deletes.append(name)
                continue
            if not isinstance(op.value, dict):
                raise UsageError(f"an item's value must be a dict, got {type(op.value).__name__}")
            index = op.index if op.index is False or op.index is None else list(op.index)
            doc = {FIELD_VALUE: op.value, FIELD_INDEX: index}
            puts[name] = encode(doc, f"the value of item {key!r}")
        pending.clear()
        self._docs.put_many(puts)
        self._docs.delete_many(deletes)

    # -- reads ----------------------------------------------------------------

    def _read(self, op: lg.Op) -> lg.Result:
        if isinstance(op, lg.GetOp):
            doc = self._docs.get(item_name(tuple(op.namespace), op.key))
            return None if doc is None else self._item(doc)
        if isinstance(op, lg.SearchOp):
            return self._search(op)
        if isinstance(op, lg.ListNamespacesOp):
            return self._namespaces(op)
        raise UsageError(f"unknown store operation {type(op).__name__}")

    @staticmethod
    def _item(doc: Document, score: float | None = None, *, found: bool = False) -> lg.Item:
        """The item a document holds: a ``SearchItem`` (with its score) for a search."""
        namespace, key = _parts(doc)
        fields = {
            "namespace": namespace,
            "key": key,
            "value": doc.value[FIELD_VALUE],
            "created_at": doc.created_at,
            "updated_at": doc.updated_at,
        }
        return lg.SearchItem(**fields, score=score) if found else lg.Item(**fields)

    def _search(self, op: lg.SearchOp) -> list[lg.SearchItem]:
        docs = [
            d
            for d in self._docs.under(prefix_name(tuple(op.namespace_prefix)))
            if not op.filter
            or all(_matches(d.value[FIELD_VALUE].get(k), v) for k, v in op.filter.items())
        ]
        found: list[float | None] = [None] * len(docs)
        order = list(range(len(docs)))
        if op.query:
            found = scores(op.query, [self._text(d) for d in docs])
            order = best_first(found)
        page = order[op.offset : op.offset + op.limit]
        return [cast(lg.SearchItem, self._item(docs[i], found[i], found=True)) for i in page]

    def _text(self, doc: Document) -> str | None:
        """What a query is matched on: the item's indexed fields, None if not indexed."""
        value, fields = doc.value[FIELD_VALUE], doc.value[FIELD_INDEX]
        if fields is False:
            return None
        fields = fields if fields is not None else self.index_fields
        if fields is None:
            return "\n".join(_texts(value))
        return "\n".join(t for path in fields for t in get_text_at_path(value, path))

    def _namespaces(self, op: lg.ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = tuple(op.match_conditions or ())
        literal: tuple[str, ...] = ()
        for c in conditions:  # the labels before a wildcard narrow what is read
            if c.match_type == "prefix":
                literal = tuple(c.path[: list(c.path).index("*")] if "*" in c.path else c.path)
        found: set[tuple[str, ...]] = set()
        for doc in self._docs.under(prefix_name(literal)):
            namespace, _ = _parts(doc)
            if all(_namespace_matches(namespace, c) for c in conditions):
                found.add(namespace[: op.max_depth] if op.max_depth is not None else namespace)
        return sorted(found)[op.offset : op.offset + op.limit]
