"""The sample session (``threadline demo`` itself is tested in ``test_demo_run``)."""

from __future__ import annotations

import base64
import struct
import zlib
from datetime import UTC, datetime
from typing import Any

from threadline import ContextPolicy, ImagePart, Message, build_context, group_units, open_store
from threadline.demo import DEMO_SYSTEM_PROMPT, DEMO_TOOLS, build_sample_session
from threadline.demo.sample import DEMO_TITLE, IMAGE_SIZE, sample_png

LARGE_OUTPUT = 30_000
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def content(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.model_dump(exclude={"seq", "token_counts"}) for m in messages]


def test_sample_session_is_realistic() -> None:
    store = open_store("memory://")
    s = build_sample_session(store, now=NOW)
    messages = s.messages()
    assert 40 <= len(messages) <= 80 and s.message_count == len(messages)
    assert (s.agent, s.model, s.title) == ("demo-coder", "gpt-4o", DEMO_TITLE)
    roles = {m.role for m in messages}
    assert roles == {"user", "assistant", "tool"}
    tools = {c.name for m in messages for c in m.tool_calls}
    assert {"read_file", "grep", "run_tests", "write_file"} <= tools
    large = [m for m in messages if m.role == "tool" and len(m.text) > LARGE_OUTPUT]
    assert len(large) >= 1 and all(len(m.text) < 64_000 for m in large)
    assert any(len(m.tool_calls) > 1 for m in messages)  # parallel calls
    assert any(m.metadata.get("is_error") for m in messages)  # a failed tool call
    assert any("NameError" in m.text for m in messages)  # the agent's own error...
    assert any("Adding the import" in m.text for m in messages)  # ...and its fix
    units, repair = group_units(messages)
    assert not repair.changed  # every call has its result
    assert sum(len(u) for u in units) == len(messages)
    assert [m.created_at for m in messages] == sorted(m.created_at for m in messages)
    assert all(m.usage and m.usage.input_tokens for m in messages if m.role == "assistant")
    assert s.scratchpad_read("plan") is not None


def test_sample_image_is_a_valid_png() -> None:
    store = open_store("memory://")
    messages = build_sample_session(store, now=NOW).messages()
    images = [p for m in messages for p in m.parts if isinstance(p, ImagePart)]
    assert len(images) == 1
    (image,) = images
    assert image.media_type == "image/png" and (image.width, image.height) == IMAGE_SIZE
    png = base64.b64decode(image.data or "", validate=True)
    assert png == sample_png(0)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == IMAGE_SIZE
    idat_length = struct.unpack(">I", png[33:37])[0]
    raw = zlib.decompress(png[41 : 41 + idat_length])
    assert len(raw) == height * (1 + 3 * width)  # one filter byte + RGB per row


def test_same_seed_same_conversation() -> None:
    store = open_store("memory://")
    first = build_sample_session(store, seed=3, now=NOW)
    second = build_sample_session(store, seed=3, now=NOW)
    other = build_sample_session(store, seed=4, now=NOW)
    assert first.id != second.id
    assert content(first.messages()) == content(second.messages())
    assert content(first.messages()) != content(other.messages())


def test_sample_context_fits_a_small_window() -> None:
    store = open_store("memory://")
    s = build_sample_session(store, now=NOW)
    policy = ContextPolicy(context_limit=16_000)
    w = build_context(s, system_prompt=DEMO_SYSTEM_PROMPT, tools=DEMO_TOOLS, policy=policy)
    assert w.tokens <= 16_000 - policy.response_reserve
    assert w.report.included_messages < s.message_count  # trimming is visible
