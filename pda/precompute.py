"""Token classes per automaton state, and the masks of configurations built from them.

For every state ``s`` that can be a top, :func:`precompute_classes` walks the sorted token trie
from a bare frame holding only ``s`` (:func:`pda.token_walk.walk_tokens`) and sorts the tokens:

* **accepted** — some path consumes all the token's bytes without leaving ``s``'s frame;
* **uncertain** — only paths that leave the frame consume it, through some place the rule can
  return to (*context expansion*: return sites are tried, so most tokens that leave the frame are
  rejected here already);
* **rejected** — everything else.

Accepted tokens are stored as a sorted id list or as a bitmask row, whichever is smaller;
uncertain tokens as sorted-trie indices, checked at run time against the real stack.

**Shared rules and shared classes.**  Context expansion is exact but ties a state's classes to
the places its rule is called from.  A rule that normalisation made out of a repeated piece
(:data:`pda.share.SHARED_PREFIX`; every JSON string of a schema calls the same one), a block of a
long counted repeat (:data:`pda.normalize.REPEAT_PREFIX`), or any
rule called from more than :data:`ESCAPE_RETURN_SITES` places, is walked without it: a token that
can leave such a rule's frame is *uncertain* (``rule_escape``), whatever follows, and the matcher
decides it against the real stack.  The classes of a state in such a rule then depend only on
the automaton the walk can reach from it, so they are keyed by a canonical fingerprint of that
region (:func:`region_fingerprint`) and kept in a cache of the tokenizer
(:attr:`pda.TokenizerInfo.class_cache`), shared by every grammar compiled for it: the string,
number and other lexical rules that every JSON Schema writes are classified once per process.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import xxhash

from .automaton import Automaton
from .kernels import set_bits
from .token_walk import KernelAutomaton, Workspace, make_workspace, partition_codes, walk_tokens
from .normalize import REPEAT_PREFIX
from .share import SHARED_PREFIX
from .tokenizer import TokenizerInfo

__all__ = [
    "StateClasses", "TokenClasses", "precompute_classes", "return_sites", "kernel_automaton", "max_token_length",
    "region_fingerprint", "ESCAPE_RETURN_SITES",
]

# A rule called from more places than this is walked with escapes rather than context expansion.
ESCAPE_RETURN_SITES = 16
# Regions larger than this many states are not fingerprinted (their classes stay per grammar).
_REGION_LIMIT = 64


def max_token_length(trie) -> int:  # type: ignore[no-untyped-def]
    """The longest token of the trie, in bytes (at least 1)."""
    return max(1, int(np.diff(trie.offsets).max())) if trie.offsets.shape[0] > 1 else 1


@dataclass
class StateClasses:
    accepted_ids: np.ndarray | None  # int32 token ids, or None when stored as bits
    accepted_bits: np.ndarray | None  # int32[words], or None when stored as ids
    uncertain: np.ndarray  # int32 sorted-trie indices

    @property
    def num_accepted(self) -> int:
        if self.accepted_ids is not None:
            return int(self.accepted_ids.shape[0])
        return int(np.unpackbits(self.accepted_bits.view(np.uint8)).sum())  # type: ignore[union-attr]

    @property
    def nbytes(self) -> int:
        a = self.accepted_ids if self.accepted_ids is not None else self.accepted_bits
        return int(a.nbytes + self.uncertain.nbytes)  # type: ignore[union-attr]

    def accepted_mask(self, order: np.ndarray, words: int) -> np.ndarray:
        """bool per sorted-trie index: is that token accepted?"""
        row = self.accepted_bits
        if row is None:
            row = np.zeros(words, dtype=np.int32)
            if self.accepted_ids is not None and self.accepted_ids.shape[0]:
                set_bits(row, self.accepted_ids)
        by_id = np.unpackbits(row.view(np.uint8), bitorder="little").view(np.bool_)
        return by_id[order]

    def or_accepted_into(self, row: np.ndarray) -> None:
        if self.accepted_bits is not None:
            np.bitwise_or(row, self.accepted_bits, out=row)
        elif self.accepted_ids is not None and self.accepted_ids.shape[0]:
            set_bits(row, self.accepted_ids)


class TokenClasses:
    """The token classes of every state that can be a top, computed eagerly or on first use.

    ``get(state)`` returns a state's classes, computing them the first time (thread-safe; the
    kernel releases the GIL).  ``by_state`` holds the states computed so far.
    """

    def __init__(self, aut: Automaton, tok: TokenizerInfo) -> None:
        self.words = (tok.vocab_size + 31) // 32
        self.by_state: dict[int, StateClasses] = {}
        self.states = np.flatnonzero(aut.has_bytes).tolist()
        self.kernel = kernel_automaton(aut)
        self.shared_hits = 0  # states whose classes came from the tokenizer's cache
        self._aut = aut
        self._tok = tok
        self._trie = tok.trie
        self._all = np.arange(self._trie.order.shape[0], dtype=np.int32)
        self._maxlen = max_token_length(self._trie)
        self._lock = threading.Lock()
        self._local = threading.local()

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.by_state.values())

    @property
    def complete(self) -> bool:
        return len(self.by_state) == len(self.states)

    def get(self, state: int) -> StateClasses:
        got = self.by_state.get(state)
        if got is None:
            got = self._compute([state], self._workspace())[0]
        return got

    def _workspace(self) -> Workspace:
        """This thread's scratch arrays (kernels run on several threads at once).  A nested ``get``
        (a callee's classes, asked for before the caller's walk starts) may share them."""
        ws = getattr(self._local, "ws", None)
        if ws is None:
            ws = self._local.ws = make_workspace(self._maxlen)
        return ws

    def _classify(self, s: int, ws: Workspace) -> StateClasses:
        """Walk the vocabulary from a bare frame holding only ``s``.

        A token the start of an escaping rule that ``s`` calls accepts is accepted from ``s`` too
        (consumed inside the callee's frame), so only the other tokens are walked: from a state
        that opens a JSON string, the few thousand tokens that close it, not all 129k."""
        trie, words = self._trie, self.words
        cand = self._all
        pre: np.ndarray | None = None
        for r, _ in self._aut.calls(s):
            start = int(self._aut.rule_start[r])
            if self.kernel.rule_escape[r] and start != s:
                mask = self.get(start).accepted_mask(trie.order, self.words)
                pre = mask if pre is None else pre | mask
        if pre is not None and pre.sum() * 2 < pre.shape[0]:
            pre = None  # a walk of most of the vocabulary is faster over all of it (lcp skips, loops)
        if pre is not None:
            cand = self._all[~pre]
        out = np.empty(cand.shape[0], dtype=np.int8)
        walk_tokens(self.kernel, trie, cand, s, np.zeros(0, dtype=np.int32), True, out, ws)
        acc, unc = partition_codes(out, cand, trie.order)
        if pre is not None:
            acc = np.concatenate([trie.order[pre], acc])
        if acc.shape[0] > words:
            bits = np.zeros(words, dtype=np.int32)
            set_bits(bits, acc.astype(np.int32))
            return StateClasses(None, bits, unc)
        return StateClasses(np.sort(acc), None, unc)

    def _compute(self, chunk: list[int], ws: Workspace, progress=None) -> list[StateClasses]:  # type: ignore[no-untyped-def]
        got = []
        for s in chunk:
            key = region_fingerprint(self._aut, self.kernel, s)
            if key is None:
                cls = self._classify(s, ws)
            else:
                before = self._tok.class_cache.misses
                cls = self._tok.class_cache.get(key, lambda: self._classify(s, ws), lambda c: c.nbytes)
                if self._tok.class_cache.misses == before:
                    self.shared_hits += 1
            with self._lock:
                cls = self.by_state.setdefault(s, cls)
                if progress is not None:
                    progress(len(self.by_state), len(self.states))
            got.append(cls)
        return got

    def warm(self, aut: Automaton, *, seconds: float, max_states: int) -> None:
        """Classify states in breadth-first order from the start until ``seconds`` have passed or
        ``max_states`` are done: the states a document meets first, within a bounded compile time."""
        deadline = time.perf_counter() + seconds
        ws = make_workspace(self._maxlen)
        rets = return_sites(aut)
        start = int(aut.rule_start[0])
        seen = {start}
        queue = deque([start])
        done = 0
        while queue and done < max_states and time.perf_counter() < deadline:
            s = queue.popleft()
            if aut.has_bytes[s] and s not in self.by_state:
                self._compute([s], ws)
                done += 1
            nxt = np.unique(aut.trans[s]).tolist()
            for r, t in aut.calls(s):
                nxt += [int(aut.rule_start[r]), t]
            if aut.is_end[s]:
                r = int(aut.state_rule[s])
                nxt += rets[1][rets[0][r]:rets[0][r + 1]].tolist()
            for t in nxt:
                if t >= 0 and t not in seen:
                    seen.add(t)
                    queue.append(t)

    def compute_all(self, progress=None, *, threads: int | None = None) -> None:  # type: ignore[no-untyped-def]
        """Classify every state now, on ``threads`` worker threads (default: CPU count, at most 8)."""
        todo = [s for s in self.states if s not in self.by_state]
        n = max(1, min(threads or os.cpu_count() or 1, 8, len(todo)))
        if n == 1:
            self._compute(todo, make_workspace(self._maxlen), progress)
            return
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(lambda chunk: self._compute(chunk, make_workspace(self._maxlen), progress),
                          [todo[k::n] for k in range(n)]))


def return_sites(aut: Automaton) -> tuple[np.ndarray, np.ndarray]:
    """CSR (ret_ptr[R+1], ret_state[]): the states each rule can return to, over all call sites."""
    nrules = len(aut.rule_names)
    width = aut.num_states + 1
    pairs = np.unique(aut.call_rule.astype(np.int64) * width + aut.call_return)  # by rule, then return state
    ptr = np.zeros(nrules + 1, dtype=np.int32)
    ptr[1:] = np.cumsum(np.bincount(pairs // width, minlength=nrules))
    return ptr, (pairs % width).astype(np.int32)


def kernel_automaton(aut: Automaton) -> KernelAutomaton:
    """The arrays :func:`~pda.token_walk.walk_tokens` reads, with the escaping rules marked."""
    ret_ptr, ret_state = return_sites(aut)
    escape = np.array([n.startswith((SHARED_PREFIX, REPEAT_PREFIX)) for n in aut.rule_names], dtype=np.bool_)
    escape |= np.diff(ret_ptr) > ESCAPE_RETURN_SITES
    return KernelAutomaton(aut.trans, aut.byte_class, aut.is_end, aut.call_ptr, aut.call_rule, aut.call_return,
                           aut.rule_start, aut.state_rule, ret_ptr, ret_state, aut.simple, escape)


def region_fingerprint(aut: Automaton, kernel: KernelAutomaton, state: int) -> bytes | None:
    """A canonical digest of everything a bare-frame walk from ``state`` can read, or None.

    Only for states of escaping rules (a walk from them never reads the grammar beyond the states
    reachable by bytes and calls) whose region has at most ``_REGION_LIMIT`` states.  The states
    are numbered in breadth-first order from ``state``; each contributes whether it is an end, its
    256 byte successors and its calls, in those numbers.  Equal digests mean isomorphic regions,
    so equal classes, in any grammar."""
    if not kernel.rule_escape[aut.state_rule[state]]:
        return None
    ids = {state: 0}
    order = [state]
    h = xxhash.xxh3_128(b"pda-region-v1")
    i = 0
    while i < len(order):
        q = order[i]
        i += 1
        row = aut.trans[q][aut.byte_class]
        targets, first = np.unique(row, return_index=True)
        for t in targets[np.argsort(first)].tolist():
            if t >= 0 and t not in ids:
                ids[t] = len(order)
                order.append(t)
        calls = []
        for r, ret in aut.calls(q):
            for t in (int(aut.rule_start[r]), ret):
                if t not in ids:
                    ids[t] = len(order)
                    order.append(t)
            calls += [ids[int(aut.rule_start[r])], ids[ret]]
        if len(order) > _REGION_LIMIT:
            return None
        lut = np.full(targets.shape[0], -1, dtype=np.int32)
        for k, t in enumerate(targets.tolist()):
            if t >= 0:
                lut[k] = ids[t]
        h.update(bytes([1 if aut.is_end[q] else 0]))
        h.update(lut[np.searchsorted(targets, row)].astype("<i4").tobytes())
        h.update(np.asarray([len(calls), *calls], dtype="<i4").tobytes())
    return h.digest()


def precompute_classes(aut: Automaton, tok: TokenizerInfo, progress=None, *,  # type: ignore[no-untyped-def]
                       threads: int | None = None, eager: bool = True) -> TokenClasses:
    """Token classes for ``aut``: all states now (``eager``) or each on first use."""
    classes = TokenClasses(aut, tok)
    if eager:
        classes.compute_all(progress, threads=threads)
    return classes
