"""Exact languages of JSON numbers for ``minimum``/``maximum``/``exclusive*``/``multipleOf``/``integer``.

Every language here is a set of JSON number *texts* (``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?``)
whose *values* satisfy the constraint, compared exactly as decimals (never as binary floats).

What is accepted, precisely:

* No constraint: every JSON number; ``integer`` alone: ``-?INT(\\.0+)?([eE]\\+?[0-9]+)?`` (an integer
  mantissa with zero fraction and a non-negative exponent is always an integer; ``1.5e1`` is an
  integer too but is not accepted).
* With bounds, plain decimals (no exponent) are accepted exactly: every text whose value is in
  range, including ``-0``, ``1.50`` and friends.  Exponent forms are accepted exactly when the
  mantissa is normalised (``[1-9](\\.[0-9]+)?``, which is what ``repr(float)`` and JavaScript print)
  or zero; other exponent spellings (``15e-1``) are not accepted.  ``integer`` with bounds accepts
  ``-?INT(\\.0+)?``.
* With ``multipleOf``, only plain decimals (no exponent) are accepted, exactly.
"""

from __future__ import annotations

from decimal import Decimal, localcontext
from typing import Callable

from pda.ir import EPSILON, NOTHING, Expr, alt, chars, lit, opt, plus, repeat, seq, star

from pda import codepoint_fsm as fsm
from pda.dfa_to_ir import to_expr
from .strings import digit_range

__all__ = ["Bound", "number_expr", "uint_range", "value_spellings"]

Bound = tuple[Decimal, bool]  # (value, exclusive)

DIGIT = chars([(0x30, 0x39)])
NZ = chars([(0x31, 0x39)])
INT = alt(lit("0"), seq(NZ, star(DIGIT)))
FRAC = seq(lit("."), plus(DIGIT))
EXP = seq(chars([(0x45, 0x45), (0x65, 0x65)]), opt(chars([(0x2B, 0x2B), (0x2D, 0x2D)])), plus(DIGIT))
UNSIGNED = seq(INT, opt(FRAC))  # plain decimal, no sign, no exponent
ZERO = seq(lit("0"), opt(seq(lit("."), plus(lit("0")))))
_E = chars([(0x45, 0x45), (0x65, 0x65)])
MAX_MULTIPLE_STATES = 5000


def any_number(integer: bool) -> Expr:
    if integer:
        return seq(opt(lit("-")), INT, opt(seq(lit("."), plus(lit("0")))),
                   opt(seq(_E, opt(lit("+")), plus(DIGIT))))
    return seq(opt(lit("-")), INT, opt(FRAC), opt(EXP))


def uint_range(lo: int, hi: int | None) -> Expr:
    """Canonical unsigned integers (no leading zeros) with value in lo..hi (hi=None: unbounded)."""
    lo = max(lo, 0)
    if hi is not None and lo > hi:
        return NOTHING
    parts = []
    width = len(str(lo))
    top_width = len(str(hi)) if hi is not None else width
    for w in range(width, top_width + 1):
        a = max(lo, 10 ** (w - 1) if w > 1 else 0)
        b = 10 ** w - 1 if hi is None else min(hi, 10 ** w - 1)
        parts.append(digit_range(a, b, w))
    if hi is None:
        parts.append(seq(NZ, repeat(DIGIT, width, None)))
    return alt(*parts)


# ----------------------------------------------------------------------------- unsigned comparisons


def _split_decimal(c: Decimal) -> tuple[int, str]:
    """Integer part and fraction digits (no trailing zeros) of a non-negative decimal."""
    sign, digits, exp = c.as_tuple()
    s = "".join(map(str, digits))
    if not isinstance(exp, int):
        raise ValueError("not a finite number")
    if exp >= 0:
        return int(s + "0" * exp), ""
    ip, fp = (s[:exp] or "0"), s[exp:].rjust(-exp, "0")
    return int(ip), fp.rstrip("0")


