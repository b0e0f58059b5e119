from durastate.testing.conformance.documents_history import *  # noqa: F403
