"""Bad input, one row per case: the library and the CLI refuse it the documented way.

Each library case names the ``ThreadlineError`` class it must raise (exactly that
class) and words its message must hold; each CLI case the exit code and the words.
Every case then checks that nothing changed: the store's sessions, messages,
checkpoints, scratchpad and memo are dumped before and after, and no file appears
anywhere under the test's directory (a traversal would put one there). The cases
are data: the tables below, grouped by kind, so their count is plain.
``tests/test_cli_bad_input.py`` holds the older CLI cases (ids with ``/``, ``..``,
NUL, malformed import lines, unusable stores); none is repeated here.
"""

# The case tables keep one case per line, however long, so they read as tables.
# ruff: noqa: E501

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from threadline import (
    ConfigError,
    ContextPolicy,
    FilePart,
    ImagePart,
    InvalidMessage,
    InvalidSessionId,
    Message,
    Store,
    ThreadlineError,
    ToolCall,
    Usage,
    UsageError,
    open_store,
)
from threadline.cli.app import app
from threadline.config import CONFIG_DIR_ENV, CONFIG_ENV
from threadline.store import STORE_ENV

SID = "keep-0001"
HUGE = str(10**30)
BIG_IMAGE = "QUJD" * 10_001
"""Valid base64 over the 32 KiB that JSONL moves to its media folder."""


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"d": value}
    return value


def append(*messages: Message) -> Callable[[Store, str], object]:
    return lambda store, sid: store.get_session(sid).append(list(messages))


def call(call_id: str = "c1", **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name="f", arguments=arguments)


# -- the library: (kind, case, call, error class, words in the message) -----------------

LibraryCase = tuple[str, str, Callable[[Store, str], object], type[ThreadlineError], str]

