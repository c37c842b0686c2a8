"""Token counting: exact tiktoken counts, the estimator, fallback, calibration."""

from __future__ import annotations

import itertools
import json
import math
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threadline import catalog, tokens
from threadline.messages import FilePart, ImagePart, Message, TextPart, ToolCall
from threadline.tokenizer_env import TOKENIZER_ENV

SHARED = Path(__file__).resolve().parents[2] / "shared"
TIKTOKEN_DIR = SHARED / "tiktoken"
TRANSCRIPTS = SHARED / "transcripts"
IN_CI = os.environ.get("CI", "").lower() == "true"


def _need(path: Path) -> None:
    if not path.exists():
        if IN_CI:
            pytest.fail(f"{path} is missing (required under CI=true)")
        pytest.skip(f"{path} is absent (shared test data beside the project)")


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(TOKENIZER_ENV, raising=False)
    monkeypatch.delenv(catalog.CATALOG_ENV, raising=False)
    tokens._reset_caches()
    catalog._reset_caches()
    yield
    tokens._reset_caches()
    catalog._reset_caches()


@pytest.fixture
def tiktoken_data(monkeypatch: pytest.MonkeyPatch) -> None:
    _need(TIKTOKEN_DIR)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(TIKTOKEN_DIR))


def _exact(family: str) -> tokens.TokenCounter:
    with warnings.catch_warnings():
        warnings.simplefilter("error", tokens.TokenizerFallbackWarning)
        counter = tokens.counter_for_family(family)
    assert isinstance(counter, tokens.TiktokenCounter)
    return counter


# -- exact counts ----------------------------------------------------------------


@pytest.mark.usefixtures("tiktoken_data")
@pytest.mark.parametrize("family", ["o200k_base", "cl100k_base"])
def test_known_counts(family: str) -> None:
    counter = _exact(family)
    assert counter.family == family
    assert counter.count_text("hello world") == 2
    assert counter.count_text("") == 0


@pytest.mark.usefixtures("tiktoken_data")
def test_counter_for_models() -> None:
    assert tokens.counter_for(None).family == "o200k_base"
    assert tokens.counter_for("gpt-4-0613").family == "cl100k_base"
    assert tokens.counter_for("openai/gpt-4o") is tokens.counter_for("gpt-4.1")
    assert tokens.counter_for("claude-sonnet-4-5").family == "anthropic"


@pytest.mark.usefixtures("tiktoken_data")
def test_special_tokens_are_text() -> None:
    counter = _exact("o200k_base")
    assert counter.count_text("a <|endoftext|> b") > 3
    assert counter.count_message(Message.user("<|endoftext|><|im_start|>")) > 3


@pytest.mark.usefixtures("tiktoken_data")
def test_message_overhead_follows_openai_formula() -> None:
    counter = _exact("o200k_base")
    text = "What is the capital of France?"
    body = counter.count_text(text)
    assert counter.count_message(Message.user(text)) == body + 3
    named = Message.user(text, name="alice")
    assert counter.count_message(named) == body + 3 + 1 + counter.count_text("alice")
    messages = [Message.system("You are terse."), Message.user(text)]
    expected = sum(3 + counter.count_text(m.text) for m in messages) + 3
    assert counter.count_messages(messages) == expected


@pytest.mark.usefixtures("tiktoken_data")
def test_tool_calls_and_results_are_counted() -> None:
    counter = _exact("o200k_base")
    call = ToolCall(id="call_1", name="read_file", arguments={"path": "/etc/hosts"})
    bare = counter.count_message(Message.assistant(""))
    with_call = counter.count_message(Message.assistant("", tool_calls=[call]))
    expected = (
        tokens.TOOL_CALL_OVERHEAD
        + counter.count_text("call_1")
        + counter.count_text("read_file")
        + counter.count_text(call.arguments_json())
    )
    assert with_call - bare == expected
    result = Message.tool("127.0.0.1 localhost", tool_call_id="call_1", name="read_file")
    assert counter.count_message(result) == (
        3
        + counter.count_text("127.0.0.1 localhost")
        + counter.count_text("call_1")
        + 1
        + counter.count_text("read_file")
    )


