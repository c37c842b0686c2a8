"""Token counting: exact for OpenAI tokenizers, a calibrated estimate for the rest.

Every budget in threadline is in tokens, so counts must be honest and, when
they cannot be exact, err high. ``counter_for(model)`` returns the counter for
the model's tokenizer family (from the catalog), cached per family:

* ``TiktokenCounter`` (``o200k_base``, ``cl100k_base``) counts exactly with
  tiktoken and adds OpenAI's documented chat overhead: 3 tokens per message,
  1 more when the message has a ``name``, 3 to prime the reply. Text is
  encoded with ``encode_ordinary``, so ``<|endoftext|>`` in a message is
  counted as text and never raises. Very long text is split first (see "Long
  text" below).
* ``EstimatingCounter`` (``anthropic``, ``google``, ``mistral``, ``llama``,
  ``qwen``, ``deepseek``, ``generic``) estimates, because those tokenizers are
  not available offline.

How the estimator works
-----------------------
The raw estimate is a weighted sum in o200k tokens::

    0.185 * lowercase + 0.35 * uppercase + 0.85 * digits + 0.52 * punctuation
    + 0.20 * spaces/tabs + 0.25 * newlines + 1.0 * non-ASCII characters

The weights come from a least-squares fit (weighted by 1/tokens so short
messages count) of o200k_base counts over 4,970 real agent-transcript texts
(4.25 MB: assistant prose, tool-call JSON, tool output and an aider chat log
from ``shared/transcripts``). On that corpus the raw estimate is within 1% of
o200k per kind (prose 1.007, JSON 0.999, tool output 0.989, markdown 1.005 of
the exact sum; per-text median 0.97-1.00). Uppercase weighs more than
lowercase because mixed-case identifiers and hashes split into short tokens;
digits weigh most because o200k splits numbers into groups of at most three.
Non-ASCII characters count 1 each: CJK is about 0.7 o200k tokens a character,
emoji 1.4, Cyrillic and accented Latin far less, so 1 is high for most
scripts. Runs of whitespace count per character (high for deep indentation,
which BPE merges).

It is computed in C-speed passes: non-ASCII characters are counted as a group
(``len(text) - len(text.encode("ascii", "ignore"))``), ``bytes.translate`` maps every
ASCII byte to its weight in 1/200 token (lowercase 37, uppercase 70, ...), and
``zlib.adler32`` adds them up: its low half is the byte sum modulo 65521, exact for a
slice of at most ``WEIGHT_SLICE`` bytes. The sum is the weighted sum above, in whole
units, at about half the cost of counting each class.

The raw estimate is then multiplied by the family's ratio to o200k
(``FAMILY_RATIOS``: Anthropic's and the older SentencePiece vocabularies need
more tokens than o200k for the same text; these ratios are published
comparisons, not measured here, since those tokenizers are not available
offline) and by ``SAFETY_MARGIN`` (1.15), then rounded up. The result errs
high for English and code: about 1.15x o200k for the o200k stand-in and
1.43x for Anthropic on the corpus above. Known weak spot: long base64 or
random mixed-case strings tokenize at ~1.5 characters a token and are
underestimated (~0.6x); inline file data is therefore counted separately with
``BASE64_CHARS_PER_TOKEN``. The provider-reported usage corrects all of this
over time through ``Calibration``.

Long text
---------
tiktoken is linear on ordinary text (about 60 ns a character here) but not on
one long regex piece: a run of one letter, punctuation or whitespace costs
more per character the longer it is (3 MB of ``-`` takes 1.4 s), and a run of
3 million spaces crashes it (a stack overflow inside its regex). So a text
longer than ``LONG_TEXT_CHARS`` is split and each part is counted on its own:

* Splits are made only at *safe split points*, where both tiktoken
  pre-tokenisation patterns (o200k and cl100k) always end a piece: after an
  ASCII digit before any other ASCII character (a number piece holds digits
  only); after an ASCII letter before ASCII that is neither a letter nor an
  apostrophe (a word piece goes on only with letters, marks or a contraction
  such as ``'s``); after ASCII punctuation before a digit or a space (a
  punctuation piece goes on only with punctuation and line breaks). BPE works
  within a piece and no pattern looks behind, so the parts' counts add up to
  the whole text's count exactly (tests split real transcripts at every such
  point and compare).
* Parts are about ``SPLIT_TARGET_CHARS`` long (the first safe point past
  that). A stretch with no safe point for more than ``MAX_EXACT_STRETCH_CHARS``
  (one 30 MB word, a megabyte of spaces) is not given to tiktoken: it counts
  its UTF-8 bytes, a hard upper bound (every token stands for at least one
  byte).
* Only the first ``EXACT_TEXT_CHARS`` of one text are counted exactly; the rest,
  which starts at a safe split point, counts its UTF-8 bytes too. Such a text
  is already ~450,000 tokens or more for ordinary text, so the bound only ever
  overcounts a message too big for most windows, and keeps counting a 30 MB
  message well under a second.

Each of these errs high, never low, so stored counts keep windows within budget.
(tiktoken's ``encode_ordinary_batch`` with threads was measured slower than a
plain loop on this machine, 2.8x for 45,000 texts: its calls contend instead of
running in parallel, so batches are counted one text at a time.)

Fallback
--------
When tiktoken's data cannot be loaded (no internet and no cache; any
exception from ``tiktoken.get_encoding``, or no answer within
``TIKTOKEN_LOAD_TIMEOUT_S``), ``counter_for`` returns the estimator for that
family (family name suffixed ``:estimated`` so estimates are never mixed with
exact stored counts) and warns once with ``TokenizerFallbackWarning``. Set
``THREADLINE_TOKENIZER=estimate`` to use the estimator for every family (tests
use this); ``auto`` (the default) uses tiktoken where it applies.

Images and files
----------------
OpenAI families: ``detail="low"`` costs 85. Otherwise the image is scaled
down to fit 2048x2048, then down so its shortest side is 768, and covered by
512-pixel tiles: ``85 + 170 * tiles``. Unknown size is taken as 1024x1024
(765 tokens). Other families use Anthropic's formula: scale the long edge
down to 1568, then ``ceil(w * h / 750)``, capped at 1600; unknown size costs
1600. A file part costs its URI and name as text, plus
``len(data) / BASE64_CHARS_PER_TOKEN`` for inline base64 data, plus
``FILE_PART_OVERHEAD``.
"""

