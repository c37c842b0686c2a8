"""Retention rules: parsing, planning, applying, never a locked session; the settings file."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conformance.backends import BACKENDS, clean_store
from threadline import Message, Store
from threadline.config import (
    CONFIG_DIR_ENV,
    CONFIG_ENV,
    RetentionWarning,
    Settings,
    apply_startup_retention,
    load_settings,
    parse_settings,
)
from threadline.errors import ConfigError, StoreUnavailable, UsageError
from threadline.store.locks import LockHolder
from threadline.store.memory import MemoryStore
from threadline.store.retention import (
    CHANGED,
    GONE,
    Reason,
    apply_cleanup,
    describe,
    format_duration,
    format_size,
    message_bytes,
    parse_duration,
    parse_size,
    plan_cleanup,
    session_bytes,
)
from threadline.store.session_info import SessionInfo

# -- parsing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90d", timedelta(days=90)),
        ("12h", timedelta(hours=12)),
        ("30m", timedelta(minutes=30)),
        ("2w", timedelta(weeks=2)),
        ("45s", timedelta(seconds=45)),
        ("1d12h", timedelta(days=1, hours=12)),
        (" 1.5D ", timedelta(hours=36)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("50MB", 50_000_000),
        ("10MiB", 10 * 1024 * 1024),
        ("500KB", 500_000),
        ("500 kb", 500_000),
        ("1048576", 1_048_576),
        ("1.5GB", 1_500_000_000),
        ("2KiB", 2048),
        ("7B", 7),
    ],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (parse_duration, "90", "has no unit; use e.g. 90d"),
        (parse_duration, "5y", "unknown unit 'y'"),
        (parse_duration, "3mo", "unknown unit 'mo'"),
        (parse_duration, "0d", "longer than zero"),
        (parse_duration, "", "empty duration"),
        (parse_size, "5XB", "unknown unit 'xb'"),
        (parse_size, "0", "more than zero"),
    ],
)
def test_parse_errors(parse: Callable[[str], object], text: str, message: str) -> None:
    """Both parsers refuse bad input with a UsageError that says what is wrong."""
    with pytest.raises(UsageError, match=message):
        parse(text)


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_duration, "d5"),
        (parse_duration, "-3d"),
        (parse_duration, "ten days"),
        (parse_size, "-1MB"),
        (parse_size, "MB"),
        (parse_size, ""),
    ],
)
def test_unreadable(parse: Callable[[str], object], text: str) -> None:
    what = "duration" if parse is parse_duration else "size"
    with pytest.raises(UsageError, match=f"cannot read {what}"):
        parse(text)


@given(st.integers(min_value=1, max_value=10_000), st.sampled_from(["s", "m", "h", "d", "w"]))
def test_duration_round_trip(n: int, unit: str) -> None:
    delta = parse_duration(f"{n}{unit}")
    assert parse_duration(format_duration(delta)) == delta


@given(st.integers(min_value=1, max_value=10**15))
def test_plain_bytes_and_formatting(n: int) -> None:
    assert parse_size(str(n)) == n
    shown = format_size(n)
    assert abs(parse_size(shown.replace(" ", "")) - n) <= max(1, n) * 0.06  # one decimal


# -- a store per backend -----------------------------------------------------------------


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from clean_store(request.param, tmp_path)


def make(store: Store, sid: str, chars: int, *, agent: str = "default") -> SessionInfo:
    """A session of one message of about ``chars`` characters, updated after the last one."""
    time.sleep(0.002)  # distinct updated_at on every backend's clock resolution
    session = store.create_session(id=sid, agent=agent, model="gpt-4o")
    session.append(Message.user("x" * chars))
    return store.session_info(sid)


def ids(victims: list[Any]) -> list[str]:
    return [v.info.id for v in victims]


def test_age_rule_selects_sessions_not_updated_since_the_cut(store: Store) -> None:
    old1, old2 = make(store, "old-0001", 100), make(store, "old-0002", 200)
    new = make(store, "new-0001", 300)
    # now is 90 days after the second session's update: cut == its updated_at, kept
    now = old2.updated_at + timedelta(days=90)
    plan = plan_cleanup(store, older_than=timedelta(days=90), max_storage_bytes=None, now=now)
    assert ids(plan.victims) == ["old-0001"]
    assert plan.victims[0].reason is Reason.AGE
    assert plan.victims[0].bytes == session_bytes(store, "old-0001") > 100
    assert plan.total_bytes is None  # the storage rule was not asked for: nothing else measured
    later = new.updated_at + timedelta(days=90, seconds=1)
    plan = plan_cleanup(store, older_than=timedelta(days=90), max_storage_bytes=None, now=later)
    assert ids(plan.victims) == ["old-0001", "old-0002", "new-0001"]  # oldest first
    result = apply_cleanup(store, plan)
    assert ids(result.deleted) == ["old-0001", "old-0002", "new-0001"]
    assert result.freed_bytes == plan.freed_bytes
    assert store.list_sessions().total == 0
    assert old1.id not in {i.id for i in store.list_sessions().items}


def test_age_rule_keeps_a_session_whose_scratchpad_was_written_since_the_cut(
    store: Store,
) -> None:
    """A LangGraph thread or ADK state lives in the scratchpad: writing it is activity."""
    idle = make(store, "idle-0001", 100)
    face = make(store, "face-0001", 100)
    time.sleep(0.002)
    store.scratchpad_write(face.id, "cp:latest", "{}")
    written = store.scratchpad_read(face.id, "cp:latest")
    assert written is not None
    now = written.updated_at + timedelta(days=90) - timedelta(microseconds=1)
    plan = plan_cleanup(store, older_than=timedelta(days=90), max_storage_bytes=None, now=now)
    assert ids(plan.victims) == ["idle-0001"]
    later = written.updated_at + timedelta(days=90, seconds=1)
    plan = plan_cleanup(store, older_than=timedelta(days=90), max_storage_bytes=None, now=later)
    assert ids(plan.victims) == ["idle-0001", "face-0001"]
    assert idle.updated_at < face.updated_at


def test_storage_rule_deletes_oldest_until_under_the_cap(store: Store) -> None:
    for i in range(4):
        make(store, f"s-000{i}", 1000)
    each = session_bytes(store, "s-0000")
    cap = each * 2 + each // 2  # room for two and a half
    plan = plan_cleanup(store, older_than=None, max_storage_bytes=cap)
    assert ids(plan.victims) == ["s-0000", "s-0001"]
    assert {v.reason for v in plan.victims} == {Reason.STORAGE}
    assert plan.total_bytes == sum(session_bytes(store, f"s-000{i}") for i in range(4))
    assert plan.total_bytes - plan.freed_bytes <= cap
    apply_cleanup(store, plan)
    assert sorted(i.id for i in store.list_sessions().items) == ["s-0002", "s-0003"]
    assert plan_cleanup(store, older_than=None, max_storage_bytes=cap).empty


def test_locked_sessions_are_never_deleted(store: Store) -> None:
    for i in range(4):
        make(store, f"s-000{i}", 1000)
    store.acquire_lock("s-0000")  # this live process
    store.acquire_lock("s-0001", LockHolder(pid=99, host="other-host.example"))  # fresh lease
    dead = LockHolder(pid=2**22 + 12345, host=LockHolder.current().host)  # no such process
    store.acquire_lock("s-0002", dead)
    each = session_bytes(store, "s-0000")
    # age: everything is old; storage: room for one
    far = store.session_info("s-0003").updated_at + timedelta(days=1)
    plan = plan_cleanup(store, older_than=timedelta(hours=1), max_storage_bytes=each, now=far)
    assert ids(plan.victims) == ["s-0002", "s-0003"]  # a dead holder's lock is stale
    assert ids(plan.skipped_locked) == ["s-0000", "s-0001"]
    assert "pid 99 on other-host.example" in plan.skipped_locked[1].why
    apply_cleanup(store, plan)
    assert sorted(i.id for i in store.list_sessions().items) == ["s-0000", "s-0001"]


def test_storage_rule_skips_a_locked_oldest_session_and_takes_the_next(store: Store) -> None:
    for i in range(3):
        make(store, f"s-000{i}", 1000)
    store.acquire_lock("s-0000")
    each = session_bytes(store, "s-0000")
    plan = plan_cleanup(store, older_than=None, max_storage_bytes=each * 2)
    assert ids(plan.victims) == ["s-0001"]  # the locked one still counts towards the total
    assert ids(plan.skipped_locked) == ["s-0000"]


def test_apply_keeps_sessions_that_changed_or_got_locked_or_vanished(store: Store) -> None:
    for i in range(4):
        make(store, f"s-000{i}", 10)
    far = store.session_info("s-0003").updated_at + timedelta(days=1)
    plan = plan_cleanup(store, older_than=timedelta(hours=1), max_storage_bytes=None, now=far)
    assert len(plan.victims) == 4
    store.append_messages("s-0000", [Message.user("I am back")])  # resumed after the plan
    store.acquire_lock("s-0001", LockHolder(pid=7, host="elsewhere.example"))
    store.delete_session("s-0002")
    result = apply_cleanup(store, plan)
    assert ids(result.deleted) == ["s-0003"]
    why = {s.info.id: s.why for s in result.skipped}
    assert why["s-0000"] == CHANGED
    assert why["s-0001"].startswith("locked by pid 7")
    assert why["s-0002"] == GONE
    assert store.lock_holder("s-0000") is None  # our own lock is not left behind
    assert sorted(i.id for i in store.list_sessions().items) == ["s-0000", "s-0001"]
    assert "deleted 1 session" in describe(result) and "3 skipped" in describe(result)


def test_agent_filter_limits_both_rules(store: Store) -> None:
    make(store, "a-0001", 500, agent="coder")
    make(store, "b-0001", 500, agent="writer")
    make(store, "a-0002", 500, agent="coder")
    plan = plan_cleanup(store, older_than=None, max_storage_bytes=1, agent="writer")
    assert ids(plan.victims) == ["b-0001"]
    assert plan.sessions_seen == 1


def test_progress_reports_every_measured_session() -> None:
    store = MemoryStore()
    for i in range(5):
        make(store, f"s-000{i}", 10)
    seen: list[tuple[int, int]] = []
    plan_cleanup(
        store, older_than=None, max_storage_bytes=10**9, progress=lambda d, t: seen.append((d, t))
    )
    assert seen == [(i, 5) for i in range(1, 6)]
    applied: list[str] = []
    plan = plan_cleanup(store, older_than=None, max_storage_bytes=1)
    apply_cleanup(store, plan, progress=lambda v: applied.append(v.info.id))
    assert applied == [f"s-000{i}" for i in range(5)]


def test_no_rules_reads_nothing() -> None:
    plan = plan_cleanup(_Untouchable(), older_than=None, max_storage_bytes=None)  # type: ignore[arg-type]
    assert plan.empty and plan.sessions_seen == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"older_than": timedelta(0), "max_storage_bytes": None}, "older_than"),
        ({"older_than": None, "max_storage_bytes": 0}, "max_storage_bytes"),
    ],
)
def test_plan_refuses_empty_rules(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        plan_cleanup(MemoryStore(), **kwargs)


# -- sizes -------------------------------------------------------------------------------


def test_session_bytes_scans_every_page() -> None:
    store = MemoryStore()
    session = store.create_session(id="big-0001", model="gpt-4o")
    session.append([Message.user(f"m{i} " + "é" * (i % 7)) for i in range(2500)])
    expected = sum(message_bytes(m) for m in store.read_messages("big-0001"))
    assert session_bytes(store, "big-0001") == expected
    assert expected > len(store.read_messages("big-0001")[5].model_dump_json(exclude={"seq"}))


class _SizedStore(MemoryStore):
    """A backend that knows its sessions' sizes without reading them."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def session_bytes(self, session_id: str) -> int:
        self.asked.append(session_id)
        return 1000

    def read_messages(self, *args: Any, **kwargs: Any) -> list[Message]:
        raise AssertionError("sizes must come from session_bytes")