@pytest.mark.usefixtures("tiktoken_data")
def test_tool_definitions_in_every_shape() -> None:
    counter = _exact("o200k_base")
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"],
    }
    neutral = {"name": "weather", "description": "Current weather", "parameters": schema}
    openai = {"type": "function", "function": neutral}
    anthropic = {"name": "weather", "description": "Current weather", "input_schema": schema}
    n = counter.count_tools([neutral])
    assert n == counter.count_tools([openai]) == counter.count_tools([anthropic])
    assert n > counter.count_text(json.dumps(schema, separators=(",", ":")))
    assert counter.count_tools([]) == 0
    assert counter.count_tools([neutral, neutral]) > n


@pytest.mark.usefixtures("tiktoken_data")
def test_images_and_files() -> None:
    counter = _exact("o200k_base")
    base = counter.count_message(Message.user([TextPart(text="look")]))

    def cost(part: ImagePart | FilePart) -> int:
        return counter.count_message(Message.user([TextPart(text="look"), part])) - base

    assert cost(ImagePart(url="https://x/y.png", detail="low", width=4000, height=4000)) == 85
    assert cost(ImagePart(url="https://x/y.png")) == 765  # unknown size: 1024x1024
    assert cost(ImagePart(url="https://x/y.png", width=2048, height=4096)) == 85 + 170 * 6
    assert cost(ImagePart(url="https://x/y.png", width=512, height=512)) == 85 + 170
    file_cost = cost(FilePart(uri="/data/report.pdf", name="report.pdf", data="QUJD" * 100))
    assert file_cost >= math.ceil(400 / tokens.BASE64_CHARS_PER_TOKEN)


def test_anthropic_image_formula() -> None:
    est = tokens.EstimatingCounter("anthropic")
    assert est.image_tokens(ImagePart(url="u")) == 1600
    assert est.image_tokens(ImagePart(url="u", width=1000, height=750)) == 1000
    assert est.image_tokens(ImagePart(url="u", width=200, height=200)) == math.ceil(40000 / 750)
    assert est.image_tokens(ImagePart(url="u", width=8000, height=8000)) == 1600
    assert est.image_tokens(ImagePart(url="u", width=3136, height=200)) == math.ceil(
        1568 * 100 / 750
    )


# -- fallback --------------------------------------------------------------------


def test_fallback_when_tiktoken_cannot_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tiktoken

    def refuse(name: str) -> Any:
        raise ConnectionError(f"no network for {name}")

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tiktoken, "get_encoding", refuse)
    with pytest.warns(tokens.TokenizerFallbackWarning, match="TIKTOKEN_CACHE_DIR") as record:
        counter = tokens.counter_for("gpt-4o")
        again = tokens.counter_for("gpt-4o-mini")
        n = counter.count_text("hello world")
        counter.count_messages([Message.user("hi"), Message.assistant("hello")])
    assert len(record) == 1
    assert isinstance(counter, tokens.EstimatingCounter) and again is counter
    assert counter.family == "o200k_base" + tokens.ESTIMATED_SUFFIX
    assert n >= 2
    assert counter.count_message(Message.user("x")) >= tokens.OPENAI_TOKENS_PER_MESSAGE


def test_estimate_mode_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKENIZER_ENV, "estimate")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        counter = tokens.counter_for("gpt-4o")
    assert isinstance(counter, tokens.EstimatingCounter)


def test_bad_tokenizer_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    from threadline.errors import ConfigError

    monkeypatch.setenv(TOKENIZER_ENV, "magic")
    with pytest.raises(ConfigError, match=TOKENIZER_ENV):
        tokens.counter_for("gpt-4o")


def test_non_openai_families_estimate_without_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for model in ("claude-sonnet-4-5", "gemini-2.5-pro", "llama3.1", "qwen3", "deepseek-chat"):
            counter = tokens.counter_for(model)
            assert isinstance(counter, tokens.EstimatingCounter)
            assert counter.family == catalog.lookup(model).tokenizer


# -- the estimator ---------------------------------------------------------------


