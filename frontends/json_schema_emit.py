"""From merged per-type constraints to IR: the JSON text layout of every type.

The functions here take the compiler (:class:`~.json_schema._Compiler`) as ``c`` for what needs
the whole schema: compiling sub-schemas (``c.compile``), sharing big sub-expressions as rules
(``c.share``), reporting unsupported keywords (``c.unsupported``) and the text layout
(``c.layout``).
"""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

from pda.errors import RegexError, SchemaError, UnsupportedRegexError
from pda.ir import EPSILON, NOTHING, Alt, Bytes, CharClass, Expr, Ref, Repeat, Seq, alt, chars, lit, opt, repeat, seq, star

from . import json_schema_fsm as fsm
from .json_formats import FORMATS, KNOWN_UNSUPPORTED, format_expr
from .json_numbers import number_expr, value_spellings
from .json_schema_merge import Loc, Merged, json_equal, merge, to_decimal
from .json_schema_values import member_locs
from .json_schema_strings import ANY_CHAR, dfa_to_json, spelled_except, quoted, spell, spell_expr, string_literal

if TYPE_CHECKING:
    from .json_schema import _Compiler

__all__ = ["Layout", "emit_merged", "value_literal", "string_dfa_of", "pattern_expr", "lang_dfa"]

_WS = chars([(0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20)])


class Layout:
    """Where whitespace may go, for one of the three ``whitespace`` modes."""

    def __init__(self, mode: Literal["flexible", "compact"] | int, max_ws: int | None,
                 separators: tuple[str, str] | None) -> None:
        self.mode = mode
        self.indent = mode if isinstance(mode, int) and not isinstance(mode, bool) else None
        if self.indent is not None:
            item, key = separators or (",", ": ")
        else:
            item, key = separators or (",", ":")
        self.item, self.key = item, key
        self.ws = repeat(_WS, 0, max_ws) if mode == "flexible" else EPSILON

    def pieces(self, depth: int, brackets: str) -> tuple[Expr, Expr, Expr, Expr]:
        """(open, separator, close, empty) of a container at ``depth`` (0 = the top level)."""
        o, c = brackets
        if self.mode == "flexible":
            w = self.ws
            return seq(lit(o), w), seq(w, lit(","), w), seq(w, lit(c)), seq(lit(o), w, lit(c))
        if self.indent is not None:
            inner = "\n" + " " * (self.indent * (depth + 1))
            outer = "\n" + " " * (self.indent * depth)
            return lit(o + inner), lit(self.item + inner), lit(outer + c), lit(o + c)
        return lit(o), lit(self.item), lit(c), lit(o + c)

    def colon(self) -> Expr:
        if self.mode == "flexible":
            return seq(self.ws, lit(":"), self.ws)
        return lit(self.key)


# ----------------------------------------------------------------------------- dispatch


def emit_merged(c: _Compiler, m: Merged, depth: int) -> Expr:
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


def emit_number(c: _Compiler, m: Merged, *, integer: bool) -> Expr:
    try:
        return number_expr(integer=integer, lo=m.lo, hi=m.hi, multiples=tuple(m.multiples),
                           add_rule=c.add_rule, name=c.fresh("num"))
    except fsm.FsmTooLarge:
        c.unsupported(f"multipleOf {', '.join(map(str, m.multiples))} is too large to enforce exactly",
                      m.multiple_ptr)
        return number_expr(integer=integer, lo=m.lo, hi=m.hi)


# ----------------------------------------------------------------------------- strings


def pattern_expr(c: _Compiler, pattern: str, ptr: str) -> Expr | None:
    """The decoded strings a ``pattern`` matches somewhere (None when refused and lenient)."""
    from .regex import regex_to_ir

    got = c.memo.get(("p", pattern))
    if got is not None:
        return got
    try:
        got = c.memo[("p", pattern)] = regex_to_ir(pattern, dialect="ecmascript", search=True)
        return got
    except UnsupportedRegexError as e:
        c.unsupported(f"pattern {pattern!r} uses a feature pda cannot enforce: {e.message}", ptr)
    except RegexError as e:
        raise SchemaError(f"pattern {pattern!r} is not a valid regular expression: {e.message}", pointer=ptr) from e
    return None


