"""Small whole-schema and whole-grammar passes of the JSON Schema frontend.

* :func:`draft4_ids` — a draft-03/04 document respelled so that one code path resolves
  references for every draft (those drafts say ``id`` where later ones say ``$id``);
* :func:`inline_single_use` — the rules the frontend made, with every non-recursive rule that is
  called once substituted into its caller.
"""

from __future__ import annotations

from typing import Any

from pda.ir import Alt, Expr, Ref, Repeat, Seq, alt, refs_of, repeat, seq

__all__ = ["draft4_ids", "inline_single_use"]

_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_SUBSCHEMA_ONE = ("additionalProperties", "additionalItems", "items", "contains", "propertyNames", "not", "if",
                  "then", "else", "unevaluatedItems", "unevaluatedProperties")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")


def draft4_ids(s: Any) -> Any:
    """A draft-03/04 document with its ``id`` keywords spelled ``$id`` (and its ``$id``, which
    those drafts do not know, dropped), so one code path resolves references for every draft."""
    if not isinstance(s, dict):
        return s
    out = {k: v for k, v in s.items() if k != "$id"}
    if isinstance(s.get("id"), str):
        out["$id"] = s["id"]
    for kw in _SUBSCHEMA_MAPS:
        if isinstance(s.get(kw), dict):
            out[kw] = {k: draft4_ids(v) for k, v in s[kw].items()}
    for kw in _SUBSCHEMA_ONE:
        if isinstance(s.get(kw), dict):
            out[kw] = draft4_ids(s[kw])
    for kw in _SUBSCHEMA_LISTS:
        if isinstance(s.get(kw), list):
            out[kw] = [draft4_ids(v) for v in s[kw]]
    return out


def inline_single_use(rules: dict[str, Expr], root: str) -> dict[str, Expr]:
    """Substitute every non-recursive rule that is called once into its caller (and drop unused
    rules), so that each remaining rule's body shows its real size: the core's inliner judges a
    rule by the size of its body, and a small body calling a big single-use rule would mislead it."""
    graph = {n: {r.name for r in refs_of(b)} for n, b in rules.items()}
    recursive: set[str] = set()
    for name in rules:  # a rule is recursive when it reaches itself
        seen, todo = set(), list(graph[name])
        while todo:
            x = todo.pop()
            if x == name:
                recursive.add(name)
                break
            if x not in seen and x in graph:
                seen.add(x)
                todo.extend(graph[x])
    uses: dict[str, int] = {n: 0 for n in rules}
    for b in rules.values():
        for r in refs_of(b):
            uses[r.name] = uses.get(r.name, 0) + 1
    single = {n for n in rules if n != root and n not in recursive and uses[n] == 1}
    done: dict[str, Expr] = {}

    def expand(e: Expr) -> Expr:
        if isinstance(e, Ref):
            return done.get(e.name, e) if e.name in single else e
        if isinstance(e, Seq):
            return seq(*(expand(i) for i in e.items))
        if isinstance(e, Alt):
            return alt(*(expand(i) for i in e.items))
        if isinstance(e, Repeat):
            return repeat(expand(e.expr), e.min, e.max)
        return e

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
    reached, todo = {root}, [root]
    while todo:
        for r in refs_of(out[todo.pop()]):
            if r.name not in reached:
                reached.add(r.name)
                todo.append(r.name)
    return {n: b for n, b in out.items() if n in reached}
