"""The ``durastate`` console script (``durastate --help``; docs/cli.md).

``main()`` is the entry point installed by ``pip install durastate``; the
commands live in ``app`` (info, stats, backup, export, import, maintain,
bench, demo, ui) and ``browse`` (kv, queue, events, docs, records,
presence). Everything goes through the public facet API, except the table
level dump of ``export``/``import`` (see ``durastate.cli.dump`` for why).
"""

from __future__ import annotations

from .app import cli, main

__all__ = ["cli", "main"]
