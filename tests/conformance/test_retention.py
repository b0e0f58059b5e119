from durastate.testing.conformance.retention import *  # noqa: F403
