"""Unicode data for the regex frontend: ``\\d \\w \\s`` sets, general categories and case folding.

Everything here is computed lazily, once per process, from the running Python (``re`` itself
for Python's ``\\d \\w \\s``; ``str.lower``/``str.upper``/``str.casefold`` for case mappings;
``unicodedata`` for ``\\p{..}``), and cached as sorted inclusive code point ranges.

Case-insensitive matching is modelled as a *key* function on code points: a character ``ch``
matches a set ``S`` when ``key(ch)`` lies in ``key(S)`` (plus, for Python, the extra equivalences
``re`` adds for characters like ``s``/``ſ`` that share an uppercase).  :func:`fold` computes the
resulting set exactly with range arithmetic over the ~1,400 code points whose key differs.
"""

from __future__ import annotations

import array
import bisect
import functools
import re
import sys
import unicodedata
from dataclasses import dataclass

from pda.ir import MAX_CODE_POINT, negate_ranges, normalize_ranges

__all__ = [
    "Ranges", "CaseTable", "python_category", "ascii_category", "ECMA_CATEGORIES", "ECMA_LINE_TERMINATORS",
    "general_category", "case_table", "fold", "is_cased",
]

Ranges = tuple[tuple[int, int], ...]

# ECMAScript \d \w \s (WhiteSpace + LineTerminator) and line terminators (what `.` excludes).
ECMA_LINE_TERMINATORS: Ranges = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
ECMA_CATEGORIES: dict[str, Ranges] = {
    "d": ((0x30, 0x39),),
    "w": ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)),
    "s": normalize_ranges([
        (0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
        (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF),
    ]),
}
_ASCII_CATEGORIES: dict[str, Ranges] = {
    "d": ((0x30, 0x39),),
    "w": ECMA_CATEGORIES["w"],
    "s": ((0x09, 0x0D), (0x20, 0x20)),
}


@functools.cache
def _all_chars() -> str:
    """One string holding every code point 0..0x10FFFF in order (surrogates included)."""
    codes = array.array("I", range(MAX_CODE_POINT + 1))
    if codes.itemsize != 4:
        return "".join(map(chr, range(MAX_CODE_POINT + 1)))
    codec = "utf-32-le" if sys.byteorder == "little" else "utf-32-be"
    return codes.tobytes().decode(codec, "surrogatepass")


def _runs(regex: str) -> Ranges:
    """The code points matched by a one-character ``regex``, as ranges (one scan with ``re``)."""
    return tuple((m.start(), m.end() - 1) for m in re.finditer(regex + "+", _all_chars()))


@functools.cache
def python_category(letter: str) -> Ranges:
    """What Python's ``\\d``, ``\\w`` or ``\\s`` (lower-case letter) match in a str pattern."""
    return _runs("\\" + letter)


def ascii_category(letter: str) -> Ranges:
    """``\\d``, ``\\w`` or ``\\s`` under Python's ASCII flag."""
    return _ASCII_CATEGORIES[letter]


# ----------------------------------------------------------------------------- \p{...}

_GC_LONG = {
    "Letter": "L", "Cased_Letter": "LC", "Uppercase_Letter": "Lu", "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt", "Modifier_Letter": "Lm", "Other_Letter": "Lo", "Mark": "M",
    "Combining_Mark": "M", "Nonspacing_Mark": "Mn", "Spacing_Mark": "Mc", "Enclosing_Mark": "Me",
    "Number": "N", "Decimal_Number": "Nd", "digit": "Nd", "Letter_Number": "Nl", "Other_Number": "No",
    "Punctuation": "P", "punct": "P", "Connector_Punctuation": "Pc", "Dash_Punctuation": "Pd",
    "Open_Punctuation": "Ps", "Close_Punctuation": "Pe", "Initial_Punctuation": "Pi",
    "Final_Punctuation": "Pf", "Other_Punctuation": "Po", "Symbol": "S", "Math_Symbol": "Sm",
    "Currency_Symbol": "Sc", "Modifier_Symbol": "Sk", "Other_Symbol": "So", "Separator": "Z",
    "Space_Separator": "Zs", "Line_Separator": "Zl", "Paragraph_Separator": "Zp", "Other": "C",
    "Control": "Cc", "cntrl": "Cc", "Format": "Cf", "Surrogate": "Cs", "Private_Use": "Co",
    "Unassigned": "Cn",
}


