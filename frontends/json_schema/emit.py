"""From merged per-type constraints to IR: the dispatch by type, numbers, arrays, literal values.

The functions here take the compile :class:`~.context.Context` as ``c`` for what needs the whole
schema: compiling sub-schemas (``c.compile``), sharing big sub-expressions as rules (``c.share``),
reporting unsupported keywords (``c.unsupported``) and the text layout (``c.layout``).  Strings
are :mod:`.patterns`, objects :mod:`.objects`.
"""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

from pda.errors import FsmTooLarge, SchemaError, SchemaTooDeep
from pda.ir import EPSILON, NOTHING, Expr, alt, lit, opt, repeat, seq, star

from .context import Context
from .document import Loc
from .merge import Merged, json_equal, merge, to_decimal
from .numbers import number_expr, value_spellings
from .objects import emit_object
from .patterns import emit_string
from .strings import string_literal

__all__ = ["emit_merged", "value_literal"]


# ----------------------------------------------------------------------------- dispatch


def emit_merged(c: Context, m: Merged, depth: int) -> Expr:
    """The JSON texts satisfying every constraint of ``m``."""
    if m.enum is not None:
        return alt(*(value_literal(c, v, depth) for v in m.enum if c.value_ok(v, m)))
    t = m.types
    parts: list[Expr] = []
    if "null" in t:
        parts.append(lit("null"))
    if "boolean" in t:
        parts += [lit(n) for n, b in (("true", True), ("false", False)) if not any(x is b for x in m.excluded)]
    if "number" in t or "integer" in t:
        parts.append(emit_number(c, m, integer="number" not in t))
    if "string" in t:
        parts.append(emit_string(c, m))
    if "array" in t:
        parts.append(emit_array(c, m, depth))
    if "object" in t:
        parts.append(emit_object(c, m, depth))
    return alt(*parts)


def emit_number(c: Context, m: Merged, *, integer: bool) -> Expr:
    try:
        return number_expr(integer=integer, lo=m.lo, hi=m.hi, multiples=tuple(m.multiples),
                           add_rule=c.add_rule, name=c.fresh("num"))
    except FsmTooLarge:
        c.unsupported(f"multipleOf {', '.join(map(str, m.multiples))} is too large to enforce exactly",
                      m.multiple_ptr)
        return number_expr(integer=integer, lo=m.lo, hi=m.hi)


# ----------------------------------------------------------------------------- arrays


def emit_array(c: Context, m: Merged, depth: int) -> Expr:
    lo, hi = m.min_items, m.max_items
    if hi is not None and hi < lo:
        return NOTHING
    n_prefix = max((len(a.prefix) for a in m.arr), default=0)
    if hi is not None:
        n_prefix = min(n_prefix, hi)
    if m.unique is not None and (hi is None or hi > 1):
        unique = None if m.contains else _unique_items(c, m, n_prefix, depth)
        if unique is not None:
            return unique
        c.unsupported("uniqueItems is not supported (unless maxItems <= 1, or the items are drawn from a small "
                      "finite set: enum, const, boolean, null)", m.unique)
    rest_locs = c.item_locs(m, None)
    if m.contains and m.uneval_items:
        c.unsupported("contains together with unevaluatedItems is not supported", m.uneval_items[0][1])
    open_, sep, close, empty = c.layout.pieces(depth, "[]")
    if m.contains:
        body = _contains_body(c, m, rest_locs, n_prefix, sep, depth)
        if body is not None:
            return seq(open_, body, close)
    elems = [c.compile(c.item_locs(m, p), depth + 1) for p in range(n_prefix)]
    rest = c.compile(rest_locs, depth + 1)
    first = max(lo, 1)

    def tail(i: int) -> Expr:
        s = sep if i > 0 else EPSILON
        if hi is not None and i >= hi:
            return EPSILON
        if i < n_prefix:
            piece = seq(s, elems[i], tail(i + 1))
            return piece if i < first else opt(piece)
        need = max(first - i, 0)
        top = None if hi is None else hi - i
        if i == 0:
            return seq(rest, repeat(seq(sep, rest), max(need - 1, 0), None if top is None else top - 1))
        return repeat(seq(sep, rest), need, top)

    nonempty = seq(open_, tail(0), close)
    tail = None  # type: ignore[assignment]  # recursive closures are cycles: break them, so what they hold is freed now
    return alt(empty, nonempty) if lo == 0 else nonempty


MAX_UNIQUE_VALUES = 12
MAX_UNIQUE_ARRAYS = 4000


def _finite_values(c: Context, locs: list[Loc]) -> list[Any] | None:
    """The values valid against every schema in ``locs`` when they are few (enum, const,
    boolean, null), deduplicated as JSON values; None otherwise."""
    vals: list[Any] = []
    try:
        conjs = c.flat_dnf(locs)
    except SchemaTooDeep:
        return None
    for conj in conjs:
        mm = merge(conj, strict=c.strict)
        if mm.enum is None and not mm.types <= {"null", "boolean"}:
            return None
        for v in mm.enum if mm.enum is not None else [None, True, False]:
            if c.value_ok(v, mm) and not any(json_equal(v, w) for w in vals):
                vals.append(v)
        if len(vals) > MAX_UNIQUE_VALUES:
            return None
    return vals


