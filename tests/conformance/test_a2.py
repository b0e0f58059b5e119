from durastate.testing.conformance.a2 import *  # noqa: F403
