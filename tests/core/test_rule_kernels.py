"""The kernels of :mod:`pda.rule_kernels` against the numpy code they replaced, kept here as the
reference: the same subset-construction DFA (numbering included) and the same minimal DFA."""

from __future__ import annotations

import random

import numpy as np
import pytest

from pda.dfa_kernels import DETERMINIZE_OK, class_symbols, determinize_nfa, minimize_partial, transition_lists
from pda.ir import Ref, alt, chars, lit, repeat, seq
from pda.nfa_kernels import THOMPSON_OK, flatten, thompson
from pda.rule_kernels import minimal_dfa, nfa_to_dfa

from .test_fsm import _random_expr


def _csr(n: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort ``rows`` (first column: a state) by state; returns (ptr[n+1], sorted rows)."""
    order = np.argsort(rows[:, 0], kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows[:, 0], minlength=n), out=ptr[1:])
    return ptr, rows[order]


def _sorted_calls(rows: np.ndarray) -> np.ndarray:
    return rows[np.lexsort((rows[:, 1], rows[:, 0]))] if len(rows) else rows.reshape(0, 3)


def _determinize_reference(n: int, eps: np.ndarray, edges: np.ndarray, call_rows: np.ndarray, max_states: int,
                 merge_classes: bool = True) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The subset construction as numpy calls around the kernels (the code nfa_to_dfa replaced)."""
    start, end = 0, 1
    bounds = np.unique(np.concatenate([[0, 256], edges[:, 1], edges[:, 2] + 1]))
    nclasses = len(bounds) - 1
    # byte ranges as class index ranges, then as symbol ranges
    clo = np.searchsorted(bounds, edges[:, 1])
    chi = np.searchsorted(bounds, edges[:, 2] + 1) - 1
    e_ptr, e_rows = _csr(n, np.column_stack([edges[:, 0], clo, chi, edges[:, 3]]))
    if merge_classes:
        # Merge the classes on which the NFA moves alike (every pair of states joined on both or
        # on neither; a string's "any byte but quote and backslash" splits the bytes into classes
        # that are alike elsewhere).  Symbols are numbered by their first class, so edge ``j``
        # stands for the symbols whose first class lies in ``clo[j]..chi[j]`` (a run, maybe empty)
        # and the edges joining two states still hold exactly their symbols.
        symbol, first = class_symbols(n, nclasses, e_ptr, e_rows[:, 1].copy(), e_rows[:, 2].copy(),
                                      e_rows[:, 3].copy())
        e_rows[:, 1] = np.searchsorted(first, e_rows[:, 1])
        e_rows[:, 2] = np.searchsorted(first, e_rows[:, 2], side="right") - 1
    else:
        symbol, first = np.arange(nclasses), np.arange(nclasses)
    eps_ptr, eps_rows = _csr(n, eps)
    c_ptr, c_rows = _csr(n, call_rows)
    status, trans, accept, csrc, crule, cdst = determinize_nfa(
        n, eps_ptr, eps_rows[:, 1].copy(), e_ptr, e_rows[:, 1].copy(), e_rows[:, 2].copy(), e_rows[:, 3].copy(),
        c_ptr, c_rows[:, 1].copy(), c_rows[:, 2].copy(), start, end, len(first), max_states,
    )
    assert status == DETERMINIZE_OK
    return bounds.tolist(), symbol, trans, _sorted_calls(np.column_stack([csrc, crule, cdst])), accept


def _minimal_reference(symbol: np.ndarray, trans: np.ndarray, rows: np.ndarray,
             accept: np.ndarray):  # type: ignore[no-untyped-def]
    """The minimal DFA of the DFA ``trans[s, symbol[k]]`` , over byte classes.

    States are renumbered in first-seen order and dead states dropped.  Call edges are transitions
    too, one label per callee after the symbols.
    """
    n, nsym = trans.shape
    callees, sym = np.unique(rows[:, 1], return_inverse=True)  # one label per callee after the symbols
    accept = np.asarray(accept, dtype=np.bool_)
    block, nblocks = minimize_partial(n, *transition_lists(trans, rows[:, 0].copy(), sym.reshape(-1), rows[:, 2].copy()), accept)
    block = block.astype(np.int64)
    if block[0] < 0:
        return None
    # block order: by the smallest state in each block (the start state's block comes first)
    live = np.flatnonzero(block >= 0)
    _, firsts = np.unique(block[live], return_index=True)
    rep = live[firsts]  # the smallest state of each block, by block number
    order = np.argsort(rep, kind="stable")
    rep = rep[order]
    renum = np.empty(nblocks + 1, dtype=np.int64)
    renum[order] = np.arange(nblocks)
    renum[nblocks] = -1  # dead states
    new_of = renum[np.where(block >= 0, block, nblocks)]
    kept = trans[rep][:, symbol]
    out = np.where(kept >= 0, new_of[np.maximum(kept, 0)], -1).astype(np.int32)
    is_rep = np.zeros(n, dtype=np.bool_)
    is_rep[rep] = True
    keep = is_rep[rows[:, 0]] & (new_of[rows[:, 2]] >= 0)
    calls = np.column_stack([new_of[rows[keep, 0]], rows[keep, 1], new_of[rows[keep, 2]]])
    return out, _sorted_calls(calls), accept[rep]


def _nfa(e):  # type: ignore[no-untyped-def]
    flat, roots = flatten([e], {"x": 1, "y": 2})
    status, n, eps, edges, calls = thompson(*flat, roots[0], 100_000)
    assert status == THOMPSON_OK
    return n, eps, edges, calls


def _check(e) -> None:  # type: ignore[no-untyped-def]
    n, eps, edges, calls = _nfa(e)
    for merge in (True, False):
        bounds, symbol, trans, rows, accept = _determinize_reference(n, eps, edges, calls, 100_000, merge)
        status, b2, s2, t2, a2, r2 = nfa_to_dfa(n, eps, edges, calls, 100_000, merge)
        assert status == DETERMINIZE_OK
        assert b2.tolist() == bounds and np.array_equal(s2, symbol) and np.array_equal(t2, trans), e
        assert np.array_equal(r2, rows) and np.array_equal(a2, accept), e
        want = _minimal_reference(symbol, trans, rows, accept)
        out, calls_out, acc = minimal_dfa(trans, symbol, rows, accept)
        if want is None:
            assert len(out) == 0, e
        else:
            assert np.array_equal(out, want[0]) and out.dtype == np.int32, e
            assert np.array_equal(calls_out, want[1].reshape(-1, 3)) and np.array_equal(acc, want[2]), e


@pytest.mark.parametrize("seed", range(6))
def test_rule_kernels_match_the_numpy_reference(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(40):
        _check(_random_expr(rng, 5))


@pytest.mark.parametrize("e", [
    lit("a"), seq(Ref("x"), Ref("y")), alt(Ref("y"), seq(Ref("x"), lit("b"))), repeat(chars([(0, 0x10FFFF)]), 0, 3),
    seq(lit("a"), chars([])), alt(seq(Ref("x"), chars([])), lit("q")),
], ids=range(6))
def test_rule_kernels_on_corners(e) -> None:  # type: ignore[no-untyped-def]
    _check(e)
