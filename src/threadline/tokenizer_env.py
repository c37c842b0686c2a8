"""``$THREADLINE_TOKENIZER``: how tokens are counted, everywhere.

Apart from ``threadline.tokens`` so that the CLI checks it before every command without
loading the counters (and pydantic, through the messages they count).
"""

from __future__ import annotations

import os

from threadline.errors import ConfigError

TOKENIZER_ENV = "THREADLINE_TOKENIZER"
"""``auto`` (default): tiktoken where it applies; ``estimate``: estimator everywhere."""
TOKENIZER_MODES = ("auto", "estimate")


def tokenizer_mode() -> str:
    """``$THREADLINE_TOKENIZER`` (``auto`` when unset); any other value is a
    ``ConfigError`` naming it, whatever model is counted (the CLI checks it at start)."""
    mode = os.environ.get(TOKENIZER_ENV, "auto").strip().lower() or "auto"
    if mode not in TOKENIZER_MODES:
        raise ConfigError(
            f"{TOKENIZER_ENV}={mode!r} is not valid; use one of {', '.join(TOKENIZER_MODES)}"
        )
    return mode
