"""Each framework integration, imported without its framework, says what to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

INTEGRATIONS = [
    ("threadline.integrations.langgraph", "langgraph", "langgraph"),
    ("threadline.integrations.langgraph_store", "langgraph", "langgraph"),
    ("threadline.integrations.adk", "google.adk", "adk"),
    ("threadline.integrations.adk_memory", "google.adk", "adk"),
    ("threadline.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai"),
]


@pytest.mark.parametrize(("module", "framework", "extra"), INTEGRATIONS)
def test_missing_framework_names_the_install_command(
    module: str, framework: str, extra: str
) -> None:
    code = (
        f"import sys; sys.modules[{framework!r}] = None\n"
        f"try:\n    import {module}\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert f"pip install 'threadline[{extra}]'" in out.stdout