from __future__ import annotations

import json
import math
import re
import string
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable
from zlib import adler32

from threadline import catalog
from threadline.messages import FilePart, ImagePart, Message, TextPart
from threadline.tokenizer_env import tokenizer_mode

# -- families and configuration --------------------------------------------------

TIKTOKEN_FAMILIES = frozenset({"o200k_base", "cl100k_base"})
"""Families counted exactly with tiktoken (when its data loads)."""
ESTIMATED_SUFFIX = ":estimated"
"""Appended to a tiktoken family's name when its estimator stands in for it."""
TIKTOKEN_LOAD_TIMEOUT_S = 30.0
"""Give up on a tiktoken download after this long and estimate instead."""

# -- OpenAI chat overhead (cookbook "How to count tokens with tiktoken") ----------

OPENAI_TOKENS_PER_MESSAGE = 3
OPENAI_TOKENS_PER_NAME = 1
OPENAI_REPLY_PRIMING = 3
TOOL_CALL_OVERHEAD = 3
"""Per tool call in an assistant message (id, type and wrapping)."""
TOOL_DEFINITION_OVERHEAD = 8
"""Per tool definition (wrapping of name, description and parameters)."""
TOOLS_BLOCK_OVERHEAD = 12
"""Once per request that defines any tools."""
ANTHROPIC_TOOLS_SYSTEM_PROMPT = 346
"""Anthropic's documented tool-use system prompt (tool_choice auto, Claude 4 models)."""

# -- estimator -------------------------------------------------------------------

ESTIMATE_PER_MESSAGE = 4
"""Estimated per-message overhead (role and delimiters) for non-OpenAI families."""
ESTIMATE_PER_NAME = 1
ESTIMATE_REPLY_PRIMING = 3

