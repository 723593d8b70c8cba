"""The walk kernels' long-lived arguments: the automaton's arrays (:class:`KernelAutomaton`), and
those, the token trie and the walk workspace by reference, as numba structrefs passed as one pointer.

A NamedTuple of arrays reaches a kernel's compiled entry point as its arrays, each unboxed on every
call (type checked, wrapped in a memory-info record, released on return): for the 44 arrays of a
:class:`KernelAutomaton`, a :class:`~pda.token_trie.TokenTrie` and a
:class:`~pda.walk_workspace.Workspace` that was most of a token walk's fixed cost: a survivors call
that walks no token took 5.3 µs at its entry point, 1.4 µs with the three by reference (and about
16 µs less, of 59, with the automaton and trie by reference when a 64 MB sweep had left the caches
cold, as another engine's work between two fills does; a JSON grammar's deep walks decide one to
twenty tokens each).  A structref holding the same arrays is unboxed as one pointer, and a
kernel reads ``A.trans`` from either alike, so the kernels' code does not change: numba compiles
one specialisation for the references, which :func:`pda.kernel_entry.run_direct` calls.

A reference is built once per NamedTuple (:func:`reference`, remembered by ``id`` with the tuple
held, so the id stays its own) and holds the same arrays, not copies: a kernel that writes into a
workspace or fills ``utf8_loop`` on first use writes into the tuple's arrays too.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numba import njit, types
from numba.experimental import structref

from .token_trie import TokenTrie
from .walk_workspace import Workspace

__all__ = ["KernelAutomaton", "reference", "forget_reference"]


class KernelAutomaton(NamedTuple):
    """The automaton arrays :func:`pda.token_walk.walk_tokens` reads (built once per compiled grammar)."""

    trans: np.ndarray  # int32[S, C]
    byte_class: np.ndarray  # uint8[256]
    is_end: np.ndarray  # bool[S]
    call_ptr: np.ndarray  # int32[S+1]
    call_rule: np.ndarray  # int32[E]
    call_return: np.ndarray  # int32[E]
    rule_start: np.ndarray  # int32[R]
    state_rule: np.ndarray  # int32[S]
    ret_ptr: np.ndarray  # int32[R+1]: return sites of each rule (CSR) ...
    ret_state: np.ndarray  # ... the states a rule's callers continue at
    simple: np.ndarray  # bool[S]: no calls and not an end
    rule_escape: np.ndarray  # bool[R]: leaving this rule's bare frame makes a token uncertain (no expansion)
    has_loop: np.ndarray  # bool[S]: some byte leads from the state back to itself
    # int8[S]: whether every multi-byte character leads from the state back to it (utf8_loops),
    # filled in by the walks on first use (-1: not yet; threads that race write the same value)
    utf8_loop: np.ndarray


class _ArraysType(types.StructRef):
    def preprocess_fields(self, fields: Any) -> Any:
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


@structref.register
class AutomatonRefType(_ArraysType):
    pass


@structref.register
class TrieRefType(_ArraysType):
    pass


@structref.register
class WorkspaceRefType(_ArraysType):
    pass


class AutomatonRef(structref.StructRefProxy):
    """A :class:`KernelAutomaton`'s arrays, by reference."""


class TrieRef(structref.StructRefProxy):
    """A :class:`~pda.token_trie.TokenTrie`'s arrays, by reference."""


class WorkspaceRef(structref.StructRefProxy):
    """A :class:`~pda.walk_workspace.Workspace`'s arrays, by reference."""


structref.define_proxy(AutomatonRef, AutomatonRefType, list(KernelAutomaton._fields))
structref.define_proxy(TrieRef, TrieRefType, list(TokenTrie._fields))
structref.define_proxy(WorkspaceRef, WorkspaceRefType, list(Workspace._fields))


# Built in compiled code (cached): the proxies' own constructors compile on first use in each process.
@njit(cache=True)
def _automaton_ref(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13):  # type: ignore[no-untyped-def]
    return AutomatonRef(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13)


@njit(cache=True)
def _trie_ref(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9):  # type: ignore[no-untyped-def]
    return TrieRef(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9)


@njit(cache=True)
def _workspace_ref(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17,  # type: ignore[no-untyped-def]
                   a18, a19):
    return WorkspaceRef(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19)


_BUILDERS = {KernelAutomaton: _automaton_ref, TokenTrie: _trie_ref, Workspace: _workspace_ref}
_REF_LIMIT = 256  # references remembered (each holds its tuple, so its id stays its own)
_refs: dict[int, tuple[object, object]] = {}


def reference(obj: Any) -> Any:
    """The structref of a KernelAutomaton, TokenTrie or Workspace (built on first use); any other
    argument is returned as it is."""
    got = _refs.get(id(obj))
    if got is not None and got[0] is obj:
        return got[1]
    build = _BUILDERS.get(type(obj))
    if build is None:
        return obj
    ref = build(*obj)
    if len(_refs) >= _REF_LIMIT:
        _refs.clear()
    _refs[id(obj)] = (obj, ref)
    return ref


def forget_reference(obj_id: int) -> None:
    """Drop the reference built for the object with this ``id`` (its owner is dying)."""
    _refs.pop(obj_id, None)