def test_a_backend_size_method_is_used_when_present() -> None:
    store = _SizedStore()
    for i in range(3):
        store.create_session(id=f"s-000{i}")
        time.sleep(0.002)
    plan = plan_cleanup(store, older_than=None, max_storage_bytes=1500)
    assert ids(plan.victims) == ["s-0000", "s-0001"]
    assert plan.freed_bytes == 2000
    assert sorted(store.asked) == ["s-0000", "s-0001", "s-0002"]


# -- the invariant: the cap holds unless locks prevent it; locked sessions survive ----------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=8),
    locked=st.sets(st.integers(min_value=0, max_value=7)),
    cap=st.integers(min_value=1, max_value=4000),
)
def test_storage_rule_properties(sizes: list[int], locked: set[int], cap: int) -> None:
    store = MemoryStore()
    for i, n in enumerate(sizes):
        make(store, f"s-{i:04d}", n)
        if i in locked:
            store.acquire_lock(f"s-{i:04d}", LockHolder(pid=1, host="far.example"))
    size = {f"s-{i:04d}": session_bytes(store, f"s-{i:04d}") for i in range(len(sizes))}
    plan = plan_cleanup(store, older_than=None, max_storage_bytes=cap)
    result = apply_cleanup(store, plan)
    left = {i.id for i in store.list_sessions(limit=200).items}
    locked_ids = {f"s-{i:04d}" for i in locked if i < len(sizes)}
    assert locked_ids <= left  # never a locked session
    remaining = sum(size[s] for s in left)
    if remaining > cap:
        assert left == locked_ids  # only locks can keep the store over its cap
    order = sorted(size)  # creation order == update order here
    deleted = ids(result.deleted)
    unlocked = [s for s in order if s not in locked_ids]
    assert deleted == unlocked[: len(deleted)]  # the oldest unlocked ones, in order
    if deleted:  # and no more than needed: without the last one, it did not fit
        assert remaining + size[deleted[-1]] > cap


