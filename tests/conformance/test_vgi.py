from durastate.testing.conformance.vgi import *  # noqa: F403
