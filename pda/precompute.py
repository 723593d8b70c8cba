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


@dataclass
class TokenClasses:
    by_state: dict[int, StateClasses]
    words: int

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.by_state.values())


def return_sites(aut: Automaton) -> tuple[np.ndarray, np.ndarray]:
    """CSR (ret_ptr[R+1], ret_state[]): the states each rule can return to, over all call sites."""
    nrules = len(aut.rule_names)
    sites: list[set[int]] = [set() for _ in range(nrules)]
    for r, t in zip(aut.call_rule.tolist(), aut.call_return.tolist()):
        sites[r].add(t)
    ptr = np.zeros(nrules + 1, dtype=np.int32)
    ptr[1:] = np.cumsum([len(s) for s in sites])
    flat = np.array([t for s in sites for t in sorted(s)], dtype=np.int32)
    return ptr, flat


def kernel_args(aut: Automaton, rets: tuple[np.ndarray, np.ndarray]) -> tuple:
    """The automaton arrays in the order :func:`walk_tokens` takes them."""
    return (aut.trans, aut.byte_class, aut.is_end, aut.call_ptr, aut.call_rule, aut.call_return, aut.rule_start,
            aut.state_rule, rets[0], rets[1], aut.simple)


def precompute_classes(aut: Automaton, tok: TokenizerInfo, progress=None, *,  # type: ignore[no-untyped-def]
                       threads: int | None = None) -> TokenClasses:
    """Classify every normal token for every state that can be a top.

    States are shared out among ``threads`` worker threads (default: the CPU count, at most 8);
    the kernel releases the GIL, so they run in parallel."""
    trie = tok.trie
    words = (tok.vocab_size + 31) // 32
    args = kernel_args(aut, return_sites(aut))
    all_idx = np.arange(trie.order.shape[0], dtype=np.int32)
    empty_stack = np.zeros(0, dtype=np.int32)
    maxlen = max_token_length(trie)
    states = np.flatnonzero(aut.has_bytes).tolist()
    by_state: dict[int, StateClasses] = {}
    lock = threading.Lock()
    done = [0]

    def work(chunk: list[int]) -> None:
        ws = make_workspace(maxlen)
        out = np.empty(all_idx.shape[0], dtype=np.int8)
        for s in chunk:
            walk_tokens(*args, trie.data, trie.offsets, all_idx, s, empty_stack, True, out, ws)
            acc = trie.order[out == TOKEN_ACCEPTED]
            unc = all_idx[(out == TOKEN_UNCERTAIN) | (out == TOKEN_OVERFLOW)]
            if acc.shape[0] > words:
                bits = np.zeros(words, dtype=np.int32)
                set_bits(bits, acc.astype(np.int32))
                cls = StateClasses(None, bits, unc)
            else:
                cls = StateClasses(np.sort(acc).astype(np.int32), None, unc)
            with lock:
                by_state[s] = cls
                done[0] += 1
                if progress is not None:
                    progress(done[0], len(states))

    n = max(1, min(threads or os.cpu_count() or 1, 8, len(states)))
    if n == 1:
        work(states)
    else:
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(work, [states[k::n] for k in range(n)]))
    return TokenClasses(by_state, words)