def _frac_cmp(f: str, op: str) -> Expr:
    """Non-empty fraction digit strings G with 0.G ``op`` 0.f (f non-empty, no trailing zero)."""
    parts = []
    for j, ch in enumerate(f):
        d = int(ch)
        if op in (">", ">=") and d < 9:
            parts.append(seq(lit(f[:j]), chars([(0x30 + d + 1, 0x39)]), star(DIGIT)))
        if op in ("<", "<=") and d > 0:
            parts.append(seq(lit(f[:j]), chars([(0x30, 0x30 + d - 1)]), star(DIGIT)))
    if op == ">=":
        parts.append(seq(lit(f), star(DIGIT)))
    elif op == ">":
        parts.append(seq(lit(f), star(lit("0")), NZ, star(DIGIT)))
    else:
        parts += [lit(f[:j]) for j in range(1, len(f))]
        if op == "<=":
            parts.append(seq(lit(f), star(lit("0"))))
    return alt(*parts)


def unsigned_cmp(c: Decimal, op: str) -> Expr:
    """Unsigned plain decimals (``INT(.DIGITS)?``) whose value ``op`` c, for any decimal c."""
    if c < 0:
        return UNSIGNED if op in (">", ">=") else NOTHING
    if c == 0:
        if op == ">=":
            return UNSIGNED
        if op == "<=":
            return ZERO
        return NOTHING if op == "<" else _nonzero_unsigned()
    i, f = _split_decimal(c)
    if op in (">", ">="):
        bigger = seq(uint_range(i + 1, None), opt(FRAC))
        if not f:
            same = opt(FRAC) if op == ">=" else seq(lit("."), star(lit("0")), NZ, star(DIGIT))
        else:
            same = seq(lit("."), _frac_cmp(f, op))
        return alt(bigger, seq(lit(str(i)), same))
    smaller = seq(uint_range(0, i - 1), opt(FRAC)) if i > 0 else NOTHING
    if not f:
        same = opt(seq(lit("."), plus(lit("0")))) if op == "<=" else NOTHING
    else:
        same = alt(EPSILON, seq(lit("."), _frac_cmp(f, op)))
    return alt(smaller, seq(lit(str(i)), same))


def _nonzero_unsigned() -> Expr:
    return alt(seq(uint_range(1, None), opt(FRAC)), seq(lit("0."), star(lit("0")), NZ, star(DIGIT)))


def _flip(op: str) -> str:
    return {">=": "<=", ">": "<", "<=": ">=", "<": ">"}[op]


def _and(a: Expr, b: Expr, limit_note: str = "") -> Expr:
    """Intersection of two regular languages over ASCII (through DFAs)."""
    if a == NOTHING or b == NOTHING:
        return NOTHING
    return to_expr(fsm.intersect(fsm.from_expr(a), fsm.from_expr(b)), budget=20000)


def _range_unsigned(lo: Bound | None, hi: Bound | None, negate: bool) -> Expr:
    """Unsigned texts u with (−u if negate else u) within [lo, hi]."""
    conds = []
    if lo is not None:
        v, ex = lo
        op = ">" if ex else ">="
        conds.append((-v, _flip(op)) if negate else (v, op))
    if hi is not None:
        v, ex = hi
        op = "<" if ex else "<="
        conds.append((-v, _flip(op)) if negate else (v, op))
    langs = [unsigned_cmp(v, op) for v, op in conds]
    langs = [x for x in langs if x != UNSIGNED]
    if not langs:
        return UNSIGNED
    if len(langs) == 1:
        return langs[0]
    return _and(langs[0], langs[1])


def _in_bounds(v: Decimal, lo: Bound | None, hi: Bound | None) -> bool:
    if lo is not None and (v < lo[0] or (lo[1] and v == lo[0])):
        return False
    if hi is not None and (v > hi[0] or (hi[1] and v == hi[0])):
        return False
    return True