def _unique_items(c: Context, m: Merged, n_prefix: int, depth: int) -> Expr | None:
    """``uniqueItems`` over items drawn from small finite sets: every sequence of distinct
    values (an array's length is the number of values used so far); None when not that case."""
    lo, hi = m.min_items, m.max_items
    sets = []
    for p in list(range(n_prefix)) + [None]:
        vals = _finite_values(c, c.item_locs(m, p))
        if vals is None:
            return None
        sets.append(vals)
    universe: list[Any] = []
    for vals in sets:
        for v in vals:
            if not any(json_equal(v, w) for w in universe):
                universe.append(v)
    if len(universe) > MAX_UNIQUE_VALUES:
        return None
    allowed = [frozenset(j for j, u in enumerate(universe) if any(json_equal(u, v) for v in vals)) for vals in sets]

    def choices(used: frozenset[int]) -> frozenset[int]:
        if hi is not None and len(used) >= hi:
            return frozenset()
        return allowed[min(len(used), n_prefix)] - used

    counts: dict[frozenset[int], int] = {}

    def count(used: frozenset[int]) -> int:  # arrays that continue from `used`
        if used not in counts:
            counts[used] = (len(used) >= lo) + sum(count(used | {j}) for j in choices(used))
        return counts[used]

    if count(frozenset()) > MAX_UNIQUE_ARRAYS:
        return None
    open_, sep, close, empty = c.layout.pieces(depth, "[]")
    texts = [value_literal(c, u, depth + 1) for u in universe]
    memo: dict[frozenset[int], Expr] = {}

    def after(used: frozenset[int]) -> Expr:  # the rest of the array after the values `used`
        if used not in memo:
            memo[used] = alt(close if len(used) >= lo else NOTHING,
                             *(seq(sep, texts[j], after(used | {j})) for j in sorted(choices(used))))
        return memo[used]

    first = alt(*(seq(texts[j], after(frozenset({j}))) for j in sorted(choices(frozenset()))))
    return alt(empty if lo == 0 else NOTHING, seq(open_, first))


def _contains_body(c: Context, m: Merged, rest_locs: list[Loc], n_prefix: int, sep: Expr,
                   depth: int) -> Expr | None:
    """Array body for ``contains`` (at least minContains matching items), or None when refused."""
    if len(m.contains) > 1 or n_prefix:
        c.unsupported("contains together with prefixItems or another contains is not supported", m.contains[0][0].ptr)
        return None
    loc, lo_c, hi_c = m.contains[0]
    if hi_c is not None and (m.max_items is None or hi_c < m.max_items):
        c.unsupported("maxContains is not supported", loc.ptr.rsplit("/", 1)[0] + "/maxContains")
        return None
    if lo_c == 0:
        return None  # contains is then always satisfied: the plain array language applies
    if m.min_items > lo_c or m.max_items is not None:
        c.unsupported("contains together with minItems/maxItems is not supported", loc.ptr)
        return None
    a = c.compile(rest_locs, depth + 1)
    hit = c.compile(rest_locs + [loc], depth + 1)
    if hit == NOTHING:
        return NOTHING
    parts = [star(seq(a, sep)), hit]
    for _ in range(lo_c - 1):
        parts += [star(seq(sep, a)), sep, hit]
    parts.append(star(seq(sep, a)))
    return seq(*parts)


# ----------------------------------------------------------------------------- literal values


def value_literal(c: Context, v: Any, depth: int) -> Expr:
    """Every text (in the current layout) of the JSON value ``v`` (an ``enum``/``const`` member)."""
    if v is None:
        return lit("null")
    if v is True:
        return lit("true")
    if v is False:
        return lit("false")
    if isinstance(v, (int, float, Decimal)):
        return value_spellings(to_decimal(v))
    if isinstance(v, str):
        return string_literal(v)
    if isinstance(v, list):
        open_, sep, close, empty = c.layout.pieces(depth, "[]")
        if not v:
            return empty
        items = [value_literal(c, x, depth + 1) for x in v]
        body = [items[0]] + [seq(sep, x) for x in items[1:]]
        return seq(open_, *body, close)
    if isinstance(v, dict):
        open_, sep, close, empty = c.layout.pieces(depth, "{}")
        if not v:
            return empty
        colon = c.layout.colon()
        members = {k: seq(string_literal(k), colon, value_literal(c, x, depth + 1)) for k, x in v.items()}
        orders = itertools.permutations(list(v)) if len(v) <= 3 else [list(v)]
        out = []
        for order in orders:
            body = [members[order[0]]] + [seq(sep, members[k]) for k in order[1:]]
            out.append(seq(open_, *body, close))
        return alt(*out)
    raise SchemaError(f"{v!r} is not a JSON value", pointer="")
