from durastate.testing.conformance.documents import *  # noqa: F403
