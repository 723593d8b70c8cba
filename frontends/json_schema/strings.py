"""JSON string spellings for the JSON Schema frontend.

String keywords (``pattern``, ``minLength``, ``format``, ``const`` ...) speak about the *decoded*
string, a sequence of code points.  The grammar must speak about the JSON *text*, where one code
point has several spellings.  This module builds the decoded-level language and maps every code
point to all of its JSON spellings (:func:`spell`):

* itself, unless it must be escaped (``"``, ``\\`` and U+0000..U+001F);
* a two-character escape where JSON has one (``\\"  \\\\  \\/  \\b  \\f  \\n  \\r  \\t``);
* ``\\uXXXX`` with hex digits in either case, for code points of the Basic Multilingual Plane
  other than printable ASCII (lone surrogates excluded: they decode to no scalar value);
* a UTF-16 surrogate pair ``\\uD83D\\uDE00`` for code points above U+FFFF.

So one code point is one unit whatever its spelling, which is how ``minLength``/``maxLength`` count.

The one spelling left out is ``\\u`` escaping of printable ASCII (``\\u0041`` for ``A``; ``"`` and
``\\`` excepted): no JSON serializer writes it, and allowing it would multiply the size of every
automaton that must tell property names apart.  Everything ``json.dumps`` writes, with
``ensure_ascii`` true or false, is accepted.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from functools import lru_cache
from operator import itemgetter
from typing import Any, Iterable

from pda.ir import (
    EPSILON, MAX_CODE_POINT, NOTHING, Alt, ByteClass, Bytes, CharClass, Expr, Ref, Repeat, Seq, alt, chars, lit,
    negate_ranges, normalize_ranges, repeat, seq,
)

from pda import codepoint_fsm as fsm
from pda.dfa_to_ir import to_expr

__all__ = [
    "spelled_except", "spell", "spell_expr", "string_literal", "digit_range", "hex_digit", "ANY_CHAR", "Ranges", "intersect_ranges",
    "subtract_ranges",
]

Ranges = tuple[tuple[int, int], ...]
ANY_CHAR: Ranges = ((0, 0xD7FF), (0xE000, MAX_CODE_POINT))
_SHORT = {0x22: '"', 0x5C: "\\", 0x2F: "/", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}
_MUST_ESCAPE: Ranges = ((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C))
# Code points that may be written as \uXXXX: all of the BMP except printable ASCII (but " and \).
_U_ESCAPABLE: Ranges = ((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0x7F, 0xFFFF))
_NO_ESCAPE: Ranges = negate_ranges(_MUST_ESCAPE)
_SHORT_RANGES: Ranges = normalize_ranges((cp, cp) for cp in _SHORT)
_LO, _HI = itemgetter(0), itemgetter(1)


def intersect_ranges(a: Iterable[tuple[int, int]], b: Iterable[tuple[int, int]]) -> Ranges:
    """Code points in both range lists (one merge over the two sorted, merged lists)."""
    return _intersect_merged(normalize_ranges(a), normalize_ranges(b))


def _intersect_merged(xs: Ranges, ys: Ranges) -> Ranges:
    """:func:`intersect_ranges` of two lists already sorted and merged (as :func:`normalize_ranges`
    makes them; so is the result)."""
    if len(xs) < len(ys):
        xs, ys = ys, xs
    if len(ys) <= 8:  # few ranges against many: the slice of ``xs`` each one overlaps, clipped
        parts: list[tuple[int, int]] = []
        for lo, hi in ys:
            i = bisect_left(xs, lo, key=_HI)  # the first range of xs that ends at lo or after
            j = bisect_right(xs, hi, key=_LO)  # past the last one that starts at hi or before
            if i < j:
                a, b = xs[i], xs[j - 1]
                if i + 1 == j:
                    parts.append((max(a[0], lo), min(a[1], hi)))
                else:
                    parts.append((max(a[0], lo), a[1]))
                    parts.extend(xs[i + 1:j - 1])
                    parts.append((b[0], min(b[1], hi)))
        return tuple(parts)
    out = []
    i = j = 0
    while i < len(xs) and j < len(ys):
        (lo1, hi1), (lo2, hi2) = xs[i], ys[j]
        lo, hi = max(lo1, lo2), min(hi1, hi2)
        if lo <= hi:
            out.append((lo, hi))  # disjoint from the last one, and adjacent to none: both lists are merged
        if hi1 < hi2:
            i += 1
        else:
            j += 1
    return tuple(out)


def subtract_ranges(a: Iterable[tuple[int, int]], b: Iterable[tuple[int, int]]) -> Ranges:
    """Code points of ``a`` not in ``b``."""
    return intersect_ranges(a, negate_ranges(b))


# ----------------------------------------------------------------------------- digit ranges


def hex_digit(lo: int, hi: int) -> Expr:
    """One hex digit with value in lo..hi, letters in either case."""
    rs = []
    if lo <= 9:
        rs.append((0x30 + lo, 0x30 + min(hi, 9)))
    if hi >= 10:
        a, b = max(lo, 10) - 10, hi - 10
        rs += [(0x61 + a, 0x61 + b), (0x41 + a, 0x41 + b)]
    return chars(rs)


def dec_digit(lo: int, hi: int) -> Expr:
    """One decimal digit with value in lo..hi."""
    return lit(str(lo)) if lo == hi else chars([(0x30 + lo, 0x30 + hi)])


def digit_range(lo: int, hi: int, width: int, base: int = 10) -> Expr:
    """Fixed-width numerals (leading zeros included) with value in lo..hi."""
    digit = hex_digit if base == 16 else dec_digit
    if lo > hi:
        return NOTHING
    if width == 0:
        return EPSILON
    p = base ** (width - 1)
    lo_d, lo_r = divmod(lo, p)
    hi_d, hi_r = divmod(hi, p)
    if lo_d == hi_d:
        return seq(digit(lo_d, lo_d), digit_range(lo_r, hi_r, width - 1, base))
    parts = []
    first_full, last_full = lo_d, hi_d
    if lo_r != 0:
        parts.append(seq(digit(lo_d, lo_d), digit_range(lo_r, p - 1, width - 1, base)))
        first_full += 1
    if hi_r != p - 1:
        last_full -= 1
    if first_full <= last_full:
        parts.append(seq(digit(first_full, last_full), repeat(digit(0, base - 1), width - 1, width - 1)))
    if hi_r != p - 1:
        parts.append(seq(digit(hi_d, hi_d), digit_range(0, hi_r, width - 1, base)))
    return alt(*parts)


# ----------------------------------------------------------------------------- spellings


def digit_set(ranges: Iterable[tuple[int, int]], width: int, base: int = 16) -> Expr:
    """Fixed-width numerals whose value is in any of ``ranges``, as one digit trie (leading
    digits with the same continuations share one class)."""
    rs = normalize_ranges(ranges)
    if not rs:
        return NOTHING
    if width == 0:
        return EPSILON
    digit = hex_digit if base == 16 else dec_digit
    if rs == ((0, base ** width - 1),):
        return repeat(digit(0, base - 1), width, width)
    p = base ** (width - 1)
    by_digit: dict[int, list[tuple[int, int]]] = {}
    for lo, hi in rs:
        for d in range(lo // p, hi // p + 1):
            by_digit.setdefault(d, []).append((max(lo, d * p) - d * p, min(hi, d * p + p - 1) - d * p))
    groups: dict[Ranges, list[int]] = {}
    for d, sub in by_digit.items():
        groups.setdefault(normalize_ranges(sub), []).append(d)
    parts = []
    for sub, ds in groups.items():
        cls = alt(*(digit(a, b) for a, b in normalize_ranges((d, d) for d in ds)))
        if isinstance(cls, Alt) and all(isinstance(x, CharClass) for x in cls.items):
            cls = chars(r for x in cls.items for r in x.ranges)  # type: ignore[union-attr]
        parts.append(seq(cls, digit_set(sub, width - 1, base)))
    return alt(*parts)


def spell(ranges: Ranges) -> Expr:
    """Every JSON spelling (inside a string literal) of one code point from ``ranges``."""
    return _spell_given(ranges if isinstance(ranges, tuple) else tuple(ranges))


# Spellings are memoised by the ranges as given (normalising costs more than the lookup), least
# recently used first out: a server meets new code-point sets (the characters of new property
# names) for as long as it runs, and a table that stopped growing at its bound recomputed every set
# it met after that, common ones included.  Each entry is a small tree of nodes that every full
# collection of the garbage collector walks, in whatever the process is doing then (a mask fill,
# say): 1,024 trees were 6,400 of the 9,800 objects a full collection walked between fills of 400
# JSON Schemas, about two thirds of its 5-12 ms.  256 entries hit 90.7% of the 130,969 calls there,
# against 92.0% for 1,024 (and 92.4% for 8,192): 1,822 more misses of 103 us each, 0.5 ms per
# compile.  (A second table by the normalised ranges was hit 0 times there and is gone.)
@lru_cache(maxsize=256)
def _spell_given(ranges: Ranges) -> Expr:
    return _spell(normalize_ranges(ranges))


def _spell(ranges: Ranges) -> Expr:
    """:func:`spell` of normalised ``ranges``."""
    # (every list below is sorted and merged: intersected without normalising again)
    scalar = _intersect_merged(ranges, ANY_CHAR)
    parts: list[Expr] = []
    plain = _intersect_merged(scalar, _NO_ESCAPE)
    if plain:
        parts.append(plain_chars(plain))
    after_backslash: list[Expr] = []
    short = _intersect_merged(scalar, _SHORT_RANGES)
    letters = [letter for cp, letter in _SHORT.items() if any(lo <= cp <= hi for lo, hi in short)]
    if letters:
        after_backslash.append(chars([(ord(x), ord(x)) for x in letters]))
    bmp = _intersect_merged(scalar, _U_ESCAPABLE)
    hexes = [digit_set(bmp, 4)] if bmp else []
    hexes += [_surrogate_pairs(lo, hi) for lo, hi in _intersect_merged(scalar, ((0x10000, MAX_CODE_POINT),))]
    if hexes:
        after_backslash.append(seq(lit("u"), alt(*hexes)))
    if after_backslash:
        parts.append(seq(lit("\\"), alt(*after_backslash)))
    return alt(*parts) if parts else NOTHING


def plain_chars(ranges: Ranges) -> Expr:
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return lit(chr(ranges[0][0]))
    return chars(ranges)


def _surrogate_pairs(lo: int, hi: int) -> Expr:
    """``HHHH\\uLLLL`` (after a ``\\u``): the UTF-16 pairs of the code points lo..hi (above U+FFFF)."""
    def split(cp: int) -> tuple[int, int]:
        v = cp - 0x10000
        return 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)

    def pair(h1: int, h2: int, l1: int, l2: int) -> Expr:
        return seq(digit_set([(h1, h2)], 4), lit("\\u"), digit_set([(l1, l2)], 4))

    (h1, l1), (h2, l2) = split(lo), split(hi)
    if h1 == h2:
        return pair(h1, h1, l1, l2)
    parts = []
    first_full, last_full = h1, h2
    if l1 != 0xDC00:
        parts.append(pair(h1, h1, l1, 0xDFFF))
        first_full += 1
    if l2 != 0xDFFF:
        last_full -= 1
    if first_full <= last_full:
        parts.append(pair(first_full, last_full, 0xDC00, 0xDFFF))
    if l2 != 0xDFFF:
        parts.append(pair(h2, h2, 0xDC00, l2))
    return alt(*parts)


def spell_expr(e: Expr) -> Expr:
    """Map a decoded-level regular expression to the language of its JSON spellings."""
    if isinstance(e, Bytes):
        text = e.data.decode("utf-8")
        return seq(*(spell(((ord(c), ord(c)),)) for c in text))
    if isinstance(e, CharClass):
        return spell(e.ranges)
    if isinstance(e, ByteClass):
        return spell(e.ranges)
    if isinstance(e, Seq):
        return seq(*(spell_expr(i) for i in e.items))
    if isinstance(e, Alt):
        return alt(*(spell_expr(i) for i in e.items))
    if isinstance(e, Repeat):
        return repeat(spell_expr(e.expr), e.min, e.max)
    if isinstance(e, Ref):
        raise ValueError("rule reference inside a string language")
    raise TypeError(f"not an IR node: {e!r}")


def string_literal(text: str) -> Expr:
    """Every JSON spelling of the string ``text``, quotes included."""
    return seq(lit('"'), spell_expr(lit(text)) if text else EPSILON, lit('"'))


def quoted(inner: Expr) -> Expr:
    return seq(lit('"'), inner, lit('"'))


# Node budget of the regular expression of a string DFA.  Past it the DFA becomes right-linear rules
# (one rule per state; a self-loop is a repetition), which are exact but make a token walk push and
# pop a frame per character of a cycle through several states:
# ``allOf`` of a ``pattern`` and a ``not pattern`` (Github_hard/o32451, a 16-state DFA whose
# expression has 4,514 nodes) filled a mask in 67 ms as rules and in 14 ms as an expression.
STRING_EXPR_BUDGET = 20000


def dfa_to_json(d: fsm.DFA, add_rule: object = None, name: str = "str") -> Expr:
    """The JSON spellings (without quotes) of the decoded strings a DFA accepts."""
    return to_expr(d, spell, add_rule=add_rule, name=name, budget=STRING_EXPR_BUDGET)  # type: ignore[arg-type]


def any_string_body(lo: int = 0, hi: int | None = None) -> Expr:
    """Spellings of any string of lo..hi code points (no quotes)."""
    return repeat(spell(ANY_CHAR), lo, hi)


def spelled_except(words: Iterable[str]) -> Expr:
    """JSON spellings (no quotes) of every string *except* the given ones.

    A string is not a word when it ends at a trie node that is not a word, or leaves the trie: at
    node ``p`` with a character that is no child of ``p``.  Characters that occur in no word at
    all leave the trie from any node, so they are factored out: ``PATHS · spell(Z) · ANY*`` with
    ``PATHS`` every trie path and ``Z`` those characters; the rest of the trie only needs the few
    characters that occur in the words.  The tail after the string has left the trie, ``ANY*``,
    is written once.  The size is a small multiple of the trie's."""
    trie: dict[str, Any] = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}
    used = normalize_ranges((ord(ch), ord(ch)) for w in _all_words(trie) for ch in w)
    one: dict[str, Expr] = {}  # character -> its spellings
    left_by: dict[tuple[str, ...], list[Expr]] = {}  # the children of a node -> spellings of the other used characters

    def sp(k: str) -> Expr:
        got = one.get(k)
        if got is None:
            got = one[k] = spell(((ord(k), ord(k)),))
        return got

    def end(node: dict[str, Any]) -> Expr:  # strings that stop inside the trie, not on a word
        kids = sorted(k for k in node if k)
        return alt(*([] if "" in node else [EPSILON]), *(seq(sp(k), end(node[k])) for k in kids))

    def exit_(node: dict[str, Any]) -> Expr:  # prefixes that leave the trie by a character of a word
        kids = tuple(sorted(k for k in node if k))
        others = left_by.get(kids)
        if others is None:
            rs = _intersect_merged(used, negate_ranges([(ord(k), ord(k)) for k in kids]))
            others = left_by[kids] = [spell(rs)] if rs else []
        return alt(*others, *(seq(sp(k), exit_(node[k])) for k in kids))

    def paths(node: dict[str, Any]) -> Expr:
        kids = sorted(k for k in node if k)
        return alt(EPSILON, *(seq(sp(k), paths(node[k])) for k in kids))

    rest = subtract_ranges(ANY_CHAR, used)
    # Every string after a prefix that has left the trie is allowed: the tail is written once.
    left = alt(exit_(trie), seq(paths(trie), spell(rest)))
    out = alt(end(trie), seq(left, repeat(spell(ANY_CHAR), 0, None)))
    end = exit_ = paths = None  # type: ignore[assignment]  # recursive closures are cycles: break them, so what they hold is freed now
    return out


def _all_words(trie: dict[str, Any], prefix: str = "") -> Iterable[str]:
    for k, v in trie.items():
        if k:
            yield from _all_words(v, prefix + k)
        else:
            yield prefix
