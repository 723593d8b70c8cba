"""Thread sets of the token walk (:mod:`pda.token_walk`): the closure of a set of threads, the
one-thread step that needs none, the hash-consed local stack nodes the threads' calls push, and
the checks that let a walk copy a set a byte leaves as it was instead of stepping it.

A set holds threads (state, stack node, context flag) at one depth of a token's bytes.  Its
threads are deduplicated, and so are the local stack nodes: equal stacks are one node, so an
ambiguous prefix (a run of ``-`` in C's unary ``-``/``--``) keeps one thread per distinct stack.
The first :data:`LINEAR` threads of a set, and local nodes of a walk, are found by a scan; later
ones through open-addressing tables in the walk's workspace.  Node removals are newest-first, which
restores the table exactly, so it needs no tombstones; a set's table is emptied by a new stamp.

These kernels are inlined into :func:`pda.token_walk._walk_tokens` (numba IR inlining): numba's
on-disk cache of that kernel does not see edits here, so clear ``pda/__pycache__`` after one.
"""

from __future__ import annotations

from numba import njit

LINEAR = 16  # threads of a set, and local stack nodes, found by a scan before a hash table takes over

@njit(cache=True, nogil=True, inline="always")
def push_node(a_state, a_parent, n_nodes, h_node, node_slot, state, parent):
    # hash-consing among the live local nodes: equal stacks pushed at different depths are one node
    # (an ambiguous prefix such as a run of `-` in C's unary `-`/`--` would otherwise make a new
    # stack per split and overflow); the first LINEAR are scanned, later ones (such a prefix
    # makes thousands) are kept in a hash table too
    lo = n_nodes[2]
    top = n_nodes[0]
    for k in range(lo, min(top, lo + LINEAR)):
        if a_state[k] == state and a_parent[k] == parent:
            return k
    mask = h_node.shape[0] - 1
    h = ((state * 0x9E3779B1) ^ (parent * 0x85EBCA77 + 0x165667B1)) & mask
    if top > lo + LINEAR:
        while h_node[h] >= 0:
            k = h_node[h]
            if a_state[k] == state and a_parent[k] == parent:
                return k
            h = (h + 1) & mask
    if top >= a_state.shape[0]:
        return -2
    a_state[top] = state
    a_parent[top] = parent
    if top >= lo + LINEAR:
        while h_node[h] >= 0:
            h = (h + 1) & mask
        h_node[h] = top
        node_slot[top] = h
    n_nodes[0] = top + 1
    return top


@njit(cache=True, nogil=True, inline="always")
def free_nodes(n_nodes, top, h_node, node_slot):
    # free the local nodes from `top` on, newest first: each removal restores the table exactly as
    # it was before that node's insertion (linear probing), so no tombstones are needed
    for k in range(n_nodes[0] - 1, max(top, n_nodes[2] + LINEAR) - 1, -1):
        h_node[node_slot[k]] = -1
    n_nodes[0] = top