def _corpus() -> list[str]:
    """Assistant prose, tool-call arguments and tool output from real sessions."""
    _need(TRANSCRIPTS)
    texts: list[str] = []
    files = [
        TRANSCRIPTS / "claude-code" / "spotter-tool_heavy.jsonl",
        TRANSCRIPTS / "claude-code" / "spotter-subagent-task.jsonl",
    ]
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            message = record.get("message")
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            if isinstance(content, str):
                texts.append(content)
                continue
            for part in content or []:
                if part.get("type") == "text":
                    texts.append(part["text"])
                elif part.get("type") == "tool_use":
                    texts.append(json.dumps(part["input"], ensure_ascii=False))
                elif part.get("type") == "tool_result":
                    inner = part.get("content")
                    if isinstance(inner, str):
                        texts.append(inner)
                    elif isinstance(inner, list):
                        texts.extend(q["text"] for q in inner if q.get("type") == "text")
    return [t for t in texts if t.strip()]


@pytest.mark.transcripts
@pytest.mark.usefixtures("tiktoken_data")
@pytest.mark.parametrize("family", sorted(tokens.FAMILY_RATIOS))
def test_estimator_errs_high_within_bound(family: str) -> None:
    corpus = _corpus()
    exact = _exact("o200k_base")
    est = tokens.EstimatingCounter(family)
    actual = sum(exact.count_text(t) for t in corpus)
    estimated = sum(est.count_text(t) for t in corpus)
    assert actual > 10_000
    ratio = estimated / actual
    assert 1.0 <= ratio <= 1.6, f"{family}: estimate/o200k = {ratio:.3f}"


@pytest.mark.usefixtures("tiktoken_data")
def test_estimator_errs_high_on_english_and_code() -> None:
    exact = _exact("o200k_base")
    est = tokens.EstimatingCounter("o200k_base")
    prose = (
        "Threadline keeps agent conversations durable. When a session grows, it compacts "
        "older history into a structured snapshot and never deletes what was said. "
    ) * 20
    code = Path(tokens.__file__).read_text(encoding="utf-8")
    for text in (prose, code):
        assert exact.count_text(text) <= est.count_text(text) <= 1.6 * exact.count_text(text)


def _reference_estimate(text: str) -> float:
    """The estimator's formula, character by character (the module docstring's sum)."""
    total = 0.0
    for c in text:
        if "a" <= c <= "z":
            total += tokens.LOWERCASE_WEIGHT
        elif "A" <= c <= "Z":
            total += tokens.UPPERCASE_WEIGHT
        elif "0" <= c <= "9":
            total += tokens.DIGIT_WEIGHT
        elif c in " \t\r\f\v":
            total += tokens.SPACE_WEIGHT
        elif c == "\n":
            total += tokens.NEWLINE_WEIGHT
        elif c.isascii():
            total += tokens.PUNCTUATION_WEIGHT
        else:
            total += tokens.NON_ASCII_WEIGHT
    return total


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(max_size=400)
    | st.text(alphabet="aZ9 \n.\ud800é这😀", min_size=300, max_size=2000)
    | st.sampled_from(
        [
            "",
            "z" * 5000,
            "9" * 5000,
            "9" * 385,
            "9" * 386,
            "😀" * 3000,
            "这" * 40_000,
            "\x00\x7f" * 1000,
        ]
    )
)
def test_estimate_matches_its_formula(text: str) -> None:
    """The byte-weight table and adler32's sums give the formula's value exactly: each
    character once (lone surrogates and 4-byte characters too), long texts summed in
    slices that never wrap adler32's modulus."""
    assert tokens.estimate_o200k(text) == pytest.approx(_reference_estimate(text), abs=1e-6)


