"""``oneOf`` as a plain union where its branches are provably disjoint (:func:`one_of_by_types`).

Type category by type category: proven from types, ``const``/``enum`` values, number ranges,
string automata, a required property whose values are disjoint (the usual "discriminator"
pattern) and closed objects without a common key; a category every value of which matches two
branches is left out.  A proof that fails only means "not proven": the caller then tries
complements (:mod:`.negate`), or refuses the ``oneOf``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pda import codepoint_fsm as fsm

from .context import Context
from .document import Call, Conj, Loc
from .formats import FORMATS, KNOWN_UNSUPPORTED
from .merge import Merged, merge
from .patterns import pattern_dfa, string_dfa_of
from .values import json_type

__all__ = ["one_of_by_types", "disjoint_on", "full_on", "admits", "category", "CATEGORIES"]

# ----------------------------------------------------------------------------- disjointness


def _flatten(c: Context, conj: Conj) -> list[list[Loc]]:
    plain = [a for a in conj if isinstance(a, Loc)]
    calls = [a.loc for a in conj if isinstance(a, Call)]
    if not calls:
        return [plain]
    return [plain + sub for sub in c.flat_dnf(calls)]


def _disjoint_locs(c: Context, a: list[Loc], b: list[Loc], depth: int) -> bool:
    if depth > 3:
        return False
    return all(_disjoint(c, fx, fy, depth) for fx in c.flat_dnf(a) for fy in c.flat_dnf(b))


CATEGORIES = ("null", "boolean", "object", "array", "string", "number")


def category(v: Any) -> str:
    """The type category of a JSON value (integers are numbers)."""
    t = json_type(v)
    return "number" if t == "integer" else t


def admits(m: Merged, t: str) -> bool:
    """Whether ``m``'s types let values of category ``t`` through (other keywords aside)."""
    return ("integer" if t == "number" else t) in m.types


def full_on(m: Merged, t: str) -> bool:
    """Whether *every* value of category ``t`` satisfies ``m`` (False: not proven)."""
    if m.enum is not None or not admits(m, t) or any(category(x) == t for x in m.excluded):
        return False
    if t == "number":
        return "number" in m.types and m.lo is None and m.hi is None and not m.multiples
    if t == "string":
        return m.min_len == 0 and m.max_len is None and not m.patterns and not m.not_patterns and \
            not m.not_formats and all(f not in FORMATS and f not in KNOWN_UNSUPPORTED for f, _ in m.formats)
    if t == "array":
        return not m.arr and m.min_items == 0 and m.max_items is None and not m.contains and m.unique is None \
            and not m.uneval_items
    if t == "object":
        return not m.obj and not m.required and m.min_props == 0 and m.max_props is None and not m.names \
            and not m.uneval_props
    return True


def _disjoint(c: Context, x: list[Loc], y: list[Loc], depth: int) -> bool:
    mx, my = merge(x, strict=c.strict), merge(y, strict=c.strict)
    return all(disjoint_on(c, mx, my, t, depth) is True for t in CATEGORIES)


def disjoint_on(c: Context, mx: Merged, my: Merged, t: str, depth: int = 0) -> bool | str:
    """Whether no value of category ``t`` satisfies both: True, False (not proven), or "empty"
    (objects, arrays: none but possibly the empty one)."""
    for a, b in ((mx, my), (my, mx)):
        if a.enum is not None:
            return not any(category(v) == t and c.value_ok(v, a) and c.value_ok(v, b) for v in a.enum)
    if not (admits(mx, t) and admits(my, t)):
        return True
    if t == "null":
        return False
    if t == "array":
        return _arrays_disjoint(c, mx, my, depth)
    if t == "boolean":
        return {True, False} <= {v for v in mx.excluded + my.excluded if isinstance(v, bool)}
    if t == "number":
        return _ranges_disjoint(mx, my)
    if t == "string":
        return fsm.is_empty(fsm.intersect(string_dfa_of(c, mx), string_dfa_of(c, my)))
    return _objects_disjoint(c, mx, my, depth)


def _ranges_disjoint(a: Merged, b: Merged) -> bool:
    def below(hi: tuple[Decimal, bool] | None, lo: tuple[Decimal, bool] | None) -> bool:
        if hi is None or lo is None:
            return False
        return hi[0] < lo[0] or (hi[0] == lo[0] and (hi[1] or lo[1]))

    return below(a.hi, b.lo) or below(b.hi, a.lo)


def _forbidden(c: Context, m: Merged, key: str) -> bool:
    return any(loc.schema is False for loc in c.value_locs(m, key))


