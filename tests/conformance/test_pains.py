from durastate.testing.conformance.pains import *  # noqa: F403
