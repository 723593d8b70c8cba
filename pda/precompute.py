"""Token classes per automaton state, and the masks of configurations built from them.

For every state ``s`` that can be a top, :func:`precompute_classes` walks the sorted token trie
from a bare frame holding only ``s`` (:func:`pda.kernels.walk_tokens`) and sorts the tokens:

* **accepted** — some path consumes all the token's bytes without leaving ``s``'s frame;
* **uncertain** — only paths that leave the frame consume it, through some place the rule can
  return to (*context expansion*: return sites are tried, so most tokens that leave the frame are
  rejected here already);
* **rejected** — everything else.

Accepted tokens are stored as a sorted id list or as a bitmask row, whichever is smaller;
uncertain tokens as sorted-trie indices, checked at run time against the real stack.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .automaton import Automaton
from .kernels import TOKEN_ACCEPTED, TOKEN_OVERFLOW, TOKEN_UNCERTAIN, make_workspace, set_bits, walk_tokens
from .tokenizer import TokenizerInfo

__all__ = ["StateClasses", "TokenClasses", "precompute_classes", "return_sites", "kernel_args", "max_token_length"]


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
        self._trie = tok.trie
        self._args = kernel_args(aut, return_sites(aut))
        self._all = np.arange(self._trie.order.shape[0], dtype=np.int32)
        self._maxlen = max_token_length(self._trie)
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.by_state.values())

    @property
    def complete(self) -> bool:
        return len(self.by_state) == len(self.states)

    def get(self, state: int) -> StateClasses:
        got = self.by_state.get(state)
        if got is None:
            got = self._compute([state], make_workspace(self._maxlen))[0]
        return got

    def _compute(self, chunk: list[int], ws: tuple, progress=None) -> list[StateClasses]:  # type: ignore[no-untyped-def]
        trie, words = self._trie, self.words
        out = np.empty(self._all.shape[0], dtype=np.int8)
        empty_stack = np.zeros(0, dtype=np.int32)
        got = []
        for s in chunk:
            walk_tokens(*self._args, trie.data, trie.offsets, trie.lcp, trie.skip, trie.bytesets, self._all, s,
                        empty_stack, True, out, ws)
            acc = trie.order[out == TOKEN_ACCEPTED]
            unc = self._all[(out == TOKEN_UNCERTAIN) | (out == TOKEN_OVERFLOW)]
            if acc.shape[0] > words:
                bits = np.zeros(words, dtype=np.int32)
                set_bits(bits, acc.astype(np.int32))
                cls = StateClasses(None, bits, unc)
            else:
                cls = StateClasses(np.sort(acc).astype(np.int32), None, unc)
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


def kernel_args(aut: Automaton, rets: tuple[np.ndarray, np.ndarray]) -> tuple:
    """The automaton arrays in the order :func:`walk_tokens` takes them."""
    return (aut.trans, aut.byte_class, aut.is_end, aut.call_ptr, aut.call_rule, aut.call_return, aut.rule_start,
            aut.state_rule, rets[0], rets[1], aut.simple)


def precompute_classes(aut: Automaton, tok: TokenizerInfo, progress=None, *,  # type: ignore[no-untyped-def]
                       threads: int | None = None, eager: bool = True) -> TokenClasses:
    """Token classes for ``aut``: all states now (``eager``) or each on first use."""
    classes = TokenClasses(aut, tok)
    if eager:
        classes.compute_all(progress, threads=threads)
    return classes
