from durastate.testing.conformance.functualize import *  # noqa: F403