LOWERCASE_WEIGHT = 0.185
UPPERCASE_WEIGHT = 0.35
DIGIT_WEIGHT = 0.85
PUNCTUATION_WEIGHT = 0.52
SPACE_WEIGHT = 0.20
NEWLINE_WEIGHT = 0.25
NON_ASCII_WEIGHT = 1.0
"""Per-character weights in o200k tokens (fitted; see the module docstring)."""
SAFETY_MARGIN = 1.15
"""Multiplier on every estimate so that it errs high on typical text."""
FAMILY_RATIOS: Mapping[str, float] = {
    "o200k_base": 1.0,
    "cl100k_base": 1.0,  # measured: 4.38 vs 4.41 chars/token on the corpus
    "anthropic": 1.25,
    "google": 1.10,
    "mistral": 1.20,
    "llama": 1.05,
    "qwen": 1.05,
    "deepseek": 1.10,
    "generic": 1.25,
}
"""Tokens a family needs for text that costs 1 token in o200k."""
DEFAULT_FAMILY_RATIO = FAMILY_RATIOS["generic"]
BASE64_CHARS_PER_TOKEN = 1.4
"""Measured: random base64 is 1.47 characters per o200k token."""
FILE_PART_OVERHEAD = 4

WEIGHT_UNITS = 200
"""Weights in whole 1/200 tokens: every weight above is a whole number of them."""


def _weight_table() -> bytes:
    """Each ASCII byte's weight in ``WEIGHT_UNITS`` (a ``bytes.translate`` table); other
    ASCII (control bytes included) counts as punctuation."""
    table = [round(PUNCTUATION_WEIGHT * WEIGHT_UNITS)] * 256
    for chars, weight in [
        (string.ascii_lowercase, LOWERCASE_WEIGHT),
        (string.ascii_uppercase, UPPERCASE_WEIGHT),
        (string.digits, DIGIT_WEIGHT),
        (" \t\r\f\v", SPACE_WEIGHT),
        ("\n", NEWLINE_WEIGHT),
    ]:
        for c in chars:
            table[ord(c)] = round(weight * WEIGHT_UNITS)
    return bytes(table)


WEIGHT_TABLE = _weight_table()
WEIGHT_SLICE = 65520 // max(WEIGHT_TABLE[:128])
"""ASCII bytes adler32 adds up exactly at once: their weights sum below its modulus."""
NON_ASCII_UNITS = round(NON_ASCII_WEIGHT * WEIGHT_UNITS)

# -- long text (see "Long text" in the module docstring) -------------------------

LONG_TEXT_CHARS = 65_536
"""A longer text is counted in parts split at safe split points."""
SPLIT_TARGET_CHARS = 16_384
"""A long text's next split is the first safe split point past this many characters."""
MAX_EXACT_STRETCH_CHARS = 65_536
"""A stretch without a safe split point longer than this counts its UTF-8 bytes."""
EXACT_TEXT_CHARS = 2_000_000
"""Characters of one text counted exactly; the rest of it counts its UTF-8 bytes."""

SAFE_SPLIT = re.compile(
    r"(?<=[0-9])[\x00-\x2f\x3a-\x7f]"  # digit | other ASCII
    r"|(?<=[A-Za-z])[\x00-\x26\x28-\x40\x5b-\x60\x7b-\x7f]"  # letter | ASCII not letter or '
    r"|(?<=[!-/:-@\[-`{-~])[0-9 ]"  # ASCII punctuation | digit or space
)
"""Matches where a tiktoken piece always ends (o200k and cl100k): a split there is exact."""

# -- images ----------------------------------------------------------------------

OPENAI_IMAGE_BASE = 85
OPENAI_IMAGE_PER_TILE = 170
OPENAI_IMAGE_MAX_SIDE = 2048
OPENAI_IMAGE_SHORT_SIDE = 768
OPENAI_IMAGE_TILE = 512
OPENAI_IMAGE_DEFAULT_SIZE = 1024
ANTHROPIC_IMAGE_MAX_EDGE = 1568
ANTHROPIC_IMAGE_PIXELS_PER_TOKEN = 750
ANTHROPIC_IMAGE_MAX_TOKENS = 1600

# -- calibration -----------------------------------------------------------------

CALIBRATION_ALPHA = 0.3
"""EMA weight of the newest observation."""
CALIBRATION_MIN = 0.5
CALIBRATION_MAX = 2.0


