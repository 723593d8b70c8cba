"""String languages: ``pattern``, ``format``, lengths and their combination, as IR and automata.

A string keyword speaks about the decoded string; :mod:`.strings` spells the result as JSON text.
:func:`pattern_expr` compiles a ``pattern`` (ECMAScript, matched anywhere) once per document;
:func:`lang_dfa` turns a pattern or format into a code-point automaton once; :func:`string_dfa_of`
is the automaton of a merged string schema (for property names and disjointness);
:func:`emit_string` the grammar of a merged string schema, written as plain IR where one pattern
with a length limit allows it (:func:`restrict_len`) and through the automata otherwise.
"""

from __future__ import annotations

from pda import codepoint_fsm as fsm
from pda.errors import FsmTooLarge, RegexError, SchemaError, UnsupportedRegexError
from pda.ir import NOTHING, Alt, Bytes, CharClass, Expr, Repeat, Seq, alt, repeat, seq

from ..regex import regex_to_ir
from .context import Context
from .document import Loc
from .formats import FORMATS, KNOWN_UNSUPPORTED, format_expr
from .merge import Merged, merge
from .strings import ANY_CHAR, dfa_to_json, quoted, spell, spell_expr

__all__ = [
    "Lang", "emit_string_union", "pattern_expr", "pattern_dfa", "format_dfa", "pattern_matches", "lang_dfa", "string_dfa_of",
    "names_dfa", "restrict_len", "emit_string", "MAX_STRING_STATES",
]

def pattern_expr(c: Context, pattern: str, ptr: str) -> Expr | None:
    """The decoded strings a ``pattern`` matches somewhere (None when refused and lenient)."""
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


def _string_langs(c: Context, m: Merged) -> list[Lang]:
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


def _string_negs(c: Context, m: Merged) -> list[Lang]:
    """Languages a string must *not* be in (from a negated ``pattern`` or ``format``)."""
    out: list[Lang] = []
    for p, ptr in m.not_patterns:
        e = pattern_expr(c, p, ptr)
        if e is not None:
            out.append((e, ("p", p)))
    out += [(format_expr(f), ("f", f)) for f, _ in m.not_formats if f in FORMATS]
    return out


def lang_dfa(c: Context, lang: Lang) -> fsm.DFA:
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


def string_dfa_of(c: Context, m: Merged) -> fsm.DFA:
    """The decoded strings of ``m``'s string part, as a DFA (for property names and disjointness)."""
    if m.enum is not None:
        return fsm.literal_set_dfa(v for v in m.enum if isinstance(v, str) and c.value_ok(v, m))
    if "string" not in m.types:
        return fsm.EMPTY
    return _combined_dfa(c, m, _string_langs(c, m))


MAX_STRING_STATES = 300


def _universal(c: Context, lang: Lang) -> bool:
    """Whether a decoded-string language is every string (e.g. the pattern ``.*`` or ``(x+)?``)."""
    if lang[1][0] != "p":
        return False  # no format allows every string
    key = ("universal",) + lang[1]
    if key not in c.memo:
        try:
            d = lang_dfa(c, lang)
            c.memo[key] = d.size == 1 and d.accept[0] and fsm.complement(d).size == 0
        except FsmTooLarge:
            c.memo[key] = False
    return bool(c.memo[key])


def _narrowing_langs(c: Context, m: Merged) -> list[Lang]:
    """``m``'s patterns and formats but those every string matches."""
    return [lang for lang in _string_langs(c, m) if not _universal(c, lang)]


def emit_string(c: Context, m: Merged) -> Expr:
    plain = _plain_string(c, m)
    if plain is not None:
        return plain
    langs = _narrowing_langs(c, m)
    lo, hi = m.min_len, m.max_len
    where = (m.patterns or m.formats or [("", m.enum_ptr)])[0][1]
    try:
        d = _combined_dfa(c, m, langs)
        if d.size <= MAX_STRING_STATES:
            return quoted(dfa_to_json(d, c.add_rule, c.fresh("str")))
    except FsmTooLarge:
        pass
    c.unsupported("the string constraints (pattern, format, minLength/maxLength) are too large to combine "
                  "exactly", where)
    return quoted(spell_expr(langs[0][0])) if langs else quoted(repeat(spell(ANY_CHAR), lo, hi))


