"""Without Google ADK, importing the integration names the extra; durastate itself never imports ADK."""

from __future__ import annotations

import subprocess
import sys


def test_missing_adk_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['google.adk'] = None  # as if it were not installed\n"
        "import durastate, durastate.integrations\n"
        "try:\n"
        "    import durastate.integrations.adk\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "pip install 'durastate[adk]'" in result.stdout, result.stdout + result.stderr


def test_importing_durastate_imports_no_adk() -> None:
    code = "import sys, durastate, durastate.integrations; print('google.adk' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "False"