# -- settings file -------------------------------------------------------------------------


@pytest.fixture
def no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.setenv(CONFIG_DIR_ENV, str(tmp_path / "config"))
    return tmp_path / "config" / "config.toml"


def test_missing_settings_file_means_no_rules(no_config: Path) -> None:
    settings_ = load_settings()
    assert not settings_.session.retention_configured
    assert settings_.source is None


def test_settings_file_in_the_config_dir(no_config: Path) -> None:
    no_config.parent.mkdir()
    no_config.write_text('[session]\nretention_days = 30\nmax_storage_bytes = "10MiB"\n')
    loaded = load_settings()
    assert loaded.session.retention_days == 30
    assert loaded.session.older_than == timedelta(days=30)
    assert loaded.session.max_storage_bytes == 10 * 1024 * 1024
    assert loaded.source == no_config


def test_settings_path_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "elsewhere.toml"
    path.write_text("[session]\nmax_storage_bytes = 10485760\n")
    monkeypatch.setenv(CONFIG_ENV, str(path))
    assert load_settings().session.max_storage_bytes == 10485760
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match=r"settings file not found: .*missing\.toml"):
        load_settings()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[session]\nretention_days = 0\n",
            r"session\.retention_days: .*greater than or equal to 1",
        ),
        ('[session]\nretention_days = "30"\n', r"session\.retention_days: .*integer"),
        ("[session]\nretention_days = true\n", r"session\.retention_days"),
        ("[session]\nretention_day = 30\n", r"session\.retention_day: unknown setting"),
        ("[sesion]\nretention_days = 30\n", r"sesion: unknown setting"),
        (
            '[session]\nmax_storage_bytes = "lots"\n',
            r"session\.max_storage_bytes: cannot read size",
        ),
        ("[session]\nmax_storage_bytes = -5\n", r"session\.max_storage_bytes"),
        ("[session\nretention_days = 30\n", r"TOML syntax error"),
    ],
)
def test_bad_settings_name_the_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        load_settings(path)
    assert str(path) in str(info.value)