@njit(cache=True, nogil=True, inline="always")
def closure(d, nseeds, hn, n_stack, expand, st, nd, cx, cnt, a_state, a_parent, n_nodes, seeds_s, seeds_n,
             seeds_c, wl_s, wl_n, wl_c, esc_d, is_end, state_rule, rule_escape, ret_ptr, ret_state, call_ptr,
             call_rule, call_return, rule_start):
    """Put the closure of the seed threads into set ``d``; False on overflow.  Sets ``esc_d[d]``
    when a thread reaches the end of an escaping rule at the frame bottom, and lowers
    ``n_nodes[1]`` to the lowest real-stack node a pop read.  Inlined into :func:`walk_tokens`
    (numba IR inlining: a call with this many array arguments cost ~8% of a wide state's walk)."""
    cap = st.shape[1]
    wcap = wl_s.shape[0]
    w = 0
    for i in range(nseeds):
        wl_s[w] = seeds_s[i]
        wl_n[w] = seeds_n[i]
        wl_c[w] = seeds_c[i]
        w += 1
    cnt[d] = 0
    esc = esc_d[d - 1] if d > 0 else 0
    h_node, node_slot, h_thread, h_stamp = hn
    mask = h_thread.shape[0] - 1
    stamp = h_stamp[-1] + 1  # a new stamp empties the table of threads
    h_stamp[-1] = stamp
    while w > 0:
        w -= 1
        s = wl_s[w]
        n = wl_n[w]
        c = wl_c[w]
        dup = False
        m = cnt[d]
        for k in range(min(m, LINEAR)):  # the first LINEAR threads are scanned, later ones hashed
            if st[d, k] == s and nd[d, k] == n and cx[d, k] == c:
                dup = True
                break
        h = ((s * 0x9E3779B1) ^ (n * 0x85EBCA77) ^ c) & mask
        if m > LINEAR and not dup:
            while h_stamp[h] == stamp:
                k = h_thread[h]
                if st[d, k] == s and nd[d, k] == n and cx[d, k] == c:
                    dup = True
                    break
                h = (h + 1) & mask
        if dup:
            continue
        if m >= cap:
            return False
        if m >= LINEAR:
            while h_stamp[h] == stamp:
                h = (h + 1) & mask
            h_stamp[h] = stamp
            h_thread[h] = m
        st[d, cnt[d]] = s
        nd[d, cnt[d]] = n
        cx[d, cnt[d]] = c
        cnt[d] += 1
        if is_end[s]:
            if n >= 0:
                if w >= wcap:
                    return False
                if n < n_stack and n < n_nodes[1]:
                    n_nodes[1] = n
                wl_s[w] = a_state[n]
                wl_n[w] = a_parent[n]
                wl_c[w] = c
                w += 1
            elif expand:
                r = state_rule[s]
                if rule_escape[r]:
                    esc = 1
                else:
                    for e in range(ret_ptr[r], ret_ptr[r + 1]):
                        if w >= wcap:
                            return False
                        wl_s[w] = ret_state[e]
                        wl_n[w] = -1
                        wl_c[w] = 1
                        w += 1
        for e in range(call_ptr[s], call_ptr[s + 1]):
            k = push_node(a_state, a_parent, n_nodes, h_node, node_slot, call_return[e], n)
            if k < 0 or w >= wcap:
                return False
            wl_s[w] = rule_start[call_rule[e]]
            wl_n[w] = k
            wl_c[w] = c
            w += 1
    esc_d[d] = esc
    return True


@njit(cache=True, nogil=True, inline="always")
def single_step(d, t, n, c, expand, st, nd, cx, cnt, esc, lazy, simple, call_ptr, state_rule, rule_escape):
    """Make set ``d + 1`` the one thread (t, n, c) when that needs no closure: ``t`` has no calls
    and is simple, or an end whose pop can wait (inside a call: ``lazy``), or the end of an
    escaping rule at the frame bottom, or an end at the bottom of a real stack.  False otherwise."""
    lz = 0
    if simple[t]:
        esc[d + 1] = esc[d]
    elif call_ptr[t] != call_ptr[t + 1]:
        return False
    elif n >= 0:
        lz = 1
        esc[d + 1] = esc[d]
    elif not expand:
        esc[d + 1] = esc[d]
    elif rule_escape[state_rule[t]]:
        esc[d + 1] = 1
    else:
        return False
    st[d + 1, 0] = t
    nd[d + 1, 0] = n
    cx[d + 1, 0] = c
    cnt[d + 1] = 1
    lazy[d + 1] = lz
    return True


@njit(cache=True, nogil=True, inline="always")
def same_set(st, nd, cx, d, n):
    # whether the set of n threads at depth d + 1 is the one at depth d, in any order (sums first:
    # a step that leaves a set as it was reorders its threads)
    s0 = 0
    s1 = 0
    for k in range(n):
        s0 += (st[d, k] * 31 + nd[d, k]) * 7 + cx[d, k]
        s1 += (st[d + 1, k] * 31 + nd[d + 1, k]) * 7 + cx[d + 1, k]
    if s0 != s1:
        return False
    for k in range(n):
        hit = False
        for q in range(n):
            if st[d + 1, k] == st[d, q] and nd[d + 1, k] == nd[d, q] and cx[d + 1, k] == cx[d, q]:
                hit = True
                break
        if not hit:
            return False
    return True


@njit(cache=True, nogil=True, inline="always")
def same_moves(trans, st, d, n, b, c):
    # whether every thread of the set at depth d moves alike on byte classes b and c
    for k in range(n):
        if trans[st[d, k], b] != trans[st[d, k], c]:
            return False
    return True


@njit(cache=True, nogil=True, inline="always")
def copy_set(st, nd, cx, cnt, esc, lazy, d):
    # the set at depth d + 1 is the one at depth d
    n = cnt[d]
    for k in range(n):
        st[d + 1, k] = st[d, k]
        nd[d + 1, k] = nd[d, k]
        cx[d + 1, k] = cx[d, k]
    cnt[d + 1] = n
    esc[d + 1] = esc[d]
    lazy[d + 1] = 0
