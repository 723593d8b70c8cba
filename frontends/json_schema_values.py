"""Checking single JSON values against merged constraints, and proving schemas disjoint.

Two jobs need the schema's meaning on concrete values rather than on texts:

* ``enum``/``const`` members are emitted only when they also satisfy the sibling keywords
  (``{"type": "string", "enum": ["a", 1]}`` allows only ``"a"``): :meth:`ValueChecker.check_merged`.
* ``oneOf`` becomes a plain union where no value can match two branches, type category by
  type category (:func:`one_of_by_types`): proven from types, ``const``/``enum`` values, number
  ranges, string automata, a required property whose values are disjoint (the usual
  "discriminator" pattern) and closed objects without a common key; a category every value of
  which matches two branches is left out.  A proof that fails only means "not proven": the
  caller then tries complements, or refuses the ``oneOf``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any, Callable

from pda.errors import SchemaError

from . import json_schema_fsm as fsm
from .json_formats import FORMATS, KNOWN_UNSUPPORTED, format_expr
from .json_schema_merge import Loc, Merged, json_equal, json_key, merge, to_decimal

if TYPE_CHECKING:
    from .json_schema import Conj, _Compiler

__all__ = ["ValueChecker", "json_type", "one_of_by_types"]


def json_type(v: Any) -> str:
    """The JSON Schema type name of a Python JSON value ('integer' for integral numbers)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, (float, Decimal)):
        return "integer" if to_decimal(v) == to_decimal(v).to_integral_value() else "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    raise SchemaError(f"{v!r} is not a JSON value")


def member_locs(m: Merged, hits: Callable[[int], list[Loc]]) -> list[Loc]:
    """The schemas a member's value must satisfy, given the ones that name it in each object
    schema of ``m`` (``hits(i)``: matching ``properties``/``patternProperties`` of ``m.obj[i]``):
    those, or that schema's ``additionalProperties`` when none names it, then the
    ``unevaluatedProperties`` of the schemas that evaluated none."""
    locs: list[Loc] = []
    evaluators = []
    for i, a in enumerate(m.obj):
        got = hits(i)
        if got:
            locs += got
            evaluators.append(a.scope)
        elif a.additional is not None:
            locs.append(a.additional)
            evaluators.append(a.scope)
    return locs + unevaluated(m.uneval_props, evaluators)


def unevaluated(owners: list[tuple[Loc, str, tuple[str, ...]]], evaluators: list[tuple[str, ...]]) -> list[Loc]:
    """The ``unevaluated*`` schemas that apply to a member which the atoms with the given scopes
    evaluate: those whose object sees none of those atoms and holds no nested ``unevaluated*``
    (which evaluates every member it sees)."""
    out = []
    for u, ptr, _ in owners:
        if any(ptr in scope for scope in evaluators):
            continue
        if any(other != ptr and ptr in scope for _, other, scope in owners):
            continue
        out.append(u)
    return out


