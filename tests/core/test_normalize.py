"""Normalisation passes that change the shape of rules but not the language."""

from __future__ import annotations

import itertools
import random
import re

import pytest

from pda import normalize as norm
from pda.ir import alt, chars, lit, repeat, seq

from .util import G


@pytest.mark.parametrize("seed", range(6))
def test_long_counted_repeats_split_into_blocks_keep_the_language(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(norm, "REPEAT_SPLIT_SIZE", 3)  # split even short repeats
    rng = random.Random(seed)
    for _ in range(12):
        lo = rng.randint(0, 9)
        hi = rng.choice([lo, lo + rng.randint(1, 12), None])
        item, pattern = rng.choice([(lit("a"), "a"), (chars([(97, 98)]), "[ab]"), (alt(lit("ab"), lit("b")), "(?:ab|b)")])
        body = seq(lit("<"), repeat(item, lo, hi), lit(">"))
        g = G({"root": body})
        if (hi or lo) > 4:
            assert any(n.startswith("$rep") for n in g.normal.rules), (lo, hi)
        rx = re.compile("<" + f"(?:{pattern}){{{lo},{'' if hi is None else hi}}}" + ">")
        for n in range(0, (hi or lo) + 3):
            for s in {"".join(rng.choice("ab") for _ in range(n)) for _ in range(6)} | {"a" * n, "b" * n}:
                text = f"<{s}>"
                assert g.accepts(text) == bool(rx.fullmatch(text)), (lo, hi, pattern, text)


def test_split_repeat_prefixes_are_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(norm, "REPEAT_SPLIT_SIZE", 2)
    g = G({"root": seq(repeat(chars([(97, 98)]), 2, 11), lit("."))})
    assert len(g.normal.rules) > 1
    for n in range(0, 14):
        for s in map("".join, itertools.product("ab", repeat=min(n, 3))):
            text = s + "a" * (n - len(s))
            assert g.is_prefix(text) == (n <= 11)
            assert g.is_prefix(text + ".") == (2 <= n <= 11) == g.accepts(text + ".")


def test_max_length_strings_stay_small() -> None:
    from pda import Grammar

    g = Grammar.from_json_schema({"type": "string", "maxLength": 4096})
    assert g.automaton.num_states < 5000
    assert g.accepts('"' + "é" * 4096 + '"') and not g.accepts('"' + "x" * 4097 + '"')