LIBRARY: list[LibraryCase] = [
    # session ids and agent names: the full-match rule, every way round it
    ("id", "session id ending in a newline", lambda s, _: s.create_session(id="coder\n"), InvalidSessionId, "is invalid"),
    ("id", "agent name ending in a newline", lambda s, _: s.create_session(agent="coder\n"), InvalidSessionId, "agent name"),
    ("id", "session id with a tab", lambda s, _: s.create_session(id="a\tb"), InvalidSessionId, "is invalid"),
    ("id", "session id with a Cyrillic letter", lambda s, _: s.create_session(id="kеep-0002"), InvalidSessionId, "is invalid"),
    ("id", "prefix ending in a newline", lambda s, _: s.get_session("keep\n"), InvalidSessionId, "is invalid"),
    ("id", "agent filter ending in a newline", lambda s, _: s.list_sessions(agent="a\n"), InvalidSessionId, "agent name"),
    ("id", "session id that is bytes", lambda s, _: s.create_session(id=b"abc"), InvalidSessionId, "must be a string"),
    ("id", "message id ending in a newline", append(Message.user("x", id="m1\n")), InvalidMessage, "message id"),
    ("id", "message id with a NUL", append(Message.user("x", id="a\x00b")), InvalidMessage, "NUL"),
    ("id", "message id with a space", append(Message.user("x", id="a b")), InvalidMessage, "message id"),
    ("id", "message id starting with a dot", append(Message.user("x", id=".hidden")), InvalidMessage, "message id"),
    # traversal: ids and references that would name a path outside the store
    ("traversal", "message id up the tree", append(Message.user([ImagePart(data=BIG_IMAGE, media_type="image/png")], id="../../../../escaped" ) ), InvalidMessage, "path separator"),
    ("traversal", "absolute message id", append(Message.user([ImagePart(data=BIG_IMAGE, media_type="image/png")], id="/tmp/escaped") ), InvalidMessage, "path separator"),
    ("traversal", "message id with backslashes", append(Message.user("x", id="..\\..\\escaped")), InvalidMessage, "path separator"),
    ("traversal", "message id of '..'", append(Message.user("x", id="..")), InvalidMessage, "'..'"),
    ("traversal", "media reference up the tree", append(Message.user([ImagePart(media_ref="../../etc/passwd")])), InvalidMessage, "media reference"),
    ("traversal", "absolute media reference", append(Message.user([ImagePart(media_ref="/etc/passwd")])), InvalidMessage, "media reference"),
    ("traversal", "media reference ending in '..'", append(Message.user([ImagePart(media_ref="keep-0001_media/..")])), InvalidMessage, "media reference"),
    ("traversal", "agent filter '../x' on delete_all", lambda s, _: s.delete_all(agent="../x"), InvalidSessionId, "path separator"),
    # control characters where they would reach a terminal or a key
    ("control", "tool call id with ESC", append(Message.assistant("", tool_calls=[call("c\x1b[2J")])), InvalidMessage, "control character"),
    ("control", "tool result for a call id with a newline", append(Message.tool("x", tool_call_id="c1\n")), InvalidMessage, "control character"),
    ("control", "title with a NUL", lambda s, sid: s.rename_session(sid, "a\x00b"), UsageError, "NUL"),
    ("control", "scratchpad name with a NUL", lambda s, sid: s.scratchpad_write(sid, "a\x00", "x"), UsageError, "scratchpad name"),
    # over-long values
    ("long", "1 MiB session id", lambda s, _: s.create_session(id="x" * 2**20), InvalidSessionId, "too long"),
    ("long", "1 MiB message id", append(Message.user("x", id="x" * 2**20)), InvalidMessage, "too long"),
    ("long", "129-character message id", append(Message.user("x", id="x" * 129)), InvalidMessage, "too long"),
    ("long", "10,000-character tool call id", append(Message.assistant("", tool_calls=[call("c" * 10_000)])), InvalidMessage, "1-256"),
    ("long", "model name of 300 characters", lambda s, _: s.create_session(model="m" * 300), UsageError, "model name"),
    ("long", "title of 501 characters", lambda s, sid: s.rename_session(sid, "t" * 501), UsageError, "500"),
    ("long", "scratchpad name of 257 characters", lambda s, sid: s.scratchpad_write(sid, "n" * 257, "x"), UsageError, "scratchpad name"),
    # empty values
    ("empty", "empty session id", lambda s, _: s.create_session(id=""), InvalidSessionId, "is invalid"),
    ("empty", "empty agent name", lambda s, _: s.create_session(agent=""), InvalidSessionId, "agent name"),
    ("empty", "empty message id", append(Message.user("x", id="")), InvalidMessage, "message id"),
    ("empty", "empty tool call id", append(Message.assistant("", tool_calls=[call("")])), InvalidMessage, "1-256"),
    ("empty", "empty batch", append(), UsageError, "empty"),
    ("empty", "empty search query", lambda s, _: s.search("   "), UsageError, "empty"),
    ("empty", "empty store URL", lambda s, _: open_store(""), UsageError, "empty"),
    # duplicates
    ("duplicate", "one tool call id twice in a message", append(Message.assistant("", tool_calls=[call("c1"), call("c1")])), InvalidMessage, "appears twice"),
    ("duplicate", "one message id twice in a batch", append(Message.user("a", id="dup-1"), Message.user("b", id="dup-1")), InvalidMessage, "twice"),
    ("duplicate", "a session id that exists", lambda s, sid: s.create_session(id=sid), ThreadlineError, "already exists"),
    # NaN and infinities: not JSON, stored as null or refused by PostgreSQL
    ("nan", "NaN tool argument", append(Message.assistant("", tool_calls=[call(x=float("nan"))])), InvalidMessage, "nan"),
    ("nan", "infinite metadata value", append(Message.user("x", metadata={"m": float("inf")})), InvalidMessage, "m is inf"),
    ("nan", "-inf deep in a list argument", append(Message.assistant("", tool_calls=[call(a=[[1, float("-inf")]])])), InvalidMessage, "a[0][1]"),
    ("nan", "NaN in session metadata", lambda s, sid: s.update_session(sid, metadata={"x": float("nan")}), UsageError, "x is nan"),
    ("nan", "inf in checkpoint metadata", lambda s, sid: s.add_checkpoint(sid, covers_up_to=2, summary="s", metadata={"x": float("inf")}), UsageError, "checkpoint metadata"),
    ("nan", "NaN as a tail limit", lambda s, sid: s.tail(sid, float("nan")), UsageError, "must be an integer"),
    ("nan", "NaN low_water", lambda s, _: ContextPolicy(low_water=float("nan")), ConfigError, "low_water"),
    ("nan", "infinite summary_share", lambda s, _: ContextPolicy(summary_share=float("inf")), ConfigError, "summary_share"),
    # nesting a reader could not read back
    ("deep", "metadata nested 150 deep", append(Message.user("x", metadata=nested(150))), InvalidMessage, "levels deep"),
    ("deep", "session metadata nested 150 deep", lambda s, _: s.create_session(metadata=nested(150)), UsageError, "levels deep"),
    ("deep", "arguments nested 10,000 deep", append(Message.assistant("", tool_calls=[call(a=nested(10_000))])), InvalidMessage, "levels deep"),
    # inline data that is not what it claims
    ("malformed", "image data that is not base64", append(Message.user([ImagePart(data="!" * 40_000, media_type="image/png")])), InvalidMessage, "not base64"),
    ("malformed", "image data in URL-safe base64", append(Message.user([ImagePart(data="-_-_" * 10_001, media_type="image/png")])), InvalidMessage, "not base64"),
    ("malformed", "file data with bad padding", append(Message.user([FilePart(uri="a.bin", data="abc")])), InvalidMessage, "not base64"),
    ("malformed", "image with two sources", lambda s, _: ImagePart(url="https://x/y.png", data="QUJD", media_type="image/png"), InvalidMessage, "exactly one"),
    ("malformed", "image data without a media type", lambda s, _: ImagePart(data="QUJD"), InvalidMessage, "media_type"),
    # wrong types
    ("type", "message content that is a number", lambda s, _: Message.user(123), InvalidMessage, "content"),
    ("type", "message id that is a number", lambda s, _: Message.user("x", id=5), InvalidMessage, "id"),
    ("type", "part of an unknown type", lambda s, _: Message.user([{"type": "video"}]), InvalidMessage, "content"),
    ("type", "tool arguments that are a string", lambda s, _: ToolCall(id="c", name="f", arguments="x"), InvalidMessage, "arguments"),
    ("type", "token usage as text", lambda s, _: Usage(input_tokens="many"), InvalidMessage, "input_tokens"),
    ("type", "created_at that is not a time", lambda s, _: Message.user("x", created_at="yesterday"), InvalidMessage, "created_at"),
    ("type", "a dict where a message goes", lambda s, sid: s.get_session(sid).append({"role": "user"}), InvalidMessage, "expected a Message"),
    ("type", "title that is a number", lambda s, sid: s.rename_session(sid, 123), UsageError, "title"),
    ("type", "model name that is a number", lambda s, sid: s.update_session(sid, model=5), UsageError, "model name"),
    ("type", "session metadata that is a list", lambda s, _: s.create_session(metadata=[1]), UsageError, "JSON object"),
    ("type", "scratchpad content that is a number", lambda s, sid: s.scratchpad_write(sid, "n", 123), UsageError, "scratchpad content"),
    ("type", "checkpoint summary that is a number", lambda s, sid: s.add_checkpoint(sid, covers_up_to=1, summary=5), UsageError, "summary"),
    ("type", "store URL that is a number", lambda s, _: open_store(123), UsageError, "must be a string"),
    ("type", "tail limit as text", lambda s, sid: s.tail(sid, "5"), UsageError, "limit"),
    ("type", "page size of True", lambda s, _: s.list_sessions(limit=True), UsageError, "page size"),
    ("type", "after_seq as text", lambda s, sid: s.read_messages(sid, after_seq="0"), UsageError, "after_seq"),
    # roles and names that do not exist
    ("unknown", "unknown role", lambda s, _: Message(role="bot", content="x"), InvalidMessage, "role"),
    ("unknown", "role in capitals", lambda s, _: Message(role="USER", content="x"), InvalidMessage, "role"),
    ("unknown", "tool message without tool_call_id", lambda s, _: Message(role="tool", content="x"), InvalidMessage, "tool_call_id"),
    ("unknown", "unknown trim strategy", lambda s, _: ContextPolicy(trim_strategy="random"), ConfigError, "trim_strategy"),
    ("unknown", "unknown policy field", lambda s, _: ContextPolicy(bogus=1), ConfigError, "bogus"),
    ("unknown", "unknown store scheme", lambda s, _: open_store("ftp://host/x"), UsageError, "unknown store scheme"),
    ("unknown", "store path without a scheme", lambda s, _: open_store("relative/dir"), UsageError, "no scheme"),
    ("unknown", "sqlite URL without a path", lambda s, _: open_store("sqlite://"), UsageError, "no path"),
    ("unknown", "memory URL with a path", lambda s, _: open_store("memory://x"), UsageError, "takes no path"),
    # negative, zero and huge numbers
    ("negative", "negative response_reserve", lambda s, _: ContextPolicy(response_reserve=-1), ConfigError, "response_reserve"),
    ("negative", "negative list offset", lambda s, _: s.list_sessions(offset=-1), UsageError, "offset"),
    ("negative", "checkpoint covering -1", lambda s, sid: s.add_checkpoint(sid, covers_up_to=-1, summary="s"), UsageError, "covers_up_to"),
    ("zero", "context_limit of zero", lambda s, _: ContextPolicy(context_limit=0), ConfigError, "context_limit"),
    ("zero", "page size of zero", lambda s, _: s.list_sessions(limit=0), UsageError, "page size"),
    ("huge", "page size of 10**30", lambda s, _: s.list_sessions(limit=10**30), UsageError, "page size"),
    ("huge", "checkpoint covering 10**30", lambda s, sid: s.add_checkpoint(sid, covers_up_to=10**30, summary="s"), UsageError, "covers_up_to"),
    # policies that could never build a context fail when made, not when used
    ("policy", "reserve larger than the limit", lambda s, _: ContextPolicy(context_limit=100, response_reserve=200), ConfigError, "response_reserve (200) must be less than context_limit (100)"),
    ("policy", "reserve equal to the limit", lambda s, _: ContextPolicy(context_limit=4096, response_reserve=4096), ConfigError, "context_limit"),
    ("policy", "limit below the default reserve", lambda s, _: ContextPolicy(context_limit=1000), ConfigError, "response_reserve"),
    ("policy", "hard prune below soft prune", lambda s, _: ContextPolicy(prune_soft_at=0.9, prune_hard_at=0.5), ConfigError, "prune_hard_at"),
    ("policy", "aggressive hard prune below soft", lambda s, _: ContextPolicy(prune_aggressive_soft_at=0.5, prune_aggressive_hard_at=0.2), ConfigError, "prune_aggressive_hard_at"),
]  # fmt: skip


