"""The conformance suite: test classes any engine must pass.

Import them into a test module (``from durastate.testing.conformance import
*``) with the ``durastate.testing.plugin`` fixtures enabled. Each module
holds the contract of one facet or compat layer.
"""

from .a2 import *  # noqa: F403
from .documents import *  # noqa: F403
from .documents_history import *  # noqa: F403
from .engine import *  # noqa: F403
from .events import *  # noqa: F403
from .facet_selection import *  # noqa: F403
from .functualize import *  # noqa: F403
from .kv import *  # noqa: F403
from .kv_once import *  # noqa: F403
from .multiprocess import *  # noqa: F403
from .pi_durable import *  # noqa: F403
from .presence import *  # noqa: F403
from .queues import *  # noqa: F403
from .queues_peek import *  # noqa: F403
from .records import *  # noqa: F403
from .records_retention import *  # noqa: F403
from .transactions import *  # noqa: F403
from .vgi import *  # noqa: F403
