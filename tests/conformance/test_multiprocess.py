from durastate.testing.conformance.multiprocess import *  # noqa: F403
