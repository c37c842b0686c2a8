"""Summarizers that use a chat model: the structured-prompt LLM summarizer and the hybrid.

``LLMSummarizer`` asks any ``ChatModel`` for the five-section snapshot with the
reference documents' settings: temperature 0.3, at most 4,096 output tokens,
tool use forbidden. The request is built to fit the *summarizer's* window,
not the agent's: when the messages do not fit, they are cut into chunks and
folded one by one, each fold updating the snapshot of the previous one, so
any backlog can be summarized by any model. The conversation goes to the
model as a plain-text transcript inside one user message, so tool calls need
no tool definitions and no provider can mistake it for a live conversation.

A reply that is empty or has nothing under the five sections is returned marked
``unusable`` (its lines kept as the current state), so a compaction can fall back
to the offline snapshot and say why (``gate``), rather than fail.

``HybridSummarizer`` (the default when a model is configured) keeps the
model's prose and adds the one thing models are unreliable at: exact values.
Every important value the offline extractor ranks highly and the model's
snapshot does not contain verbatim is appended to ``## Important Values``,
within a bound of values and words.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from threadline.catalog import lookup
from threadline.compaction.extractive import ExtractiveSummarizer
from threadline.compaction.snapshot import (
    DEFAULT_MAX_WORDS,
    SECTION_TITLES,
    SKELETON_WORDS,
    Bullet,
    Snapshot,
    SummaryResult,
    parse,
    words,
)
from threadline.compaction.values import Value, extract_values, unique_values
from threadline.errors import ConfigError, ModelError, UsageError
from threadline.llm.base import ChatModel, ChatRequest
from threadline.messages import Message
from threadline.tokens import TokenCounter, counter_for

DEFAULT_TEMPERATURE = 0.3
DEFAULT_MAX_OUTPUT_TOKENS = 4096
"""The agent server's cap on a summary; the model's own cap applies when lower."""
WINDOW_MARGIN_FRACTION = 0.05
"""Share of the summarizer's window left free for token-count error."""
WINDOW_MARGIN_MIN = 64
MIN_CHUNK_TOKENS = 200
"""A window that leaves less room than this for messages is too small to summarize with."""
OUTPUT_WINDOW_SHARE = 0.5
"""A small window spends at most this share on the reply."""
DEFAULT_MAX_APPENDED_VALUES = 30
HYBRID_VALUE_SHARE = 0.2
"""Share of the word limit the hybrid keeps free for the values it appends."""
WORST_TOKENS_PER_WORD = 4
"""Tokens per snapshot word assumed when sizing chunks (paths and ids cost several)."""
SPLIT_SAFETY = 0.9
"""A long message is split at this fraction of the size estimated to fit."""
LLM_NAME = "llm"
HYBRID_NAME = "hybrid"

SYSTEM_PROMPT = """\
You compress an AI agent's conversation into a structured state snapshot. The \
agent will continue the work from your snapshot alone, without the original \
messages, so it must hold everything needed to carry on.

Write exactly these five sections, in this order, as Markdown headings with \
"- " bullets:

## Files Modified
- each file path and what was changed in it
## Key Decisions
- each decision made and its rationale
## Important Values
- exact file paths, URLs, IDs, error messages, configuration values
## Current State
- the task in progress; the last action taken and its result; the expected next step; \
the names of the skills the agent loaded (results of the `skill` tool), if any
## Pending Tasks
- each remaining work item

Rules:
- Copy exact values verbatim: file paths, URLs, IDs and hashes, error messages, \
configuration values, versions, ports, commands. Never paraphrase, shorten or correct them.
- Keep what tool results revealed when it is data (outputs, numbers, errors, \
findings). Leave out bare confirmations such as "ok" or "success: true".
- Describe the conversation from outside ("the user asked", "the assistant \
edited"); the snapshot is not a message from the user.
- Stay under {max_words} words in total. When space is short, drop settled \
older detail before exact values.
- Write "- (none)" under a section with nothing in it.
- Output only the snapshot: no preamble, no closing remarks, no code fences. Do not call tools.
"""

FOCUS_NOTE = """\
The user asked that this snapshot focus on: {focus}
Give what concerns it more room and detail; keep the five sections and the rules above.
"""

FIRST_REQUEST = """\
Summarize the conversation below into the snapshot.

<conversation>
{transcript}
</conversation>
"""

UPDATE_REQUEST = """\
This is the current state snapshot of the conversation so far:

<snapshot>
{previous}
</snapshot>

Update this snapshot with the new messages below: keep everything in it that \
is still true and relevant (above all exact values), change what the new \
messages change, and add what they add. Return the whole updated snapshot.

<new-messages>
{transcript}
</new-messages>
"""

