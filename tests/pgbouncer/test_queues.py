from durastate.testing.conformance.queues import *  # noqa: F403
