"""The matcher against Lark's Earley parser on random grammars, plus rollback, limits, ambiguity."""

from __future__ import annotations

import itertools
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark import Lark
from lark.exceptions import LarkError

from pda import LimitExceededError
from pda.ir import Alt, Bytes, CharClass, Expr, Ref, Repeat, Seq, alt, chars, lit, opt, plus, repeat, seq, star

from .util import G

NAMES = ["r0", "r1", "r2", "r3"]


def to_lark(e: Expr) -> str:
    """IR (over single-byte ASCII literals and classes) as a Lark expression; ``_e`` is the empty rule."""
    if isinstance(e, Bytes):
        return "_e" if not e.data else " ".join(f'"{chr(b)}"' for b in e.data)
    if isinstance(e, CharClass):
        return "(" + " | ".join(f'"{chr(c)}"' for lo, hi in e.ranges for c in range(lo, hi + 1)) + ")"
    if isinstance(e, Seq):
        return "(" + " ".join(to_lark(i) for i in e.items) + ")"
    if isinstance(e, Alt):
        return "(" + " | ".join(to_lark(i) for i in e.items) + ")"
    if isinstance(e, Repeat):
        inner = f"({to_lark(e.expr)})"
        parts = [inner] * e.min + ([inner + "*"] if e.max is None else [inner + "?"] * (e.max - e.min))
        return "(" + " ".join(parts) + ")" if parts else "_e"
    if isinstance(e, Ref):
        return e.name
    raise TypeError(e)


def lark_parser(rules: dict[str, Expr]) -> Lark:
    text = "\n".join(f"{n}: {to_lark(b)}" for n, b in rules.items()) + "\n_e: \n"
    # ambiguity="forest": only acceptance matters, and building a tree from the shared forest of a
    # highly ambiguous random grammar can take exponential time
    return Lark(text, start="r0", parser="earley", lexer="dynamic_complete", ambiguity="forest")


def lark_accepts(p: Lark, s: str) -> bool:
    try:
        p.parse(s)
        return True
    except LarkError:
        return False


leaf = st.one_of(
    st.sampled_from([lit("a"), lit("b"), lit("ab"), lit(""), chars([(97, 98)])]),
    st.sampled_from(NAMES).map(Ref),
)


