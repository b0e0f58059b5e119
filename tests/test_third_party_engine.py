"""docs/third-party-engine.md works: its files run (part of) the conformance suite on a new engine."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "third-party-engine.md"
FILE_BLOCK = re.compile(r"```python\n# file: (?P<name>[\w.]+)\n(?P<body>.*?)```", re.DOTALL)
# A cross-section that exercises the engine contract (transactions, the
# factory, plans, schema, capabilities, migrations) on a file and in memory
# in a minute or two; the whole suite works the same way.
SELECTION = (
    "runs_on_the_audited_engine or TestDoomedTransactions or TestCloseInsideATransaction or TestSchema or TestOpen"
    " or TestKVIndexUse or TestQueueIndexUse or TestTransactionNesting or TestPresence or TestCapabilities"
    " or TestDeclaredStatements or TestSchemaTooNew or RetentionMigration"
)


def test_the_documented_engine_passes_the_suite(tmp_path: Path) -> None:
    files = {m["name"]: m["body"] for m in FILE_BLOCK.finditer(DOC.read_text())}
    assert set(files) == {"audited_engine.py", "conftest.py", "test_audited_engine.py"}
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-k", SELECTION],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    summary = result.stdout.strip().splitlines()[-1]
    passed = int(re.search(r"(\d+) passed", summary).group(1))  # type: ignore[union-attr]
    assert passed >= 150, summary
    assert "failed" not in summary and "error" not in summary, summary
