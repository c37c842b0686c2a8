"""Important values: the exact strings a summary must carry over verbatim.

An agent that resumes from a summary needs the precise path it edited, the URL
it called, the id a tool returned and the exact error text; a paraphrase of
any of them is useless. ``extract_values`` finds such strings with precise
patterns, and ``retention`` measures how many survive, verbatim, in a summary.

Every value is a substring of the text it came from, so "kept verbatim" is a
plain substring test. The patterns lean towards precision: a sentence-ending
period is not part of a path, a closing parenthesis or backtick is not part of
a URL, ``and/or`` is not a path and ``2024/01/02`` is not one either. Token
values (paths, URLs, ids, versions, ...) are matched in one pass and overlaps
are settled longest-first, so a UUID inside a path or a version inside a
package pin is reported once, as the longer value. Error lines are matched per
line and may contain token values; a summary that keeps the line keeps them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args


def split_words(text: str) -> tuple[str, ...]:
    """The words of ``text``: long word lists stay readable as one string."""
    return tuple(text.split())


ValueKind = Literal[
    "error",
    "url",
    "path",
    "uuid",
    "hex",
    "id",
    "email",
    "setting",
    "port",
    "address",
    "version",
    "exception",
    "identifier",
]
VALUE_KINDS: tuple[ValueKind, ...] = get_args(ValueKind)

ERROR_LINE_MAX_CHARS = 200
"""An error line longer than this is cut at a word boundary (still a substring)."""
QUOTED_MAX_CHARS = 60
"""Longest backtick-quoted span taken as an identifier."""
SETTING_VALUE_MAX_CHARS = 120
"""Longest quoted value of a ``key="value"`` setting."""
MIN_VALUE_CHARS = 2

# File extensions accepted on a bare file name (no slash). Names that are also
# common attribute names in code (``self.log``, ``process.env``, ``self.db``,
# ``self.lock``) are left out on purpose; with a slash any extension is fine.
BARE_EXTENSIONS = split_words(
    "py pyi pyx ipynb js jsx ts tsx mjs cjs json jsonl ndjson yaml yml toml ini md mdx rst "
    "txt csv tsv html htm css scss sass less sql sh bash zsh fish ps1 bat go rs rb java kt "
    "kts scala c h cc cpp cxx hpp cs swift php exs erl hrl lua dart vue svelte xml proto "
    "graphql gql tf tfvars hcl gradle patch diff pem crt traj parquet sqlite sqlite3 wasm zip "
    "tgz gz bz2 xz tar whl png jpg jpeg gif svg webp pdf mp4 mp3 wav lockb"
)
KNOWN_FILE_NAMES = split_words(
    "Makefile Dockerfile Containerfile Jenkinsfile Procfile Gemfile Rakefile Justfile "
    "Vagrantfile CODEOWNERS"
)
KNOWN_DOTFILES = split_words(
    ".env .gitignore .gitattributes .dockerignore .bashrc .zshrc .profile .npmrc .nvmrc "
    ".editorconfig .prettierrc .eslintrc .babelrc .python-version .tool-versions"
)
RUNTIME_NAMES = split_words(
    "python node nodejs go golang ruby java rust rustc postgres postgresql redis ubuntu "
    "debian django flask fastapi react vue angular npm pip elixir erlang phoenix "
    "kubernetes docker sqlite mysql pydantic typescript version release"
)

_PATH_CHARS = r"[\w.@+~%-]"
_NOT_BEFORE_PATH = r"(?<![\w.~:/@%+\\-])"


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


# Token patterns, each run only on the whitespace-free chunks that can hold it (see
# ``_token_matches``). Their order is their priority when two matches tie in length.
_URL = _rx(
    r"\b(?:https?|wss?|ftp|file|s3|gs|git|ssh|postgres(?:ql)?|mysql|rediss?|"
    r"mongodb(?:\+srv)?|amqps?|sqlite|jdbc:[a-z]+)://[^\s<>\"'`\\|{}^\[\]]+"
)
_WINDOWS_PATH = _rx(r"\b[A-Za-z]:\\(?:[^\\/:*?\"<>|\s]+\\)*[^\\/:*?\"<>|\s]+")
_ROOTED_PATH = _rx(
    _NOT_BEFORE_PATH + r"(?:~|\.{1,2})?/" + _PATH_CHARS + r"+(?:/" + _PATH_CHARS + r"+)*/?"
)
_RELATIVE_PATH = _rx(_NOT_BEFORE_PATH + _PATH_CHARS + r"+(?:/" + _PATH_CHARS + r"+)+/?")
_FILE_NAME = _rx(
    _NOT_BEFORE_PATH
    + r"[\w@+~%-]"
    + _PATH_CHARS
    + r"*\.(?:"
    + "|".join(BARE_EXTENSIONS)
    + r")(?![\w(/@%+~-])"
)
_DOTFILE = _rx(r"(?<![\w.-])(?:" + "|".join(re.escape(n) for n in KNOWN_DOTFILES) + r")(?![\w-])")
_EMAIL = _rx(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_SETTING = _rx(
    r"(?<![\w.-])(?:--?)?[A-Za-z_][\w.-]*=(?![=>~])"
    rf"(?:\"[^\"\n]{{0,{SETTING_VALUE_MAX_CHARS}}}\"|'[^'\n]{{0,{SETTING_VALUE_MAX_CHARS}}}'|"
    r"[^\s\"'`,;()\[\]{}<>]+)"
)
_SETTING_LINE = _rx(
    r"(?m)^[ \t]*(?P<inner>[A-Za-z_][\w.-]{2,63}[ \t]*(?:=|:)[ \t]*"
    rf"(?:\d+(?:\.\d+)?|true|false|\"[^\"\n]{{0,{SETTING_VALUE_MAX_CHARS}}}\"|"
    rf"'[^'\n]{{0,{SETTING_VALUE_MAX_CHARS}}}'))[ \t]*$"
)
_UUID = _rx(
    r"(?<![\w-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
    r"[0-9a-fA-F]{12}(?![\w-])"
)
_HEX_LITERAL = _rx(r"(?<![\w-])0x[0-9a-fA-F]{4,}(?![\w-])")
_HEX = _rx(r"(?<![\w#-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,64}(?![\w-])")
_PREFIXED_ID = _rx(
    r"(?<![\w-])[A-Za-z][A-Za-z0-9]{1,11}[_-](?=[A-Za-z0-9_-]*\d)"
    r"[A-Za-z0-9][A-Za-z0-9_-]{6,}(?![\w-])"
)
_TICKET = _rx(
    r"(?<![\w./-])(?:[A-Z][A-Z0-9]{1,9}-\d{1,6}|"
    r"[a-z][a-z0-9]{1,19}-(?=[a-z]{0,7}\d)(?=\d{0,7}[a-z])[a-z0-9]{2,8}(?:\.\d{1,4})*|"
    r"[a-z][a-z0-9]{1,19}-[a-z0-9]{2,8}(?:\.\d{1,4})+)(?![\w-]|\.\w)"
)
"""A ticket or task id: ``PROJ-123``, ``spotter-4te``, ``spotter-fum.3`` (a tracker's child
task); not ``utf-8`` or ``h-20``, whose part after the dash is a bare number."""
_CODE_ID = _rx(r"(?<![\w#-])(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6,12}(?![\w-])")
_HOST_PORT = _rx(
    r"(?<![\w.-])(?:localhost|(?:\d{1,3}\.){3}\d{1,3}|\[[0-9a-fA-F:]+\]|"
    r"[A-Za-z][\w-]*(?:\.[\w-]+)+):\d{2,5}(?![\d.])"
)
_PORT_PHRASE = _rx(r"(?i)port(?:[ \t]+(?:number|is|to|on))?[ \t]*[:=]?[ \t]*\d{2,5}(?!\d)")
_ADDRESS = _rx(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.]*\d)")
_PINNED_VERSION = _rx(
    r"(?i)(?<![\w.-])[A-Za-z][\w.-]*(?:==|>=|<=|~=|!=|@)v?\d+(?:\.\d+)+"
    r"(?:[-+.]?[0-9A-Za-z]+)*(?![\w])"
)
_RUNTIME_BEFORE = _rx(r"(?i)\b(?:" + "|".join(RUNTIME_NAMES) + r")[ \t]+$")
_BARE_VERSION = _rx(r"^v?\d+\.\d+(?:\.\d+)*$")
_V_VERSION = _rx(r"(?<![\w.-])v\d+(?:\.\d+){1,3}(?:-[0-9A-Za-z.]+)?(?![\w])")
_SEMVER = _rx(r"(?<![\w.-])\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+|\+[0-9A-Za-z.]+)?(?![\w.]*\d)")
_EXCEPTION = _rx(
    r"(?<![\w.])(?:[a-z_][\w]*\.)*[A-Z][A-Za-z0-9]*"
    r"(?:Error|Exception|Warning|Fault|Failure|Interrupt)(?![\w])"
)
_EXCEPTION_HINTS = ("Error", "Exception", "Warning", "Fault", "Failure", "Interrupt")
_BACKTICKED = _rx(rf"`(?P<inner>[^`\n]{{{MIN_VALUE_CHARS},{QUOTED_MAX_CHARS}}})`")
_QUOTED = _rx(r"(?<![\w\\])[\"'](?P<inner>[A-Za-z_][\w.:/-]{2,63})[\"'](?!\s*:)")
"""A quoted identifier, but not a JSON or dict key (``"user_id":``): keys are not values."""

_PRIORITY = {
    name: i
    for i, name in enumerate(
        split_words(
            "url windows rooted relative file dotfile name email setting setting_line uuid "
            "hex_literal hex prefixed ticket code host_port port_phrase address pinned runtime "
            "v_version semver exception backticked quoted"
        )
    )
}
CHUNK_LOOKAHEAD = 256
"""A chunk is a candidate when one of its first this-many characters can start a value."""
_CHUNK = re.compile(
    rf"(?<!\S)(?=\S{{0,{CHUNK_LOOKAHEAD}}}?(?:[/\\@=\d_:'\"]|\.\w|"
    + "|".join(_EXCEPTION_HINTS)
    + r"))\S+"
)
"""Whitespace-free chunks that may hold a token value: plain words are skipped at C speed."""
_DIGIT = re.compile(r"\d")
_EXCEPTION_HINT = re.compile("|".join(_EXCEPTION_HINTS))
_INNER_RULES = frozenset({"setting_line", "backticked", "quoted"})

_ERROR_LINE = re.compile(
    r"""(?mx)^[ \t]*(?:E[ \t]+(?P<pytest>\S.*?)|(?P<line>
        (?:[a-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Failure|Fault|Exit)(?::[ \t]+\S.*)?
      | (?i:error|fatal|panic)(?:\[[\w-]+\])?:[ \t]+\S.*
      | (?:FAILED|ERROR)[ \t]+\S.*
      | \*\*[ ]\((?:[A-Z][\w.]*)\)[ \t]+\S.*
      | \[(?i:error|fatal|critical)\][ \t]*\S.*
      | .*\b(?:npm[ ]ERR!|Segmentation[ ]fault|command[ ]not[ ]found
            |No[ ]such[ ]file[ ]or[ ]directory|Permission[ ]denied|Connection[ ]refused
            |Traceback[ ]\(most[ ]recent[ ]call[ ]last\))\b.*
      | .*\b(?:ERROR|FATAL|CRITICAL)\b:?[ \t]+\S.*
    ))[ \t]*\r?$""",
)

_CODE_SHAPED = re.compile(
    r"[{\[(,]\s*$|=>|^\s*(?i:error|fatal|panic)\s*:\s*(?:[\w.$]+\(.*\)|null|undefined|"
    r"true|false|-?\d+)?\s*[,;]?\s*$"
)
"""An "error:" line shaped like code: an object key (``error: {``, ``error: vi.fn(),``,
``error: null``), an arrow function."""
_TRAILING_PUNCT = ".,;:!?*"
_LETTER = re.compile(r"[A-Za-z]")
_HAS_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}$")
_NOT_PATHS = frozenset(
    split_words(
        "and/or w/o i/o n/a tcp/ip input/output read/write true/false yes/no on/off client/server "
        "either/or he/she him/her his/her km/h"
    )
)
_NOISE_PATHS = frozenset(
    [
        "/dev/null",
        "/dev/stdout",
        "/dev/stderr",
        "/dev/stdin",
        "/dev/zero",
        "/dev/tty",
        "/dev/random",
        "/dev/urandom",
        "/bin/sh",
        "/bin/bash",
        "/usr/bin/env",
    ]
)
_DIRECTORY_NAMES = frozenset(
    split_words(
        "src lib libs test tests spec specs docs doc app apps bin cmd pkg internal config configs "
        "scripts assets public static dist build node_modules vendor packages examples tools "
        "fixtures migrations templates home usr etc var tmp opt .github .git"
    )
)
"""A slash-separated word list without an extension is a path only when it names one of these."""
_IDENTIFIER_SHAPE = re.compile(r"[\W\d_]|[a-z][A-Z]|^[A-Z]{2,}$|^[A-Z][a-z]+[A-Z]")
"""A quoted word is an identifier when it is not plain lower-case prose: it has a digit,
punctuation, an underscore, a space (a code snippet) or mixed case (``historyPath``)."""


@dataclass(frozen=True, slots=True)
class Value:
    """One exact string worth keeping, and what kind of thing it is."""

    kind: ValueKind
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(slots=True)
class RetentionReport:
    """How many distinct extracted values a summary keeps verbatim."""

    total: int
    kept: int
    missing: list[str] = field(default_factory=list)
    """The values not found verbatim, in extraction order."""
    ratio: float = 1.0
    """kept / total; 1.0 when there was nothing to keep."""


def _strip_url(text: str) -> str:
    while text:
        if text[-1] in _TRAILING_PUNCT or (text[-1] == ")" and text.count("(") < text.count(")")):
            text = text[:-1]
        else:
            break
    return text


def _clean_path(text: str) -> str | None:
    text = text.rstrip(_TRAILING_PUNCT)
    if len(text) < MIN_VALUE_CHARS or not _LETTER.search(text):
        return None
    if "\\" in text:  # a Windows path
        return text
    if text in _NOISE_PATHS:
        return None
    if text.startswith(("/", "~/", "./", "../")):
        body = text.rstrip("/")
        if body.count("/") < 2 and not _HAS_EXTENSION.search(body):
            return None  # "/tmp", "/mcp": slash commands and bare roots are too vague
        return text
    if "/" not in text:
        return text  # a bare file name; its pattern already demanded a known extension
    if text.lower() in _NOT_PATHS or text.startswith("/"):
        return None
    parts = [p for p in text.split("/") if p]
    if any(not p.strip(".") for p in parts):
        return None
    # "yes/no" and "side/difficulty/orientation" are prose; "src/engine" is a directory.
    named = text.endswith("/") or any(p.lower() in _DIRECTORY_NAMES for p in parts)
    return text if named or _HAS_EXTENSION.search(text) else None


_EXTENSION_SET = frozenset(BARE_EXTENSIONS)


def _clean(kind: ValueKind, text: str) -> str | None:
    if kind == "port":
        host = text.rsplit(":", 1)[0]
        if "." in host and host.rsplit(".", 1)[1].lower() in _EXTENSION_SET:
            return None  # ``state.go:46`` is a line of a file, not a host and a port
        return text
    if kind == "url":
        text = _strip_url(text)
        _, sep, rest = text.partition("://")
        if not sep or not rest.strip("/") or rest.endswith(("$", ":")):
            return None  # ``sqlite:////``, or a template (``http://localhost:${PORT}``)
        return text
    if kind == "path":
        return _clean_path(text)
    if kind == "setting":
        key, _, value = text.partition("=") if "=" in text else text.partition(":")
        if not value.strip():
            return None
        if value[:1] not in "\"'":
            text = text.rstrip(_TRAILING_PUNCT)
            if text.endswith(("=", ":")):
                return None
        return text.strip() if len(key.strip().lstrip("-")) >= MIN_VALUE_CHARS else None
    if kind == "identifier":
        text = text.strip()
        if len(text) < MIN_VALUE_CHARS or not _LETTER.search(text):
            return None
        return text if _IDENTIFIER_SHAPE.search(text) else None
    return text


Match = tuple[int, int, int, ValueKind, str]


def _add(
    found: list[Match], regex: re.Pattern[str], rule: str, kind: ValueKind, text: str, base: int
) -> None:
    priority = _PRIORITY[rule]
    group: int | str = "inner" if rule in _INNER_RULES else 0
    for m in regex.finditer(text):
        raw = m.group(group)
        if kind == "setting" and text[m.end() : m.end() + 1] == "(":
            continue  # ``idx=_w(s, 0)``: a call's argument in code, not a setting
        cleaned = _clean(kind, raw)
        if cleaned:
            s = base + m.start(group) + max(raw.find(cleaned), 0)
            found.append((s, s + len(cleaned), priority, kind, cleaned))


def _chunk_matches(found: list[Match], chunk: str, base: int, text: str) -> None:
    """Token values inside one whitespace-free chunk of ``text`` starting at ``base``.

    Each pattern runs only when the chunk has the character it needs, which is
    what makes extraction cheap on long, mostly plain text. Chunk edges are
    whitespace in ``text``, so the patterns' look-arounds see what they would
    see in the whole text.
    """
    digit = _DIGIT.search(chunk) is not None
    if ":" in chunk:
        if "://" in chunk:
            _add(found, _URL, "url", "url", chunk, base)
        if digit:
            _add(found, _HOST_PORT, "host_port", "port", chunk, base)
    if "\\" in chunk:
        _add(found, _WINDOWS_PATH, "windows", "path", chunk, base)
    if "/" in chunk:
        _add(found, _ROOTED_PATH, "rooted", "path", chunk, base)
        _add(found, _RELATIVE_PATH, "relative", "path", chunk, base)
    if "." in chunk:
        _add(found, _FILE_NAME, "file", "path", chunk, base)
        if chunk.startswith(".") or "/." in chunk or "(." in chunk or "`." in chunk:
            _add(found, _DOTFILE, "dotfile", "path", chunk, base)
        if digit:
            _add(found, _ADDRESS, "address", "address", chunk, base)
            _add(found, _SEMVER, "semver", "version", chunk, base)
            if "v" in chunk:
                _add(found, _V_VERSION, "v_version", "version", chunk, base)
            core = chunk.rstrip(_TRAILING_PUNCT + ")")
            if _BARE_VERSION.match(core):
                head = _RUNTIME_BEFORE.search(text, max(0, base - 24), base)
                if head is not None:
                    end = base + len(core)
                    found.append(
                        (
                            head.start(),
                            end,
                            _PRIORITY["runtime"],
                            "version",
                            text[head.start() : end],
                        )
                    )
    if "@" in chunk:
        _add(found, _EMAIL, "email", "email", chunk, base)
    if "=" in chunk:
        if '="' in chunk or "='" in chunk:
            end = min(len(text), base + len(chunk) + SETTING_VALUE_MAX_CHARS + 2)
            line_end = text.find("\n", base, end)
            _add(
                found,
                _SETTING,
                "setting",
                "setting",
                text[base : line_end if line_end >= 0 else end],
                base,
            )
        else:
            _add(found, _SETTING, "setting", "setting", chunk, base)
    if digit:
        if ("=" in chunk or "@" in chunk) and "." in chunk:
            _add(found, _PINNED_VERSION, "pinned", "version", chunk, base)
        if "-" in chunk and len(chunk) >= 36:
            _add(found, _UUID, "uuid", "uuid", chunk, base)
        if "0x" in chunk:
            _add(found, _HEX_LITERAL, "hex_literal", "hex", chunk, base)
        _add(found, _HEX, "hex", "hex", chunk, base)
        if "_" in chunk or "-" in chunk:
            _add(found, _PREFIXED_ID, "prefixed", "id", chunk, base)
        if "-" in chunk:
            _add(found, _TICKET, "ticket", "id", chunk, base)
        _add(found, _CODE_ID, "code", "id", chunk, base)
    if _EXCEPTION_HINT.search(chunk):
        _add(found, _EXCEPTION, "exception", "exception", chunk, base)
    if '"' in chunk or "'" in chunk:
        _add(found, _QUOTED, "quoted", "identifier", chunk, base)


def _known_names(found: list[Match], text: str) -> None:
    """Well-known extensionless file names (``Makefile``), found with plain string search."""
    priority = _PRIORITY["name"]
    for name in KNOWN_FILE_NAMES:
        start = text.find(name)
        while start >= 0:
            end = start + len(name)
            before = text[start - 1] if start else " "
            after = text[end] if end < len(text) else " "
            if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
                found.append((start, end, priority, "path", name))
            start = text.find(name, end)


def _port_phrases(found: list[Match], text: str) -> None:
    """ "port 8080", "PORT: 8080": found where the word occurs, not by scanning every position."""
    lower = text.lower()
    priority = _PRIORITY["port_phrase"]
    start = lower.find("port")
    while start >= 0:
        before = text[start - 1] if start else " "
        if not (before.isalnum() or before in "_-"):
            m = _PORT_PHRASE.match(text, start)
            if m:
                found.append((start, m.end(), priority, "port", m.group(0)))
        start = lower.find("port", start + 4)


def _token_matches(text: str) -> list[Match]:
    """Every candidate token value in ``text`` as (start, end, priority, kind, text)."""
    found: list[Match] = []
    for m in _CHUNK.finditer(text):
        _chunk_matches(found, m.group(), m.start(), text)
    if "`" in text:
        _add(found, _BACKTICKED, "backticked", "identifier", text, 0)
    if "=" in text or ":" in text:
        _add(found, _SETTING_LINE, "setting_line", "setting", text, 0)
    if "port" in text or "PORT" in text or "Port" in text:
        _port_phrases(found, text)
    if "file" in text or "CODEOWNERS" in text:
        _known_names(found, text)
    return found


def _resolve(matches: list[Match]) -> list[tuple[int, ValueKind, str]]:
    """Settle overlapping token matches: the longer wins, then the earlier-listed kind."""
    ordered = sorted(matches, key=lambda m: (m[0] - m[1], m[2], m[0]))
    taken = bytearray(max((m[1] for m in matches), default=0))
    kept: list[tuple[int, ValueKind, str]] = []
    for start, end, _, kind, text in ordered:
        if 1 in taken[start:end]:
            continue
        taken[start:end] = b"\x01" * (end - start)
        kept.append((start, kind, text))
    return kept


_ERROR_KEYWORDS = (
    "error",
    "err!",
    "fail",
    "fatal",
    "panic",
    "exception",
    "traceback",
    "denied",
    "refused",
    "not found",
    "no such file",
    "fault",
    "critical",
    "exit",
)
"""Lower-case words one of which every error-line pattern contains: lines without any are
never handed to the (slower) error-line pattern."""


_FAILURE_WORD = re.compile(
    r"(?i)error|exception|fail|fatal|panic|traceback|denied|refused|not found|no such file|"
    r"fault|critical"
)
"""The word that names a failure; a long line's excerpt starts at the token holding it."""
LONG_LINE_CHARS = 4_000
"""Lines longer than this (minified code, one-line dumps) are parsed near the failure word only."""


def _error_line_starts(text: str) -> dict[int, int]:
    """Start of each line holding an error keyword -> where its first keyword is."""
    lower = text.lower()
    starts: dict[int, int] = {}
    for keyword in _ERROR_KEYWORDS:
        i = lower.find(keyword)
        while i >= 0:
            line = text.rfind("\n", 0, i) + 1
            starts[line] = min(i, starts.get(line, i))
            end = text.find("\n", i)
            if end < 0:
                break
            i = lower.find(keyword, end)
    i = 0 if text.startswith("E ") else text.find("\nE ") + 1
    while i >= 0 and text.startswith("E ", i):  # pytest's "E   <detail>" lines
        starts.setdefault(i, i)
        i = text.find("\nE ", i) + 1 or -1
    return dict(sorted(starts.items()))


def _error_lines(text: str) -> list[tuple[int, ValueKind, str]]:
    out: list[tuple[int, ValueKind, str]] = []
    for start, keyword in _error_line_starts(text).items():
        end = text.find("\n", start)
        end = end if end >= 0 else len(text)
        base = 0
        if end - start > LONG_LINE_CHARS:
            base = max(start, text.rfind(" ", start, keyword) + 1)
            m = _ERROR_LINE.match(text[base : min(end, base + 2 * ERROR_LINE_MAX_CHARS)])
        else:
            m = _ERROR_LINE.match(text, start, end)
        if m is None:
            continue
        group = "pytest" if m.group("pytest") is not None else "line"
        line, at = m.group(group).rstrip(), base + m.start(group)
        if group == "line" and _CODE_SHAPED.search(line):
            continue  # ``error: vi.fn(),`` in a file dump is code, not a failure
        if len(line) > ERROR_LINE_MAX_CHARS:
            line, at = _error_excerpt(line, at)
        if len(line) >= MIN_VALUE_CHARS:
            out.append((at, "error", line))
    return out


def _error_excerpt(line: str, at: int) -> tuple[str, int]:
    """A long error line cut to ``ERROR_LINE_MAX_CHARS`` from where the failure is named.

    A log line may carry a timestamp and request ids before ``ERROR: disk
    full``; the excerpt starts at the word that names the failure (or at the
    line start when none does) and ends at a word boundary. It is still a
    substring of the text.
    """
    named = _FAILURE_WORD.search(line)
    start = line.rfind(" ", 0, named.start()) + 1 if named else 0
    cut = line[start : start + ERROR_LINE_MAX_CHARS]
    space = cut.rfind(" ")
    if len(line) - start > ERROR_LINE_MAX_CHARS and space > ERROR_LINE_MAX_CHARS // 2:
        cut = cut[:space]
    return cut, at + start


_REDACTION = re.compile(r"\[REDACTED(?:_[A-Z]+)*(?:\s[^\]\n]{0,200})?\]")
"""A sanitised transcript's placeholder (``[REDACTED_TEXT len=134 sha=1685a1c8]``,
``[REDACTED_EMAIL]``): its ``len=`` and ``sha=`` describe text that is gone."""


def extract_values(text: str) -> list[Value]:
    """Distinct important values in ``text``, in order of first appearance.

    Each value's text is a substring of ``text``. A string found as more than
    one kind keeps the kind of its first match.
    """
    if not text:
        return []
    if "[REDACTED" in text:  # a sanitiser's placeholder holds no value: blank it in place
        text = _REDACTION.sub(lambda m: " " * len(m.group()), text)
    hits = _resolve(_token_matches(text)) + _error_lines(text)
    hits.sort(key=lambda h: h[0])
    seen: set[str] = set()
    out: list[Value] = []
    for _, kind, value in hits:
        if value not in seen:
            seen.add(value)
            path_like = kind == "identifier" and _PATH_TEMPLATE.match(value)
            out.append(Value("path" if path_like else kind, value))
    return out


_PATH_TEMPLATE = re.compile(r"^(?:~|\.{1,2})?/[\w.@{}-]+(?:/[\w.@{}-]+)+/?$")
"""A quoted path with a placeholder in it (``~/.codemie/sessions/{sessionId}.json``): the path
rule stops at the brace, the quote keeps it whole; it is a path, not a name."""


def extract_error_lines(text: str) -> list[Value]:
    """Only the error lines of ``text`` (cheap: a keyword pre-scan picks the lines to parse)."""
    return unique_values(Value(kind, line) for _, kind, line in _error_lines(text))


def unique_values(values: Iterable[Value]) -> list[Value]:
    """``values`` without repeated texts, first occurrence kept."""
    seen: set[str] = set()
    out: list[Value] = []
    for v in values:
        if v.text not in seen:
            seen.add(v.text)
            out.append(v)
    return out


VALUE_LABELS: dict[ValueKind, str] = {
    "error": "error",
    "url": "URL",
    "path": "path",
    "uuid": "UUID",
    "hex": "hash",
    "id": "id",
    "email": "email",
    "setting": "setting",
    "port": "port",
    "address": "address",
    "version": "version",
    "exception": "exception",
    "identifier": "name",
}
"""What each kind of value is called in a snapshot's Important Values."""
COMMAND_LABEL = "failed command"
_LABEL_OF: dict[str, str] = {str(k): v for k, v in VALUE_LABELS.items()}
SIGNATURE_LABEL = "signature"
"""The label of a callable's declaration an edit of the run wrote (``signatures``)."""
_LABELS = {label.lower() for label in [*VALUE_LABELS.values(), COMMAND_LABEL, SIGNATURE_LABEL]}
_LABELLED = re.compile(r"^(?P<label>[A-Za-z][A-Za-z ]{0,20}):\s+(?P<rest>\S.*)$")

ARTEFACT_DIRECTORIES = frozenset(
    split_words(
        "_build node_modules dist build target __pycache__ .pytest_cache .mypy_cache "
        ".ruff_cache .next .nuxt coverage htmlcov .venv venv site-packages .tox .gradle deps "
        ".eggs"
    )
)
"""Directories of build output and installed dependencies: what lies in them is made, not
written, and no agent resumes work there."""
ARTEFACT_SUFFIXES = split_words(
    ".beam .pyc .pyo .class .o .so .dylib .dll .exe .map .min.js .min.css"
)
_ESCAPE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|0\d{2}|[ntr])|[\x00-\x08\x0b-\x1f\x7f]")
"""An escape sequence (``\\x1b``, ``\\n`` written out) or a control character: text torn
out of a JSON string or a terminal, not a value."""
_FLAG = re.compile(r"^--?[A-Za-z][\w.-]*(?:=\S*)?$")
_TAG = re.compile(r"</?[A-Za-z!][^<>]{0,200}>")
_NAME_SHAPE = re.compile(r"^[A-Za-z_][\w.-]*(?:\([\w, ]*\)|/\d+)?$")
"""A name a reader can look up: a word, a dotted name, a call or an arity (``render/2``);
not a selector, an atom, an attribute or a key with its colon."""
ID_KINDS = frozenset({"uuid", "hex", "id"})
"""Kinds of value kept only when the run refers to them more than once."""


_SEGMENT = re.compile(r"[^/\\._?=&#:@+,;]+(?:\.\d{1,4})*")
_ID_PATTERNS: tuple[tuple[ValueKind, re.Pattern[str]], ...] = (
    ("uuid", _UUID),
    ("hex", _HEX),
    ("id", _TICKET),
)


def ids_within(text: str) -> list[Value]:
    """Ids that make up a segment of a longer value: the session UUID in a transcript's
    path, the commit hash in a URL (an agent using the path uses the id too)."""
    out: list[Value] = []
    for m in _SEGMENT.finditer(text):
        segment = m.group()
        if len(segment) == len(text):
            continue
        for kind, rx in _ID_PATTERNS:
            if rx.fullmatch(segment):
                out.append(Value(kind, segment))
                break
    return out


def is_ticket(text: str) -> bool:
    """A tracker's ticket or task id (``PROJ-12``, ``spotter-4te.3``), not just any code."""
    return _TICKET.fullmatch(text) is not None


def value_bullet(kind: ValueKind | str, text: str, note: str | None = None) -> str:
    """An Important Values bullet: what the value is, the value verbatim, then what it is
    to the run (``note``: "beads item: ..., closed", "read", "used in a command")."""
    label = _LABEL_OF.get(kind, kind)
    quoted = f"`{text}`" if text and "`" not in text and text.strip() == text else text
    said = f" ({note})" if note and quoted.startswith("`") else ""
    return f"{label}: {quoted}{said}"


_NOTED = re.compile(r"^(?P<value>`[^`]+`)\s+\((?P<note>[^()`]*(?:\([^()`]*\)[^()`]*)*)\)$")
"""A quoted value with its note after it (``path: `x.py` (read)``)."""


def bullet_value(text: str) -> tuple[str | None, str]:
    """The label and the value of an Important Values bullet (``value_bullet``'s form or a
    bare value, backticks and the note after the value removed)."""
    label: str | None = None
    m = _LABELLED.match(text.strip())
    if m and m.group("label").lower() in _LABELS:
        label, text = m.group("label"), m.group("rest")
    text = text.strip()
    noted = _NOTED.match(text)
    if noted:
        text = noted.group("value")
    if len(text) > 1 and text[0] == text[-1] == "`":
        text = text[1:-1]
    return label, text


def bullet_note(text: str) -> str | None:
    """The note ``value_bullet`` put after a value, if any."""
    m = _LABELLED.match(text.strip())
    noted = _NOTED.match(m.group("rest").strip() if m else text.strip())
    return noted.group("note") if noted else None


def worth_keeping(value: Value, refs: int = 1) -> bool:
    """Whether a value belongs in a snapshot: not an escape sequence, a lone command-line
    flag, a build artefact or a markup fragment; an id or a hash only when the run refers
    to it more than once (``refs``)."""
    text = value.text.strip()
    if not text or "\x1b" in text:
        return False
    if _ESCAPE.search(text) and value.kind != "path":  # a Windows path's "\\new" is no escape
        return False
    if value.kind != "error" and (_FLAG.match(text) or _TAG.search(text)):
        return False
    if value.kind == "error" and text.startswith("<"):
        return False
    if value.kind in ID_KINDS and refs < 2:
        return False
    if value.kind == "identifier" and not _NAME_SHAPE.match(text):
        return False  # ``::after``, ``@not_found``, ``prompt:``, ``.square.check``: code syntax
    if value.kind == "identifier" and _FILE_NAME.fullmatch(text):
        return False  # a file's name: the path it names is the value, where the run used it
    return not is_artefact(text) if value.kind in ("path", "url", "error") else True


def is_artefact(path: str) -> bool:
    """A path inside build output or installed dependencies, or to a compiled file."""
    if "://" in path:
        return False
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    directories = parts if path.endswith("/") else parts[:-1]
    if any(p in ARTEFACT_DIRECTORIES for p in directories):
        return True
    return bool(parts) and parts[-1].endswith(ARTEFACT_SUFFIXES)


def retention(values: Sequence[Value], snapshot_text: str) -> RetentionReport:
    """Count the distinct ``values`` that appear verbatim in ``snapshot_text``."""
    distinct = unique_values(values)
    missing = [v.text for v in distinct if v.text not in snapshot_text]
    total = len(distinct)
    kept = total - len(missing)
    return RetentionReport(
        total=total, kept=kept, missing=missing, ratio=kept / total if total else 1.0
    )


__all__ = [
    "ARTEFACT_DIRECTORIES",
    "COMMAND_LABEL",
    "VALUE_KINDS",
    "VALUE_LABELS",
    "RetentionReport",
    "Value",
    "ValueKind",
    "bullet_note",
    "bullet_value",
    "extract_error_lines",
    "extract_values",
    "ids_within",
    "is_artefact",
    "is_ticket",
    "retention",
    "unique_values",
    "value_bullet",
    "worth_keeping",
]
