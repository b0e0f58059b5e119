from durastate.testing.conformance.events import *  # noqa: F403