_FENCE_LINE = re.compile(r"^\s*(?:```|~~~)[\w-]*\s*$")

SummarizerKind = Literal["extractive", "llm", "hybrid"]


# -- the transcript ------------------------------------------------------------------


def _label(m: Message) -> str:
    seq = f"#{m.seq} " if m.seq is not None else ""
    if m.role == "tool":
        name = f" {m.name}" if m.name else ""
        return f"[{seq}tool result{name} for call {m.tool_call_id}]"
    flags = " (synthetic)" if m.synthetic else ""
    return f"[{seq}{m.role}{flags}]"


def _body(m: Message) -> str:
    pieces = m.part_texts()
    for call in m.tool_calls:
        pieces.append(f"-> calls {call.name} {call.arguments_json()} (call {call.id})")
    return "\n".join(pieces)


def render_message(m: Message) -> str:
    """One message as transcript text: a label line, then its content."""
    body = _body(m)
    return f"{_label(m)}\n{body}" if body else _label(m)


def evidence_text(messages: Sequence[Message], previous: str | None = None) -> str:
    """What the messages (text and tool arguments) and the previous snapshot say, as one
    text: what a model's snapshot is checked against (``gate``)."""
    return "\n".join([previous or "", *(_body(m) for m in messages)])


def message_values(messages: Sequence[Message], previous: str | None = None) -> list[Value]:
    """Distinct important values in the messages (text and tool arguments) and the snapshot."""
    found: list[Value] = []
    if previous:
        found.extend(extract_values(previous))
    for m in messages:
        found.extend(extract_values(_body(m)))
    return unique_values(found)


# -- output cleaning -------------------------------------------------------------------


def clean_output(text: str, max_words: int) -> tuple[str, Snapshot]:
    """The model's reply as a well-formed snapshot under ``max_words``.

    Code fences and chatter around the sections are dropped; a reply with no
    recognisable section at all is kept, line by line, as the current state,
    so nothing the model said is lost to formatting.
    """
    lines = [line for line in text.splitlines() if not _FENCE_LINE.match(line)]
    snapshot = parse("\n".join(lines))
    if snapshot.bullet_count() == 0:
        kept = [line.strip() for line in lines if line.strip()]
        for i, line in enumerate(kept):
            snapshot.add("current_state", line.lstrip("-*+ ").strip(), score=len(kept) - i)
    return snapshot.render(max_words), snapshot


def _defect(reply: str, model: str, finish_reason: str | None) -> str | None:
    """Why a reply cannot stand as a snapshot: it is empty, or it has none of the five
    sections (``clean_output`` still keeps its lines, but a compaction does not use them)."""
    if not reply.strip():
        return f"the model {model!r} returned an empty reply (finish reason: {finish_reason})"
    lines = [line for line in reply.splitlines() if not _FENCE_LINE.match(line)]
    if parse("\n".join(lines)).bullet_count() == 0:
        return f"the reply of {model!r} has nothing under any of the five snapshot sections"
    return None


# -- the LLM summarizer ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Block:
    """A piece of transcript and its token count."""

    text: str
    tokens: int


