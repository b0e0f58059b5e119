"""durastate: durable state for agent runtimes and workflow engines.

One embedded SQLite file by default, PostgreSQL when you outgrow one
machine, the same contract on both::

    import durastate

    with durastate.open() as store:            # ./.durastate/state.db
        store.kv.put(b"run-1", b"cfg", b"model", b"small")
        store.queues.push("jobs", [b"a", b"b"])
        job = store.queues.claim("jobs", lease=30)
        with store.transaction():
            store.kv.incr(b"run-1", b"stats", b"done")
            job.ack()
"""

from .errors import (
    ConfigurationError,
    Conflict,
    DurastateError,
    InvalidRequest,
    NotFound,
    NotSupported,
    OutcomeUnknown,
    SchemaTooNew,
    StoreClosed,
    StoreCorrupt,
    StoreUnavailable,
    WrongOption,
    WrongType,
)
from .retention import MaintenanceReport, Retention
from .store import Store, Transaction, open

__version__ = "0.1.0"

__all__ = [
    "ConfigurationError",
    "Conflict",
    "DurastateError",
    "InvalidRequest",
    "MaintenanceReport",
    "NotFound",
    "NotSupported",
    "OutcomeUnknown",
    "Retention",
    "SchemaTooNew",
    "Store",
    "StoreClosed",
    "StoreCorrupt",
    "StoreUnavailable",
    "WrongOption",
    "WrongType",
    "Transaction",
    "__version__",
    "open",
]
