"""The compile-time budget: a per-thread deadline that long compile loops check.

Building a grammar runs inside :func:`compile_budget`; the frontends, normalisation and the
automaton construction call :func:`check_deadline` in their long loops, so a grammar or schema
that would take too long stops with :class:`~pda.errors.LimitExceededError` (limit
``max_compile_seconds``) rather than hanging the caller.  An expression nested deeper than
Python's recursion limit is a ``LimitExceededError`` too (limit ``recursion_limit``).  The numba kernels are not interrupted;
they are bounded by ``max_states`` instead.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from .errors import LimitExceededError

__all__ = ["DEFAULT_MAX_COMPILE_SECONDS", "compile_budget", "check_deadline"]

DEFAULT_MAX_COMPILE_SECONDS = 120.0

_local = threading.local()


@contextmanager
def compile_budget(seconds: float | None) -> Iterator[None]:
    """Run the block with at most ``seconds`` of compile time (``None``: no limit of its own).

    Nested budgets keep the earlier deadline, so an outer budget covers everything inside it.
    """
    outer = getattr(_local, "deadline", None)
    if seconds is not None:
        if not seconds > 0:
            raise ValueError(f"max_compile_seconds must be positive or None, got {seconds!r}")
        mine = (time.monotonic() + seconds, seconds)
        _local.deadline = mine if outer is None or mine[0] < outer[0] else outer
    try:
        yield
    except RecursionError as e:
        raise LimitExceededError(
            "recursion_limit", sys.getrecursionlimit(), "the grammar nests expressions deeper than Python's "
            "recursion limit allows; flatten it or raise sys.setrecursionlimit",
        ) from e
    finally:
        _local.deadline = outer


def check_deadline() -> None:
    """Raise :class:`~pda.errors.LimitExceededError` when this thread's compile budget is spent."""
    got = getattr(_local, "deadline", None)
    if got is not None and time.monotonic() > got[0]:
        raise LimitExceededError(
            "max_compile_seconds", got[1], "the grammar takes too long to compile; raise max_compile_seconds "
            "(None: no limit) or simplify the grammar",
        )