def _extend(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    return st.one_of(
        st.lists(children, min_size=2, max_size=3).map(lambda xs: seq(*xs)),
        st.lists(children, min_size=2, max_size=3).map(lambda xs: alt(*xs)),
        children.map(opt), children.map(star), children.map(plus),
        st.tuples(children, st.integers(0, 2), st.integers(0, 2)).map(lambda t: repeat(t[0], t[1], t[1] + t[2])),
    )


body = st.recursive(leaf, _extend, max_leaves=6)
# each rule has a base case so the grammar is productive
rule = st.tuples(body, st.sampled_from([lit("a"), lit("b"), lit("ba")])).map(lambda t: alt(t[0], t[1]))
grammars = st.lists(rule, min_size=len(NAMES), max_size=len(NAMES)).map(lambda bs: dict(zip(NAMES, bs)))
ALL_STRINGS = ["".join(p) for n in range(0, 5) for p in itertools.product("ab", repeat=n)]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grammars)
def test_accepts_agrees_with_earley_on_random_grammars(rules: dict[str, Expr]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unused rules are expected here
        g = G(rules, start="r0")
    p = lark_parser(rules)
    accepted = set()
    for s in ALL_STRINGS:
        got = g.accepts(s)
        assert got == lark_accepts(p, s), (s, g.to_ebnf(), g.to_ebnf(normalized=True))
        if got:
            accepted.add(s)
    # every prefix of an accepted string is a viable prefix; a dead prefix has no accepted extension
    for s in ALL_STRINGS:
        viable = g.is_prefix(s)
        if any(a.startswith(s) for a in accepted):
            assert viable, s
        if not viable:
            assert not any(a.startswith(s) for a in accepted)


LEFT_RECURSIVE = {
    "direct": {"r0": alt(seq(Ref("r0"), lit("+"), lit("a")), lit("a"))},
    "indirect": {"r0": alt(seq(Ref("r1"), lit("x")), lit("a")), "r1": alt(seq(Ref("r0"), lit("y")), lit("b"))},
    "hidden": {"r0": alt(seq(Ref("r1"), Ref("r0"), lit("x")), lit("a")), "r1": opt(lit("z"))},
    "nullable_cycle": {"r0": alt(seq(Ref("r1"), lit("x")), lit("a")), "r1": alt(Ref("r0"), lit(""))},
    "self_and_ss": {"r0": alt(seq(Ref("r0"), Ref("r0")), lit("a"), lit("b"))},
    "star_left": {"r0": seq(star(Ref("r1")), Ref("r0"), lit("c")) if False else alt(seq(star(lit("z")), Ref("r0"), lit("c")), lit("a"))},
}


@pytest.mark.parametrize("name", list(LEFT_RECURSIVE))
def test_left_recursion_forms_agree_with_earley(name: str) -> None:
    rules = LEFT_RECURSIVE[name]
    g = G(rules, start="r0")
    p = lark_parser(rules)
    for s in ["".join(t) for n in range(0, 6) for t in itertools.product("abxyz+c", repeat=min(n, 3))]:
        assert g.accepts(s) == lark_accepts(p, s), s


def test_highly_ambiguous_grammar_200_bytes() -> None:
    g = G({"root": Ref("s"), "s": alt(seq(Ref("s"), Ref("s")), lit("a"))})
    assert g.accepts("a" * 200)
    assert not g.accepts("a" * 199 + "b")
    g3 = G({"root": Ref("s"), "s": alt(seq(Ref("s"), Ref("s"), Ref("s")), seq(Ref("s"), lit("+"), Ref("s")), lit("a"))})
    assert g3.accepts("+".join("a" * 100))
    assert not g3.accepts("+".join("a" * 100) + "+")


NESTED = {"root": Ref("v"), "v": alt(seq(lit("("), star(Ref("v")), lit(")")), lit("x"))}


def test_byte_matcher_feed_rollback_and_refusal() -> None:
    g = G(NESTED)
    m = g.matcher()
    assert m.feed("((x") and not m.is_complete()
    before = m.allowed_bytes()
    assert not m.feed("x)q")  # refused as a whole: nothing changes
    assert m.num_bytes == 3 and m.allowed_bytes() == before
    assert m.feed("))")
    assert m.is_complete()
    m.rollback(2)
    assert m.num_bytes == 3 and not m.is_complete() and m.allowed_bytes() == before
    assert m.can_feed("))") and m.num_bytes == 3
    m.rollback(3)
    assert m.allowed_bytes() == (ord("("), ord("x"))
    with pytest.raises(ValueError, match="cannot roll back 1 bytes"):
        m.rollback(1)
    for ch in "(x(x)x)":
        assert m.feed(ch)
    assert m.is_complete()
    m.reset()
    assert m.num_bytes == 0 and not m.is_complete()


def test_validate_reports_offset_line_column_expected() -> None:
    g = G({"root": Ref("v"), "v": alt(seq(lit("("), star(Ref("v")), lit(")")), lit("x"), lit("\n"))})
    with pytest.raises(Exception) as info:
        g.validate("(x\n(y))")
    err = info.value
    assert (err.offset, err.line, err.column) == (4, 2, 2)
    assert set(err.expected) == {ord("("), ord(")"), ord("x"), ord("\n")}
    assert "expected 0x0A, '('-')', 'x'" in str(err) and "\n     ^" in str(err)
    with pytest.raises(Exception, match="text ends before the grammar is complete"):
        g.validate("((x)")


def test_limits_are_errors() -> None:
    with pytest.raises(LimitExceededError, match="max_states=10"):
        G({"root": repeat(lit("abc"), 0, 50)}, max_states=10)
    g = G(NESTED, max_stack_depth=20)
    assert g.accepts("(" * 15 + ")" * 15)
    with pytest.raises(LimitExceededError, match="max_stack_depth=20"):
        g.accepts("(" * 30)


def test_compile_time_is_a_limit() -> None:
    import time

    from pda import Grammar
    from pda.limits import compile_budget

    big = {"root": seq(lit("<"), *(repeat(lit(f"x{i}"), 0, 300) for i in range(40)), lit(">"))}  # 48k NFA states
    t0 = time.monotonic()
    with pytest.raises(LimitExceededError, match="max_compile_seconds=1e-06"):
        G(big, max_compile_seconds=1e-6)
    assert time.monotonic() - t0 < 5
    with pytest.raises(LimitExceededError, match="max_compile_seconds"):
        Grammar.from_json_schema({"type": "string", "maxLength": 5000}, max_compile_seconds=1e-6)
    with pytest.raises(ValueError, match="max_compile_seconds"):
        G({"root": lit("a")}, max_compile_seconds=0)
    # an outer budget covers a nested one; a spent budget leaves no trace on the next compile
    with compile_budget(1e-6), pytest.raises(LimitExceededError):
        G(big, max_compile_seconds=None)
    assert G(big, max_compile_seconds=None).accepts("<x0x1>")


def test_deep_nesting_and_exponential_inlining() -> None:
    deep = lit("x")
    for _ in range(3000):
        deep = alt(lit(""), seq(chars([(97, 98)]), deep))
    # nothing for normalisation to rewrite in it (no call, no nullable repeat): it is not walked
    g = G({"root": deep})
    assert g.accepts("ab" * 1500 + "x") and g.accepts("a" * 7) and not g.accepts("a" * 3001 + "x")
    # a call of a nullable rule at the bottom: every level is rewritten, deeper than Python recurses
    deep = Ref("n")
    for _ in range(3000):
        deep = alt(lit(""), seq(chars([(97, 98)]), deep))
    with pytest.raises(LimitExceededError, match="recursion_limit"):
        G({"root": deep, "n": opt(lit("x"))})
    # each rule calls the one below twice: inlining them all would write 2^19 copies
    rules: dict[str, Expr] = {"x0": lit("v")}
    rules.update({f"x{i}": seq(lit("["), Ref(f"x{i - 1}"), star(seq(lit(","), Ref(f"x{i - 1}"))), lit("]"))
                  for i in range(1, 20)})
    rules["root"] = Ref("x19")
    g = G(rules)
    assert g.automaton.num_states < 1000
    assert g.accepts("[" * 19 + "v,v" + "]" * 19) and not g.accepts("[" * 18 + "v" + "]" * 18)
