"""The one background thread of the process: the work compiles leave running (eager token
classification past the start state, disk cache writes), batch after batch in submission order.

A thread started per compile made every compile wait in ``Thread.start`` until the new thread ran:
a scheduler hand-off, or a whole GIL switch interval (5 ms) while an earlier compile's warm-up
held the GIL, which is a large part of a small grammar's time to first mask.  The worker is started
once (again after a fork) and fed through a queue, so handing work over does not wait.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Callable

__all__ = ["submit", "stop"]

_Batch = tuple[list[Callable[[], object]], threading.Event]

_queue: queue.SimpleQueue[_Batch | None] = queue.SimpleQueue()
_lock = threading.Lock()
_thread: threading.Thread | None = None
_outstanding: set[threading.Event] = set()  # the events of the batches not run yet


def submit(tasks: list[Callable[[], object]]) -> threading.Event:
    """Run ``tasks`` in order on the background thread; the event is set once they have run (or one
    of them raised: the rest of the batch is dropped and the error reported as a thread's is)."""
    global _thread
    done = threading.Event()
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="pda-warm", daemon=True)
            _thread.start()
        _outstanding.add(done)
        _queue.put((tasks, done))
    return done


def stop(seconds: float) -> None:
    """Let the thread finish what it was given and end, waiting at most ``seconds`` (interpreter
    exit: a daemon thread still inside numba while the interpreter tears down aborts the process)."""
    with _lock:
        thread = _thread
        if thread is None or not thread.is_alive():
            return
        _queue.put(None)
    thread.join(max(0.0, seconds))


def _run() -> None:
    while True:
        batch = _queue.get()
        if batch is None:
            return
        tasks, done = batch
        try:
            for task in tasks:
                task()
        except Exception as e:  # noqa: BLE001 - reported like an uncaught error of a thread; the worker goes on
            threading.excepthook(threading.ExceptHookArgs((type(e), e, e.__traceback__, threading.current_thread())))
        finally:
            with _lock:
                _outstanding.discard(done)
            done.set()


def _after_fork_in_child() -> None:
    """A forked child has no worker, and the parent's batches are not its own: it starts afresh,
    and whoever waits there for a parent's batch (``GrammarCompiler.wait``) is not left hanging."""
    global _queue, _lock, _thread
    _queue, _lock, _thread = queue.SimpleQueue(), threading.Lock(), None
    for done in _outstanding:
        done.set()
    _outstanding.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
