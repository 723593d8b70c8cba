"""Graph helpers shared by the grammar passes (:mod:`pda.normalize`, :mod:`pda.dfa_to_ir`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

__all__ = ["strongly_connected"]

N = TypeVar("N", bound=Any)


def strongly_connected(graph: Mapping[N, Iterable[N]]) -> list[list[N]]:
    """The strongly connected components of ``graph`` (node -> successors; a successor that is no key
    of it is ignored), iterative Tarjan, in reverse topological order (a component after those it
    reaches)."""
    index: dict[N, int] = {}
    low: dict[N, int] = {}
    on: set[N] = set()
    stack: list[N] = []
    out: list[list[N]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(comp)
    return out
