from durastate.testing.conformance.presence import *  # noqa: F403
