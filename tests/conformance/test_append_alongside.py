"""An append and what goes with it (scratchpad entries, session metadata) are one
atomic step on every backend (``store/alongside.py``, issue 35): both or neither,
whether the second write fails or the writing process is killed."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from threadline import Message, Store
from threadline.errors import ThreadlineError, UsageError

NAMES = st.text(alphabet="abcdefgh/-", min_size=1, max_size=8)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(
        st.tuples(
            st.dictionaries(NAMES, st.text(max_size=6), max_size=3),
            st.dictionaries(NAMES, st.integers(), max_size=3),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_what_goes_with_a_batch_is_written_with_it(
    store: Store, steps: list[tuple[dict[str, str], dict[str, Any]]]
) -> None:
    store.delete_all(force=True)
    session = store.create_session(id="with", metadata={"kept": True})
    pad: dict[str, str] = {}
    meta: dict[str, Any] = {"kept": True}
    for n, (entries, keys) in enumerate(steps):
        stored = session.append([Message.user(f"m {n}")], scratchpad=entries, metadata=keys)
        pad.update(entries)
        meta.update(keys)
        assert [m.text for m in stored] == [f"m {n}"]
    assert {e.name: e.content for e in store.scratchpad_list("with")} == pad
    assert store.session_info("with").metadata == meta
    assert session.info.metadata == meta  # the handle knows what it wrote
    assert [m.text for m in session.messages()] == [f"m {n}" for n in range(len(steps))]


def test_a_resent_batch_does_not_write_its_companions_again(store: Store) -> None:
    session = store.create_session(id="resend")
    batch = [Message.user("once")]
    first = store.append_messages("resend", batch, scratchpad={"p": "1"}, metadata={"k": 1})
    store.scratchpad_write("resend", "p", "changed")
    store.update_session("resend", metadata={"k": 2})
    again = store.append_messages("resend", batch, scratchpad={"p": "1"}, metadata={"k": 1})
    assert [m.seq for m in again] == [m.seq for m in first]
    assert store.scratchpad_read("resend", "p").content == "changed"  # type: ignore[union-attr]
    assert store.session_info("resend").metadata["k"] == 2
    assert session.refresh().message_count == 1


def test_companions_are_checked_before_anything_is_written(store: Store) -> None:
    store.create_session(id="checked")
    with pytest.raises(UsageError):
        store.append_messages("checked", [Message.user("x")], scratchpad={"": "no name"})
    with pytest.raises(UsageError):
        store.append_messages("checked", [Message.user("x")], metadata={"n": float("nan")})
    with pytest.raises(UsageError):
        store.append_messages("checked", [], scratchpad={"p": "without a batch"})
    assert store.session_info("checked").message_count == 0


def _break_second_write(
    backend: str, store: Store, monkeypatch: pytest.MonkeyPatch
) -> Callable[[], None]:
    """Make the scratchpad write of an append fail, where each backend does it; returns
    what mends it."""

    def fail(*args: Any, **kwargs: Any) -> None:
        raise OSError("injected: the second write failed")

    if backend == "memory":
        monkeypatch.setattr(sys.modules[type(store).__module__], "_put_entry", fail)
    elif backend in ("sqlite", "postgres"):
        monkeypatch.setattr(sys.modules[type(store).__module__], "_put_entries", fail)
    elif backend == "jsonl":
        monkeypatch.setattr(type(store), "_put_entries", fail)
    elif backend == "redis":  # a pad key of the wrong type: the script's write would fail
        client, key = store._r, store.prefix + "p:broken"  # type: ignore[attr-defined]
        client.set(key, "not a hash")
        return lambda: client.delete(key)
    return monkeypatch.undo


def test_a_failed_second_write_leaves_both_or_neither(
    backend: str, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The append reports the failure; what is stored then is the batch with its
    companions (the failure came after the commit point, like a lost reply) or neither."""
    session = store.create_session(id="broken", metadata={"step": 0})
    session.append(Message.user("before"))
    mend = _break_second_write(backend, store, monkeypatch)
    with pytest.raises((OSError, ThreadlineError)):
        session.append([Message.user("lost")], scratchpad={"p": "x"}, metadata={"step": 1})
    mend()
    found = (
        [m.text for m in store.get_session("broken").messages()],
        store.session_info("broken").metadata,
        {e.name: e.content for e in store.scratchpad_list("broken")},
    )
    neither = (["before"], {"step": 0}, {})
    both = (["before", "lost"], {"step": 1}, {"p": "x"})
    assert found in (neither, both)


WRITER = """
import sys
from threadline import Message, open_store
store = open_store(sys.argv[1])
session = store.get_session("crash")
n = session.message_count // 2
while True:
    n += 1
    session.append([Message.user(f"m {n}"), Message.assistant(f"a {n}")],
                   scratchpad={f"pad-{n:06d}": str(n)}, metadata={"last": n})
    if n % 5 == 1:
        print("writing", flush=True)
"""


def _kill_while_writing(script: str, store_url: str, delays: list[float]) -> None:
    """Run ``script`` on the store once per delay, killing it that long into its writes."""
    for kill_after in delays:
        child = subprocess.Popen(
            [sys.executable, "-c", script, store_url], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "writing"
        time.sleep(kill_after)
        child.send_signal(signal.SIGKILL)
        child.wait()


@pytest.mark.parametrize("kill_after", [0.05, 0.2, 0.5])
def test_a_killed_writer_leaves_batches_with_their_companions(
    backend: str, store: Store, store_url: str, kill_after: float
) -> None:
    if backend == "memory":
        pytest.skip("an in-process store: nothing outlives its process")
    store.create_session(id="crash", metadata={"last": 0})
    _kill_while_writing(WRITER, store_url, [kill_after, kill_after])
    session = store.get_session("crash")
    batches = session.message_count // 2
    assert session.message_count == 2 * batches
    assert batches > 0
    names = [e.name for e in store.scratchpad_list("crash")]
    assert names == [f"pad-{n:06d}" for n in range(1, batches + 1)]
    assert session.info.metadata == {"last": batches}


ELSEWHERE_WRITER = """
import sys
from threadline import Message, open_store
from threadline.store.session_info import Mark
store = open_store(sys.argv[1])
session = store.get_session("crash")
n = session.message_count
while True:
    n += 1
    mark = Mark.of(store.session_info("crash"))
    store.append_messages(
        "crash", [Message.user(f"m {n}")], scratchpad={f"pad-{n:06d}": str(n)},
        scratchpad_of="crash-pad", expect=mark,
    )
    if n % 5 == 1:
        print("writing", flush=True)
"""


def test_a_killed_writer_leaves_entries_of_another_session_with_their_batches(
    backend: str, store: Store, store_url: str
) -> None:
    """``scratchpad_of`` (a LangGraph fork's messages, its checkpoint in the root):
    the same step on every backend, so a kill leaves each batch with its entries."""
    if backend == "memory":
        pytest.skip("an in-process store: nothing outlives its process")
    store.create_session(id="crash")
    store.create_session(id="crash-pad")
    _kill_while_writing(ELSEWHERE_WRITER, store_url, [0.05, 0.3])
    batches = store.session_info("crash").message_count  # JSONL: settles what was pending
    assert batches > 0
    names = [e.name for e in store.scratchpad_list("crash-pad")]
    assert names == [f"pad-{n:06d}" for n in range(1, batches + 1)]
    assert store.scratchpad_list("crash") == []