class TokenizerFallbackWarning(UserWarning):
    """tiktoken's data could not be loaded; counts for OpenAI models are estimated."""


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens for one tokenizer family."""

    @property
    def family(self) -> str:
        """The tokenizer family; stored token counts are keyed by it."""
        ...

    def count_text(self, text: str) -> int: ...

    def count_message(self, message: Message) -> int: ...

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int: ...

    def count_messages(self, messages: Iterable[Message]) -> int: ...


# -- shared pieces -----------------------------------------------------------------


def openai_image_tokens(part: ImagePart) -> int:
    """OpenAI's tile formula (see module docstring)."""
    if part.detail == "low":
        return OPENAI_IMAGE_BASE
    width = float(part.width or OPENAI_IMAGE_DEFAULT_SIZE)
    height = float(part.height or OPENAI_IMAGE_DEFAULT_SIZE)
    if max(width, height) > OPENAI_IMAGE_MAX_SIDE:
        scale = OPENAI_IMAGE_MAX_SIDE / max(width, height)
        width, height = width * scale, height * scale
    if min(width, height) > OPENAI_IMAGE_SHORT_SIDE:
        scale = OPENAI_IMAGE_SHORT_SIDE / min(width, height)
        width, height = width * scale, height * scale
    tiles = math.ceil(width / OPENAI_IMAGE_TILE) * math.ceil(height / OPENAI_IMAGE_TILE)
    return OPENAI_IMAGE_BASE + OPENAI_IMAGE_PER_TILE * tiles


def anthropic_image_tokens(part: ImagePart) -> int:
    """Anthropic's pixel formula (see module docstring)."""
    if not part.width or not part.height:
        return ANTHROPIC_IMAGE_MAX_TOKENS
    width, height = float(part.width), float(part.height)
    if max(width, height) > ANTHROPIC_IMAGE_MAX_EDGE:
        scale = ANTHROPIC_IMAGE_MAX_EDGE / max(width, height)
        width, height = width * scale, height * scale
    return min(
        ANTHROPIC_IMAGE_MAX_TOKENS, math.ceil(width * height / ANTHROPIC_IMAGE_PIXELS_PER_TOKEN)
    )


def utf8_length(text: str) -> int:
    """UTF-8 bytes of ``text``: an upper bound on its tokens for any byte-level BPE."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class LongTextCount:
    """A long text's count, and how many of its characters were bounded, not counted."""

    tokens: int
    bounded_chars: int
    """Characters counted by their UTF-8 bytes (an over-long stretch, or past
    ``EXACT_TEXT_CHARS``); 0 when the count is exact."""


def count_long_text(
    text: str,
    exact: Callable[[str], int],
    *,
    split_target: int = SPLIT_TARGET_CHARS,
    max_stretch: int = MAX_EXACT_STRETCH_CHARS,
    exact_chars: int = EXACT_TEXT_CHARS,
) -> LongTextCount:
    """Count ``text`` in parts split at ``SAFE_SPLIT`` points, each part with ``exact``;
    parts that are too long, and everything past ``exact_chars``, count their UTF-8
    bytes. Exact when nothing is bounded; otherwise never lower than exact.

    No search looks past ``exact_chars`` (plus one stretch), so a 30 MB text costs a
    scan of about ``exact_chars`` characters, whatever it holds."""
    total = bounded = pos = 0
    size = len(text)
    while pos < size:
        if pos >= exact_chars:
            break
        if size - pos <= split_target:
            return LongTextCount(tokens=total + exact(text[pos:]), bounded_chars=bounded)
        match = SAFE_SPLIT.search(text, pos + split_target, pos + max_stretch + 1)
        if match is not None:
            total += exact(text[pos : match.start()])
            pos = match.start()
            continue
        if size - pos <= max_stretch:
            return LongTextCount(tokens=total + exact(text[pos:]), bounded_chars=bounded)
        # an over-long stretch: bound it up to the next safe point, if one comes soon
        match = SAFE_SPLIT.search(text, pos + max_stretch, exact_chars + max_stretch)
        if match is None:
            break
        total += utf8_length(text[pos : match.start()])
        bounded += match.start() - pos
        pos = match.start()
    if pos < size:  # the rest starts at a safe split point: its bytes bound its tokens
        total += utf8_length(text[pos:])
        bounded += size - pos
    return LongTextCount(tokens=total, bounded_chars=bounded)


