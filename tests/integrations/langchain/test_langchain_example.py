"""``python -m durastate.examples.langchain`` runs, offline, on each shared engine."""

from __future__ import annotations

import subprocess
import sys


def test_the_example_answers_from_the_cache_and_lists_keys(shared_url: str) -> None:
    command = [sys.executable, "-m", "durastate.examples.langchain", "--url", shared_url]
    for _ in range(2):  # a rerun on the same URL starts over
        result = subprocess.run(command, capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == [
            "model says: Paris.",
            "again, from the cache: Paris.",
            "after reopening the store (async): Paris.",
            "mget: [b'first document', None]",
            "keys under 'doc/': ['doc/1', 'doc/2']",
            "after mdelete: ['doc/2', 'img/1']",
        ]