# A string language: its expression and its key ("p", pattern) or ("f", format) for the caches.
Lang = tuple[Expr, tuple[str, str]]


def _string_langs(c: _Compiler, m: Merged) -> list[Lang]:
    langs: list[Lang] = []
    for p, ptr in m.patterns:
        e = pattern_expr(c, p, ptr)
        if e is not None:
            langs.append((e, ("p", p)))
    for f, ptr in m.formats:
        if f in FORMATS:
            langs.append((format_expr(f), ("f", f)))
        elif f in KNOWN_UNSUPPORTED:
            c.unsupported(f"format {f!r} is not supported", ptr)
    return langs


def _string_negs(c: _Compiler, m: Merged) -> list[Lang]:
    """Languages a string must *not* be in (from a negated ``pattern`` or ``format``)."""
    out: list[Lang] = []
    for p, ptr in m.not_patterns:
        e = pattern_expr(c, p, ptr)
        if e is not None:
            out.append((e, ("p", p)))
    out += [(format_expr(f), ("f", f)) for f, _ in m.not_formats if f in FORMATS]
    return out


def lang_dfa(c: _Compiler, lang: Lang) -> fsm.DFA:
    """The automaton of a string language (built once per pattern or format)."""
    key = ("dfa",) + lang[1]
    got = c.memo.get(key)
    if got is None:
        got = c.memo[key] = fsm.from_expr(lang[0])
    return got


def _fixed_len(e: Expr) -> int | None:
    if isinstance(e, CharClass):
        return 1
    if isinstance(e, Bytes):
        return len(e.data.decode("utf-8"))
    if isinstance(e, Seq):
        total = 0
        for i in e.items:
            n = _fixed_len(i)
            if n is None:
                return None
            total += n
        return total
    if isinstance(e, Repeat) and e.max == e.min:
        n = _fixed_len(e.expr)
        return None if n is None else n * e.min
    if isinstance(e, Alt):
        lens = {_fixed_len(i) for i in e.items}
        return lens.pop() if len(lens) == 1 else None
    return None


