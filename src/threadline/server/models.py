"""Whether a model string can run this server's turns, checked without calling it.

``simulated/<name>`` is the server's own offline model; anything else must be one the
registry resolves (a known provider with what it needs: a base URL, an SDK, a key).
``threadline serve --model`` is checked at start, so a typo is refused there with
one line (``UnknownModel``, exit 11; a missing key is ``MissingCredentials``, exit 7)
instead of failing at the first prompt.
"""

from __future__ import annotations

import warnings

from threadline.errors import ConfigError, UnknownModel
from threadline.llm.registry import resolve_model
from threadline.server.config import SIMULATED_PROVIDER


def check_model(spec: str) -> None:
    """Raise ``UnknownModel`` (or ``MissingCredentials``) unless ``spec`` can run turns."""
    provider, _, name = spec.strip().partition("/")
    if provider == SIMULATED_PROVIDER:
        if not name.strip("/"):
            raise UnknownModel(f"model {spec!r} names the simulated provider but no model")
        return
    with warnings.catch_warnings(record=True) as said:  # shown only if it resolves
        warnings.simplefilter("always")
        try:
            model = resolve_model(spec)
        except UnknownModel:
            raise
        except ConfigError as exc:
            raise UnknownModel(f"cannot use model {spec!r}: {exc}") from exc
    for warning in said:
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    close = getattr(model, "close", None)
    if callable(close):
        close()
