"""What DurastateSaver and DurastateStore share: a store, borrowed or owned, and its async path.

``DurastateSaver(store)`` / ``DurastateStore(store)`` borrow an open
``durastate.Store`` (the caller closes it, after the saver or store);
``from_url(url, **open_options)`` opens one that ``close()`` closes.

Every ``a*`` method runs the sync method of the same name through the
object's ``AsyncCalls`` (``durastate.integrations._common``): a
``durastate.aio.AsyncStore`` over the same store with a runner of the
saver's (or store's) own, so an async call runs as a ``durastate.aio`` call
does: inline on the event loop's thread on a SQLite file (handed to a worker
thread when another connection holds the write lock), on worker threads on
PostgreSQL. Writes run in one transaction (``transact``: rolled back when
the caller is cancelled before it commits), reads as plain calls, ``alist``
as an async iterator over ``list``. ``close()``/``aclose()`` (and leaving a
``with``/``async with`` block) wait until no worker is inside a call.
"""

from __future__ import annotations

import inspect
import os
from typing import Any, TypeVar

from ...errors import InvalidRequest
from ...store import Store
from ...store import open as open_store
from .._common import Holder, borrowed

Bound = TypeVar("Bound", bound="StoreBound")

# The keyword options durastate.open takes (what from_url passes on).
OPEN_OPTIONS = frozenset(inspect.signature(open_store).parameters) - {"url"}


class StoreBound(Holder):
    """A durastate ``Store`` held, and closed with this object if it opened it (``opened``)."""

    def _bind(self, store: Store, name: str, what: str) -> None:
        """Hold ``store`` (borrowed): refused when it is not a ``Store`` or already closed, as every integration's."""
        borrowed(store)
        if not isinstance(name, str) or not name:
            raise InvalidRequest(f"name must be a non-empty str, got {name!r}")
        self._hold(store, owned=False, name=f"durastate-{what}-{name}")

    @classmethod
    def opened(
        cls: type[Bound], url: str | os.PathLike[str] | None, open_options: dict[str, Any], **options: Any
    ) -> Bound:
        """``cls(durastate.open(url, **open_options), **options)``, owning the store it opened.

        An option ``durastate.open`` does not take is refused (``InvalidRequest``) before anything is opened.
        """
        unknown = open_options.keys() - OPEN_OPTIONS
        if unknown:
            raise InvalidRequest(
                f"unknown {cls.__name__}.from_url option(s): {', '.join(sorted(unknown))}; it takes "
                f"{', '.join(options)} and durastate.open's options {', '.join(sorted(OPEN_OPTIONS))}"
            )
        store = open_store(url, **open_options)
        try:
            bound = cls(store, **options)  # type: ignore[call-arg]
        except BaseException:
            store.close()
            raise
        bound._owns_store = True
        return bound
