"""The JSON Schema frontend's building blocks, checked by brute force against exact arithmetic.

* :mod:`pda.frontends.json_schema.numbers` — number texts within bounds / multiples, compared with
  ``decimal.Decimal`` over a few thousand generated texts;
* :mod:`pda.codepoint_fsm` — intersection, difference, complement, length limits and
  the way back to IR, compared with set operations over all short strings;
* :mod:`pda.frontends.json_schema.strings` — every JSON spelling of a code point, and the
  "any string but these" language, compared with ``json.loads``.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from decimal import Decimal

import pytest

from pda import Grammar
from pda import codepoint_fsm as fsm
from pda import dfa_to_ir
from pda.errors import FsmTooLarge
from pda.frontends.json_schema.numbers import Bound, multiples_dfa, number_expr
from pda.frontends.json_schema.strings import quoted, spell, spelled_except
from pda.ir import GrammarIR, alt, chars, lit, plus, seq, star


def _number_texts(n: int = 1500) -> list[str]:
    rng = random.Random(7)
    out = {"0", "-0", "0.0", "-0.0", "1", "10", "1.5", "1.50", "-1.5", "0.001", "100", "99.99", "1e2", "1.5e-3"}
    while len(out) < n:
        ip = rng.choice(["0", str(rng.randint(1, 9)), str(rng.randint(10, 999)), str(rng.randint(1000, 10 ** 6))])
        fp = rng.choice(["", "", "." + "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 4)))])
        ex = rng.choice(["", "", "", "e" + rng.choice(["", "+", "-"]) + rng.choice(["0", "1", "2", "05", "12"])])
        out.add(rng.choice(["", "-"]) + ip + fp + ex)
    return sorted(out)


TEXTS = _number_texts()
D = Decimal
BOUNDS: list[tuple[Bound | None, Bound | None]] = [
    ((D("1.5"), False), None),
    ((D("1.5"), True), None),
    (None, (D("-2.25"), True)),
    ((D("-3"), False), (D("7.25"), True)),
    ((D(0), True), None),
    ((D(0), False), (D(0), False)),
    ((D("0.001"), False), (D(100), False)),
    ((D("-100"), True), (D("-0.5"), False)),
]


def _in(v: Decimal, lo: Bound | None, hi: Bound | None) -> bool:
    return (lo is None or v > lo[0] or (v == lo[0] and not lo[1])) and \
        (hi is None or v < hi[0] or (v == hi[0] and not hi[1]))


@pytest.mark.parametrize("integer", [False, True])
@pytest.mark.parametrize("lo,hi", BOUNDS)
def test_bounds_exact(lo: Bound | None, hi: Bound | None, integer: bool) -> None:
    d = fsm.from_expr(number_expr(integer=integer, lo=lo, hi=hi))
    for t in TEXTS:
        v = D(t)
        ok = _in(v, lo, hi) and (not integer or v == v.to_integral_value())
        got = fsm.matches(d, t)
        assert not (got and not ok), f"accepts {t}"
        plain = "e" not in t and (not integer or "." not in t or set(t.split(".")[1]) <= {"0"})
        normalised = "e" in t and re.fullmatch(r"[1-9](\.[0-9]+)?", t.lstrip("-").split("e")[0]) is not None
        if ok and (plain or (normalised and not integer)):
            assert got, f"rejects {t}"


@pytest.mark.parametrize("m", ["3", "7", "0.25", "100", "0.01", "1.5"])
@pytest.mark.parametrize("integer", [False, True])
def test_multiple_of_exact(m: str, integer: bool) -> None:
    lo, hi = (D(-50), False), (D(200), True)
    d = multiples_dfa(integer, lo, hi, (D(m),))
    for t in TEXTS:
        v = D(t)
        ok = _in(v, lo, hi) and v % D(m) == 0 and (not integer or v == v.to_integral_value())
        got = fsm.matches(d, t)
        assert got == ok or (not got and ("e" in t or (integer and "." in t))), t


def _strings(alphabet: str, n: int) -> list[str]:
    return ["".join(p) for k in range(n + 1) for p in itertools.product(alphabet, repeat=k)]


def test_fsm_operations_against_sets() -> None:
    a = fsm.from_expr(seq(star(chars([(97, 98)])), lit("c")))          # [ab]*c
    b = fsm.from_expr(alt(lit("abc"), plus(lit("a")), lit("c")))      # abc | a+ | c
    words = _strings("abc", 5)
    la = {w for w in words if fsm.matches(a, w)}
    lb = {w for w in words if fsm.matches(b, w)}
    assert la == {w for w in words if w.endswith("c") and set(w[:-1]) <= {"a", "b"}}
    assert {w for w in words if fsm.matches(fsm.intersect(a, b), w)} == la & lb
    assert {w for w in words if fsm.matches(fsm.union(a, b), w)} == la | lb
    assert {w for w in words if fsm.matches(fsm.difference(a, b), w)} == la - lb
    assert {w for w in words if fsm.matches(fsm.complement(a), w)} == set(words) - la
    short = fsm.intersect(a, fsm.length_dfa(2, 3))
    assert {w for w in words if fsm.matches(short, w)} == {w for w in la if 2 <= len(w) <= 3}
    back = fsm.from_expr(dfa_to_ir.to_expr(fsm.difference(a, b)))
    assert {w for w in words if fsm.matches(back, w)} == la - lb
    assert fsm.is_empty(fsm.intersect(fsm.literal_set_dfa(["x"]), a))


def test_to_expr_falls_back_to_rules() -> None:
    d = multiples_dfa(True, None, None, (D(7),))
    rules: dict[str, object] = {}

    def add(name: str, body: object) -> str:
        rules[name] = body
        return name

    e = dfa_to_ir.to_expr(d, add_rule=add, name="m7", budget=50)  # type: ignore[arg-type]
    g = Grammar.from_ir(GrammarIR({"root": e, **rules}, "root"))  # type: ignore[dict-item]
    for n in range(0, 300, 1):
        assert g.accepts(str(n)) == (n % 7 == 0), n
    with pytest.raises(FsmTooLarge):
        dfa_to_ir.to_expr(d, budget=50)


def test_rules_fallback_loops_without_pushing_a_frame_per_character() -> None:
    # The rule-per-state fallback writes a state's self-loop as a repetition: a rule calling itself
    # once per character pushed a frame per character, and a token walk from the "any other
    # string" state of a key's complement kept a thread per depth (Github_ultra/o65323: 35-60 ms
    # to classify one state, 88 ms in one fill).
    words = ["ab", "abc", "b"]
    d = fsm.complement(fsm.literal_set_dfa(words))
    rules: dict[str, object] = {}

    def add(name: str, body: object) -> str:
        rules[name] = body
        return name

    r = dfa_to_ir._rules(d, dfa_to_ir.default_label, add, "k")
    g = Grammar.from_ir(GrammarIR({"root": r, **rules}, "root"), max_stack_depth=8)  # type: ignore[dict-item]
    for w in _strings("abx", 4) + ["x" * 200, "ab" + "c" * 300, "b" * 100]:
        assert g.accepts(w) == (w not in words), w


@pytest.mark.parametrize("pattern", [r"^(ab)+c$", r"^x(a[bc]d)*(ab|c)*y?$", r"^([a-c]{2}-)*z$"])
def test_rules_fallback_writes_a_cycle_as_one_rule(pattern: str) -> None:
    # A cycle through several states becomes one rule per way into it (its state elimination), so
    # a long text of rounds pushes no frame per character (here: a stack of at most 8 frames).
    from pda.frontends.regex import regex_to_ir

    d = fsm.from_expr(regex_to_ir(pattern, dialect="ecmascript", search=True))
    rules: dict[str, object] = {}

    def add(name: str, body: object) -> str:
        rules[name] = body
        return name

    r = dfa_to_ir._rules(d, dfa_to_ir.default_label, add, "k")
    assert len(rules) < len(d.trans)
    g = Grammar.from_ir(GrammarIR({"root": r, **rules}, "root"), max_stack_depth=8)  # type: ignore[dict-item]
    rng = random.Random(5)
    texts = ["ab" * 200 + "c", "ab" * 200, "x" + "abd" * 100 + "ab" * 50 + "y", "ab-" * 150 + "z", "ab-" * 150]
    texts += ["".join(rng.choice("abcdxyz-") for _ in range(rng.randint(0, 12))) for _ in range(3000)]
    for text in texts:
        assert g.accepts(text) == fsm.matches(d, text), text


def test_spell_matches_json_decoding() -> None:
    g = Grammar.from_ir(GrammarIR({"root": quoted(star(spell(((0, 0x10FFFF),))))}, "root"))
    for s in ["", "plain", '"\\/', "\b\f\n\r\t\u0000\u001f\u007f", "é中😀", "\u2028"]:
        assert g.accepts(json.dumps(s)) and g.accepts(json.dumps(s, ensure_ascii=False))
    for bad in ['"\\ud800"', '"\\udc00x"', '"\\x41"', '"\u0001"', '"\\u12"', '"\\U0041"', '"\\u0041"']:
        assert not g.accepts(bad), bad


def test_spelled_except_against_decoding() -> None:
    words = ["", "a", "ab", "a/b", "é", "x\"y"]
    g = Grammar.from_ir(GrammarIR({"root": quoted(spelled_except(words))}, "root"))
    for w in _strings("ab/é\"", 3) + ["x\"y", "x\"", "x\"yy", "😀"]:
        for text in (json.dumps(w), json.dumps(w, ensure_ascii=False)):
            assert g.accepts(text) == (w not in words), text


@pytest.mark.parametrize("pattern", [r"^data:(jpg|jpeg|png|svg\+xml);[a-z=]*$", r"^[1-9]{1}[0-9]{2,5}$",
                                     r"^[a-z]{2,}:(x|yy|zzzz)$", r"^(ab|c)[0-9]{0,30}$",
                                     r"^(ab|c)*x$", r"^(a|bb)(c|dd)[e-f]+$", r"^(xy)+$"])
@pytest.mark.parametrize("lo,hi", [(0, None), (3, None), (0, 6), (4, 9), (7, 7), (12, 40)])
def test_restrict_len_is_length_intersection(pattern: str, lo: int, hi: int | None) -> None:
    from pda.frontends.json_schema.patterns import restrict_len
    from pda.frontends.regex import regex_to_ir

    e = regex_to_ir(pattern, dialect="ecmascript", search=True)
    got = restrict_len(e, lo, hi)
    if got is None:  # a repetition of a choice between lengths: not a simple rewrite
        assert "(ab|c)*" in pattern and (lo, hi) != (0, None)
        return
    want = fsm.intersect(fsm.from_expr(e), fsm.length_dfa(lo, hi))
    have = fsm.from_expr(got)
    assert fsm.is_empty(fsm.difference(want, have)) and fsm.is_empty(fsm.difference(have, want))


def _depth(e: object) -> int:
    from pda.ir import Alt, Repeat, Seq

    best, todo = 0, [(e, 1)]
    while todo:
        x, d = todo.pop()
        best = max(best, d)
        if isinstance(x, (Seq, Alt)):
            todo += [(y, d + 1) for y in x.items]
        elif isinstance(x, Repeat):
            todo.append((x.expr, d + 1))
    return best


@pytest.mark.parametrize("pattern,words,outside", [
    (r"^[0-9a-z_]{1,300}$", ["id", "createdAt", "a_b"], False),
    (r"^[0-9a-z_]{1,300}$", ["id", "createdAt"], True),   # keys the pattern does not match
    (r"^a{5,200}b?$", [], False),
    (r"^x[ab]{3,150}c?$", ["xabab"], True),
])
def test_to_expr_folds_long_chains(pattern: str, words: list[str], outside: bool) -> None:
    from pda.frontends.regex import regex_to_ir

    p = fsm.from_expr(regex_to_ir(pattern, dialect="ecmascript", search=True))
    base = fsm.complement(fsm.literal_set_dfa(words))
    d = fsm.difference(base, p) if outside else fsm.intersect(base, p)
    e = dfa_to_ir.to_expr(d)
    assert _depth(e) < 60  # counted repetitions, not hundreds of nested levels
    back = fsm.from_expr(e)
    assert fsm.is_empty(fsm.difference(back, d)) and fsm.is_empty(fsm.difference(d, back))
    rules: dict[str, object] = {}

    def add(name: str, body: object) -> str:
        rules[name] = body
        return name

    r = dfa_to_ir._rules(d, dfa_to_ir.default_label, add, "k")  # the rule-per-state fallback folds them too
    assert len(rules) < 40
    g = Grammar.from_ir(GrammarIR({"root": r, **rules}, "root"))  # type: ignore[dict-item]
    rng = random.Random(3)
    for n in [0, 1, 2, 3, 5, 6, 7, 89, 90, 180, 199, 200, 201, 202, 299, 300, 301, 302]:
        for _ in range(3):
            w = "".join(rng.choice("ab" if "a" in pattern else "ix_d") for _ in range(n))
            for text in (w, w + "c", "x" + w, "x" + w + "c", "a" * n + "b", "x" * n):
                assert g.accepts(text) == fsm.matches(d, text), text


def test_json_key_is_json_equality() -> None:
    from pda.frontends.json_schema.merge import json_equal, json_key

    values = [None, True, False, 0, 1, -0.0, 0.0, 1.0, 1.5, 2, "1", "", "a", [], [1], [1.0], [True], {}, {"a": 1},
              {"a": 1.0}, {"a": True}, {"b": 1}, {"a": 1, "b": [None]}, {"b": [None], "a": 1}, [[1, {"x": 0}]],
              [[1.0, {"x": -0.0}]], 10 ** 20, 1e20]
    for a in values:
        for b in values:
            assert (json_key(a) == json_key(b)) == json_equal(a, b), (a, b)


def test_inlining_a_chain_of_single_use_rules_flattens_once() -> None:
    """A chain of single-use rules, each ending with a call of the next (a big object's members),
    is inlined into one flat Seq, literals merged across the rules, the same as nesting ``seq``
    level by level would give; and a callee inside a choice is inlined whole."""
    from pda.frontends.json_schema.tidy import inline_single_use
    from pda.ir import Ref, alt, chars, lit, seq

    n = 300
    digit = chars([(0x30, 0x39)])
    rules = {"root": seq(lit("{"), Ref("m0"))}
    for k in range(n):
        nxt = Ref(f"m{k + 1}") if k + 1 < n else lit("}")
        rules[f"m{k}"] = seq(lit(f'"k{k}":'), digit, lit(","), alt(Ref(f"v{k}"), lit("null")), nxt)
        rules[f"v{k}"] = seq(lit("["), digit, lit("]"))
    want = lit("}")
    for k in reversed(range(n)):
        want = seq(lit(f'"k{k}":'), digit, lit(","), alt(seq(lit("["), digit, lit("]")), lit("null")), want)
    want = seq(lit("{"), want)
    assert inline_single_use(rules, "root") == {"root": want}


def test_pattern_and_not_pattern_stay_one_expression() -> None:
    """A 16-state DFA whose expression passes 4,000 nodes (Github_hard/o32451) is inlined as an
    expression, not one rule per DFA state (those cost a push per character in every token walk),
    and still matches exactly what ``re`` says."""
    good, bad = r"\.(json|png|tbin|tmx|xnb) *$", "\b" r"\.\.[/]"  # a backspace, as the schema has it
    g = Grammar.from_json_schema({"type": "string", "allOf": [{"pattern": good}, {"not": {"pattern": bad}}]})
    assert not [n for n in g.normal.rules if n.startswith("str_")], list(g.normal.rules)
    rng = random.Random(7)
    pieces = ["a", ".", "/", "..", "../", "json", "png", "tmx", "xnb", "tbin", " ", "é", "-", "\b", "\b.."]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 7))) for _ in range(400)]
    texts += ["x.json", "a/../b.png", "../x.tmx", "x.xnb  ", "dir/.../a.tbin", "..json", "\b../a.png", "\b..a.png"]
    for t in texts:
        want = bool(re.search(good, t)) and not re.search(bad, t)
        assert g.accepts(json.dumps(t)) == want, t
