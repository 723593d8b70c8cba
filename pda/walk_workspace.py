"""The scratch arrays of the token walk (:mod:`pda.token_walk`), one set per thread.

A walk's thread sets, local stack nodes and hash tables live in a :class:`Workspace` that the
caller passes in: allocated once per thread (:func:`thread_workspace`) and reused by every walk on
it, since a walk never outlives its kernel call.  :func:`listing_buffers` are the output arrays of
the walks that list only the tokens they do not reject.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

__all__ = ["Workspace", "make_workspace", "thread_workspace", "listing_buffers"]


_CAP = 1024  # threads per depth
_NODES = 1 << 14  # local stack nodes


class Workspace(NamedTuple):
    """Scratch arrays of one :func:`~pda.token_walk.walk_tokens` caller (one per thread; reused
    across calls)."""

    states: np.ndarray  # int32[D, CAP]: thread states per depth
    nd: np.ndarray  # int32[D, CAP]: thread stack nodes per depth
    cx: np.ndarray  # int8[D, CAP]: 1 for context threads (left the frame through a return site)
    cnt: np.ndarray  # int32[D]: threads per depth
    a_state: np.ndarray  # int32[NODES]: local stack nodes: return state ...
    a_parent: np.ndarray  # ... and parent node
    n_nodes: np.ndarray  # int64[3]: nodes in use; the lowest real-stack node read; the first local node
    h_node: np.ndarray  # int32[2 * NODES]: the live local nodes by (state, parent), open addressing (-1: free)
    node_slot: np.ndarray  # int32[NODES]: each local node's slot in h_node
    h_thread: np.ndarray  # int32[2 * CAP]: the threads of the set a closure builds, by (state, node, context) ...
    h_stamp: np.ndarray  # int64[2 * CAP + 1]: ... a slot is in use when its stamp is the closure's (the last counts)
    a_top: np.ndarray  # int64[D]: nodes in use after each depth's closure
    seeds_s: np.ndarray
    seeds_n: np.ndarray
    seeds_c: np.ndarray
    wl_s: np.ndarray
    wl_n: np.ndarray
    wl_c: np.ndarray
    esc: np.ndarray  # int8[D]: some path up to this depth could leave an escaping frame
    lazy: np.ndarray  # int8[D]: the depth's one thread is at an end whose pop is not written out


def make_workspace(max_token_len: int) -> Workspace:
    """Scratch arrays for :func:`~pda.token_walk.walk_tokens` (one per thread of use; reused across calls)."""
    d = max_token_len + 1
    return Workspace(
        np.empty((d, _CAP), np.int32), np.empty((d, _CAP), np.int32), np.empty((d, _CAP), np.int8),
        np.zeros(d, np.int32), np.empty(_NODES, np.int32), np.empty(_NODES, np.int32), np.zeros(3, np.int64),
        np.full(2 * _NODES, -1, np.int32), np.empty(_NODES, np.int32), np.empty(2 * _CAP, np.int32),
        np.zeros(2 * _CAP + 1, np.int64),
        np.zeros(d, np.int64), np.empty(_CAP, np.int32), np.empty(_CAP, np.int32), np.empty(_CAP, np.int8),
        np.empty(4 * _CAP, np.int32), np.empty(4 * _CAP, np.int32), np.empty(4 * _CAP, np.int8),
        np.zeros(d, np.int8), np.zeros(d, np.int8),
    )


_THREAD = threading.local()  # per thread: workspaces by longest token length


def thread_workspace(max_token_len: int) -> Workspace:
    """This thread's workspace for tokens of at most ``max_token_len`` bytes (about 1.6 MB for 128),
    shared by every matcher and token-class computation on the thread: a walk never outlives its
    kernel call, so one workspace per thread is enough."""
    mine: dict[int, Workspace] | None = getattr(_THREAD, "by_length", None)
    if mine is None:
        mine = _THREAD.by_length = {}
    ws = mine.get(max_token_len)
    if ws is None:
        ws = mine[max_token_len] = make_workspace(max_token_len)
    return ws


def listing_buffers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """This thread's ``out`` (int8) and ``found`` (int32) arrays of at least ``n`` entries for
    :func:`~pda.token_walk.walk_listing` (grown when a larger vocabulary asks; a walk never outlives its call)."""
    got: tuple[np.ndarray, np.ndarray] | None = getattr(_THREAD, "listing", None)
    if got is None or got[0].shape[0] < n:
        got = _THREAD.listing = (np.empty(n, np.int8), np.empty(n, np.int32))
    return got