class LLMSummarizer:
    """Structured snapshots from a chat model, chunked to fit the model's own window."""

    name = LLM_NAME

    def __init__(
        self,
        model: ChatModel,
        *,
        temperature: float = DEFAULT_TEMPERATURE,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS,
        max_words: int = DEFAULT_MAX_WORDS,
        context_window: int | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        """``context_window`` overrides the catalog's window for ``model.model``."""
        if max_output_tokens <= 0:
            raise UsageError("max_output_tokens must be positive")
        self.model = model
        self.temperature = temperature
        self.max_words = max_words
        info = lookup(model.model)
        self.context_window = context_window or info.context_window
        self.max_output_tokens = max(
            1,
            min(
                max_output_tokens,
                info.max_output,
                int(self.context_window * OUTPUT_WINDOW_SHARE),
            ),
        )
        self.counter = counter or counter_for(model.model)
        self.requests = 0
        """Requests sent so far (one per fold)."""
        self.cancel: Callable[[], threading.Event | None] | None = None
        """The running turn's cancel event, when an agent compacts mid-turn: cancelling
        the turn closes the summarizer's request too."""

    @property
    def model_name(self) -> str:
        return self.model.model

    # -- sizing

    def _system(self, max_words: int, focus: str | None = None) -> Message:
        text = SYSTEM_PROMPT.format(max_words=max_words)
        if focus and focus.strip():
            text += "\n" + FOCUS_NOTE.format(focus=focus.strip())
        return Message.system(text)

    def _user(self, transcript: str, previous: str | None) -> Message:
        if previous and previous.strip():
            text = UPDATE_REQUEST.format(previous=previous.strip(), transcript=transcript)
            return Message.user(text)
        return Message.user(FIRST_REQUEST.format(transcript=transcript))

    def _room(self, max_words: int, previous: str | None) -> int:
        """Tokens left for transcript text in one request with this ``previous``."""
        fixed = self.counter.count_messages([self._system(max_words), self._user("", previous)])
        margin = max(WINDOW_MARGIN_MIN, int(self.context_window * WINDOW_MARGIN_FRACTION))
        return self.context_window - self.max_output_tokens - fixed - margin

    def _snapshot_room(self, max_words: int) -> int:
        """Room left beside a previous snapshot as long as one may be (the split size)."""
        worst = " ".join(["word"] * max(max_words, SKELETON_WORDS) * WORST_TOKENS_PER_WORD)
        return self._room(max_words, worst)

    def _blocks(self, messages: Sequence[Message], room: int) -> Iterator[_Block]:
        """Transcript blocks, a message split into parts when it alone exceeds ``room``."""
        for m in messages:
            text = render_message(m)
            tokens = self.counter.count_text(text) + 1
            if tokens <= room:
                yield _Block(text, tokens)
                continue
            yield from self._split(m, text, tokens, room)

    def _split(self, m: Message, text: str, tokens: int, room: int) -> Iterator[_Block]:
        body = text.split("\n", 1)[1] if "\n" in text else text
        label = _label(m)
        size = max(1, int(len(body) * room / tokens * SPLIT_SAFETY))
        parts: list[str] = []
        start = 0
        while start < len(body):
            piece = body[start : start + size]
            while len(piece) > 1 and self.counter.count_text(piece) + 16 > room:
                piece = piece[: len(piece) // 2]
            parts.append(piece)
            start += len(piece)
        for i, piece in enumerate(parts, 1):
            chunk = f"{label} (part {i} of {len(parts)})\n{piece}"
            yield _Block(chunk, self.counter.count_text(chunk) + 1)

    # -- summarizing

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        previous: str | None = None,
        max_words: int | None = None,
        focus: str | None = None,
    ) -> SummaryResult:
        """Summarize ``messages`` into a snapshot, updating ``previous`` when given.

        One request when everything fits the summarizer's window; otherwise one
        request per chunk, each updating the snapshot the last one returned.
        With no messages, ``previous`` comes back unchanged and nothing is sent.
        A single message too large for the window is split into parts.
        """
        limit = max_words or self.max_words
        split_room = self._snapshot_room(limit)
        if split_room < MIN_CHUNK_TOKENS:
            raise ConfigError(
                f"the summarizer model {self.model.model!r} has a {self.context_window:,}-token "
                f"window: after {self.max_output_tokens:,} tokens for the reply and the prompt, "
                f"only {max(split_room, 0):,} are left for messages (at least "
                f"{MIN_CHUNK_TOKENS} needed); use a model with a larger window or lower "
                "max_output_tokens"
            )
        current = previous
        input_tokens = output_tokens = 0
        defect: str | None = None
        chunk: list[str] = []
        used = 0
        budget = self._room(limit, current)
        for block in self._blocks(messages, split_room):
            if chunk and used + block.tokens > budget:
                current, sent, got, bad = self._fold(chunk, current, limit, focus)
                input_tokens, output_tokens = input_tokens + sent, output_tokens + got
                defect = defect or bad
                chunk, used = [], 0
                budget = self._room(limit, current)
            chunk.append(block.text)
            used += block.tokens
        if chunk:
            current, sent, got, bad = self._fold(chunk, current, limit, focus)
            input_tokens, output_tokens = input_tokens + sent, output_tokens + got
            defect = defect or bad
        text, snapshot = clean_output(current or "", limit)
        values = message_values(messages, previous)
        result = SummaryResult.counted(
            text,
            snapshot,
            values,
            summarizer=LLM_NAME,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
        )
        result.unusable = defect
        return result

    def _fold(
        self, transcript: list[str], previous: str | None, max_words: int, focus: str | None
    ) -> tuple[str, int, int, str | None]:
        """One request: the previous snapshot plus a chunk -> the updated snapshot, its
        cost, and what makes the reply unusable as a snapshot (``_defect``), if anything."""
        request = ChatRequest(
            messages=[
                self._system(max_words, focus),
                self._user("\n\n".join(transcript), previous),
            ],
            tools=(),
            temperature=self.temperature,
            max_tokens=self.max_output_tokens,
            tool_choice="none",
            cancel=self.cancel() if self.cancel is not None else None,
        )
        response = self.model.complete(request)
        self.requests += 1
        reply = response.message
        if reply.tool_calls:
            raise ModelError(
                f"the summarizer model {self.model.model!r} tried to call tools "
                f"({', '.join(c.name for c in reply.tool_calls)}) although tool use was forbidden"
            )
        text = reply.text
        usage = response.usage
        sent = usage.input_tokens
        if sent is None:
            sent = self.counter.count_messages(list(request.messages))
        got = usage.output_tokens
        if got is None:
            got = self.counter.count_text(text)
        cleaned, _ = clean_output(text, max_words)
        return cleaned, sent, got, _defect(text, self.model.model, response.finish_reason)


# -- the hybrid --------------------------------------------------------------------------


def append_values(
    text: str, snapshot: Snapshot, values: Sequence[Value], *, max_values: int, max_words: int
) -> tuple[str, list[Value]]:
    """Append the ``values`` missing from ``text`` to its Important Values section.

    Takes values in the order given (most important first) while both bounds
    hold; ``text`` must be a rendered snapshot. Returns the new text and the
    values appended.
    """
    budget = max_words - words(text)
    added: list[Value] = []
    for v in values:
        if len(added) >= max_values:
            break
        if v.text in text or any(v.text in a.text for a in added):
            continue
        cost = words(f"- {v.text}")
        if cost > budget:
            continue
        added.append(v)
        budget -= cost
    if not added:
        return text, []
    heading = f"## {SECTION_TITLES['important_values']}"
    lines = text.rstrip("\n").split("\n")
    start = lines.index(heading) if heading in lines else None
    if start is None:  # not a rendered snapshot: add the section at the end
        lines += ["", heading]
        start = len(lines) - 1
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    section = [line for line in lines[start + 1 : end] if line.strip() not in ("- (none)", "")]
    section += [f"- {v.text}" for v in added]
    tail = [""] if end < len(lines) else []
    new_lines = lines[: start + 1] + section + tail + lines[end:]
    for v in added:
        snapshot.important_values.append(Bullet(text=v.text, score=0.0))
    return "\n".join(new_lines) + "\n", added


class HybridSummarizer:
    """The LLM snapshot, plus the exact values it dropped, appended verbatim."""

    name = HYBRID_NAME

    def __init__(
        self,
        llm: LLMSummarizer,
        extractive: ExtractiveSummarizer | None = None,
        *,
        max_appended_values: int = DEFAULT_MAX_APPENDED_VALUES,
        value_share: float = HYBRID_VALUE_SHARE,
    ) -> None:
        if not 0.0 <= value_share < 1.0:
            raise UsageError("value_share must be in [0, 1)")
        self.llm = llm
        self.extractive = extractive or ExtractiveSummarizer()
        self.max_appended_values = max_appended_values
        self.value_share = value_share
        self.appended: list[Value] = []
        """Values the last ``summarize`` appended."""

    @property
    def model_name(self) -> str:
        return self.llm.model_name

    def summarize(
        self,
        messages: Sequence[Message],
        *,
        previous: str | None = None,
        max_words: int | None = None,
        focus: str | None = None,
    ) -> SummaryResult:
        limit = max_words or self.llm.max_words
        llm_words = max(SKELETON_WORDS, int(limit * (1.0 - self.value_share)))
        from_llm = self.llm.summarize(messages, previous=previous, max_words=llm_words, focus=focus)
        ranked = self.extractive.summarize(
            messages, previous=previous, max_words=limit, focus=focus
        ).values
        values = unique_values([*ranked, *message_values(messages, previous)])
        text, appended = append_values(
            from_llm.text,
            from_llm.snapshot,
            values,
            max_values=self.max_appended_values,
            max_words=limit,
        )
        self.appended = appended
        result = SummaryResult.counted(
            text,
            from_llm.snapshot,
            values,
            summarizer=HYBRID_NAME,
            input_tokens=from_llm.input_tokens,
            output_tokens=from_llm.output_tokens,
        )
        result.unusable = from_llm.unusable
        return result


Summarizer = ExtractiveSummarizer | LLMSummarizer | HybridSummarizer


def make_summarizer(
    kind: SummarizerKind | None = None,
    model: ChatModel | None = None,
    *,
    max_words: int = DEFAULT_MAX_WORDS,
) -> Summarizer:
    """The summarizer for ``kind``; by default hybrid with a model, extractive without."""
    if kind is None:
        kind = "hybrid" if model is not None else "extractive"
    if kind == "extractive":
        return ExtractiveSummarizer()
    if kind not in (LLM_NAME, HYBRID_NAME):
        raise UsageError(f"unknown summarizer {kind!r}: use extractive, llm or hybrid")
    if model is None:
        raise UsageError(f"the {kind} summarizer needs a chat model (--model or the agent's)")
    llm = LLMSummarizer(model, max_words=max_words)
    return llm if kind == LLM_NAME else HybridSummarizer(llm)
