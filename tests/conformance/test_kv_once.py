from durastate.testing.conformance.kv_once import *  # noqa: F403
