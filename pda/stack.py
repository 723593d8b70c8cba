"""The persistent stack arena: hash-consed nodes of a graph-structured stack (GSS).

A node is ``(state, parents)``: ``state`` is the state a rule returns to, ``parents`` the set of
nodes below it (``BOTTOM`` for the root level), as a sorted tuple of ints: one the garbage
collector stops tracking, where a frozenset (and every tuple holding one) stays tracked for good.
Stacks that share a top state are merged into one node whose parents are the union (Tomita's
GSS), so an ambiguous grammar costs work polynomial in the input, never exponential.  Nodes are
immutable and hash-consed: the same (state, parents) is always the same id, and every node
carries an xxhash signature of its whole graph below, so equal stacks have equal ids and equal
signatures across matchers of one arena.
"""

from __future__ import annotations

import threading

import xxhash

from .errors import LimitExceededError

__all__ = ["BOTTOM", "StackArena", "DEFAULT_MAX_STACK_DEPTH"]

BOTTOM = -1
DEFAULT_MAX_STACK_DEPTH = 10_000


class StackArena:
    """Interns GSS nodes.  Append-only: a node id stays valid for the arena's life."""

    __slots__ = ("_ids", "state", "parents", "depth", "signature", "max_depth", "_lock")

    def __init__(self, max_depth: int = DEFAULT_MAX_STACK_DEPTH) -> None:
        self._ids: dict[tuple[int, tuple[int, ...]], int] = {}
        self.state: list[int] = []
        self.parents: list[tuple[int, ...]] = []
        self.depth: list[int] = []
        self.signature: list[int] = []
        self.max_depth = max_depth
        self._lock = threading.Lock()  # forks of a matcher share the arena across threads

    def __len__(self) -> int:
        return len(self.state)

    def node(self, state: int, parents: tuple[int, ...]) -> int:
        """The id of node (state, parents), created on first use (atomically: threads that make the
        same node at once get the same id)."""
        key = (state, parents)
        got = self._ids.get(key)
        if got is not None:
            return got
        with self._lock:
            return self._make(key, state, parents)

    def _make(self, key: tuple[int, tuple[int, ...]], state: int, parents: tuple[int, ...]) -> int:
        got = self._ids.get(key)
        if got is not None:
            return got
        depth = 1 + max((self.depth[p] for p in parents if p != BOTTOM), default=0)
        if depth > self.max_depth:
            raise LimitExceededError("max_stack_depth", self.max_depth, "the text nests rules too deeply")
        h = xxhash.xxh64_intdigest(
            b"".join(x.to_bytes(8, "little", signed=True) for x in
                     [state, *sorted(self.signature[p] if p != BOTTOM else -1 for p in parents)])
        )
        nid = len(self.state)
        self._ids[key] = nid
        self.state.append(state)
        self.parents.append(parents)
        self.depth.append(depth)
        self.signature.append(h - (1 << 63))
        return nid
