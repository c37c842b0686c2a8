"""Calibrating token estimates with what providers report, per model.

Every model call compares the builder's estimate of the context with the
input tokens the provider reported; ``threadline.tokens.Calibration`` keeps a
smoothed ratio per model. Where the ratio is kept:

* **in the process**, in one ``Calibrator`` shared by every agent (a model's
  tokenizer does not change between sessions, so what one session learned
  helps the next at once);
* **in the store**, in each session's memo under ``"calibration"``. The Store
  protocol has no global key-value table, and adding one to every backend for
  a handful of floats is not worth it; a session's memo is read anyway when
  the agent resumes it, so a fresh process seeds its ratios from the session
  it resumes (a ratio already learned in the process wins: it is fresher).

The memo also gets ``"last_usage"``: the last call's estimate and reported
count, so the ``context`` report can show how far the estimate was off.

Using the ratio: the builder counts with stored per-message counts, so scaling
the counter would scale only the system prompt and tools. Instead the budget
is scaled: when the provider counts more than we estimate (ratio > 1), the
window is built against ``limit / ratio`` (and ``reserve / ratio``), in
estimated units, so that the real prompt fits the real window. When we
overestimate (ratio < 1) nothing changes: the margin is kept, not spent.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from threadline.catalog import lookup
from threadline.context.policy import ContextPolicy
from threadline.messages import Usage
from threadline.stamps import utcnow
from threadline.store.checks import format_ts
from threadline.store.protocol import Session
from threadline.tokens import CALIBRATION_MAX, CALIBRATION_MIN, Calibration

MEMO_KEY = "calibration"
"""Session memo: ``{model: {"factor", "samples", "updated_at"}}``."""
LAST_USAGE_KEY = "last_usage"
"""Session memo: the last model call's ``UsageObservation`` as JSON."""
SEED_SCALE = 1_000_000
"""Seeding a ratio goes through ``Calibration.observe(model, factor * SEED_SCALE, SEED_SCALE)``
(its first observation sets the ratio exactly), so precision is 1e-6."""
APPLY_ABOVE = 1.0
"""Budgets are scaled only for ratios above this (the provider counts more than we do)."""


@dataclass(frozen=True, slots=True)
class UsageObservation:
    """One model call: what we estimated and what the provider reported."""

    model: str
    """The calibration key: the agent's ``provider/model``."""
    estimated_input_tokens: int
    reported_input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    factor: float
    """The model's ratio after this observation."""
    step: int = 1
    at: str = ""

    @property
    def error(self) -> float | None:
        """How far the estimate was off: reported / estimated - 1 (0.05 is 5% under)."""
        if not self.reported_input_tokens or not self.estimated_input_tokens:
            return None
        return self.reported_input_tokens / self.estimated_input_tokens - 1.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _key(model: str) -> str:
    return model.strip().lower()


class Calibrator:
    """A ``Calibration`` that remembers which models it knows, and persists to session memos."""

    def __init__(self, calibration: Calibration | None = None) -> None:
        self.calibration = calibration or Calibration()
        self._known: set[str] = set()
        self._samples: dict[str, int] = {}
        self._lock = threading.Lock()

    def factor(self, model: str) -> float:
        return self.calibration.factor(model)

    def knows(self, model: str) -> bool:
        with self._lock:
            return _key(model) in self._known

    def seed(self, model: str, factor: float, samples: int = 1) -> bool:
        """Adopt a persisted ratio for a model this process has not calibrated yet."""
        if not math.isfinite(factor) or factor <= 0:
            return False
        factor = min(CALIBRATION_MAX, max(CALIBRATION_MIN, factor))
        with self._lock:
            key = _key(model)
            if key in self._known:
                return False
            self._known.add(key)
            self._samples[key] = max(0, samples)
        self.calibration.observe(model, round(factor * SEED_SCALE), SEED_SCALE)
        return True

    def load(self, session: Session) -> None:
        """Seed ratios from the session's memo (models already known here keep theirs)."""
        stored = session.get_memo().get(MEMO_KEY)
        if not isinstance(stored, Mapping):
            return
        for model, entry in stored.items():
            if not isinstance(model, str) or not isinstance(entry, Mapping):
                continue
            factor, samples = entry.get("factor"), entry.get("samples", 1)
            if isinstance(factor, int | float) and isinstance(samples, int):
                self.seed(model, float(factor), samples)

    def observe(
        self, model: str, *, estimated: int, usage: Usage | None, step: int = 1
    ) -> UsageObservation:
        """Record one call; the ratio moves only when the provider reported input tokens."""
        reported = usage.input_tokens if usage is not None else None
        if reported and estimated > 0:
            factor = self.calibration.observe(model, reported, estimated)
            with self._lock:
                key = _key(model)
                self._known.add(key)
                self._samples[key] = self._samples.get(key, 0) + 1
        else:
            factor = self.calibration.factor(model)
        return UsageObservation(
            model=model,
            estimated_input_tokens=estimated,
            reported_input_tokens=reported,
            output_tokens=usage.output_tokens if usage is not None else None,
            cached_tokens=usage.cached_tokens if usage is not None else None,
            factor=factor,
            step=step,
            at=format_ts(utcnow()),
        )

    def save(self, session: Session, observations: Sequence[UsageObservation]) -> None:
        """Write the ratios observed and the last call's usage to the session memo, once."""
        if not observations:
            return
        memo = session.get_memo()
        table = memo.get(MEMO_KEY)
        table = dict(table) if isinstance(table, Mapping) else {}
        for model in dict.fromkeys(o.model for o in observations):
            with self._lock:
                samples = self._samples.get(_key(model), 0)
            if samples:
                table[model] = {
                    "factor": round(self.factor(model), 6),
                    "samples": samples,
                    "updated_at": observations[-1].at,
                }
        memo[MEMO_KEY] = table
        memo[LAST_USAGE_KEY] = observations[-1].to_json()
        session.set_memo(memo)

    def real_tokens(self, model: str, estimated: int) -> int:
        """An estimate converted to what the provider would likely count."""
        return math.ceil(estimated * self.factor(model))


def calibrated_policy(policy: ContextPolicy, *, model: str, factor: float) -> ContextPolicy:
    """The policy to build with so that the real prompt fits: limit and reserve / factor."""
    if factor <= APPLY_ABOVE:
        return policy
    limit = policy.context_limit or lookup(model).context_window
    return policy.model_copy(
        update={
            "context_limit": max(1, math.floor(limit / factor)),
            "response_reserve": math.ceil(policy.response_reserve / factor),
        }
    )


def last_usage(session: Session) -> UsageObservation | None:
    """The last call's estimate and reported usage, from the session memo."""
    raw = session.get_memo().get(LAST_USAGE_KEY)
    if not isinstance(raw, Mapping):
        return None
    try:
        return UsageObservation(
            **{k: raw[k] for k in UsageObservation.__dataclass_fields__ if k in raw}
        )
    except TypeError:
        return None


DEFAULT_CALIBRATOR = Calibrator()
"""The process-wide calibrator agents share unless given their own."""