def _plain_string(c: Context, m: Merged) -> Expr | None:
    """``m``'s strings spelled from one pattern or format (or none) without an automaton: its
    expression, its repetition counts rewritten for the length bounds; None when they need the
    automaton of the combined constraints."""
    langs = _narrowing_langs(c, m)
    negs = _string_negs(c, m)
    lo, hi = m.min_len, m.max_len
    if hi is not None and hi < lo:
        return NOTHING
    if any(isinstance(v, str) for v in m.excluded) or negs or len(langs) > 1:
        return None
    if not langs:
        return quoted(repeat(spell(ANY_CHAR), lo, hi))
    if lo == 0 and hi is None:
        key = ("spelled",) + langs[0][1]
        if key not in c.memo:
            c.memo[key] = quoted(spell_expr(langs[0][0]))
        return c.memo[key]
    r = restrict_len(langs[0][0], lo, hi)
    return None if r is None else quoted(spell_expr(r))


def _combined_dfa(c: Context, m: Merged, langs: list[Lang]) -> fsm.DFA:
    """The automaton of ``m``'s strings: lengths, less the excluded values, within ``langs``,
    outside the negated patterns and formats."""
    d = fsm.length_dfa(m.min_len, m.max_len)
    banned = [v for v in m.excluded if isinstance(v, str)]
    if banned:
        d = fsm.difference(d, fsm.literal_set_dfa(banned))
    for lang in langs:
        d = fsm.intersect(d, lang_dfa(c, lang))
    for lang in _string_negs(c, m):
        d = fsm.difference(d, lang_dfa(c, lang))
    return d


MAX_UNION_STATES = 2000


def emit_string_union(c: Context, ms: list[Merged]) -> tuple[Expr, list[int]] | None:
    """One string for the branches of ``ms`` (strings alone: a ``oneOf``/``anyOf`` of patterns,
    formats, their complements) that need automata: the union of those automata, so the value is
    one lexical state, not one per branch; with the indices of the branches it covers.

    Emitted apart, each such branch is a rule of its own (an automaton written back as rules), and
    each is a top of the stack after the opening quote, classified over the vocabulary on its first
    visit and filled at each character (Github_hard/o12278: a ``oneOf`` of seven unanchored words,
    each "this word and none of the others": seven tops of 30-90 states, 24-48 ms for that fill).
    Branches spelled from one expression (:func:`_plain_string`) stay apart: inlined beside each
    other they are determinized together anyway, at less cost than their union written back.
    None (emit them apart) when fewer than two need automata, one cannot be built, or the union
    passes :data:`MAX_UNION_STATES` states.
    """
    saved, c.probing = c.probing, True
    try:
        need = [i for i, m in enumerate(ms) if _plain_string(c, m) is None]
        if len(need) < 2:
            return None
        d = fsm.EMPTY
        for i in need:
            d = fsm.union(d, _combined_dfa(c, ms[i], _narrowing_langs(c, ms[i])))
            if d.size > MAX_UNION_STATES:
                return None
    except (FsmTooLarge, RegexError, SchemaError):
        return None
    finally:
        c.probing = saved
    return quoted(dfa_to_json(d, c.add_rule, c.fresh("str"))), need


def pattern_dfa(c: Context, pattern: str, ptr: str) -> fsm.DFA | None:
    """The automaton of the strings ``pattern`` matches (None when refused and lenient)."""
    e = pattern_expr(c, pattern, ptr)
    return None if e is None else lang_dfa(c, (e, ("p", pattern)))


def format_dfa(c: Context, name: str, ptr: str) -> fsm.DFA | None:
    """The automaton of the strings of format ``name`` (None for a format that asserts nothing)."""
    if name in KNOWN_UNSUPPORTED:
        c.unsupported(f"format {name!r} is not supported", ptr)
    if name not in FORMATS:
        return None
    return lang_dfa(c, (format_expr(name), ("f", name)))


def pattern_matches(c: Context, pattern: str, ptr: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (True when refused and lenient)."""
    d = pattern_dfa(c, pattern, ptr)
    return True if d is None else fsm.matches(d, text)


def names_dfa(c: Context, locs: list[Loc]) -> fsm.DFA:
    """Decoded strings valid against every ``propertyNames`` schema in ``locs``."""
    d: fsm.DFA | None = None
    for loc in locs:
        here = fsm.EMPTY
        for conj in c.flat_dnf([loc]):
            here = fsm.union(here, string_dfa_of(c, merge(conj, strict=c.strict)))
        d = here if d is None else fsm.intersect(d, here)
    return d if d is not None else fsm.complement(fsm.EMPTY)