def _exp_spell(ea: int | None, eb: int | None) -> Expr:
    """``[eE]`` and an exponent with value in ea..eb (None: unbounded), every spelling."""
    if ea is not None and eb is not None and ea > eb:
        return NOTHING
    parts = []
    if eb is None or eb >= 0:
        parts.append(seq(_E, opt(lit("+")), star(lit("0")), uint_range(max(ea or 0, 0), eb)))
    if ea is None or ea < 0:
        top = None if ea is None else -ea
        parts.append(seq(_E, lit("-"), star(lit("0")), uint_range(max(1, -eb if eb is not None else 1), top)))
    if (ea is None or ea <= 0) and (eb is None or eb >= 0):
        parts.append(seq(_E, lit("-"), plus(lit("0"))))
    return alt(*parts)


NORM_MANTISSA = seq(NZ, opt(FRAC))


def _exponent_forms(lo: Bound | None, hi: Bound | None, negate: bool) -> Expr:
    """Normalised-mantissa exponent texts (unsigned) m·10^E with (−1)^negate·m·10^E in bounds."""
    # Work with positive magnitudes: bounds on the magnitude u.
    if negate:
        ulo = None if hi is None else (-hi[0], hi[1])
        uhi = None if lo is None else (-lo[0], lo[1])
    else:
        ulo, uhi = lo, hi
    if uhi is not None and uhi[0] <= 0:
        return NOTHING
    if ulo is not None and ulo[0] <= 0:
        ulo = None
    # E with [10^E, 10^(E+1)) inside (ulo, uhi): full; the decade of each bound: partial.
    ea = eb = None
    parts = []
    partial: set[int] = set()
    if ulo is not None:
        e_lo = ulo[0].adjusted()
        partial.add(e_lo)
        ea = e_lo + 1
    if uhi is not None:
        e_hi = uhi[0].adjusted()
        partial.add(e_hi)
        eb = e_hi - 1
    if ea is None or eb is None or ea <= eb:
        parts.append(seq(NORM_MANTISSA, _exp_spell(ea, eb)))
    for e in sorted(partial):
        scale = Decimal(10) ** e
        with localcontext() as ctx:
            ctx.prec = 1000
            mlo = None if ulo is None else (ulo[0] / scale, ulo[1])
            mhi = None if uhi is None else (uhi[0] / scale, uhi[1])
        m = _and(NORM_MANTISSA, _range_unsigned(mlo, mhi, False))
        if m != NOTHING:
            parts.append(seq(m, _exp_spell(e, e)))
    return alt(*parts)


def bounded_number(lo: Bound | None, hi: Bound | None, *, integer: bool) -> Expr:
    """JSON number texts whose value lies within the bounds (see the module docstring)."""
    if lo is not None and hi is not None:
        if lo[0] > hi[0] or (lo[0] == hi[0] and (lo[1] or hi[1])):
            return NOTHING
    if integer:
        ilo = None if lo is None else _int_ceil(lo)
        ihi = None if hi is None else _int_floor(hi)
        if ilo is not None and ihi is not None and ilo > ihi:
            return NOTHING
        pos = NOTHING if ihi is not None and ihi < 0 else uint_range(max(ilo or 0, 0), ihi)
        neg_lo = 0 if ihi is None else max(-ihi, 0)
        neg_hi = None if ilo is None else -ilo
        neg = NOTHING if neg_hi is not None and neg_hi < 0 else uint_range(neg_lo, neg_hi)
        tail = opt(seq(lit("."), plus(lit("0"))))
        return alt(seq(pos, tail), seq(lit("-"), neg, tail))
    pos = _range_unsigned(lo, hi, False)
    neg = _range_unsigned(lo, hi, True)
    parts = [pos, seq(lit("-"), neg)]
    parts.append(seq(_exponent_forms(lo, hi, False)))
    parts.append(seq(lit("-"), _exponent_forms(lo, hi, True)))
    if _in_bounds(Decimal(0), lo, hi):
        parts.append(seq(opt(lit("-")), ZERO, EXP))
    return alt(*parts)


