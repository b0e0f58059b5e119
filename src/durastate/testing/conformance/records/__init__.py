"""Conformance: the ``store.records`` facet (pi-durable's records and documents).

Every test runs on every engine (``store`` fixture). Each validation rule of
the seed is its own test, and every refused batch is checked to leave no
trace (the commit sequence and everything readable are unchanged). Fork-chain
reads are compared with a straightforward in-Python walk of the same chain;
documents with an in-memory model (``TestRecordsModel``, a hypothesis state
machine checking every point-in-time read). ``TestRecordsAcrossProcesses``
commits from several processes at once and checks the sequences are strictly
increasing and gap-free.
"""

from __future__ import annotations

from . import commits, common, documents, model
from .commits import *  # noqa: F403
from .common import *  # noqa: F403
from .common import base as base
from .common import change as change
from .common import conv_scope as conv_scope
from .common import conversation as conversation
from .common import copy_doc as copy_doc
from .common import create as create
from .common import delta as delta
from .common import doc_record as doc_record
from .common import entry as entry
from .common import fingerprint as fingerprint
from .common import retire as retire
from .common import set_op as set_op
from .common import submission as submission
from .common import task as task
from .documents import *  # noqa: F403
from .model import *  # noqa: F403

__all__ = [*common.__all__, *commits.__all__, *documents.__all__, *model.__all__]
