from durastate.testing.conformance.vgi_dropin import *  # noqa: F403