def test_weights_are_whole_units() -> None:
    """The weight table holds each weight exactly (a weight that is not a whole number of
    ``WEIGHT_UNITS`` would be rounded silently), and no slice of ASCII weights can wrap
    adler32's modulus."""
    ascii_weights = (
        tokens.LOWERCASE_WEIGHT,
        tokens.UPPERCASE_WEIGHT,
        tokens.DIGIT_WEIGHT,
        tokens.PUNCTUATION_WEIGHT,
        tokens.SPACE_WEIGHT,
        tokens.NEWLINE_WEIGHT,
    )
    for weight in (*ascii_weights, tokens.NON_ASCII_WEIGHT):
        assert weight * tokens.WEIGHT_UNITS == pytest.approx(round(weight * tokens.WEIGHT_UNITS))
    assert max(tokens.WEIGHT_TABLE) * tokens.WEIGHT_SLICE < 65521
    assert max(round(w * tokens.WEIGHT_UNITS) for w in ascii_weights) == max(tokens.WEIGHT_TABLE)


def test_estimator_non_ascii_counts_about_one_each() -> None:
    counter = tokens.EstimatingCounter("o200k_base")
    cjk = "这是一个测试" * 100
    assert counter.count_text(cjk) >= len(cjk)


@settings(max_examples=200, deadline=None)
@given(a=st.text(max_size=300), b=st.text(max_size=300))
def test_estimate_is_non_negative_and_monotone(a: str, b: str) -> None:
    for family in ("anthropic", "o200k_base", "generic"):
        counter = tokens.EstimatingCounter(family)
        na, nab = counter.count_text(a), counter.count_text(a + b)
        assert na >= 0
        assert nab >= na
        assert (na == 0) == (a == "")


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=200), role=st.sampled_from(["system", "user", "assistant"]))
def test_count_message_at_least_overhead(text: str, role: str) -> None:
    message = Message.model_validate({"role": role, "content": text})
    for family in ("anthropic", "o200k_base", "llama"):
        counter = tokens.EstimatingCounter(family)
        assert counter.count_message(message) >= counter.per_message
        assert counter.count_messages([message]) >= counter.per_message + counter.reply_priming


# -- calibration -----------------------------------------------------------------


def test_calibration_ema_and_clamp() -> None:
    cal = tokens.Calibration(alpha=0.5)
    assert cal.factor("gpt-4o") == 1.0
    assert cal.observe("gpt-4o", 1200, 1000) == pytest.approx(1.2)
    assert cal.observe("GPT-4o", 1000, 1000) == pytest.approx(1.1)
    assert cal.observe("gpt-4o", 0, 1000) == pytest.approx(1.1)  # ignored
    assert cal.observe("claude-sonnet-4-5", 10_000, 1_000) == tokens.CALIBRATION_MAX
    assert cal.observe("gemini-2.5-pro", 1, 1_000) == tokens.CALIBRATION_MIN
    assert cal.factor(None) == cal.factor("gpt-4o")


def test_calibrated_counter_scales_and_rounds_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKENIZER_ENV, "estimate")
    base = tokens.counter_for("claude-sonnet-4-5")
    scaled = tokens.CalibratedCounter(base, 1.5)
    assert scaled.family == base.family
    text = "some text to count"
    assert scaled.count_text(text) == math.ceil(base.count_text(text) * 1.5)
    msgs = [Message.user(text)]
    assert scaled.count_messages(msgs) == math.ceil(base.count_messages(msgs) * 1.5)
    assert scaled.count_message(msgs[0]) == math.ceil(base.count_message(msgs[0]) * 1.5)
    assert isinstance(scaled, tokens.TokenCounter)
    cal = tokens.Calibration()
    cal.observe("claude-sonnet-4-5", 130, 100)
    assert cal.counter("claude-sonnet-4-5").count_text(text) == math.ceil(
        base.count_text(text) * 1.3
    )


# -- long text: split at safe points, bounded past a size ----------------------------

SPLIT_PIECES = [
    *"abcXYZ019 \n\t\r'.,;-_/\"{}()[]<>=+*&#@!~`|\\?:",
    "é",
    "字",
    "Ж",
    "\u0301",
    "😀",
    "²",
    "٣",
    "\u00a0",
    "\u3000",
    "\x0b",
    "\x1c",
    "'s",
    "'LL",
    "  ",
    "\r\n",
    "hello",
    "World",
    "2024",
]


