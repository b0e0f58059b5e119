"""Without pydantic-ai, importing the integration names the extra; durastate itself never imports pydantic-ai."""

from __future__ import annotations

import subprocess
import sys


def test_missing_pydantic_ai_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['pydantic_ai'] = None  # as if it were not installed\n"
        "import durastate, durastate.integrations\n"
        "try:\n"
        "    import durastate.integrations.pydantic_ai\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "pip install 'durastate[pydantic-ai]'" in result.stdout, result.stdout + result.stderr


def test_importing_durastate_imports_no_pydantic_ai() -> None:
    code = "import sys, durastate, durastate.integrations; print('pydantic_ai' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "False"
