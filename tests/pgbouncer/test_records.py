from durastate.testing.conformance.records import *  # noqa: F403