def _tool_definition_text(tool: Mapping[str, Any]) -> str:
    """Name, description and schema of a tool in any of the accepted shapes."""
    body: Mapping[str, Any] = tool
    function = tool.get("function")
    if tool.get("type") == "function" and isinstance(function, Mapping):
        body = function
    schema = body.get("parameters", body.get("input_schema", {}))
    pieces = [str(body.get("name", "")), str(body.get("description", ""))]
    if schema:
        pieces.append(json.dumps(schema, ensure_ascii=False, separators=(",", ":")))
    return "\n".join(p for p in pieces if p)


class _BaseCounter:
    """Message, tool and list counting on top of ``count_text``."""

    family: str
    per_message: int
    per_name: int
    reply_priming: int
    tools_preamble: int = 0

    def count_text(self, text: str) -> int:
        raise NotImplementedError

    def image_tokens(self, part: ImagePart) -> int:
        return anthropic_image_tokens(part)

    def _file_tokens(self, part: FilePart) -> int:
        total = FILE_PART_OVERHEAD + self.count_text(part.uri)
        if part.name:
            total += self.count_text(part.name)
        if part.data:
            total += math.ceil(len(part.data) / BASE64_CHARS_PER_TOKEN)
        return total

    def count_message(self, message: Message) -> int:
        total, texts = self._message_parts(message)
        return total + sum(map(self.count_text, texts))

    def _message_parts(self, message: Message) -> tuple[int, list[str]]:
        """What a message costs besides its texts (overheads, images, files), and the
        texts: the one place that says which of a message's text is counted."""
        total = self.per_message
        content = message.content
        texts = [content] if isinstance(content, str) else []
        for part in () if isinstance(content, str) else content:
            if isinstance(part, TextPart):
                texts.append(part.text)
            elif isinstance(part, ImagePart):
                total += self.image_tokens(part)
            else:
                total += self._file_tokens(part)
        for call in message.tool_calls:
            total += TOOL_CALL_OVERHEAD
            texts += (call.id, call.name, call.arguments_json())
        if message.tool_call_id:
            texts.append(message.tool_call_id)
        if message.name:
            total += self.per_name
            texts.append(message.name)
        return total, texts

    def count_messages(self, messages: Iterable[Message]) -> int:
        return self.reply_priming + sum(self.count_message(m) for m in messages)

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        if not tools:
            return 0
        total = TOOLS_BLOCK_OVERHEAD + self.tools_preamble
        for tool in tools:
            total += TOOL_DEFINITION_OVERHEAD + self.count_text(_tool_definition_text(tool))
        return total


class TiktokenCounter(_BaseCounter):
    """Exact counts for OpenAI tokenizers, with OpenAI's chat overhead."""

    per_message = OPENAI_TOKENS_PER_MESSAGE
    per_name = OPENAI_TOKENS_PER_NAME
    reply_priming = OPENAI_REPLY_PRIMING

    def __init__(self, encoding_name: str) -> None:
        self.family = encoding_name
        self._encoding = _load_encoding(encoding_name)

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        if len(text) <= LONG_TEXT_CHARS:
            return self._exact(text)
        return count_long_text(text, self._exact).tokens

    def count_long(self, text: str) -> LongTextCount:
        """How ``count_text`` counts a text of any length, with what it bounded."""
        return count_long_text(text, self._exact)

    def _exact(self, text: str) -> int:
        # encode_ordinary counts special-token text such as <|endoftext|> as text, the
        # same as encode(text, disallowed_special=()) without its checks
        try:
            return len(self._encoding.encode_ordinary(text))
        except BaseException as exc:  # tiktoken's Rust side panics on some huge pieces
            if type(exc).__name__ != "PanicException":
                raise
            return utf8_length(text)

    def image_tokens(self, part: ImagePart) -> int:
        return openai_image_tokens(part)

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.family!r})"


