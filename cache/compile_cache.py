"""An in-memory cache of compiled grammars: keyed, bounded in bytes, thread-safe, compile-once.

When several threads ask for the same key at once, one compiles and the others wait for its
result; a compile that fails is not cached (the next request tries again).  Entries are evicted
least-recently-used first once their total size passes ``max_bytes``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future
from typing import Callable, Generic, TypeVar

__all__ = ["CompileCache", "DEFAULT_MAX_BYTES"]

T = TypeVar("T")
DEFAULT_MAX_BYTES = 2 << 30  # 2 GiB


class CompileCache(Generic[T]):
    """``get(key, build, size)`` returns the cached value or builds it once."""

    def __init__(self, max_bytes: int | None = DEFAULT_MAX_BYTES) -> None:
        if max_bytes is not None and max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0 or None, got {max_bytes}")
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._done: OrderedDict[str, tuple[T, int]] = OrderedDict()
        self._pending: dict[str, Future[T]] = {}
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: str, build: Callable[[], T], size: Callable[[T], int]) -> T:
        with self._lock:
            got = self._done.get(key)
            if got is not None:
                self._done.move_to_end(key)
                self.hits += 1
                return got[0]
            fut = self._pending.get(key)
            owner = fut is None
            if owner:
                fut = self._pending[key] = Future()
                self.misses += 1
        if not owner:
            return fut.result()  # type: ignore[union-attr]
        try:
            value = build()
        except BaseException as exc:
            with self._lock:
                del self._pending[key]
            fut.set_exception(exc)  # type: ignore[union-attr]
            raise
        nbytes = size(value)
        with self._lock:
            del self._pending[key]
            self._done[key] = (value, nbytes)
            self._bytes += nbytes
            while self.max_bytes is not None and self._bytes > self.max_bytes and len(self._done) > 1:
                _, (_, b) = self._done.popitem(last=False)
                self._bytes -= b
        fut.set_result(value)  # type: ignore[union-attr]
        return value

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._done)

    def clear(self) -> None:
        with self._lock:
            self._done.clear()
            self._bytes = 0