def _int_ceil(b: Bound) -> int:
    v, ex = b
    n = int(v.to_integral_value(rounding="ROUND_CEILING"))
    return n + 1 if ex and n == v else n


def _int_floor(b: Bound) -> int:
    v, ex = b
    n = int(v.to_integral_value(rounding="ROUND_FLOOR"))
    return n - 1 if ex and n == v else n


# ----------------------------------------------------------------------------- multipleOf


def multiple_dfa(m: Decimal) -> fsm.DFA:
    """Plain decimal texts (``-?INT(.DIGITS)?``, no exponent) whose value is a multiple of m > 0."""
    sign, digits, exp = m.normalize().as_tuple()
    M = int("".join(map(str, digits)))
    s = 0
    if isinstance(exp, int):
        if exp >= 0:
            M *= 10 ** exp
        else:
            s = -exp
    if M * (s + 3) > MAX_MULTIPLE_STATES:
        raise fsm.FsmTooLarge(f"the automaton of multipleOf {m}", MAX_MULTIPLE_STATES)
    # state ids: 0 start, 1 after '-', 2 "0" integer part, int(r) = 3 + r, frac(r, j) after.
    def frac(r: int, j: int) -> int:
        return 3 + M + r * (s + 2) + j

    n = 3 + M + M * (s + 2)
    trans: list[list[tuple[int, int, int]]] = [[] for _ in range(n)]
    accept = [False] * n
    for st in (0, 1):
        if st == 0:
            trans[st].append((0x2D, 0x2D, 1))
        trans[st].append((0x30, 0x30, 2))
        for d in range(1, 10):
            trans[st].append((0x30 + d, 0x30 + d, 3 + d % M))
    trans[2].append((0x2E, 0x2E, frac(0, 0)))
    accept[2] = True
    for r in range(M):
        st = 3 + r
        trans[st].append((0x2E, 0x2E, frac(r, 0)))
        for d in range(10):
            trans[st].append((0x30 + d, 0x30 + d, 3 + (10 * r + d) % M))
        accept[st] = (r * 10 ** s) % M == 0
        for j in range(s + 2):
            fs = frac(r, j)
            if j < s:
                for d in range(10):
                    trans[fs].append((0x30 + d, 0x30 + d, frac((10 * r + d) % M, j + 1)))
            else:
                trans[fs].append((0x30, 0x30, frac(r, min(j + 1, s + 1))))
            accept[fs] = j >= 1 and (r * 10 ** (s - min(j, s))) % M == 0
    for row in trans:
        row.sort()
    return fsm.minimize(fsm.DFA(trans, accept))


def number_expr(
    *, integer: bool, lo: Bound | None = None, hi: Bound | None = None, multiples: tuple[Decimal, ...] = (),
    add_rule: Callable[[str, Expr], str] | None = None, name: str = "num",
) -> Expr:
    """JSON number texts satisfying ``integer``, the bounds and every ``multipleOf`` (see module doc)."""
    if lo is None and hi is None and not multiples:
        return any_number(integer)
    return to_expr(multiples_dfa(integer, lo, hi, multiples), add_rule=add_rule, name=name, budget=4000)


def multiples_dfa(integer: bool, lo: Bound | None, hi: Bound | None, multiples: tuple[Decimal, ...]) -> fsm.DFA:
    """The DFA of :func:`number_expr` when there is a ``multipleOf``."""
    base = bounded_number(lo, hi, integer=integer) if (lo is not None or hi is not None) else any_number(integer)
    d = fsm.from_expr(base)
    if integer:
        d = fsm.intersect(d, fsm.from_expr(seq(opt(lit("-")), INT, opt(seq(lit("."), plus(lit("0")))))))
    for m in multiples:
        d = fsm.intersect(d, multiple_dfa(m))
    return d


def value_spellings(v: Decimal) -> Expr:
    """Texts of the JSON number v (as :func:`bounded_number` with v as both bounds)."""
    return bounded_number((v, False), (v, False), integer=False)