def _sum_of_parts(counter: tokens.TokenCounter, text: str) -> int:
    """The text's count when split at every safe split point."""
    cuts = [0, *(m.start() for m in tokens.SAFE_SPLIT.finditer(text)), len(text)]
    return sum(counter.count_text(text[a:b]) for a, b in itertools.pairwise(cuts))


@pytest.mark.usefixtures("tiktoken_data")
@settings(max_examples=400, deadline=None)
@given(text=st.lists(st.sampled_from(SPLIT_PIECES), max_size=60).map("".join))
def test_safe_split_points_are_exact(text: str) -> None:
    for family in ("o200k_base", "cl100k_base"):
        counter = tokens.counter_for_family(family)
        assert _sum_of_parts(counter, text) == counter.count_text(text)


@pytest.mark.usefixtures("tiktoken_data")
def test_safe_split_points_are_exact_on_real_transcripts() -> None:
    _need(TRANSCRIPTS)
    files = sorted(p for p in TRANSCRIPTS.rglob("*") if p.is_file())
    assert files
    for family in ("o200k_base", "cl100k_base"):
        counter = _exact(family)
        for path in files:
            text = path.read_text(errors="replace")[:60_000]
            assert _sum_of_parts(counter, text) == counter.count_text(text), path


@pytest.mark.usefixtures("tiktoken_data")
@pytest.mark.parametrize("family", ["o200k_base", "cl100k_base"])
def test_long_normal_text_counts_exactly_in_parts(family: str) -> None:
    counter = _exact(family)
    assert isinstance(counter, tokens.TiktokenCounter)
    unit = (
        'def handler(event):\n    return {"status": 200, "body": event["x"] * 3}\n'
        "The quick brown fox jumps over the lazy dog, 42 times; naïve café 字.\n"
        '{"id":"call_123","args":{"path":"src/a.py","line":17}}\n'
    )
    text = unit * (3 * tokens.LONG_TEXT_CHARS // len(unit))
    whole = len(counter._encoding.encode_ordinary(text))
    detail = counter.count_long(text)
    assert detail == tokens.LongTextCount(tokens=whole, bounded_chars=0)
    assert counter.count_text(text) == whole
    tiny = tokens.count_long_text(text, counter.count_text, split_target=50, max_stretch=500)
    assert tiny.tokens == whole and tiny.bounded_chars == 0


@pytest.mark.usefixtures("tiktoken_data")
def test_counts_past_the_exact_size_are_bounded_high() -> None:
    counter = _exact("o200k_base")
    assert isinstance(counter, tokens.TiktokenCounter)
    text = ("alpha beta 12 gamma, delta! " * 40_000)[:1_000_000]
    whole = len(counter._encoding.encode_ordinary(text))
    part = tokens.count_long_text(text, counter.count_text, exact_chars=300_000)
    assert 650_000 < part.bounded_chars < 700_000  # the rest past ~300,000 characters
    assert part.tokens >= whole
    exact = tokens.count_long_text(text, counter.count_text, exact_chars=len(text))
    assert exact == tokens.LongTextCount(tokens=whole, bounded_chars=0)


@pytest.mark.usefixtures("tiktoken_data")
def test_a_30_mb_line_takes_the_bounded_path() -> None:
    """The import that took 39 s: no tiktoken on the long runs, and never low."""
    counter = _exact("o200k_base")
    assert isinstance(counter, tokens.TiktokenCounter)
    one_word = "x" * 30_000_000  # one piece: superlinear in tiktoken
    assert counter.count_long(one_word) == tokens.LongTextCount(30_000_000, 30_000_000)
    assert counter.count_text(one_word) == 30_000_000
    spaces = " " * 3_000_000  # crashes tiktoken (a stack overflow in its regex)
    assert counter.count_text(spaces) == 3_000_000
    line = "word " * 6_000_000  # 30 MB of ordinary words on one line
    per_thousand = counter.count_text("word " * 1000)
    detail = counter.count_long(line)
    assert detail.bounded_chars == pytest.approx(len(line) - tokens.EXACT_TEXT_CHARS, abs=20_000)
    assert detail.tokens >= per_thousand * 6000
    cafe = "café " * 1_000_000  # non-ASCII past the exact size counts UTF-8 bytes
    assert counter.count_long(cafe).tokens >= counter.count_text("café " * 1000) * 1000


@pytest.mark.usefixtures("tiktoken_data")
def test_a_tiktoken_panic_counts_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = _exact("o200k_base")
    assert isinstance(counter, tokens.TiktokenCounter)

    class PanicException(BaseException):
        pass

    class Panicking:
        def encode_ordinary(self, text: str) -> list[int]:
            raise PanicException("stack overflow")

    monkeypatch.setattr(counter, "_encoding", Panicking())
    assert counter.count_text("naïve") == len("naïve".encode())
    monkeypatch.setattr(Panicking, "encode_ordinary", lambda self, t: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        counter.count_text("other errors are not swallowed")


@pytest.mark.usefixtures("tiktoken_data")
def test_batch_and_single_appends_count_the_same() -> None:
    from threadline.store.encoding import prepare_messages

    call = ToolCall(id="c1", name="grep", arguments={"q": "needle", "n": 3})
    batch = [
        Message.user("Please look at src/app.py and fix the failing check."),
        Message.assistant("Looking.", tool_calls=[call]),
        Message.tool("src/app.py:12: x = compute(0.25)\n" * 40, tool_call_id="c1", name="grep"),
        Message.assistant("Fixed it: the value was computed twice. " * 5),
    ]
    together = prepare_messages("gpt-4o", batch)
    alone = [prepare_messages("gpt-4o", [m])[0] for m in batch]
    assert [m.token_counts for m in together] == [m.token_counts for m in alone]
    # an append stores the o200k estimate (tiktoken's pass costs more than the append),
    # under its own key, never mixed with exact counts, and erring high
    estimator = tokens.stored_counter_for("gpt-4o")
    assert estimator.family == "o200k_base" + tokens.ESTIMATED_SUFFIX
    exact = tokens.counter_for("gpt-4o")
    for stored, m in zip(together, batch, strict=True):
        assert list(stored.token_counts) == [estimator.family]
        assert stored.token_counts[estimator.family] == estimator.count_message(m)
        assert stored.token_counts[estimator.family] >= exact.count_message(m)


@pytest.mark.usefixtures("tiktoken_data")
def test_a_count_a_message_carries_for_the_session_family_is_recounted() -> None:
    """An edited message keeps its old counts: the session's family is always counted
    again (exact or estimated key alike); other families' counts ride along after it."""
    from threadline.store.encoding import prepare_messages, primary_tokens

    m = Message.user(
        "counted before an edit " * 50,
        token_counts={"cl100k_base": 9, "o200k_base": 4, "o200k_base:estimated": -5},
    )
    [stored] = prepare_messages("gpt-4o", [m])
    assert list(stored.token_counts) == ["o200k_base:estimated", "cl100k_base"]
    assert primary_tokens(stored) == tokens.stored_counter_for("gpt-4o").count_message(m)
    [claude] = prepare_messages("claude-sonnet-4-5", [m])
    assert next(iter(claude.token_counts)) == "anthropic"  # its own family comes first


@pytest.mark.usefixtures("tiktoken_data")
def test_a_build_counts_stored_estimates_exactly(tmp_path: Path) -> None:
    """The window's budget uses exact counts: a build counts what it sends whose stored
    count is an estimate, so the report's total is the exact count of the window."""
    from threadline import build_context
    from threadline.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "s.db")
    session = store.create_session(model="gpt-4o")
    texts = [
        f"Message {i}: " + "the quick brown fox jumps over the lazy dog. " * i for i in range(30)
    ]
    session.append(
        [Message.user(t) if i % 2 else Message.assistant(t) for i, t in enumerate(texts)]
    )
    exact = tokens.counter_for("gpt-4o")
    window = build_context(session, model="gpt-4o")
    sent = [m for m in window.messages if not m.synthetic]
    assert len(sent) == 30
    assert window.report.total_tokens == exact.count_messages(sent)
    assert session.total_tokens > sum(exact.count_message(m) for m in sent)  # errs high
    store.close()
