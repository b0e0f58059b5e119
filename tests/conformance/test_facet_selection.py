from durastate.testing.conformance.facet_selection import *  # noqa: F403