def estimate_o200k(text: str) -> float:
    """The raw estimate of ``text`` in o200k tokens, before family ratio and margin."""
    if text.isascii():
        ascii_bytes = text.encode("ascii")
        units = 0
    else:  # lone surrogates too: each non-ASCII character counts once
        ascii_bytes = text.encode("ascii", "ignore")
        units = NON_ASCII_UNITS * (len(text) - len(ascii_bytes))
    weights = ascii_bytes.translate(WEIGHT_TABLE)
    if len(weights) <= WEIGHT_SLICE:
        units += adler32(weights, 0) & 0xFFFF
    else:
        view = memoryview(weights)
        units += sum(
            [
                adler32(view[i : i + WEIGHT_SLICE], 0) & 0xFFFF
                for i in range(0, len(view), WEIGHT_SLICE)
            ]
        )
    return units / WEIGHT_UNITS


class EstimatingCounter(_BaseCounter):
    """A fast estimate that errs high; see the module docstring for the method."""

    def __init__(self, family: str) -> None:
        self.imitates = family
        self.family = family + ESTIMATED_SUFFIX if family in TIKTOKEN_FAMILIES else family
        self._scale = FAMILY_RATIOS.get(family, DEFAULT_FAMILY_RATIO) * SAFETY_MARGIN
        if family in TIKTOKEN_FAMILIES:
            self.per_message = OPENAI_TOKENS_PER_MESSAGE
            self.per_name = OPENAI_TOKENS_PER_NAME
            self.reply_priming = OPENAI_REPLY_PRIMING
        else:
            self.per_message = ESTIMATE_PER_MESSAGE
            self.per_name = ESTIMATE_PER_NAME
            self.reply_priming = ESTIMATE_REPLY_PRIMING
        if family == "anthropic":
            self.tools_preamble = ANTHROPIC_TOOLS_SYSTEM_PROMPT

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        return math.ceil(estimate_o200k(text) * self._scale)

    def count_message(self, message: Message) -> int:
        """``_BaseCounter.count_message`` with one estimate of all the message's text: the
        raw estimate adds up over joined texts, so only the rounding differs (once, not
        per text: up to a token a text lower), and a tool step costs one pass, not four."""
        total, texts = self._message_parts(message)
        text = "".join(texts)
        return total + math.ceil(estimate_o200k(text) * self._scale) if text else total

    def image_tokens(self, part: ImagePart) -> int:
        if self.imitates in TIKTOKEN_FAMILIES:
            return openai_image_tokens(part)
        return anthropic_image_tokens(part)

    def __repr__(self) -> str:
        return f"EstimatingCounter({self.imitates!r})"


# -- loading tiktoken --------------------------------------------------------------

_lock = threading.Lock()
_counters: dict[str, TokenCounter] = {}
_stored_estimators: dict[str, TokenCounter] = {}
_warned_fallback: set[str] = set()


def _reset_caches() -> None:
    """Forget cached counters and issued warnings (for tests)."""
    with _lock:
        _counters.clear()
        _stored_estimators.clear()
        _warned_fallback.clear()


def _load_encoding(name: str) -> Any:
    """``tiktoken.get_encoding(name)``, raising on any failure or after the timeout."""
    result: dict[str, Any] = {}

    def load() -> None:
        try:
            import tiktoken

            result["encoding"] = tiktoken.get_encoding(name)
        except BaseException as exc:  # reported to the caller below
            result["error"] = exc

    worker = threading.Thread(target=load, name=f"threadline-tiktoken-{name}", daemon=True)
    worker.start()
    worker.join(TIKTOKEN_LOAD_TIMEOUT_S)
    if "encoding" in result:
        return result["encoding"]
    if "error" in result:
        raise RuntimeError(f"{type(result['error']).__name__}: {result['error']}")
    raise TimeoutError(f"no answer within {TIKTOKEN_LOAD_TIMEOUT_S:g} s")


def _make_counter(family: str) -> TokenCounter:
    if tokenizer_mode() == "estimate" or family not in TIKTOKEN_FAMILIES:
        return EstimatingCounter(family)
    try:
        return TiktokenCounter(family)
    except Exception as exc:
        if family not in _warned_fallback:
            _warned_fallback.add(family)
            warnings.warn(
                f"could not load tiktoken's {family!r} data ({exc}); token counts for "
                "OpenAI models are estimated (they err high). To count exactly, allow "
                "tiktoken to download its data once, or set TIKTOKEN_CACHE_DIR to a folder "
                "holding its cached encoding files.",
                TokenizerFallbackWarning,
                stacklevel=4,
            )
        return EstimatingCounter(family)


