"""UTF-8 lowering and per-rule DFAs."""

from __future__ import annotations

import random
import sys

import numpy as np
import pytest

from pda.errors import LimitExceededError
from pda.grammar import Grammar
from pda.fsm import _minimize, _subset, build_rule_dfa, determinize, utf8_sequences
from pda.kernels import run_simple, run_simple_reference
from pda.utf8 import leaf_fragment

from .util import G
from pda.ir import EPSILON, NOTHING, ByteClass, CharClass, Ref, Repeat, Seq, alt, chars, lit, plus, repeat, seq, star


def _expand(seqs: list[list[tuple[int, int]]]) -> set[bytes]:
    out: set[bytes] = set()
    for s in seqs:
        partial = [b""]
        for lo, hi in s:
            partial = [p + bytes([b]) for p in partial for b in range(lo, hi + 1)]
        out.update(partial)
    return out


@pytest.mark.parametrize(
    "lo,hi",
    [(0, 0x7F), (0x41, 0x5A), (0x7F, 0x80), (0x80, 0x7FF), (0x7FF, 0x800), (0x800, 0xFFFF), (0xD700, 0xE100),
     (0xFFFF, 0x10000), (0x1F600, 0x1F64F), (0x3A5, 0x2A6F), (0x10FF00, 0x10FFFF)],
)
def test_utf8_sequences_cover_exactly_the_encodings(lo: int, hi: int) -> None:
    want = {chr(c).encode() for c in range(lo, hi + 1) if not 0xD800 <= c <= 0xDFFF}
    assert _expand(utf8_sequences(lo, hi)) == want


def test_utf8_sequences_random_ranges() -> None:
    rng = random.Random(7)
    for _ in range(40):
        a = rng.randrange(0, 0x10FFFF)
        b = min(0x10FFFF, a + rng.choice([0, 1, 50, 3000, 70000]))
        if b - a > 5000:
            # check endpoints and a sample only (full expansion is large)
            got = utf8_sequences(a, b)
            for c in [a, b, *(rng.randrange(a, b + 1) for _ in range(200))]:
                enc = chr(c).encode("utf-8", "surrogatepass")
                hit = any(len(s) == len(enc) and all(lo <= x <= hi for (lo, hi), x in zip(s, enc)) for s in got)
                assert hit == (not 0xD800 <= c <= 0xDFFF)
        else:
            want = {chr(c).encode() for c in range(a, b + 1) if not 0xD800 <= c <= 0xDFFF}
            assert _expand(utf8_sequences(a, b)) == want


def test_leaf_fragments_do_not_keep_their_nodes() -> None:
    """The fragment table is keyed by a leaf's bytes or ranges: it keeps no node alive (thousands
    of cached nodes made every full garbage collection of a server's process longer)."""
    for node in (CharClass(((0x4E00, 0x4E07), (0x4E10, 0x4E11))), lit("\u00e9t\u00e9"), ByteClass(((0x80, 0x8F),))):
        before = sys.getrefcount(node)
        first = leaf_fragment(node)
        assert sys.getrefcount(node) == before
        assert leaf_fragment(node) == first


