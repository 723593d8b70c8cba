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
    done: dict[str, Expr] = {}
    memo: dict[int, tuple[Expr, Expr]] = {}  # id(node) -> (node, expanded): shared subtrees once

    def expand(e: Expr) -> Expr:
        if not calls_any(e, single):
            return e  # nothing to inline below
        if isinstance(e, Ref):
            return done.get(e.name, e) if e.name in single else e
        if not isinstance(e, (Seq, Alt, Repeat)):
            return e
        got = memo.get(id(e))
        if got is not None:
            return got[1]
        if isinstance(e, Repeat):
            inner = expand(e.expr)
            out = e if inner is e.expr else repeat(inner, e.min, e.max)
        else:
            items = [expand(i) for i in e.items]
            if all(a is b for a, b in zip(items, e.items)):
                out = e  # nothing inlined below: keep the node (no rebuilding, no rehashing)
            else:
                out = seq(*items) if isinstance(e, Seq) else alt(*items)
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
    out = {n: expand(b) for n, b in rules.items() if n not in single}
    expand = None  # type: ignore[assignment]  # recursive closures are cycles: break them, so what they hold is freed now
    reached, todo = {root}, [root]
    while todo:
        for r in ref_names(out[todo.pop()]):
            if r not in reached:
                reached.add(r)
                todo.append(r)
    return {n: b for n, b in out.items() if n in reached}
