"""The linear stacks below a top of the graph-structured stack, and its signatures.

A top's parents (:mod:`pda.stack`) may branch, so below a top there are one or more *linear
stacks*: its return-state paths down to the bottom.  The token walks take one linear stack each
(:mod:`pda.token_walk`), and the mask cache keys a top by its *signature*: the set of its
return-state paths of a given length (:mod:`pda.matcher`).  :class:`StackPaths` gives both for
the tops of one stack arena, and remembers the linear stacks per arena node (a matcher's tops move
a frame or two between tokens).
"""

from __future__ import annotations

import numpy as np

from .stack import BOTTOM, StackArena

__all__ = ["StackPaths", "MAX_STACK_PATHS"]

MAX_STACK_PATHS = 64  # linear stacks (or signature paths) enumerated per top before giving up (None)
LINE_MEMO_LIMIT = 1 << 14  # arena nodes whose linear stacks are remembered (per stack space)


class StackPaths:
    """The linear stacks and signatures below the tops of one :class:`~pda.stack.StackArena`
    (shared by the matchers of a :class:`~pda.stack_space.StackSpace`: entries are stored whole)."""

    def __init__(self, arena: StackArena) -> None:
        self.arena = arena
        self._lines: dict[int, np.ndarray] = {}  # arena node -> its linear stack

    def signature(self, parents: tuple[int, ...], depth: int) -> tuple[tuple[int, ...], ...] | None:
        """The return-state paths of length ``depth`` below a top (shorter ones end in -1, the
        bottom), sorted; None when there are more than ``MAX_STACK_PATHS``."""
        if depth == 0:
            return ()
        arena = self.arena
        out: set[tuple[int, ...]] = set()
        todo: list[tuple[tuple[int, ...], tuple[int, ...]]] = [(parents, ())]
        while todo:
            ps, above = todo.pop()
            for p in ps:
                if p == BOTTOM:
                    out.add(above + (-1,))
                    continue
                path = above + (arena.state[p],)
                if len(path) >= depth:
                    out.add(path)
                else:
                    todo.append((arena.parents[p], path))
            if len(out) + len(todo) > MAX_STACK_PATHS:
                return None
        return tuple(sorted(out))

    def paths(self, parents: tuple[int, ...]) -> list[np.ndarray] | None:
        """Every linear stack (return states, bottom first) below a top; None when too many.

        A linear stack (one parent per node, the usual case) is remembered per arena node: the next
        token's top usually sits one frame above or below a node met before, so only the frames
        above that node are read (a walk down a JSON document's nesting took 14 us a call).  The
        arrays are shared: callers must not write to them (they stay writeable, as numba's kernels
        were compiled for writeable arrays)."""
        arena = self.arena
        lines = self._lines
        top = next(iter(parents)) if len(parents) == 1 else BOTTOM
        if top != BOTTOM:
            got = lines.get(top)
            if got is not None:
                return [got]
        line: list[int] = []  # states from the top down
        while len(parents) == 1:
            (p,) = parents
            if p == BOTTOM:
                below = None
                break
            below = lines.get(p)
            if below is not None:
                break
            line.append(arena.state[p])
            parents = arena.parents[p]
        else:
            return self._branching(parents, line)
        path = np.array(line[::-1], dtype=np.int32)
        if below is not None:
            path = np.concatenate((below, path))
        if top != BOTTOM:
            if len(lines) >= LINE_MEMO_LIMIT:
                lines.clear()
            lines[top] = path
        return [path]

    def _branching(self, parents: tuple[int, ...], line: list[int]) -> list[np.ndarray] | None:
        """The linear stacks below ``parents`` (several), each under the frames ``line`` (top
        first); None when there are more than ``MAX_STACK_PATHS``."""
        arena = self.arena
        paths: list[list[int]] = []
        todo: list[tuple[tuple[int, ...], list[int]]] = [(parents, line)]
        while todo:
            ps, above = todo.pop()
            for p in ps:
                if p == BOTTOM:
                    paths.append(above[::-1])
                else:
                    todo.append((arena.parents[p], above + [arena.state[p]]))
                if len(paths) + len(todo) > MAX_STACK_PATHS:
                    return None
        return [np.array(p, dtype=np.int32) for p in paths]