def counter_for_family(family: str) -> TokenCounter:
    """The (cached) counter for one tokenizer family."""
    with _lock:
        counter = _counters.get(family)
        if counter is None:
            counter = _make_counter(family)
            _counters[family] = counter
        return counter


def counter_for(model: str | None) -> TokenCounter:
    """The counter for ``model``'s tokenizer family (``None``: the default model)."""
    return counter_for_family(catalog.lookup(model).tokenizer)


def stored_counter_for(model: str | None) -> TokenCounter:
    """The counter whose counts an append stores for ``model``: ``counter_for(model)``
    itself where counting is cheap, the family's estimator (``ESTIMATED_SUFFIX``) where
    the exact count needs tiktoken's BPE pass, which costs more per message than the
    whole durable append. tiktoken's data is not loaded for it (0.2 s of a one-shot
    ``sessions import``); where it cannot load, or ``THREADLINE_TOKENIZER=estimate``,
    ``counter_for`` gives the same estimator.

    Only a window's messages need exact counts, and a build counts exactly whatever it
    sends that is stored as an estimate, so budgets stay exact while totals, triggers and
    cuts add estimates (high on ordinary text, low on base64, random strings and rare
    scripts: see "How the estimator works")."""
    family = catalog.lookup(model).tokenizer
    if family not in TIKTOKEN_FAMILIES:
        return counter_for_family(family)
    with _lock:
        estimator = _stored_estimators.get(family)
        if estimator is None:
            estimator = _stored_estimators[family] = EstimatingCounter(family)
        return estimator


# -- calibration -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CalibratedCounter:
    """A counter whose counts are scaled by ``factor`` and rounded up."""

    base: TokenCounter
    factor: float

    @property
    def family(self) -> str:
        return self.base.family

    def _scale(self, n: int) -> int:
        return math.ceil(n * self.factor)

    def count_text(self, text: str) -> int:
        return self._scale(self.base.count_text(text))

    def count_message(self, message: Message) -> int:
        return self._scale(self.base.count_message(message))

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        return self._scale(self.base.count_tools(tools))

    def count_messages(self, messages: Iterable[Message]) -> int:
        return self._scale(self.base.count_messages(messages))


def _clamp(value: float) -> float:
    return min(CALIBRATION_MAX, max(CALIBRATION_MIN, value))


class Calibration:
    """Per-model ratio of provider-reported to estimated input tokens.

    Smoothed as an exponential moving average: the first observation sets the
    ratio, each later one moves it by ``alpha`` (default 0.3, so an
    observation's weight halves about every two turns and one odd request
    cannot swing budgets). Observations and the ratio are clamped to
    [0.5, 2.0]. Thread-safe.
    """

    def __init__(self, alpha: float = CALIBRATION_ALPHA) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError("alpha must be in (0, 1]")
        self.alpha = alpha
        self._ratios: dict[str, float] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(model: str | None) -> str:
        return (model or catalog.DEFAULT_MODEL).strip().lower()

    def observe(
        self, model: str | None, reported_input_tokens: int, estimated_input_tokens: int
    ) -> float:
        """Record one request; returns the updated factor. Non-positive inputs are ignored."""
        key = self._key(model)
        with self._lock:
            if reported_input_tokens <= 0 or estimated_input_tokens <= 0:
                return self._ratios.get(key, 1.0)
            sample = _clamp(reported_input_tokens / estimated_input_tokens)
            old = self._ratios.get(key)
            new = sample if old is None else old + self.alpha * (sample - old)
            self._ratios[key] = _clamp(new)
            return self._ratios[key]

    def factor(self, model: str | None) -> float:
        """The current factor for ``model`` (1.0 before any observation)."""
        with self._lock:
            return self._ratios.get(self._key(model), 1.0)

    def counter(self, model: str | None) -> TokenCounter:
        """``counter_for(model)`` scaled by this model's factor."""
        return CalibratedCounter(counter_for(model), self.factor(model))
