"""UTF-8 lowering and per-rule DFAs."""

from __future__ import annotations

import random

import numpy as np
import pytest

from pda.fsm import utf8_sequences
from pda.kernels import run_simple, run_simple_reference

from .util import G
from pda.ir import Ref, alt, chars, lit, plus, seq, star


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