@functools.cache
def _general_categories() -> dict[str, Ranges]:
    """Two-letter general category -> ranges, from one scan of ``unicodedata``."""
    acc: dict[str, list[tuple[int, int]]] = {}
    cat = unicodedata.category
    start, prev = 0, cat("\0")
    for cp, ch in enumerate(_all_chars()):
        c = cat(ch)
        if c != prev:
            acc.setdefault(prev, []).append((start, cp - 1))
            start, prev = cp, c
    acc.setdefault(prev, []).append((start, MAX_CODE_POINT))
    return {k: tuple(v) for k, v in acc.items()}


def general_category(name: str) -> Ranges | None:
    """Ranges of a ``\\p{..}`` value: a general category (short or long name, optionally after
    ``gc=`` / ``General_Category=``), ``Any`` or ``ASCII``; None when the name is unknown."""
    if name == "Any":
        return ((0, MAX_CODE_POINT),)
    if name == "ASCII":
        return ((0, 0x7F),)
    for prefix in ("gc=", "General_Category="):
        if name.startswith(prefix):
            name = name[len(prefix):]
    short = _GC_LONG.get(name, name)
    table = _general_categories()
    if short == "LC":
        return normalize_ranges(table.get("Lu", ()) + table.get("Ll", ()) + table.get("Lt", ()))
    if len(short) == 1 and short in "LMNPSZC":
        return normalize_ranges(r for k, v in table.items() if k[0] == short for r in v)
    if len(short) == 2 and short[0] in "LMNPSZC" and short[1].islower():
        return table.get(short, ())
    return None


# ----------------------------------------------------------------------------- case folding


@dataclass(frozen=True)
class CaseTable:
    """A case-insensitivity key: ``key[c]`` for every code point whose key is not itself."""

    key: dict[int, int]
    changed: tuple[int, ...]  # sorted keys of ``key``
    extra: dict[int, tuple[int, ...]]  # key value -> other key values that are equivalent too
    cased: tuple[int, ...]  # sorted; Python's notion of "cased" (lower or upper differs)


def _table(key: dict[int, int], extra: dict[int, tuple[int, ...]] | None = None,
           cased: tuple[int, ...] = ()) -> CaseTable:
    return CaseTable(key, tuple(sorted(key)), extra or {}, cased)