def test_any_char_never_matches_invalid_utf8() -> None:
    g = G({"root": star(chars([(0, 0x10FFFF)]))})
    assert g.accepts("héllo wörld 中文 😀".encode())
    for bad in [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xe4\xb8"]:
        assert not g.accepts(bad), bad
    assert g.is_prefix(b"\xe4\xb8")  # an unfinished character can still be completed


def test_dfa_is_minimal_for_equivalent_alternatives() -> None:
    a = G({"root": alt(seq(lit("ab"), star(lit("c"))), seq(lit("a"), lit("b"), star(lit("c"))))})
    b = G({"root": seq(lit("ab"), star(lit("c")))})
    assert a.automaton.num_states == b.automaton.num_states == 3


@pytest.mark.parametrize("seed", range(5))
def test_run_simple_kernel_matches_reference(seed: int) -> None:
    g = G({"root": Ref("v"), "v": alt(seq(lit("["), star(alt(Ref("v"), lit(","))), lit("]")), plus(chars([(97, 100)])))})
    a = g.automaton
    rng = np.random.default_rng(seed)
    data = rng.choice(np.frombuffer(b"[],abcdx", dtype=np.uint8), size=64)
    for s in range(a.num_states):
        for pos in (0, 5, 63):
            got = run_simple(a.trans, a.byte_class, a.simple, s, data, pos, len(data))
            ref = run_simple_reference(a.trans, a.byte_class, a.simple, s, data, pos, len(data))
            assert tuple(int(x) for x in got) == ref


# ----------------------------------------------------------------------------- minimisation oracle


def _random_expr(rng: random.Random, depth: int):  # type: ignore[no-untyped-def]
    leaves = [lambda: lit(rng.choice(["a", "b", "ab", "ba", "c"])), lambda: chars([(97, 98)]),
              lambda: chars([(0x3B1, 0x3B3)]), lambda: Ref(rng.choice(["x", "y"]))]
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(leaves)()
    kind = rng.randrange(5)
    parts = [_random_expr(rng, depth - 1) for _ in range(rng.randint(1, 3))]
    if kind == 0:
        return seq(*parts)
    if kind == 1:
        return alt(*parts)
    if kind == 2:
        return star(parts[0])
    if kind == 3:
        return plus(parts[0])
    lo = rng.randint(0, 3)
    return repeat(parts[0], lo, rng.choice([lo, lo + 2, None]))


def _live(d) -> list[bool]:  # type: ignore[no-untyped-def]
    n = len(d.trans)
    live = list(d.accept)
    changed = True
    while changed:
        changed = False
        for s in range(n):
            if not live[s] and (any(t >= 0 and live[t] for t in d.trans[s]) or any(live[t] for t in d.calls[s].values())):
                live[s] = changed = True
    return live


def _moore_blocks(d) -> int:  # type: ignore[no-untyped-def]
    """Number of classes of language-equivalent live states, by naive Moore refinement."""
    live = _live(d)
    states = [s for s in range(len(d.trans)) if live[s]]
    block = {s: int(d.accept[s]) for s in states}
    while True:
        def sig(s: int) -> tuple:  # type: ignore[type-arg]
            row = tuple(block[t] if t >= 0 and live[t] else -1 for t in d.trans[s])
            calls = tuple(sorted((r, block[t]) for r, t in d.calls[s].items() if live[t]))
            return (block[s], row, calls)
        sigs = {s: sig(s) for s in states}
        ids = {k: i for i, k in enumerate(sorted(set(sigs.values())))}
        new = {s: ids[sigs[s]] for s in states}
        if len(set(new.values())) == len(set(block.values())):
            return len(ids)
        block = new


def _equivalent(a, b) -> bool:  # type: ignore[no-untyped-def]
    """Same language: walk the product of the two DFAs' live parts from their starts."""
    la, lb = _live(a), _live(b)
    todo, seen = [(0, 0)], {(0, 0)}
    while todo:
        p, q = todo.pop()
        pl, ql = p >= 0 and la[p], q >= 0 and lb[q]
        if pl != ql:
            return False
        if not pl:
            continue
        if a.accept[p] != b.accept[q]:
            return False
        nexts = [(int(x), int(y)) for x, y in zip(a.trans[p], b.trans[q])]
        nexts += [(a.calls[p].get(r, -1), b.calls[q].get(r, -1)) for r in set(a.calls[p]) | set(b.calls[q])]
        for x, y in nexts:
            if (x, y) not in seen:
                seen.add((x, y))
                todo.append((x, y))
    return True


@pytest.mark.parametrize("seed", range(8))
def test_minimisation_matches_moore_refinement(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(60):
        e = _random_expr(rng, 5)
        raw = determinize(e, {"x": 1, "y": 2}, max_states=100_000)
        small = build_rule_dfa(e, {"x": 1, "y": 2}, max_states=100_000)
        want = max(_moore_blocks(raw), 1)
        assert len(small.trans) == want, e
        assert _equivalent(raw, small), e
        assert small.trans.dtype == np.int32 and small.trans.shape[1] == len(raw.bounds) - 1


# ----------------------------------------------------------------------------- Thompson kernel == Python reference


def _same_dfa(a, b) -> bool:  # type: ignore[no-untyped-def]
    return (a.bounds == b.bounds and np.array_equal(a.trans, b.trans) and list(a.calls) == list(b.calls)
            and list(a.accept) == list(b.accept))


_CORNERS = [
    EPSILON, NOTHING, Seq(()), Repeat(lit("a"), 0, 0), Repeat(lit("ab"), 2, 2), ByteClass(()), CharClass(()),
    ByteClass(((0, 0x7F), (0xC0, 0xFF))), seq(Ref("x"), EPSILON, Ref("y")), Repeat(EPSILON, 0, None),
    alt(EPSILON, lit("a")), chars([(0, 0x10FFFF)]), repeat(alt(Ref("x"), chars([(0xD7F0, 0xE010)])), 1, 4),
]


@pytest.mark.parametrize("e", _CORNERS, ids=range(len(_CORNERS)))
def test_thompson_kernel_matches_reference_on_corners(e) -> None:  # type: ignore[no-untyped-def]
    index = {"x": 1, "y": 2}
    assert _same_dfa(determinize(e, index, max_states=10_000), determinize(e, index, max_states=10_000, reference=True))


@pytest.mark.parametrize("seed", range(6))
def test_thompson_kernel_matches_reference(seed: int) -> None:
    """Same subset-construction DFA (numbering included) from the kernel's NFA and the Python one,
    on random expressions whose subtrees are shared between parents (the DAGs frontends make)."""
    rng = random.Random(seed)
    index = {"x": 1, "y": 2}
    for _ in range(40):
        shared = _random_expr(rng, 3)
        e = _random_expr(rng, 4)
        e = alt(seq(shared, e), repeat(shared, rng.randint(0, 2), rng.choice([2, 3, None])), seq(e, shared))
        got = determinize(e, index, max_states=100_000)
        want = determinize(e, index, max_states=100_000, reference=True)
        assert _same_dfa(got, want), e
        assert _same_dfa(build_rule_dfa(e, index, max_states=100_000), _minimize(want)), e


@pytest.mark.parametrize("e", [repeat(lit("abc"), 400, 400), repeat(chars([(0, 0x10FFFF)]), 0, 300), seq(*[lit(c) for c in "xyz"] * 1)])
def test_thompson_kernel_state_limit_like_reference(e) -> None:  # type: ignore[no-untyped-def]
    for limit in (2, 3, 50, 1200):
        outcomes = []
        for reference in (False, True):
            try:
                determinize(e, {}, max_states=limit, reference=reference)
                outcomes.append("ok")
            except LimitExceededError as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1], (limit, outcomes)


# ----------------------------------------------------------------------------- merged byte classes (symbols)


_STRING_BYTE = ByteClass(((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x7F)))
_ESCAPED = ByteClass(((0x22, 0x22), (0x5C, 0x5C), (0x6E, 0x6E)))


def test_symbols_merge_classes_no_edge_tells_apart() -> None:
    # a string body: any byte but '"' and '\\', then '"' or an escape; the classes below '"', between
    # the two and above '\\' are alike everywhere, so they are one symbol
    e = seq(star(alt(_STRING_BYTE, seq(lit("\\"), _ESCAPED))), lit('"'))
    bounds, symbol, trans, _, _ = _subset(e, {}, 10_000, reference=False)
    assert trans.shape[1] < len(bounds) - 1
    k = {b: int(np.searchsorted(bounds, b, side="right")) - 1 for b in (0x20, 0x23, 0x5D, 0x22, 0x5C, 0x6E)}
    assert symbol[k[0x20]] == symbol[k[0x23]] == symbol[k[0x5D]]
    assert len({int(symbol[k[b]]) for b in (0x20, 0x22, 0x5C, 0x6E)}) == 4
    firsts = [int(np.flatnonzero(symbol == g)[0]) for g in range(trans.shape[1])]
    assert firsts == sorted(firsts)  # symbols numbered by their first class


@pytest.mark.parametrize("seed", range(6))
def test_merged_classes_give_the_same_dfas(seed: int) -> None:
    """The subset construction over merged symbols is the one over byte classes, numbering included;
    so is the minimal DFA (the minimiser runs over symbols too)."""
    rng = random.Random(100 + seed)
    index = {"x": 1, "y": 2}
    for _ in range(40):
        body = star(alt(_STRING_BYTE, seq(lit("\\"), _ESCAPED), _random_expr(rng, 2)))
        e = alt(seq(_random_expr(rng, 4), body, _random_expr(rng, 3)), _random_expr(rng, 4))
        plain = determinize(e, index, max_states=100_000, merge_classes=False)
        assert _same_dfa(determinize(e, index, max_states=100_000), plain), e
        assert _same_dfa(build_rule_dfa(e, index, max_states=100_000), _minimize(plain)), e


def test_equal_tails_are_built_once() -> None:
    """Choices that end alike (an object's optional members, each followed by the rest of the
    object) share the NFA of their tail, so the subset construction does not copy it per choice:
    the DFA before minimisation is about as small as the minimal one.  The tails are equal but
    distinct objects, as frontends often make them."""
    def tail():  # type: ignore[no-untyped-def]
        return seq(lit(":"), repeat(chars([(0x61, 0x7A)]), 0, 40), lit(";"))

    e = alt(*(seq(lit(w), tail()) for w in ("alpha", "beta", "gamma", "delta", "epsilon")))
    raw = determinize(e, {}, max_states=100_000)
    small = build_rule_dfa(e, {}, max_states=100_000)
    assert len(small.trans) > 40
    assert len(raw.trans) <= len(small.trans) + 10, (len(raw.trans), len(small.trans))  # words end alike: 8
    assert _same_dfa(raw, determinize(e, {}, max_states=100_000, reference=True))


def test_literals_share_their_ends() -> None:
    """A choice of literals determinises to about its minimal DFA: the NFA builds each literal
    byte by byte from its end, sharing the states of equal ends, so the subset construction does
    not build the trie of all prefixes first (for 50,000 enum strings that trie passed
    ``max_states`` while the minimal DFA fits)."""
    rng = random.Random(7)
    words = sorted({"".join(rng.choice("abcdefgh") for _ in range(rng.randint(3, 9))) + "ing" for _ in range(400)})
    e = alt(*(lit(w) for w in words))
    raw = determinize(e, {}, max_states=100_000)
    small = build_rule_dfa(e, {}, max_states=100_000)
    trie = len({w[:i] for w in words for i in range(len(w))})
    assert len(raw.trans) <= len(small.trans) + 2 < trie, (len(raw.trans), len(small.trans), trie)
    assert _same_dfa(raw, determinize(e, {}, max_states=100_000, reference=True))


def test_enum_of_50000_strings_fits_the_default_state_limit() -> None:
    rng = random.Random(0)
    words: set[str] = set()
    while len(words) < 50_000:
        words.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyz_") for _ in range(rng.randint(4, 14))))
    g = Grammar.from_json_schema({"enum": sorted(words)})
    assert g.automaton.num_states < 200_000
    word = sorted(words)[123]
    assert g.accepts(f"\"{word}\"") and not g.accepts(f"\"{word}x\"")
