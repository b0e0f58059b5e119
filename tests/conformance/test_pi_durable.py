from durastate.testing.conformance.pi_durable import *  # noqa: F403