@functools.cache
def case_table(kind: str) -> CaseTable:
    """The case table of ``kind``: ``"python"`` (``re.IGNORECASE`` on str patterns),
    ``"python-ascii"`` (with ``re.ASCII``), ``"ecma"`` (ECMAScript Canonicalize without the u
    flag: simple uppercase, never mapping non-ASCII to ASCII, BMP only) or ``"ecma-u"``
    (with the u flag: simple case folding, approximated by single-character ``str.casefold``)."""
    if kind == "python-ascii":
        return _table({c: c + 32 for c in range(0x41, 0x5B)},
                      cased=tuple(range(0x41, 0x5B)) + tuple(range(0x61, 0x7B)))
    text = _all_chars()
    lower: dict[int, int] = {}
    ecma: dict[int, int] = {}
    ecma_u: dict[int, int] = {}
    cased: set[int] = set()
    by_upper: dict[str, set[int]] = {}
    for block in range(0, MAX_CODE_POINT + 1, 128):
        chunk = text[block:block + 128]
        if chunk.lower() == chunk and chunk.upper() == chunk and chunk.casefold() == chunk:
            continue
        for cp in range(block, block + 128):
            ch = text[cp]
            lo = ord(ch.lower()[0])  # simple lowercase (only U+0130 lowers to two characters)
            up = ch.upper()
            if lo != cp:
                lower[cp] = lo
            if lo != cp or up != ch:
                cased.add(cp)
                by_upper.setdefault(up, set()).add(lo)
            if len(up) == 1 and cp <= 0xFFFF and ord(up) != cp and not (cp >= 128 and ord(up) < 128):
                ecma[cp] = ord(up)
            fold_s = ch.casefold()
            if len(fold_s) != 1:
                fold_s = ch.lower() if len(ch.lower()) == 1 else ch
            if ord(fold_s) != cp:
                ecma_u[cp] = ord(fold_s)
    if kind == "ecma":
        return _table(ecma)
    if kind == "ecma-u":
        # Simple foldings that neither casefold() nor lower() give (CaseFolding.txt status S).
        ecma_u.update({0x1FD3: 0x0390, 0x1FE3: 0x03B0, 0xFB05: 0xFB06})
        return _table(ecma_u)
    if kind != "python":
        raise ValueError(f"unknown case table {kind!r}")
    # Lowercase letters that share an uppercase (i/ı, s/ſ, µ/μ, ...) match each other in `re`.
    extra = {a: tuple(sorted(g - {a})) for g in by_upper.values() if len(g) > 1 for a in g}
    return _table(lower, extra, tuple(sorted(cased)))


def is_cased(table: CaseTable, ranges: Ranges) -> bool:
    """Whether some code point of ``ranges`` is cased (Python's ``iscased``)."""
    return bool(_points_in(ranges, table.cased or table.changed))


def _points_in(ranges: Ranges, points: tuple[int, ...] | list[int]) -> list[int]:
    out: list[int] = []
    for lo, hi in ranges:
        out.extend(points[bisect.bisect_left(points, lo):bisect.bisect_right(points, hi)])
    return out


def _minus_points(ranges: Ranges, points: tuple[int, ...] | list[int]) -> list[tuple[int, int]]:
    out = []
    for lo, hi in ranges:
        cur = lo
        for p in points[bisect.bisect_left(points, lo):bisect.bisect_right(points, hi)]:
            if p > cur:
                out.append((cur, p - 1))
            cur = p + 1
        if cur <= hi:
            out.append((cur, hi))
    return out


def _contains(starts: list[int], ranges: Ranges, x: int) -> bool:
    i = bisect.bisect_right(starts, x) - 1
    return i >= 0 and ranges[i][1] >= x


def image(table: CaseTable, ranges: Ranges) -> Ranges:
    """``{key(c) for c in ranges}``, closed under the table's extra equivalences."""
    moved = _points_in(ranges, table.changed)
    out = normalize_ranges(_minus_points(ranges, moved) + [(table.key[c], table.key[c]) for c in moved])
    if table.extra:
        starts = [a for a, _ in out]
        more = [(o, o) for k, others in table.extra.items() if _contains(starts, out, k) for o in others]
        out = normalize_ranges(list(out) + more)
    return out


def preimage(table: CaseTable, keys: Ranges) -> Ranges:
    """``{c : key(c) in keys}``."""
    starts = [a for a, _ in keys]
    back = [(c, c) for c in table.changed if _contains(starts, keys, table.key[c])]
    return normalize_ranges(_minus_points(keys, table.changed) + back)


def fold(table: CaseTable, ranges: Ranges, raw_keys: Ranges = ()) -> Ranges:
    """Every code point whose key lies in ``image(ranges) | raw_keys``: what a case-insensitive
    class of ``ranges`` matches (``raw_keys`` are sets tested on the key without folding,
    like Python's ``\\w`` inside a case-insensitive class)."""
    return preimage(table, normalize_ranges(image(table, ranges) + tuple(raw_keys)))


def complement(ranges: Ranges) -> Ranges:
    """All code points not in ``ranges``."""
    return negate_ranges(ranges)
