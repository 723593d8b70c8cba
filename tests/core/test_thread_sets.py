"""The thread sets of the token walk (:mod:`pda.thread_sets`): local stack nodes are hash-consed
(equal stacks are one live node, freed newest first), and a set never holds a thread twice, past
the scanned first ``LINEAR`` entries too."""

from __future__ import annotations

import random

import numpy as np

from pda.thread_sets import LINEAR, free_nodes, push_node
from pda.token_walk import walk_tokens
from pda.walk_workspace import make_workspace

from .test_walk_reference import case_of, max_token_length, vocab_trie


def test_push_node_finds_every_live_node_and_forgets_freed_ones() -> None:
    """Random pushes and newest-first frees against a dict of the live nodes: a push returns the
    live node of equal (state, parent) when there is one, else a new node at the top."""
    ws = make_workspace(8)
    a_state, a_parent, n_nodes, h_node, node_slot = ws.a_state, ws.a_parent, ws.n_nodes, ws.h_node, ws.node_slot
    rng = random.Random(7)
    for base in (0, 3):  # local nodes start above a real stack of `base` nodes
        free_nodes(n_nodes, n_nodes[2], h_node, node_slot)  # what a walk does first
        n_nodes[0] = n_nodes[2] = base
        live: dict[tuple[int, int], int] = {}
        marks: list[int] = []
        for _ in range(20000):
            op = rng.random()
            if op < 0.02 and marks:
                top = marks.pop()
                free_nodes(n_nodes, top, h_node, node_slot)
                live = {key: k for key, k in live.items() if k < top}
                assert int(n_nodes[0]) == top
            elif op < 0.06:
                marks.append(int(n_nodes[0]))
            elif n_nodes[0] < a_state.shape[0] - 1:
                key = (rng.randrange(6), rng.randrange(-1, int(n_nodes[0]) + 1) if rng.random() < 0.5
                       else rng.randrange(-1, min(int(n_nodes[0]), base + 8) + 1))
                want = live.get(key, int(n_nodes[0]))
                got = push_node(a_state, a_parent, n_nodes, h_node, node_slot, key[0], key[1])
                assert got == want, f"push {key}: node {got}, want {want} ({len(live)} live)"
                live[key] = got
        assert len(live) > 4 * LINEAR, "the hash table was not exercised"
    free_nodes(n_nodes, n_nodes[2], h_node, node_slot)
    assert (h_node == -1).all(), "freeing every node must leave the table empty"


def test_a_set_never_holds_a_thread_or_a_stack_twice() -> None:
    """Runs of dashes split every way (unary `-`, `--`, binary `-`): sets of more than a hundred
    threads.  Each set's threads are distinct, and so are their stacks by content: equal stacks
    are one node."""
    case = case_of("dashes")
    trie, tokens = vocab_trie(sorted({b"-" * k for k in range(1, 48)} | {b"x", b"(", b")", b" -"}))
    ws = make_workspace(max_token_length(trie))
    n = trie.order.shape[0]
    longest = max(range(n), key=lambda i: len(tokens[i]))
    widest = 0
    for s in np.flatnonzero(case.aut.has_bytes).tolist():
        out = np.empty(1, np.int8)
        walk_tokens(case.kernel, trie, np.array([longest], np.int32), s, np.zeros(0, np.int32), False, out, ws)
        for d in range(len(tokens[longest]) + 1):
            m = int(ws.cnt[d])
            if m == 0:
                break
            widest = max(widest, m)
            threads = [(int(ws.states[d, k]), int(ws.nd[d, k]), int(ws.cx[d, k])) for k in range(m)]
            assert len(set(threads)) == m, f"state {s}, depth {d}: a thread twice"
            stacks = [(t, c, _stack(ws, nd)) for t, nd, c in threads]
            assert len(set(stacks)) == m, f"state {s}, depth {d}: equal stacks in two nodes"
    assert widest > 4 * LINEAR, f"no set wider than {widest} threads: the hash tables were not exercised"


def _stack(ws, node: int) -> tuple[int, ...]:  # type: ignore[no-untyped-def]
    out = []
    while node >= 0:
        out.append(int(ws.a_state[node]))
        node = int(ws.a_parent[node])
    return tuple(out)
