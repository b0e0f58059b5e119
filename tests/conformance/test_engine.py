from durastate.testing.conformance.engine import *  # noqa: F403
