from durastate.testing.conformance.kv import *  # noqa: F403
