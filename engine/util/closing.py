"""Objects that hold a resource until :meth:`Closing.close` and close it at the end of a ``with`` block."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class Closing(ABC):
    """``with obj:`` gives ``obj`` and calls :meth:`close` when the block ends, however it ends."""

    @abstractmethod
    def close(self) -> None:
        """Give up what the object holds."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
