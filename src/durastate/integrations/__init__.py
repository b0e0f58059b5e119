"""Backends for the frameworks people already use, on any durastate URL.

Each module is one framework's storage contract implemented on durastate's
public facets, in its own extra, imported only when you import the module
(a missing framework raises ``ImportError`` naming the extra to install):

* ``durastate.integrations.eventsourcing`` (``[eventsourcing]``): recorders
  and the infrastructure factory for eventsourcing 9.5
  (``PERSISTENCE_MODULE=durastate.integrations.eventsourcing``).
* ``durastate.integrations.huey`` (``[huey]``): ``DurastateHuey``, a huey 3.5
  task queue whose dequeued tasks are leased, not deleted.

Each is tested against the framework's own test suite for third-party
backends, on SQLite and PostgreSQL.
"""
