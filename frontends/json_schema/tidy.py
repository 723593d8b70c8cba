"""The whole-grammar pass of the JSON Schema frontend: :func:`inline_single_use`, the rules the
frontend made with every non-recursive rule that is called once substituted into its caller."""

from __future__ import annotations

from pda.ir import Alt, Expr, Ref, Repeat, Seq, alt, calls_any, recursive_rules, ref_counts, ref_names, repeat, seq

__all__ = ["inline_single_use"]


def inline_single_use(rules: dict[str, Expr], root: str) -> dict[str, Expr]:
    """Substitute every non-recursive rule that is called once into its caller (and drop unused
    rules), so that each remaining rule's body shows its real size: the core's inliner judges a
    rule by the size of its body, and a small body calling a big single-use rule would mislead it."""
    calls = {n: ref_counts(b) for n, b in rules.items()}
    graph = {n: set(cs) for n, cs in calls.items()}
    recursive = recursive_rules(graph)
    uses: dict[str, int] = {n: 0 for n in rules}
    for cs in calls.values():
        for r, k in cs.items():
            uses[r] = uses.get(r, 0) + k
    single = {n for n in rules if n != root and n not in recursive and uses[n] == 1}
    done: dict[str, Expr | _Rope] = {}
    memo: dict[int, tuple[Expr, Expr | _Rope]] = {}  # id(node) -> (node, expanded): shared subtrees once

    def expand(e: Expr) -> Expr | _Rope:
        if not calls_any(e, single):
            return e  # nothing to inline below
        if isinstance(e, Ref):
            return done.get(e.name, e) if e.name in single else e
        if not isinstance(e, (Seq, Alt, Repeat)):
            return e
        got = memo.get(id(e))
        if got is not None:
            return got[1]
        out: Expr | _Rope
        if isinstance(e, Repeat):
            inner = _solid(expand(e.expr))
            out = e if inner is e.expr else repeat(inner, e.min, e.max)
        else:
            items = [expand(i) for i in e.items]
            if all(a is b for a, b in zip(items, e.items)):
                out = e  # nothing inlined below: keep the node (no rebuilding, no rehashing)
            elif isinstance(e, Seq):
                out = _Rope(items)  # made a Seq once, where a whole is needed
            else:
                out = alt(*(_solid(i) for i in items))
        memo[id(e)] = (e, out)
        return out

    # Expand single-use rules callees first (iterative post-order), so no recursion crosses rules.
    for start in single:
        if start in done:
            continue
        stack = [(start, False)]
        while stack:
            name, ready = stack.pop()
            if name in done:
                continue
            if ready:
                done[name] = expand(rules[name])
                continue
            stack.append((name, True))
            stack.extend((d, False) for d in graph[name] if d in single and d not in done)
    out = {n: _solid(expand(b)) for n, b in rules.items() if n not in single}
    expand = None  # type: ignore[assignment]  # recursive closures are cycles: break them, so what they hold is freed now
    reached, todo = {root}, [root]
    while todo:
        for r in ref_names(out[todo.pop()]):
            if r not in reached:
                reached.add(r)
                todo.append(r)
    return {n: b for n, b in out.items() if n in reached}


class _Rope:
    """A sequence whose parts are expressions and other ropes, not yet made one :class:`Seq`.

    Inlining a chain of single-use rules, each ending with a call of the next (the members of a
    big object), made each rule's body a Seq holding the rest of the chain, flattened again at
    every step: quadratic (1.3 s for 2,000 properties).  A rope is made a Seq once, by
    :func:`_solid`: the same Seq as :func:`pda.ir.seq` nested level by level would give (it
    flattens and merges adjacent literals, which does not depend on the nesting)."""

    __slots__ = ("parts", "whole")

    def __init__(self, parts: list[Expr | _Rope]) -> None:
        self.parts = parts
        self.whole: Expr | None = None


def _solid(e: Expr | _Rope) -> Expr:
    """``e``, or the Seq of a rope (made once)."""
    if not isinstance(e, _Rope):
        return e
    if e.whole is None:
        items: list[Expr] = []
        stack: list[tuple[list[Expr | _Rope], int]] = [(e.parts, 0)]
        while stack:  # the leaves of the rope in order, without recursion
            parts, i = stack.pop()
            while i < len(parts):
                p = parts[i]
                i += 1
                if isinstance(p, _Rope):
                    if p.whole is not None:
                        items.append(p.whole)
                    else:
                        stack.append((parts, i))
                        parts, i = p.parts, 0
                else:
                    items.append(p)
        e.whole = seq(*items)
    return e.whole