# -- the CLI: (kind, case, arguments, file content, exit code, words in the output) --------
# "{file}" in the arguments is a file holding the content; a case that starts with
# --store replaces the store under test (which still must not change).

CliCase = tuple[str, str, list[str], str | bytes | None, int, str]


def export_doc(*messages: dict[str, Any]) -> str:
    """A threadline JSON export holding ``messages`` (Python's json writes NaN as is)."""
    doc = {"format": "threadline.session", "version": 1, "session": {}, "messages": list(messages)}
    return json.dumps(doc)


def openai_calls(*ids: str) -> str:
    calls = [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
    ]
    results = [{"role": "tool", "tool_call_id": i, "content": "ok"} for i in ids]
    return json.dumps(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            *results,
        ]
    )


CHAT = json.dumps([{"role": "user", "content": "hi"}])
IMPORT = ["sessions", "import", "{file}"]
PG = "postgresql://postgres@127.0.0.1:5432/test"

CLI: list[CliCase] = [
    # ids and agent names
    ("id", "show an id ending in a newline", ["sessions", "show", f"{SID}\n"], None, 2, "is invalid"),
    ("id", "history of an absolute path", ["sessions", "history", "/etc/passwd"], None, 2, "path separator"),
    ("id", "rename a backslash path", ["sessions", "rename", "..\\..\\x", "t"], None, 2, "path separator"),
    ("id", "context of an id holding ESC", ["context", "keep\x1b[2J"], None, 2, "is invalid"),
    ("id", "list the sessions of agent 'a\\n'", ["sessions", "list", "--agent", "a\n"], None, 2, "agent name"),
    ("id", "import with agent 'a\\tb'", [*IMPORT, "--agent", "a\tb"], CHAT, 2, "agent name"),
    ("traversal", "delete --all of agent '../x'", ["sessions", "delete", "--all", "--agent", "../x", "--yes"], None, 2, "path separator"),
    ("traversal", "cleanup of agent '../../x'", ["cleanup", "--older-than", "1d", "--agent", "../../x", "--yes"], None, 2, "path separator"),
    ("traversal", "copy a session named '../x'", ["sessions", "copy", "--to", "memory://", "-s", "../x"], None, 2, "path separator"),
    ("traversal", "import a media reference up the tree", IMPORT, export_doc({"role": "user", "content": [{"type": "image", "media_ref": "../../etc/passwd"}]} ), 2, "media reference"),
    ("traversal", "postgres schema '../x'", ["--store", f"{PG}?schema=../x", "sessions", "list"], None, 2, "schema name"),
    ("long", "export a 1 MiB id", ["sessions", "export", "x" * 2**20, "-o", "-"], None, 2, "too long"),
    ("long", "rename to 501 characters", ["sessions", "rename", SID, "t" * 501], None, 2, "500"),
    ("long", "import with a 600-character title", [*IMPORT, "--title", "t" * 600], CHAT, 2, "500"),
    ("control", "rename to a title with a NUL", ["sessions", "rename", SID, "a\x00b"], None, 2, "NUL"),
    ("control", "import with a NUL in the title", [*IMPORT, "--title", "a\x00b"], CHAT, 2, "NUL"),
    ("control", "import a tool call id holding ESC", IMPORT, openai_calls("c\x1b[2J"), 2, "control character"),
    ("empty", "delete an empty id", ["sessions", "delete", ""], None, 2, "is invalid"),
    ("empty", "list the sessions of agent ''", ["sessions", "list", "--agent", ""], None, 2, "agent name"),
    ("empty", "import with agent ''", [*IMPORT, "--agent", ""], CHAT, 2, "agent name"),
    ("empty", "search for nothing", ["sessions", "search", ""], None, 2, "empty"),
    ("empty", "an empty --store", ["--store", "", "sessions", "list"], None, 2, "empty"),
    ("empty", "a blank --store", ["--store", "  ", "sessions", "list"], None, 2, "empty"),
    ("empty", "cleanup --older-than ''", ["cleanup", "--older-than", "", "--dry-run"], None, 2, "empty duration"),
    ("empty", "import an empty file", IMPORT, "", 2, "threadline: error"),
    ("empty", "import an empty list", IMPORT, "[]", 2, "no messages"),
    ("empty", "delete with no ids", ["sessions", "delete"], None, 2, "nothing to delete"),
    # integers: negative, zero, huge, not numbers
    ("huge", "history -n 10**30", ["sessions", "history", SID, "-n", HUGE], None, 2, "--count"),
    ("huge", "list --offset 10**30", ["sessions", "list", "--offset", HUGE], None, 2, "--offset"),
    ("huge", "list -n 201", ["sessions", "list", "-n", "201"], None, 2, "--limit"),
    ("huge", "search -n 10**30", ["sessions", "search", "x", "-n", HUGE], None, 2, "--limit"),
    ("huge", "context --limit 10**30", ["context", SID, "--limit", HUGE], None, 2, "--limit"),
    ("huge", "context --reserve 10**30", ["context", SID, "--reserve", HUGE], None, 2, "--reserve"),
    ("huge", "compact --max-words 10**30", ["compact", SID, "--max-words", HUGE, "--dry-run"], None, 2, "--max-words"),
    ("huge", "compact --keep-recent 10**30", ["compact", SID, "--keep-recent", HUGE, "--dry-run"], None, 2, "--keep-recent"),
    ("huge", "copy --batch 10**30", ["sessions", "copy", "--to", "memory://", "--batch", HUGE], None, 2, "--batch"),
    ("huge", "demo --turns 10**30", ["demo", "--turns", HUGE], None, 2, "--turns"),
    ("huge", "demo --seed 10**30", ["demo", "--seed", HUGE], None, 2, "--seed"),
    ("huge", "cleanup --older-than 10**20 days", ["cleanup", "--older-than", "1" + "0" * 20 + "d", "--dry-run"], None, 2, "too long"),
    ("huge", "cleanup --older-than of 400 digits", ["cleanup", "--older-than", "9" * 400 + "d", "--dry-run"], None, 2, "too long"),
    ("huge", "cleanup --max-storage of 400 digits", ["cleanup", "--max-storage", "9" * 400 + "B", "--dry-run"], None, 2, "too large"),
    ("negative", "history -n -1", ["sessions", "history", SID, "-n", "-1"], None, 2, "--count"),
    ("negative", "list --offset -1", ["sessions", "list", "--offset", "-1"], None, 2, "--offset"),
    ("negative", "context --reserve -1", ["context", SID, "--reserve", "-1"], None, 2, "--reserve"),
    ("negative", "compact --max-words -1", ["compact", SID, "--max-words", "-1", "--dry-run"], None, 2, "summary_max_words"),
    ("negative", "cleanup --older-than -5d", ["cleanup", "--older-than", "-5d", "--dry-run"], None, 2, "cannot read duration"),
    ("negative", "cleanup --max-storage -5MB", ["cleanup", "--max-storage", "-5MB", "--dry-run"], None, 2, "cannot read size"),
    ("zero", "history -n 0", ["sessions", "history", SID, "-n", "0"], None, 2, "--count"),
    ("zero", "list -n 0", ["sessions", "list", "-n", "0"], None, 2, "--limit"),
    ("zero", "context --limit 0", ["context", SID, "--limit", "0"], None, 2, "--limit"),
    ("zero", "cleanup --older-than 0d", ["cleanup", "--older-than", "0d", "--dry-run"], None, 2, "longer than zero"),
    ("zero", "cleanup --max-storage 0", ["cleanup", "--max-storage", "0", "--dry-run"], None, 2, "more than zero"),
    ("type", "history -n abc", ["sessions", "history", SID, "-n", "abc"], None, 2, "--count"),
    ("type", "history -n 1.5", ["sessions", "history", SID, "-n", "1.5"], None, 2, "--count"),
    ("nan", "history -n nan", ["sessions", "history", SID, "-n", "nan"], None, 2, "--count"),
    ("nan", "context --limit inf", ["context", SID, "--limit", "inf"], None, 2, "--limit"),
    ("nan", "cleanup --older-than nand", ["cleanup", "--older-than", "nand", "--dry-run"], None, 2, "cannot read duration"),
    ("nan", "cleanup --max-storage infMB", ["cleanup", "--max-storage", "infMB", "--dry-run"], None, 2, "cannot read size"),
    ("nan", "import NaN in exported tool arguments", IMPORT, export_doc({ "role": "assistant", "tool_calls": [{"id": "c1", "name": "f", "arguments": {"x": float("nan")}}], } ), 2, "nan"),
    ("policy", "context --limit 100 --reserve 200", ["context", SID, "--limit", "100", "--reserve", "200"], None, 2, "response_reserve (200) must be less"),
    # import files
    ("deep", "import JSON nested 200,000 deep", IMPORT, "[" * 200_000, 2, "levels deep"),
    ("deep", "import a JSONL line nested 100,000 deep", IMPORT, '{"role": "user", "content": "x"}\n' + '{"a": ' * 100_000, 2, ":2: JSON nests more than"),
    ("deep", "tools file nested 100,000 deep", ["context", SID, "--tools", "{file}"], "[" * 100_000, 2, "levels deep"),
    ("malformed", "import a bare JSON number", IMPORT, "42", 2, "threadline: error"),
    ("malformed", "import binary garbage", IMPORT, bytes(range(256)) * 4, 2, "invalid UTF-8"),
    ("malformed", "import exported image data that is not base64", IMPORT, export_doc({ "role": "user", "content": [{"type": "image", "data": "!!!!", "media_type": "image/png"}], } ), 2, "not base64"),
    ("malformed", "tools file of numbers", ["context", SID, "--tools", "{file}"], "[1, 2]", 2, "JSON array"),
    ("malformed", "export as xml", ["sessions", "export", SID, "-f", "xml"], None, 2, "--format"),
    ("malformed", "delete ids and --all", ["sessions", "delete", SID, "--all"], None, 2, "not both"),
    ("malformed", "--agent without --all", ["sessions", "delete", SID, "--agent", "x"], None, 2, "only applies with --all"),
    ("unknown", "import an unknown role", IMPORT, json.dumps([{"role": "bot", "content": "x"}]), 2, "threadline: error"),
    ("type", "import content that is a number", IMPORT, json.dumps([{"role": "user", "content": 123}]), 2, "threadline: error"),
    ("duplicate", "import one tool call id twice in a message", IMPORT, openai_calls("c1", "c1"), 2, "appears twice"),
    # store URLs
    ("url", "an unknown scheme", ["--store", "ftp://host/x", "sessions", "list"], None, 2, "unknown store scheme"),
    ("url", "sqlite without a path", ["--store", "sqlite://", "sessions", "list"], None, 2, "no path"),
    ("url", "jsonl without a directory", ["--store", "jsonl://", "sessions", "list"], None, 2, "no directory"),
    ("url", "memory with a path", ["--store", "memory://x", "sessions", "list"], None, 2, "takes no path"),
    ("url", "a path without a scheme", ["--store", "relative/dir", "sessions", "list"], None, 2, "no scheme"),
    ("url", "redis port out of range", ["--store", "redis://127.0.0.1:99999/0", "sessions", "list"], None, 2, "port"),
    ("url", "redis with an empty key prefix", ["--store", "redis://127.0.0.1:6379/0?prefix=", "sessions", "list"], None, 2, "prefix"),
    ("url", "postgres schema with a ';'", ["--store", f"{PG}?schema=a;drop", "sessions", "list"], None, 2, "schema name"),
    ("url", "copy to the same store", ["sessions", "copy", "--to", "{store}"], None, 2, "same store"),
    ("url", "copy to an unknown scheme", ["sessions", "copy", "--to", "bogus://x"], None, 2, "unknown store scheme"),
]  # fmt: skip


