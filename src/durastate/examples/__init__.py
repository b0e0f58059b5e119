"""Runnable examples of durastate behind the frameworks people already use.

Each is ``python -m durastate.examples.<name> [URL]`` (default: a fresh
SQLite file in a temporary folder; pass a ``postgresql://`` URL to run it on
a server), prints what happens, and exits 0 only if its checks held:

* ``eventsourcing``: an event-sourced application and a process
  application following it, persisted through ``PERSISTENCE_MODULE``.
* ``huey``: a huey consumer killed with SIGKILL mid-task, and its task
  run to completion by the next consumer.
"""
