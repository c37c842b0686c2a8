"""Sample data for demonstrations and tests: realistic sessions built offline."""

from threadline.demo.sample import (
    DEMO_AGENT,
    DEMO_MODEL,
    DEMO_SYSTEM_PROMPT,
    DEMO_TOOLS,
    build_sample_session,
)

__all__ = ["DEMO_AGENT", "DEMO_MODEL", "DEMO_SYSTEM_PROMPT", "DEMO_TOOLS", "build_sample_session"]
