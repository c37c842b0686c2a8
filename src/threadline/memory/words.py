"""Word lists that more than one memory module matches on, spelled once.

Each is a regular-expression alternation (``a|b|c``) of lower-case words, to be put
inside a group of a case-insensitive pattern.
"""

from __future__ import annotations

WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
MONTHS_BUT_MAY = "january|february|march|april|june|july|august|september|october|november|december"
"""The months less "may", which is far more often the verb than the month."""
SEASONS = "summer|winter|spring|fall"
