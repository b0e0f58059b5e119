"""Conformance: the ``store.documents`` facet.

Every test runs on every engine through the ``store`` / ``open_store`` /
``shared_url`` fixtures of ``durastate.testing.plugin``. Expectations are
computed from the inputs (``orjson.dumps`` sizes, sorted keys, the model in
``TestDocumentsModel``), never hard-coded engine output.

Concurrency tests synchronise with barriers and events, never sleeps; the
multi-process ones use the plumbing of ``conformance.multiprocess``.
"""

from __future__ import annotations

from . import listing, model, values
from .common import DOCS as DOCS
from .common import JSON_VALUES as JSON_VALUES
from .common import MODEL_KEYS as MODEL_KEYS
from .common import NOT_AN_OBJECT as NOT_AN_OBJECT
from .common import UNDECODABLE as UNDECODABLE
from .common import plant as plant
from .common import run_threads as run_threads
from .listing import *  # noqa: F403
from .model import *  # noqa: F403
from .values import *  # noqa: F403

__all__ = [*values.__all__, *listing.__all__, *model.__all__]