def case_ids(cases: list[Any]) -> list[str]:
    return [f"{c[0]}: {c[1]}" for c in cases]


# -- what "nothing changed" means ----------------------------------------------------------


def dump(store: Store) -> list[Any]:
    """Every session with everything in it, in a comparable form."""
    out: list[Any] = []
    offset = 0
    while True:
        page = store.list_sessions(limit=200, offset=offset)
        for info in page.items:
            out.append(
                (
                    info.to_dict(),
                    [m.model_dump() for m in store.read_messages(info.id)],
                    [c.to_dict() for c in store.list_checkpoints(info.id)],
                    [e.to_dict() for e in store.scratchpad_list(info.id)],
                    store.get_memo(info.id),
                )
            )
        offset += len(page.items)
        if offset >= page.total or not page.items:
            return out


def files(root: Path) -> list[str]:
    """Every file under ``root`` except lock files (a refused call may still take a lock)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if ".locks" not in p.parts)


def seed(store: Store) -> None:
    session = store.create_session(id=SID, agent="coder", title="keep me")
    session.append([Message.user("precious"), Message.assistant("kept", model="gpt-4o")])
    session.add_checkpoint(covers_up_to=1, summary="## State\n- precious")
    session.scratchpad_write("plan", "- keep it")
    session.set_memo({"anchor": 1})


@pytest.fixture
def jsonl_store(tmp_path: Path) -> Iterator[Store]:
    store = open_store(f"jsonl://{tmp_path / 'store'}")
    seed(store)
    yield store
    store.close()


@pytest.mark.parametrize(("kind", "case", "call", "error", "words"), LIBRARY, ids=case_ids(LIBRARY))
def test_library_refuses(
    jsonl_store: Store,
    tmp_path: Path,
    kind: str,
    case: str,
    call: Callable[[Store, str], object],
    error: type[ThreadlineError],
    words: str,
) -> None:
    before, tree = dump(jsonl_store), files(tmp_path)
    with pytest.raises(ThreadlineError) as raised:
        call(jsonl_store, SID)
    assert type(raised.value) is error or error is ThreadlineError
    assert words.lower() in str(raised.value).lower()
    assert dump(jsonl_store) == before
    assert files(tmp_path) == tree


runner = CliRunner()


@pytest.fixture
def sqlite_store_url(tmp_path: Path) -> str:
    url = f"sqlite://{tmp_path / 'store.db'}"
    store = open_store(url)
    seed(store)
    store.close()
    return url


@pytest.mark.parametrize(
    ("kind", "case", "args", "content", "code", "words"), CLI, ids=case_ids(CLI)
)
def test_cli_refuses(
    sqlite_store_url: str,
    tmp_path: Path,
    kind: str,
    case: str,
    args: list[str],
    content: str | bytes | None,
    code: int,
    words: str,
) -> None:
    path = tmp_path / "input.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    argv = [a.replace("{file}", str(path)).replace("{store}", sqlite_store_url) for a in args]
    if argv[0] != "--store":
        argv = ["--store", sqlite_store_url, *argv]
    store = open_store(sqlite_store_url)
    before = dump(store)
    store.close()
    tree = files(tmp_path)
    env = {
        STORE_ENV: f"sqlite://{tmp_path / 'default.db'}",  # never the user's own store
        CONFIG_DIR_ENV: str(tmp_path / "config"),
        CONFIG_ENV: "",
    }
    result = runner.invoke(app, argv, env=env)
    output = result.stdout + result.stderr
    assert result.exit_code == code, output
    assert words.lower() in output.lower()
    assert "\x1b" not in output
    if "Usage:" not in result.stderr:  # Click's own usage errors keep Click's format
        assert result.stderr.startswith("threadline: error: ")
        assert len(result.stderr.splitlines()) == 1, result.stderr
    store = open_store(sqlite_store_url)
    assert dump(store) == before
    store.close()
    assert files(tmp_path) == tree
