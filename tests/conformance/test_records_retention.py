from durastate.testing.conformance.records_retention import *  # noqa: F403
