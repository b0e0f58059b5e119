from durastate.testing.conformance.transactions import *  # noqa: F403
