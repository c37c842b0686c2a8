"""tRPC v11's HTTP wire format for the procedures (``/trpc/<name>``), as ``@trpc/client``'s
``httpLink`` and ``httpBatchLink`` speak it.

- A query is ``GET /trpc/session.get?input=<url-encoded JSON>``, a mutation ``POST``
  with the JSON input as body; the answer is ``{"result": {"data": ...}}`` or
  ``{"error": {"message", "code": <JSON-RPC number>, "data": {"code", "httpStatus",
  "path"}}}`` with that status. An input wrapped as ``{"json": ...}`` (superjson's
  shape) is unwrapped.
- A batch is ``/trpc/a,b?batch=1`` with the inputs as ``{"0": ..., "1": ...}`` (in
  ``input`` for queries, the body for mutations); the answer is a list with one
  result or error per call, in order, sent with their common status, or 207 when
  they differ. Queries and mutations cannot share a batch (400), nor may a batch have
  more than ``MAX_BATCH`` calls. Calls run one after another.
- Streamed batches (``httpBatchStreamLink``, ``trpc-accept: application/jsonl``) are
  refused with 400: use ``httpBatchLink`` or ``httpLink``.

Input that is not UTF-8, not JSON or nested deeper than ``MAX_JSON_DEPTH`` is a 400
``BAD_REQUEST`` like any other invalid input, never a 500.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from threadline.json_limits import MAX_JSON_DEPTH, TooDeep, parse_json
from threadline.server.procedures import (
    PROCEDURES,
    ProcedureError,
    Procedures,
    classify,
    error_body,
    error_extra,
    validation_message,
)

MAX_BATCH: Final = 25
"""Calls in one batch; a longer batch is refused whole."""
STREAM_TYPE = "application/jsonl"
METHODS: Final = {"query": "GET", "mutation": "POST"}


def bad_request(message: str) -> ProcedureError:
    return ProcedureError("BAD_REQUEST", message)


def error_response(exc: Exception, path: str | None = None) -> JSONResponse:
    """``exc`` as tRPC's error shape, with its status."""
    answer = _error(exc, path)
    return JSONResponse(answer, status_code=_status(answer))


def _error(exc: Exception, path: str | None) -> dict[str, Any]:
    code, status, message = classify(exc)
    return error_body(code, status, message, path, error_extra(exc))


def _status(answer: dict[str, Any]) -> int:
    error = answer.get("error")
    return int(error["data"]["httpStatus"]) if error else 200


@dataclass(frozen=True)
class _Query:
    batch: bool
    input: str | None


def _query(request: Request) -> _Query:
    """``batch`` and ``input`` from the raw query string, decoded strictly as UTF-8."""
    raw = request.scope.get("query_string", b"").decode("latin-1")
    try:
        pairs = dict(parse_qsl(raw, keep_blank_values=True, errors="strict"))
    except UnicodeDecodeError:
        raise bad_request("the query string is not UTF-8") from None
    return _Query(pairs.get("batch") == "1", pairs.get("input"))


def parse_input(text: str | bytes | None) -> Any:
    """The JSON in a query's ``input`` or a mutation's body (None when there is none)."""
    if text is None:
        return None
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise bad_request(f"the input is not UTF-8 (byte {exc.start})") from None
    if not text.strip():
        return None
    try:
        return parse_json(text)
    except TooDeep:
        raise bad_request(f"the input nests deeper than {MAX_JSON_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise bad_request(f"the input is not JSON: {exc.msg}") from None


def _unwrap(raw: Any) -> Any:
    if isinstance(raw, dict) and set(raw) == {"json"}:
        raw = raw["json"]
    return {} if raw is None else raw


def _call(procs: Procedures, name: str, method: str, raw: Any) -> dict[str, Any]:
    """One call's answer: ``{"result": ...}`` or ``{"error": ...}`` (never raises)."""
    proc = PROCEDURES.get(name)
    try:
        if proc is None:
            raise ProcedureError("NOT_FOUND", f"no procedure {name!r}")
        wanted = METHODS[proc.kind]
        if method != wanted:
            raise ProcedureError(
                "METHOD_NOT_SUPPORTED", f"{name} is a {proc.kind}: send it with {wanted}"
            )
        if isinstance(raw, Exception):
            raise raw
        inp = proc.input.model_validate(_unwrap(raw))
        return {"result": {"data": proc.call(procs, inp)}}
    except ValidationError as exc:
        return _error(bad_request(validation_message(exc.errors())), name)
    except Exception as exc:
        return _error(exc, name)


def _batch_status(answers: Sequence[dict[str, Any]]) -> int:
    statuses = {_status(a) for a in answers}
    return statuses.pop() if len(statuses) == 1 else 207


async def handle(request: Request, path: str, procs: Procedures) -> Response:
    """Answer one ``/trpc/<path>`` request (see the module docstring)."""
    method = request.method
    if method == "HEAD":
        return Response(status_code=204)
    try:
        query = _query(request)
    except ProcedureError as exc:
        return error_response(exc, path if "," not in path else None)
    names = path.split(",") if query.batch else [path]
    single = None if query.batch else path
    if method not in ("GET", "POST"):
        message = f"{method} is not a tRPC method: queries are GET, mutations POST"
        answer = error_response(ProcedureError("METHOD_NOT_SUPPORTED", message), single)
        answer.headers["allow"] = "GET, POST"
        return answer
    accept = request.headers.get("trpc-accept") or request.headers.get("accept") or ""
    if STREAM_TYPE in [t.strip() for t in accept.split(",")]:
        message = "streamed batches (httpBatchStreamLink) are not supported: use httpBatchLink"
        return error_response(bad_request(message), single)
    if len(names) > MAX_BATCH:
        return error_response(bad_request(f"a batch may have at most {MAX_BATCH} calls"))
    kinds = {PROCEDURES[n].kind for n in names if n in PROCEDURES}
    if len(kinds) > 1:
        return error_response(bad_request("a batch cannot mix queries and mutations"))
    inputs: list[Any]
    try:
        raw = parse_input(query.input if method == "GET" else await request.body())
        if not query.batch:
            inputs = [raw]
        elif raw is None:
            inputs = [None] * len(names)
        elif not isinstance(raw, dict):
            raise bad_request('"input" needs to be an object when doing a batch call')
        else:
            inputs = [raw.get(str(i)) for i in range(len(names))]
    except ProcedureError as exc:  # every call of the request fails the same way
        inputs = [exc] * len(names)
    answers = [
        await run_in_threadpool(_call, procs, n, method, i)
        for n, i in zip(names, inputs, strict=True)
    ]
    if not query.batch:
        return JSONResponse(answers[0], status_code=_status(answers[0]))
    return JSONResponse(answers, status_code=_batch_status(answers))