def _objects_disjoint(c: Context, a: Merged, b: Merged, depth: int) -> bool | str:
    if (a.max_props is not None and a.max_props < b.min_props) or \
            (b.max_props is not None and b.max_props < a.min_props):
        return True
    for x, y in ((a, b), (b, a)):
        for key in x.required:
            if _forbidden(c, y, key):
                return True
            # x needs the key; where y's object has it too, no value may satisfy both.
            if _disjoint_locs(c, c.value_locs(x, key), c.value_locs(y, key), depth + 1):
                return True
    ka, kb = _key_dfa(c, a), _key_dfa(c, b)
    if ka is not None and kb is not None and fsm.is_empty(fsm.intersect(ka, kb)):
        # No key is allowed by both: only the empty object can satisfy both.
        return True if a.required or b.required or a.min_props or b.min_props else "empty"
    return False


def _arrays_disjoint(c: Context, a: Merged, b: Merged, depth: int) -> bool | str:
    if (a.max_items is not None and a.max_items < b.min_items) or \
            (b.max_items is not None and b.max_items < a.min_items):
        return True
    if _disjoint_locs(c, c.item_locs(a, 0), c.item_locs(b, 0), depth + 1):
        # No first item satisfies both: only the empty array can.
        return True if a.min_items or b.min_items else "empty"
    return False


def _key_dfa(c: Context, m: Merged) -> fsm.DFA | None:
    """A superset of the keys an object of ``m`` may have (None: any key)."""
    d: fsm.DFA | None = None
    for a in m.obj:
        if a.additional is None or a.additional.schema is not False:
            continue
        allowed = fsm.literal_set_dfa(k for k, loc in a.props.items() if loc.schema is not False)
        for p, loc in a.patterns:
            pd = pattern_dfa(c, p, loc.ptr)
            if pd is None:
                return None
            allowed = fsm.union(allowed, pd)
        d = allowed if d is None else fsm.intersect(d, allowed)
    return d


def one_of_by_types(c: Context, loc: Loc, branches: list[list[Conj]], context: list[Conj]) -> list[Conj] | None:
    """``oneOf`` as a union, type category by type category, when that is exact; else None.

    Per category ``t`` of the values the context allows: a branch is *full* (every ``t`` value
    satisfies it), *partial*, or absent.  Two full branches exclude ``t`` (every such value matches
    both); one full branch alone gives its values; no full branch needs the partial ones pairwise
    disjoint.  Objects that overlap only in ``{}`` lose ``{}``, which comes back when exactly one
    branch accepts it.
    """
    out: list[Conj] = []
    own = [[merge(g, strict=c.strict) for x in b for g in _flatten(c, x)] for b in branches]
    for ctx in context:
        fctx = _flatten(c, ctx)
        flats = [[f + g for x in b for f in fctx for g in _flatten(c, x)] for b in branches]
        merged = [[merge(f, strict=c.strict) for f in fs] for fs in flats]
        ctx_merged = [merge(f, strict=c.strict) for f in fctx]
        allowed: list[str] = []
        empties: set[str] = set()  # categories where branches may overlap only in {} / []
        for t in CATEGORIES:
            if not any(admits(m, t) for m in ctx_merged):
                continue
            full = [i for i in range(len(branches)) if any(full_on(m, t) for m in own[i])]
            partial = [i for i in range(len(branches)) if i not in full and any(admits(m, t) for m in merged[i])]
            if len(full) >= 2:
                continue  # every value of this category matches two branches
            if full and partial:
                return None
            for k, i in enumerate(partial):
                for j in partial[k + 1:]:
                    for mx in merged[i]:
                        for my in merged[j]:
                            got = disjoint_on(c, mx, my, t)
                            if got == "empty":
                                empties.add(t)
                            elif got is not True:
                                return None
            allowed.append(t)
        if not allowed:
            continue
        where = loc.at("oneOf")
        restrict: list[Loc] = []
        if len(allowed) < len(CATEGORIES):
            restrict.append(Loc({"type": allowed}, where, loc.base))
        for t, kw in (("object", "minProperties"), ("array", "minItems")):
            if t in empties:
                restrict.append(Loc({kw: 1}, where, loc.base))
        out += [ctx + x + restrict for b in branches for x in b]
        for t, empty in (("object", {}), ("array", [])):
            # The empty container is valid when exactly one branch takes it.
            if t in empties and sum(1 for ms in merged if any(c.value_ok(empty, m) for m in ms)) == 1:
                out.append(ctx + [Loc({"const": empty}, where, loc.base)])
    return out
