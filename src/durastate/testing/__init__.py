"""The executable contract of durastate, shipped so any engine can run it.

``durastate.testing.plugin`` is a pytest plugin with the fixtures the
conformance suite uses (``store_url``, ``shared_url``, ``durastate_open``,
``open_store``, ``open_shared``, ``store``, ``clock``); the contract itself
lives in ``durastate.testing.conformance`` as test classes. A third-party
engine runs the suite by registering its URL scheme
(``durastate.engines.registry``), enabling the plugin, overriding
``store_url`` and ``shared_url`` to yield its own URLs, and collecting the
classes (a worked example: ``docs/third-party-engine.md``)::

    # conftest.py
    pytest_plugins = ["durastate.testing.plugin"]

    # test_my_engine.py
    from durastate.testing.conformance import *  # noqa: F403

Needs the ``test`` extra (pytest, hypothesis).
"""

from .clock import FakeClock

__all__ = ["FakeClock"]
