from durastate.testing.conformance.queues_peek import *  # noqa: F403
