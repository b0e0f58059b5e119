"""Each integration imports its framework only when imported, and says which extra is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(
    ("module", "framework", "extra"),
    [
        ("eventsourcing", "eventsourcing", "eventsourcing"),
        ("huey", "huey", "huey"),
        ("agent_framework", "agent_framework", "agent-framework"),
        ("strands", "strands", "strands"),
        ("adk", "google.adk", "adk"),
        ("pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ],
)
def test_missing_framework_names_the_extra(module: str, framework: str, extra: str) -> None:
    code = (
        "import sys\n"
        f"sys.modules[{framework!r}] = None  # as if it were not installed\n"
        "import durastate, durastate.integrations  # fine without it\n"
        "try:\n"
        f"    import durastate.integrations.{module}\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert f"pip install 'durastate[{extra}]'" in result.stdout, result.stdout + result.stderr


def test_importing_durastate_imports_no_framework() -> None:
    frameworks = "{'eventsourcing', 'huey', 'agent_framework', 'strands', 'google.adk', 'pydantic_ai'}"
    code = f"import sys, durastate, durastate.integrations; print(sorted({frameworks} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[]"


DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize(
    ("page", "extra"),
    [
        ("langgraph", "langgraph"),
        ("langchain", "langchain"),
        ("openai_agents", "openai-agents"),
        ("adk", "adk"),
        ("pydantic_ai", "pydantic-ai"),
        ("agent_framework", "agent-framework"),
        ("strands", "strands"),
        ("huey", "huey"),
        ("eventsourcing", "eventsourcing"),
    ],
)
def test_a_page_showing_postgresql_says_how_to_install_it(page: str, extra: str) -> None:
    """PostgreSQL needs the ``[postgres]`` extra (psycopg): a page showing ``postgresql://`` says how to add it."""
    text = (DOCS / f"{page}.md").read_text()
    assert "postgresql://" in text
    assert f"pip install 'durastate[{extra},postgres]'" in text or "add [postgres] for PostgreSQL" in text
