"""Conformance: ``durastate.compat.vgi``, clause by clause against vgi's seed.

Every storage test runs ``FunctionStorage(store_url)`` on each engine of the
``store_url`` fixture; the namespace, shard-key and delegation tests need no
engine. The seed is vgi-python's ``vgi/function_storage.py``
(``FunctionStorageSqlite``, ``BoundStorage``, ``TransactionBoundStorage``,
``ShardedSqliteStorage``); where this adapter deliberately differs (argument
errors the seed did not raise), the module docstring of
``durastate.compat.vgi`` says why and the tests below pin the decision.
"""

from __future__ import annotations

from . import storage, views
from .common import SEED_FRAMEWORK_NS as SEED_FRAMEWORK_NS
from .storage import *  # noqa: F403
from .views import *  # noqa: F403

__all__ = [*storage.__all__, *views.__all__]
