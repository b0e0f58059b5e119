"""The executable contract of durastate, shipped so any engine can run it.

``durastate.testing.plugin`` is a pytest plugin with the fixtures the
conformance suite uses (``store_url``, ``store``, ``open_store``,
``shared_url``, ``clock``); the contract itself lives in
``durastate.testing.conformance`` as test classes. A third-party engine runs
the suite by enabling the plugin, overriding ``store_url`` to yield its own
URLs, and collecting the classes::

    # conftest.py
    pytest_plugins = ["durastate.testing.plugin"]

    # test_my_engine.py
    from durastate.testing.conformance import *  # noqa: F403

Needs the ``test`` extra (pytest, hypothesis).
"""

from .clock import FakeClock

__all__ = ["FakeClock"]