def test_bad_settings_cut_a_long_value_and_keep_it_closed(tmp_path: Path) -> None:
    """A long refused value is cut, the ``(got ...)`` still closed (as agent files do)."""
    path = tmp_path / "config.toml"
    path.write_text(f'[session]\nretention_days = "{"9" * 500}"\nretention_day = 1\n')
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    first, second = str(info.value).splitlines()[1:]
    assert first.startswith("  session.retention_days: ") and first.endswith("...)")
    assert len(first) < 200
    assert second == "  session.retention_day: unknown setting (check the spelling)"
    assert str(info.value).startswith(f"{path}: invalid settings")


def test_settings_file_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b"[session]\nretention_days = 3\n# \xff\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_settings(path)


# -- start-up retention ----------------------------------------------------------------------


class _Untouchable:
    """A store that fails the test if anything reads it."""

    url = "untouchable://"

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the store was used ({name}) although no rule is configured")


def test_startup_retention_does_nothing_unless_configured() -> None:
    said: list[str] = []
    assert apply_startup_retention(_Untouchable(), Settings(), notify=said.append) is None  # type: ignore[arg-type]
    assert said == []


def test_startup_retention_applies_the_rules_quietly(store: Store) -> None:
    for i in range(3):
        make(store, f"s-000{i}", 100)
    store.acquire_lock("s-0000")  # attached: survives although old
    configured = parse_settings("[session]\nretention_days = 30\n")
    said: list[str] = []
    soon = store.session_info("s-0002").updated_at + timedelta(days=1)
    result = apply_startup_retention(store, configured, notify=said.append, now=soon)
    assert result is not None and result.deleted == []
    assert said == []  # nothing deleted: nothing said
    later = soon + timedelta(days=60)
    result = apply_startup_retention(store, configured, notify=said.append, now=later)
    assert result is not None and ids(result.deleted) == ["s-0001", "s-0002"]
    assert len(said) == 1 and said[0].startswith("retention: deleted 2 sessions (")
    assert "by the age rule" in said[0]
    assert [i.id for i in store.list_sessions().items] == ["s-0000"]


class _Broken(MemoryStore):
    def list_sessions(self, **kwargs: Any) -> Any:
        raise StoreUnavailable("the server went away")


def test_startup_retention_failure_warns_and_goes_on() -> None:
    configured = parse_settings("[session]\nmax_storage_bytes = 100\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert apply_startup_retention(_Broken(), configured) is None
    assert [w.category for w in caught] == [RetentionWarning]
    assert "the server went away" in str(caught[0].message)
