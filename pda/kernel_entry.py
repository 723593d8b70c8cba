"""Calling a numba kernel through its compiled entry point, past the dispatcher: :func:`run_direct`.

numba's dispatcher types every argument on every call, and a NamedTuple of arrays is typed in
Python: about 8 µs for a kernel automaton, a token trie and a walk workspace, more than many token
walks take.  These three live long (a compiled grammar's, a tokenizer's, a thread's), so after the
first call with them a kernel's compiled entry point is remembered for them and called directly,
with the three passed by reference (:mod:`pda.kernel_refs`): 1.4 µs for a call that walks no token,
where unboxing their 44 arrays made it 5.3 µs.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .kernel_refs import forget_reference, reference

__all__ = ["run_direct", "forget_entry_points"]

_ENTRY_LIMIT = 256  # (kernel, automaton, trie, workspace) whose compiled entry point is remembered
# (kernel name, id(A), id(T), id(ws)) -> (A, T, ws, the kernel's compiled entry point); the objects
# are held, so their ids stay theirs while they are in the table
_entries: dict[tuple[str, int, int, int], tuple[object, object, object, Any, tuple[tuple[int, Any], ...]]] = {}


def forget_entry_points(automaton_id: int) -> None:
    """Drop the remembered entry points of the kernel automaton with this ``id`` (and with them the
    table's references to it): its owner calls this when it dies (``weakref.finalize``), so a
    compiled grammar's arrays are not kept alive by this table after the grammar is gone."""
    for key in [k for k in list(_entries) if k[1] == automaton_id]:
        _entries.pop(key, None)
    _tuple_kinds.pop(automaton_id, None)
    forget_reference(automaton_id)


# (kernel name, the kinds of its arguments (:func:`_kinds`)) -> its compiled entry point for them:
# every new grammar brings a new automaton of the same kinds, and numba's dispatcher took 0.5 ms
# to type a new triple's NamedTuples of arrays
_by_kinds: dict[tuple[Any, ...], Any] = {}


# the flags numba's type of an array depends on: C- and F-contiguous (its layout), aligned, writeable
_KIND_FLAGS = 0x1 | 0x2 | 0x100 | 0x400


def _array_kind(x: object) -> tuple[Any, ...]:
    """What numba's type of ``x`` depends on: for an array its dtype, rank, layout, writability and
    alignment (the flags' bits, read at once: a third of the time of reading them one by one);
    for anything else its Python type."""
    if isinstance(x, np.ndarray):
        return (x.dtype, x.ndim, x.flags.num & _KIND_FLAGS)
    return (type(x),)


_TUPLE_KIND_LIMIT = 256  # tuples of arrays whose kinds are remembered (each held, so its id stays its own)
# id(tuple) -> (the tuple, the number of its kinds in _kind_numbers): the automaton, trie and
# workspace are long-lived, and each kernel's first call with a new grammar's automaton took 30-50
# us typing the trie's and the workspace's 30 arrays again, and 15-19 us hashing their kinds to
# find the entry point, in a fill that is already a first visit
_tuple_kinds: dict[int, tuple[object, int]] = {}
_kind_numbers: dict[tuple[Any, ...], int] = {}  # the kinds of a tuple of arrays -> a number of its own
_kind_lock = threading.Lock()


def _tuple_kind(x: tuple[Any, ...]) -> int:
    got = _tuple_kinds.get(id(x))
    if got is not None and got[0] is x:
        return got[1]
    kind = (type(x), *map(_array_kind, x))
    with _kind_lock:  # two threads must not give two kinds one number (a few kinds per process)
        number = _kind_numbers.setdefault(kind, len(_kind_numbers))
    if len(_tuple_kinds) >= _TUPLE_KIND_LIMIT:
        _tuple_kinds.clear()
    _tuple_kinds[id(x)] = (x, number)
    return number


def _kinds(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(_tuple_kind(x) if isinstance(x, tuple) else _array_kind(x) for x in args)


def run_direct(kernel: Any, name: str, A: object, T: object, ws: object, args: tuple[Any, ...]) -> Any:
    """``kernel(*args)``, through its compiled entry point when one is known for ``(A, T, ws)``
    (``name`` names the kernel in the tables), with ``A``, ``T`` and ``ws`` passed by reference
    (:mod:`pda.kernel_refs`: one pointer each, not their 44 arrays).  The entry point checks each
    per-call array's dtype and rank as it unboxes it (a TypeError before any work: then the
    dispatcher chooses), not its layout: the caller passes C-contiguous per-call arrays.  The first
    call with a new triple finds the entry point by the kinds of its arrays (:data:`_by_kinds`,
    about 40 µs), not through the dispatcher."""
    key = (name, id(A), id(T), id(ws))
    got = _entries.get(key)
    if got is not None:
        call = list(args)
        for i, ref in got[4]:
            call[i] = ref
        try:
            return got[3](*call)
        except TypeError:
            pass
    overloads = getattr(kernel, "overloads", None)  # None: NUMBA_DISABLE_JIT
    if overloads is None:
        return kernel(*args)
    refs = tuple((i, reference(x)) for i, x in enumerate(args) if x is A or x is T or x is ws)
    call = list(args)
    for i, ref in refs:
        call[i] = ref
    kinds = (name, _kinds(args))  # a reference's numba type is that of its tuple's arrays
    entry = _by_kinds.get(kinds)
    if entry is None:  # the dispatcher types the arguments and compiles (or loads) the kernel
        result = kernel(*call)
        compiled = overloads.get(tuple(kernel.typeof_pyval(x) for x in call))
        if compiled is not None:
            entry = _by_kinds[kinds] = compiled.entry_point
    else:
        result = entry(*call)
    if entry is not None:
        if len(_entries) >= _ENTRY_LIMIT:
            _entries.clear()
        _entries[key] = (A, T, ws, entry, refs)
    return result
