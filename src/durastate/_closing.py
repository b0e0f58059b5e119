"""``with thing:`` closes ``thing`` at the end of the block: one copy of the two methods.

For the objects whose ``with`` block means exactly ``close()`` at its end
(``Store``, ``ShardedStore``, the integrations' store holders). An object
whose exit does more or less than ``close()`` (compat.vgi's storage, which
follows the seed) writes its own.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["ClosesOnExit"]


class ClosesOnExit:
    """Mixin: ``__enter__`` returns the object, ``__exit__`` calls ``close()`` (exceptions propagate)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
