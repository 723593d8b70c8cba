"""A plain-Python definition of :func:`pda.token_walk.walk_tokens`, for tests to compare the kernel with.

It shares nothing with the kernel but the automaton's arrays and :func:`pda.precompute.return_sites`:
no trie, no hash-consed stack nodes, no work shared between tokens.  Each token is walked on its
own, over plain sets of *threads* ``(state, stack, cx)``:

* ``stack`` is a tuple of return states, bottom first (``()`` is the bottom of the walk's frame);
* ``cx`` is 0 for a thread still inside the frame (or on the real stack it was given), 1 for a
  *context thread*: one that left the frame through a return site of its rule (``expand``).

The closure of a set of threads adds, until nothing changes, for every thread ``(s, stack, cx)``:

* at an end state (``is_end[s]``) with a non-empty stack: the pop ``(stack[-1], stack[:-1], cx)``;
* at an end state with an empty stack, when ``expand``: ``(t, (), 1)`` for every return site ``t``
  of the state's rule; unless the rule is in ``escape_rules``: then the thread *escapes* instead
  (the frame may be left here, and what follows is up to the caller; this holds for context
  threads too: they have empty stacks); without ``expand``: nothing, and no escape;
* for every call edge ``s -r-> t``: the push ``(rule_start[r], stack + (t,), cx)``.

The thread itself always stays.  A byte ``b`` moves every thread with ``trans[s, byte_class[b]] >= 0``
there (the others die), then the closure is taken.  A token is

* ``TOKEN_ACCEPTED`` when, after all its bytes, some thread has ``cx == 0``;
* else ``TOKEN_UNCERTAIN`` when some (context) thread is left, or when a thread escaped after any
  number of the token's bytes (none and all included), whatever the bytes after that are;
* else ``TOKEN_REJECTED``.

With a real stack and ``expand=False`` this is the run-time check: accepted exactly when the
token's bytes can be consumed on that stack (popping into it), as :class:`pda.walker.Walker` says.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .automaton import Automaton
from .token_walk import TOKEN_ACCEPTED, TOKEN_REJECTED, TOKEN_UNCERTAIN
from .precompute import return_sites

__all__ = ["ReferenceWalk", "ClosureTooLarge", "walk_tokens_reference"]

Thread = tuple[int, tuple[int, ...], int]  # (state, return states bottom first, cx)

_MAX_THREADS = 1_000_000  # a closure this big means a bug (left recursion), not a slow grammar


class ClosureTooLarge(RuntimeError):
    """A closure grew past the walk's ``max_threads`` (stacks are not shared here, so a highly
    ambiguous grammar can make thread sets grow exponentially with the token's length)."""
_MEMO_LIMIT = 200_000


class ReferenceWalk:
    """The closure and the byte step of one (automaton, expand, escape_rules), on thread sets.

    ``closure`` returns the closed set and whether some thread escaped while closing it.  ``step``
    remembers its results (it is a pure function of the thread set and the byte), so that walking
    many tokens that start alike stays affordable; nothing else is shared between tokens."""

    def __init__(self, aut: Automaton, expand: bool, escape_rules: Iterable[int] = frozenset(), *,
                 max_threads: int = _MAX_THREADS) -> None:
        self.expand = expand
        self.max_threads = max_threads
        self.escape_rules = frozenset(int(r) for r in escape_rules)
        self.trans = aut.trans.tolist()
        self.byte_class = aut.byte_class.tolist()
        self.is_end = aut.is_end.tolist()
        self.state_rule = aut.state_rule.tolist()
        self.rule_start = aut.rule_start.tolist()
        self.calls = [aut.calls(s) for s in range(aut.num_states)]
        ptr, flat = return_sites(aut)
        self.returns = [flat[ptr[r]:ptr[r + 1]].tolist() for r in range(len(aut.rule_names))]
        self._memo: dict[tuple[frozenset[Thread], int], tuple[frozenset[Thread], bool]] = {}

    def closure(self, threads: Iterable[Thread]) -> tuple[frozenset[Thread], bool]:
        done: set[Thread] = set()
        todo = list(threads)
        escaped = False
        while todo:
            th = todo.pop()
            if th in done:
                continue
            done.add(th)
            if len(done) > self.max_threads:
                raise ClosureTooLarge(f"a closure of more than {self.max_threads} threads")
            s, stack, cx = th
            if self.is_end[s]:
                if stack:
                    todo.append((stack[-1], stack[:-1], cx))
                elif self.expand:
                    rule = self.state_rule[s]
                    if rule in self.escape_rules:
                        escaped = True
                    else:
                        todo.extend((t, (), 1) for t in self.returns[rule])
            for rule, ret in self.calls[s]:
                todo.append((self.rule_start[rule], stack + (ret,), cx))
        return frozenset(done), escaped

    def step(self, threads: frozenset[Thread], byte: int) -> tuple[frozenset[Thread], bool]:
        got = self._memo.get((threads, byte))
        if got is None:
            c = self.byte_class[byte]
            moved = []
            for s, stack, cx in threads:
                t = self.trans[s][c]
                if t >= 0:
                    moved.append((t, stack, cx))
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            got = self._memo[(threads, byte)] = self.closure(moved)
        return got

    def start(self, state: int, stack: Sequence[int]) -> tuple[frozenset[Thread], bool]:
        return self.closure([(int(state), tuple(int(x) for x in stack), 0)])

    def classify(self, start: tuple[frozenset[Thread], bool], token: bytes) -> int:
        """The TOKEN_* code of ``token`` from a :meth:`start` closure."""
        threads, escaped = start
        for b in token:
            if not threads:
                break
            threads, esc = self.step(threads, b)
            escaped |= esc
        if any(cx == 0 for _, _, cx in threads):
            return TOKEN_ACCEPTED
        if threads or escaped:
            return TOKEN_UNCERTAIN
        return TOKEN_REJECTED


def walk_tokens_reference(aut: Automaton, token_bytes: list[bytes], start_state: int,
                          stack: Sequence[int] | np.ndarray, expand: bool,
                          escape_rules: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """The TOKEN_* code of every token in ``token_bytes``, walked from ``start_state`` over ``stack``
    (return states, bottom first) as :func:`pda.token_walk.walk_tokens` defines it (see the module
    docstring).  Slow (Python sets, one token at a time): for tests."""
    walk = ReferenceWalk(aut, expand, escape_rules)
    start = walk.start(start_state, np.asarray(stack).tolist())
    return [walk.classify(start, tok) for tok in token_bytes]
