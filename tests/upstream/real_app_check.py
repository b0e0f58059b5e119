"""Boot a real functualize app with durastate's plugin and report what it uses (run by a test).

Run in a subprocess from ``tests/test_functualize_upstream.py``, in an empty
working directory, with the functualize version under test first on the
path. Prints one JSON line: the functualize version, whether the plugin
installed its substrate, whether the engine's substrate in effect is that one,
whether a store's write landed in durastate's database, and any JSON files the
filesystem default would have written.
"""

import json
from pathlib import Path

import functualize
from functualize import FunctualizeApp
from functualize._primitives.scope_store import ScopeStore
from functualize.app.config import ConfigSources, JobSources, PluginSources

import durastate
from durastate.compat.functualize import SQLiteStatePlugin

plugin = SQLiteStatePlugin()
app = FunctualizeApp(
    "durastate-check",
    job_sources=JobSources(directories=[]),
    config_sources=ConfigSources(dotenv=False),
    plugin_sources=PluginSources(explicit_plugins=[plugin], ambient_directory=False),
)
in_effect = app.execution_engine.substrate
ScopeStore(in_effect).set_state("wf", "rows", 12)
database = Path(app.fresh_root) / ".functualize" / "state.db"
with durastate.open(database) as store:
    stored = store.documents.read("scope-state/wf")
print(
    json.dumps(
        {
            "version": functualize.__version__,
            "installed": plugin.substrate is not None,
            "in_effect_is_ours": in_effect is plugin.substrate,
            "state_in_durastate": stored is not None and stored.data.get("state", {}).get("rows") == 12,
            "json_files": sorted(str(p.relative_to(app.fresh_root)) for p in Path(app.fresh_root).rglob("*.json")),
        }
    )
)