class ValueChecker:
    """Validates Python JSON values against the compiler's schemas (a small exact validator)."""

    def __init__(self, c: _Compiler) -> None:
        self.c = c
        self._enums: dict[int, tuple[list[Any], set[Any]]] = {}  # id(enum list) -> (it, its keys)

    def _enum_keys(self, enum: list[Any]) -> set[Any]:
        got = self._enums.get(id(enum))
        if got is None or got[0] is not enum:
            got = self._enums[id(enum)] = (enum, {json_key(e) for e in enum})
        return got[1]

    def _pattern_dfa(self, pattern: str, ptr: str) -> fsm.DFA | None:
        from .json_schema_emit import lang_dfa, pattern_expr

        e = pattern_expr(self.c, pattern, ptr)
        return None if e is None else lang_dfa(self.c, (e, ("p", pattern)))

    def _format_dfa(self, name: str, ptr: str) -> fsm.DFA | None:
        from .json_schema_emit import lang_dfa

        if name in KNOWN_UNSUPPORTED:
            self.c.unsupported(f"format {name!r} is not supported", ptr)
        if name not in FORMATS:
            return None
        return lang_dfa(self.c, (format_expr(name), ("f", name)))

    def pattern_matches(self, pattern: str, ptr: str, text: str) -> bool:
        d = self._pattern_dfa(pattern, ptr)
        return True if d is None else fsm.matches(d, text)

    def validate(self, v: Any, locs: list[Loc], depth: int = 0) -> bool:
        """Whether ``v`` is valid against every schema in ``locs``."""
        if depth > 64:
            raise RecursionError("value nesting too deep")
        return any(self.check_merged(v, merge(conj, strict=self.c.strict), depth)
                   for conj in self.c.flat_dnf(locs))

    def value_locs(self, m: Merged, key: str) -> list[Loc]:
        """The schemas the value of property ``key`` must satisfy in an object of ``m``."""

        def hits(i: int) -> list[Loc]:
            a = m.obj[i]
            got = [loc for p, loc in a.patterns if self.pattern_matches(p, loc.ptr, key)]
            return ([a.props[key]] if key in a.props else []) + got

        return member_locs(m, hits)

    def item_locs(self, m: Merged, i: int | None) -> list[Loc]:
        """The schemas item ``i`` of an array of ``m`` must satisfy (None: every item after the
        longest prefix)."""
        locs: list[Loc] = []
        evaluators = []
        for a in m.arr:
            if i is not None and i < len(a.prefix):
                locs.append(a.prefix[i])
            elif a.rest is not None:
                locs.append(a.rest)
            else:
                continue
            evaluators.append(a.scope)
        return locs + unevaluated(m.uneval_items, evaluators)

    def check_merged(self, v: Any, m: Merged, depth: int = 0) -> bool:
        """Whether the value ``v`` satisfies every constraint of ``m``."""
        if m.enum is not None and json_key(v) not in self._enum_keys(m.enum):
            return False
        if any(json_equal(v, x) for x in m.excluded):
            return False
        t = json_type(v)
        if t not in m.types:
            return False
        if t in ("integer", "number"):
            return self._number_ok(to_decimal(v), m)
        if t == "string":
            return self._string_ok(v, m)
        if t == "array":
            return self._array_ok(v, m, depth)
        if t == "object":
            return self._object_ok(v, m, depth)
        return True

    def _number_ok(self, d: Decimal, m: Merged) -> bool:
        if m.lo is not None and (d < m.lo[0] or (m.lo[1] and d == m.lo[0])):
            return False
        if m.hi is not None and (d > m.hi[0] or (m.hi[1] and d == m.hi[0])):
            return False
        return all(d % k == 0 for k in m.multiples)

    def _string_ok(self, s: str, m: Merged) -> bool:
        if len(s) < m.min_len or (m.max_len is not None and len(s) > m.max_len):
            return False
        if not all(self.pattern_matches(p, ptr, s) for p, ptr in m.patterns):
            return False
        for f, ptr in m.formats:
            d = self._format_dfa(f, ptr)
            if d is not None and not fsm.matches(d, s):
                return False
        if any(self.pattern_matches(p, ptr, s) for p, ptr in m.not_patterns):
            return False
        for f, ptr in m.not_formats:
            d = self._format_dfa(f, ptr)
            if d is not None and fsm.matches(d, s):
                return False
        return True

    def _array_ok(self, v: list[Any], m: Merged, depth: int) -> bool:
        if len(v) < m.min_items or (m.max_items is not None and len(v) > m.max_items):
            return False
        if m.unique is not None and any(json_equal(a, b) for i, a in enumerate(v) for b in v[i + 1:]):
            return False
        for i, item in enumerate(v):
            locs = self.item_locs(m, i)
            if locs and not self.validate(item, locs, depth + 1):
                return False
        for loc, lo, hi in m.contains:
            n = sum(1 for item in v if self.validate(item, [loc], depth + 1))
            if n < lo or (hi is not None and n > hi):
                return False
        return True

    def _object_ok(self, v: dict[str, Any], m: Merged, depth: int) -> bool:
        if len(v) < m.min_props or (m.max_props is not None and len(v) > m.max_props):
            return False
        if any(k not in v for k in m.required):
            return False
        for k, x in v.items():
            if m.names and not self.validate(k, m.names, depth + 1):
                return False
            locs = self.value_locs(m, k)
            if locs and not self.validate(x, locs, depth + 1):
                return False
        return True


# ----------------------------------------------------------------------------- disjointness


def _flatten(c: _Compiler, conj: Conj) -> list[list[Loc]]:
    from .json_schema import _Call

    plain = [a for a in conj if isinstance(a, Loc)]
    calls = [a.loc for a in conj if isinstance(a, _Call)]
    if not calls:
        return [plain]
    return [plain + sub for sub in c.flat_dnf(calls)]


def _disjoint_locs(c: _Compiler, a: list[Loc], b: list[Loc], depth: int) -> bool:
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


def _disjoint(c: _Compiler, x: list[Loc], y: list[Loc], depth: int) -> bool:
    mx, my = merge(x, strict=c.strict), merge(y, strict=c.strict)
    return all(disjoint_on(c, mx, my, t, depth) is True for t in CATEGORIES)


def disjoint_on(c: _Compiler, mx: Merged, my: Merged, t: str, depth: int = 0) -> bool | str:
    """Whether no value of category ``t`` satisfies both: True, False (not proven), or "empty"
    (objects, arrays: none but possibly the empty one)."""
    from .json_schema_emit import string_dfa_of

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


def _forbidden(c: _Compiler, m: Merged, key: str) -> bool:
    return any(loc.schema is False for loc in c.value_locs(m, key))


def _objects_disjoint(c: _Compiler, a: Merged, b: Merged, depth: int) -> bool | str:
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


def _arrays_disjoint(c: _Compiler, a: Merged, b: Merged, depth: int) -> bool | str:
    if (a.max_items is not None and a.max_items < b.min_items) or \
            (b.max_items is not None and b.max_items < a.min_items):
        return True
    if _disjoint_locs(c, c.checker.item_locs(a, 0), c.checker.item_locs(b, 0), depth + 1):
        # No first item satisfies both: only the empty array can.
        return True if a.min_items or b.min_items else "empty"
    return False


def _key_dfa(c: _Compiler, m: Merged) -> fsm.DFA | None:
    """A superset of the keys an object of ``m`` may have (None: any key)."""
    d: fsm.DFA | None = None
    for a in m.obj:
        if a.additional is None or a.additional.schema is not False:
            continue
        allowed = fsm.literal_set_dfa(k for k, loc in a.props.items() if loc.schema is not False)
        for p, loc in a.patterns:
            pd = c.checker._pattern_dfa(p, loc.ptr)
            if pd is None:
                return None
            allowed = fsm.union(allowed, pd)
        d = allowed if d is None else fsm.intersect(d, allowed)
    return d


def one_of_by_types(c: _Compiler, loc: Loc, branches: list[list[Conj]], context: list[Conj]) -> list[Conj] | None:
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
            if t in empties and sum(1 for ms in merged if any(c.checker.check_merged(empty, m) for m in ms)) == 1:
                out.append(ctx + [Loc({"const": empty}, where, loc.base)])
    return out