def restrict_len(e: Expr, lo: int, hi: int | None, budget: list[int] | None = None) -> Expr | None:
    """``e`` limited to lo..hi characters by rewriting its repetition counts (alternatives of
    different lengths are distributed, up to a budget); None when that is not a simple rewrite."""
    budget = [64] if budget is None else budget
    lo = max(lo, 0)
    if lo == 0 and hi is None:
        return e
    n = _fixed_len(e)
    if n is not None:
        return e if n >= lo and (hi is None or n <= hi) else NOTHING
    if hi is not None and hi < lo:
        return NOTHING
    if isinstance(e, Alt):
        budget[0] -= len(e.items)
        parts = [restrict_len(x, lo, hi, budget) if budget[0] >= 0 else None for x in e.items]
        return None if any(p is None for p in parts) else alt(*parts)  # type: ignore[arg-type]
    if isinstance(e, Repeat):
        k = _fixed_len(e.expr)
        if not k:
            return None
        new_lo = max(e.min, -(-lo // k))
        new_hi = e.max if hi is None else (hi // k if e.max is None else min(e.max, hi // k))
        return NOTHING if new_hi is not None and new_hi < new_lo else repeat(e.expr, new_lo, new_hi)
    if not isinstance(e, Seq):
        return None
    items = list(e.items)
    var = [i for i, it in enumerate(items) if _fixed_len(it) is None]
    fixed = sum(_fixed_len(it) or 0 for it in items)
    if len(var) == 1:
        i = var[0]
        r = restrict_len(items[i], lo - fixed, None if hi is None else hi - fixed, budget)
        return None if r is None else seq(*items[:i], r, *items[i + 1:])
    shared = _share_long_repeat(items, var, fixed, lo, hi)
    if shared is not None:
        return shared
    for i in var:  # distribute a choice between lengths over the rest of the sequence
        it = items[i]
        if isinstance(it, Alt):
            budget[0] -= len(it.items)
            if budget[0] < 0:
                return None
            return restrict_len(alt(*(seq(*items[:i], x, *items[i + 1:]) for x in it.items)), lo, hi, budget)
    return None


def _share_long_repeat(items: list[Expr], var: list[int], fixed: int, lo: int, hi: int | None) -> Expr | None:
    """``A · mid · x{a,b}`` (A a choice of fixed-length alternatives, mid fixed, x one character)
    limited to at most ``hi`` characters, with the long repetition written once:
    ``(A_i · mid · x{0,d_i})_i · x{a,H}`` where ``d_i`` is how much shorter ``A_i`` is than the
    longest (or mirrored, the repetition first).  None when that is not the shape."""
    if len(var) != 2 or hi is None:
        return None
    i, j = var
    if isinstance(items[i], Repeat):
        i, j = j, i
    choice, rep = items[i], items[j]
    if not (isinstance(choice, Alt) and isinstance(rep, Repeat) and _fixed_len(rep.expr) == 1):
        return None
    lens = [_fixed_len(x) for x in choice.items]
    if any(n is None for n in lens):
        return None
    longest = max(lens)  # type: ignore[type-var]
    top = hi - fixed - longest  # the shared repetition's bound
    if top < rep.min or lo > fixed + min(lens) + rep.min or (rep.max is not None and rep.max < top + longest - min(lens)):  # type: ignore[operator]
        return None
    first, last = min(i, j), max(i, j)
    mid = items[first + 1:last]
    if i < j:  # the choice, then the repetition
        per = alt(*(seq(x, *mid, repeat(rep.expr, 0, longest - n)) for x, n in zip(choice.items, lens)))  # type: ignore[operator]
        return seq(*items[:i], per, repeat(rep.expr, rep.min, top), *items[j + 1:])
    per = alt(*(seq(repeat(rep.expr, 0, longest - n), *mid, x) for x, n in zip(choice.items, lens)))  # type: ignore[operator]
    return seq(*items[:j], repeat(rep.expr, rep.min, top), per, *items[i + 1:])


def string_dfa_of(c: _Compiler, m: Merged) -> fsm.DFA:
    """The decoded strings of ``m``'s string part, as a DFA (for property names and disjointness)."""
    if m.enum is not None:
        return fsm.literal_set_dfa(v for v in m.enum if isinstance(v, str) and c.value_ok(v, m))
    if "string" not in m.types:
        return fsm.EMPTY
    d = fsm.length_dfa(m.min_len, m.max_len)
    banned = [v for v in m.excluded if isinstance(v, str)]
    if banned:
        d = fsm.difference(d, fsm.literal_set_dfa(banned))
    for lang in _string_langs(c, m):
        d = fsm.intersect(d, lang_dfa(c, lang))
    for lang in _string_negs(c, m):
        d = fsm.difference(d, lang_dfa(c, lang))
    return d


MAX_STRING_STATES = 300


def _universal(c: _Compiler, lang: Lang) -> bool:
    """Whether a decoded-string language is every string (e.g. the pattern ``.*`` or ``(x+)?``)."""
    if lang[1][0] != "p":
        return False  # no format allows every string
    key = ("universal",) + lang[1]
    if key not in c.memo:
        try:
            d = lang_dfa(c, lang)
            c.memo[key] = d.size == 1 and d.accept[0] and fsm.complement(d).size == 0
        except fsm.FsmTooLarge:
            c.memo[key] = False
    return bool(c.memo[key])


def emit_string(c: _Compiler, m: Merged) -> Expr:
    langs = [lang for lang in _string_langs(c, m) if not _universal(c, lang)]
    negs = _string_negs(c, m)
    lo, hi = m.min_len, m.max_len
    if hi is not None and hi < lo:
        return NOTHING
    banned = [v for v in m.excluded if isinstance(v, str)]
    if not langs and not banned and not negs:
        return quoted(repeat(spell(ANY_CHAR), lo, hi))
    if len(langs) == 1 and not banned and not negs:
        if lo == 0 and hi is None:
            key = ("spelled",) + langs[0][1]
            if key not in c.memo:
                c.memo[key] = quoted(spell_expr(langs[0][0]))
            return c.memo[key]
        r = restrict_len(langs[0][0], lo, hi)
        if r is not None:
            return quoted(spell_expr(r))
    where = (m.patterns or m.formats or [("", m.enum_ptr)])[0][1]
    try:
        d = fsm.length_dfa(lo, hi)
        if banned:
            d = fsm.difference(d, fsm.literal_set_dfa(banned))
        for lang in langs:
            d = fsm.intersect(d, lang_dfa(c, lang))
        for lang in negs:
            d = fsm.difference(d, lang_dfa(c, lang))
        if d.size <= MAX_STRING_STATES:
            return quoted(dfa_to_json(d, c.add_rule, c.fresh("str")))
    except fsm.FsmTooLarge:
        pass
    c.unsupported("the string constraints (pattern, format, minLength/maxLength) are too large to combine "
                  "exactly", where)
    return quoted(spell_expr(langs[0][0])) if langs else quoted(repeat(spell(ANY_CHAR), lo, hi))


# ----------------------------------------------------------------------------- arrays


def emit_array(c: _Compiler, m: Merged, depth: int) -> Expr:
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
    rest_locs = c.checker.item_locs(m, None)
    if m.contains and m.uneval_items:
        c.unsupported("contains together with unevaluatedItems is not supported", m.uneval_items[0][1])
    open_, sep, close, empty = c.layout.pieces(depth, "[]")
    if m.contains:
        body = _contains_body(c, m, rest_locs, n_prefix, sep, depth)
        if body is not None:
            return seq(open_, body, close)
    elems = [c.compile(c.checker.item_locs(m, p), depth + 1) for p in range(n_prefix)]
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
    return alt(empty, nonempty) if lo == 0 else nonempty


MAX_UNIQUE_VALUES = 12
MAX_UNIQUE_ARRAYS = 4000


def _finite_values(c: _Compiler, locs: list[Loc]) -> list[Any] | None:
    """The values valid against every schema in ``locs`` when they are few (enum, const,
    boolean, null), deduplicated as JSON values; None otherwise."""
    vals: list[Any] = []
    try:
        conjs = c.flat_dnf(locs)
    except RecursionError:
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


def _unique_items(c: _Compiler, m: Merged, n_prefix: int, depth: int) -> Expr | None:
    """``uniqueItems`` over items drawn from small finite sets: every sequence of distinct
    values (an array's length is the number of values used so far); None when not that case."""
    lo, hi = m.min_items, m.max_items
    sets = []
    for p in list(range(n_prefix)) + [None]:
        vals = _finite_values(c, c.checker.item_locs(m, p))
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


def _contains_body(c: _Compiler, m: Merged, rest_locs: list[Loc], n_prefix: int, sep: Expr,
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


# ----------------------------------------------------------------------------- objects


def emit_object(c: _Compiler, m: Merged, depth: int) -> Expr:
    lo, hi = m.min_props, m.max_props
    if hi is not None and hi < lo:
        return NOTHING
    if hi == 0:
        return NOTHING if m.required else c.layout.pieces(depth, "{}")[3]
    open_, sep, close, empty = c.layout.pieces(depth, "{}")
    colon = c.layout.colon()
    names_dfa = None
    if m.names:
        names_dfa = c.names_dfa(m.names)
    declared: list[str] = []
    for a in m.obj:
        for k in a.props:
            if k not in declared:
                declared.append(k)
    for k in m.required:
        if k not in declared:
            declared.append(k)
    # Required names that no `properties` declares "float": they may come anywhere among the
    # undeclared members (in the order `required` lists them), when no count limits apply.
    in_props = {k for a in m.obj for k in a.props}
    floating = [k for k in m.required if k not in in_props] if lo == 0 and hi is None else []
    members: list[tuple[Expr, bool]] = []  # (member text, required)
    float_texts: list[Expr] = []
    for k in declared:
        req = k in m.required
        ok = names_dfa is None or fsm.matches(names_dfa, k)
        value = c.compile(c.value_locs(m, k), depth + 1) if ok else NOTHING
        if value == NOTHING:
            if req:
                return NOTHING
            continue
        text = c.share(seq(string_literal(k), colon, value), "prop")
        if k in floating:
            float_texts.append(text)
        else:
            members.append((text, req))
    extra = _extra_members(c, m, declared, names_dfa, colon, depth)
    if hi is not None and sum(1 for _, r in members if r) > hi:
        return NOTHING
    cap = max(1, lo, hi + 1 if hi is not None else 0)
    if c.property_order == "any" and lo == 0 and hi is None:
        # Any order: required members once each (in their relative order when their orders
        # would be too many), the others anywhere and possibly repeated (a repeated key keeps
        # its last value, which is valid anyway).
        loose = alt(*(t for t, r in members if not r), extra)
        fixed = [t for t, r in members if r] + float_texts
        if fixed:
            return _object_with_floating(c, [], fixed, c.share(loose, "any"), depth)
        if loose == NOTHING:
            return empty
        return alt(empty, seq(open_, loose, star(seq(sep, loose)), close))
    if float_texts:
        return _object_with_floating(c, members, float_texts, extra, depth)

    def extras(n: int) -> tuple[bool, Expr]:
        """Undeclared members after n members: (may be none, the non-empty part)."""
        kmin = max(0, lo - n)
        kmax = None if hi is None else hi - n
        if kmax is not None and kmax < 0:
            return False, NOTHING
        if extra == NOTHING or kmax == 0:
            return kmin == 0, NOTHING
        if kmin >= 2:
            # {"x": 1, "x": 2} would count twice, but a JSON parser keeps one member; distinct
            # names cannot be counted by a grammar
            c.unsupported("minProperties that needs two or more undeclared property names is not supported "
                          "(a repeated name would count twice)", m.min_props_ptr)
        if n == 0:
            return kmin == 0, seq(extra, repeat(seq(sep, extra), max(kmin - 1, 0), None if kmax is None else kmax - 1))
        return kmin == 0, repeat(seq(sep, extra), max(kmin, 1), kmax)

    # rest[i][n]: members i.. when n (capped) members came before, each led by a separator, as
    # (may be empty, the non-empty part).  Built from the end; only non-empty parts become rules
    # (so the core never strips the empty string out of a rule body), and only big ones (the
    # core inlines rules of up to 200 nodes, so smaller ones would be copied back anyway).
    rest: list[dict[int, tuple[bool, Expr]]] = [{} for _ in range(len(members) + 1)]
    rest[len(members)] = {n: extras(n) for n in range(1, cap + 1)}

    def tail(i: int, n: int) -> Expr:
        nullable, ne = rest[i][min(n, cap)]
        return alt(EPSILON, ne) if nullable else ne

    for i in range(len(members) - 1, -1, -1):
        text, req = members[i]
        for n in range(1, cap + 1):
            nullable, parts = False, []
            if not req:
                nullable, skip = rest[i + 1][n]
                parts.append(skip)
            if hi is None or n < hi:
                parts.append(seq(sep, text, tail(i + 1, n + 1)))
            e = alt(*parts)
            if e not in (NOTHING, EPSILON) and fsm.size_exceeds(e, 200):
                e = Ref(c.add_rule(c.fresh("obj"), e))
            rest[i][n] = (nullable, e)
    # The first member has no separator: one flat alternative per choice of the first member.
    firsts = []
    for j, (text, req) in enumerate(members):
        if hi is None or hi >= 1:
            firsts.append(seq(text, tail(j + 1, 1)))
        if req:
            break
    else:
        firsts.append(extras(0)[1])
    nullable = all(not r for _, r in members) and extras(0)[0]
    nonempty = seq(open_, alt(*firsts), close)
    return alt(empty, nonempty) if nullable else nonempty


MAX_ORDERS_WEIGHT = 50000
MAX_ORDERS_MEMBERS = 8


def weight(e: Expr, memo: dict[int, tuple[Expr, int]] | None = None, rules: dict[str, Expr] | None = None,
           _open: frozenset[str] = frozenset()) -> int:
    """A rough count of the automaton states ``e`` needs, read as a tree: a counted repetition
    costs its body times its count (``{0,1000}`` of a string character is a thousand of them);
    a call of one of ``rules`` costs that rule's body (the core inlines the rules it can)."""
    memo = {} if memo is None else memo
    if isinstance(e, Bytes):
        return len(e.data)
    if isinstance(e, Ref):
        if rules is None or e.name not in rules or e.name in _open or _recursive(e.name, rules):
            return 1  # stays a call
        got = memo.get(id(rules[e.name]))
        return got[1] if got is not None else weight(rules[e.name], memo, rules, _open | {e.name})
    if not isinstance(e, (Seq, Alt, Repeat)):
        return 1
    got = memo.get(id(e))
    if got is not None:
        return got[1]
    if isinstance(e, Repeat):
        w = weight(e.expr, memo, rules, _open) * max(e.min if e.max is None else e.max, 1)
    else:
        w = sum(weight(i, memo, rules, _open) for i in e.items)
    memo[id(e)] = (e, w)
    return w


def _recursive(name: str, rules: dict[str, Expr]) -> bool:
    """Whether rule ``name`` can reach itself (the core keeps such rules as calls)."""
    from pda.ir import refs_of

    seen, todo = set(), [name]
    while todo:
        for r in refs_of(rules.get(todo.pop(), NOTHING)):
            if r.name == name:
                return True
            if r.name not in seen:
                seen.add(r.name)
                todo.append(r.name)
    return False


def _orders_weight(members: list[Expr], xs: Expr, rules: dict[str, Expr]) -> int:
    """:func:`weight` of the automaton that lets ``members`` come in any order: one state per set
    of members still due, each with an edge per member of the set."""
    if len(members) > MAX_ORDERS_MEMBERS:
        return MAX_ORDERS_WEIGHT + 1
    memo: dict[int, tuple[Expr, int]] = {}
    ws, wx = [weight(m, memo, rules) for m in members], weight(xs, memo, rules)
    k = len(members)
    return 2 ** k * wx + 2 ** (k - 1) * sum(1 + w for w in ws) + sum(ws)


def _object_with_floating(c: _Compiler, members: list[tuple[Expr, bool]], floating: list[Expr], extra: Expr,
                          depth: int) -> Expr:
    """Declared members in order, then undeclared ones among which each floating (required,
    undeclared) member appears once: in any order when the orders, written out, stay small
    (:data:`MAX_ORDERS_WEIGHT`), else in the order given.  Only used without
    minProperties/maxProperties."""
    open_, sep, close, _ = c.layout.pieces(depth, "{}")
    xs = star(seq(sep, extra)) if extra != NOTHING else EPSILON
    if _orders_weight(floating, xs, c.rules) <= MAX_ORDERS_WEIGHT:
        # Any order of the floating members: one rule per set of members still due (shared by
        # every order that reaches it, so the size grows as 2^k, not as k!).
        memo: dict[frozenset[int], Expr] = {}

        def after(left: frozenset[int]) -> Expr:  # after at least one member, `left` still due
            if left not in memo:
                body = seq(xs, alt(*(seq(sep, floating[f], after(left - {f})) for f in sorted(left)))) \
                    if left else xs
                memo[left] = Ref(c.add_rule(c.fresh("due"), body)) if len(left) >= 2 else body
            return memo[left]

        everything = frozenset(range(len(floating)))
        led = after(everything)
        no_member_before = alt(*(seq(floating[f], after(everything - {f})) for f in sorted(everything)),
                               seq(extra, led) if extra != NOTHING else NOTHING)
    else:  # in the order given
        led = seq(*(seq(xs, sep, f) for f in floating), xs)
        after_first = seq(*(seq(xs, sep, f) for f in floating[1:]), xs)
        no_member_before = alt(seq(floating[0], after_first),
                               seq(extra, xs, sep, floating[0], after_first) if extra != NOTHING else NOTHING)
    tails: list[Expr] = [led] * (len(members) + 1)  # tails[i]: members i.., each led by a separator
    for i in range(len(members) - 1, -1, -1):
        text, req = members[i]
        taken = seq(sep, text, tails[i + 1])
        tails[i] = c.share(taken if req else alt(tails[i + 1], taken), "obj")
    firsts = []
    for j, (text, req) in enumerate(members):
        firsts.append(seq(text, tails[j + 1]))
        if req:
            break
    else:
        firsts.append(no_member_before)
    return seq(open_, alt(*firsts), close)


MAX_KEY_REGIONS = 64


def _extra_members(c: _Compiler, m: Merged, declared: list[str], names_dfa: fsm.DFA | None,
                   colon: Expr, depth: int) -> Expr:
    """Members whose key is not declared: one alternative per region of keys that share a schema."""
    patterns = [(p, loc, i) for i, a in enumerate(m.obj) for p, loc in a.patterns]
    plain = not patterns and names_dfa is None  # keys: any but the declared ones, built without automata
    base = fsm.EMPTY if plain else fsm.complement(fsm.literal_set_dfa(declared))
    if names_dfa is not None:
        base = fsm.intersect(base, names_dfa)
    # Regions of undeclared keys, each with the set of patterns its keys match (only the
    # non-empty ones: disjoint patterns give one region each, not one per subset).
    regions: list[tuple[fsm.DFA, tuple[bool, ...]]] = [(base, ())]  # (base is unused when plain)
    for p, loc, _ in patterns:
        e = pattern_expr(c, p, loc.ptr)
        d = lang_dfa(c, (e, ("p", p))) if e is not None else None
        split = []
        for keys, bits in regions:
            inside = fsm.intersect(keys, d) if d is not None else fsm.EMPTY
            outside = fsm.difference(keys, d) if d is not None else keys
            split += [(k, bits + (on,)) for k, on in ((inside, True), (outside, False)) if not fsm.is_empty(k)]
        regions = split
        if len(regions) > MAX_KEY_REGIONS:
            c.unsupported(f"patternProperties that split the property names into more than {MAX_KEY_REGIONS} "
                          "regions are not supported", m.obj[0].ptr)
            regions = regions[:MAX_KEY_REGIONS]
    parts = []
    for keys, bits in regions:
        locs = member_locs(m, lambda i: [loc for (_, loc, j), on in zip(patterns, bits) if on and j == i])
        value = c.compile(locs, depth + 1)
        if value == NOTHING:
            continue
        if plain:
            memo_key = ("except",) + tuple(sorted(declared))
            if memo_key not in c.memo:
                c.memo[memo_key] = quoted(spelled_except(declared))
            key = c.memo[memo_key]
        else:
            key = quoted(dfa_to_json(keys, c.add_rule, c.fresh("key")))
        parts.append(seq(key, colon, value))
    return c.share(alt(*parts), "extra") if parts else NOTHING


# ----------------------------------------------------------------------------- literal values


def value_literal(c: _Compiler, v: Any, depth: int) -> Expr:
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
