"""Normalisation passes that change the shape of rules but not the language."""

from __future__ import annotations

import itertools
import random
import re

import pytest

from pda import counted_repeats
from pda.ir import alt, chars, lit, ref_counts, repeat, seq

from .util import G


@pytest.mark.parametrize("seed", range(6))
def test_long_counted_repeats_split_into_blocks_keep_the_language(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(counted_repeats, "REPEAT_SPLIT_SIZE", 3)  # split even short repeats
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
    monkeypatch.setattr(counted_repeats, "REPEAT_SPLIT_SIZE", 2)
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


@pytest.mark.parametrize("seed", range(4))
def test_repeats_of_large_items_call_item_rules_and_keep_the_language(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A repeat whose items hold counted repeats of their own (an array of bounded strings) calls a
    rule per item; the other copies of the item (the array's first) call it too."""
    monkeypatch.setattr(counted_repeats, "REPEAT_SPLIT_SIZE", 8)
    rng = random.Random(seed)
    for k in range(8):
        inner, outer = rng.randint(2, 6), rng.randint(3, 8)
        word = repeat(chars([(97, 98)]), 1, inner)
        item = seq(lit("("), word, lit(")"))
        # a large part of the item (the word) is called, from both copies; or, when no part is
        # large (the item only is), the repeat's whole body
        monkeypatch.setattr(counted_repeats, "REPEAT_ITEM_RULE_SIZE", 3 if k % 2 else 8)
        g = G({"root": seq(lit("["), item, repeat(seq(lit(","), item), 0, outer - 1), lit("]"))})
        calls = [n for body in g.normal.rules.values() for n, c in ref_counts(body).items() for _ in range(c)]
        rule = [n for n, body in g.normal.rules.items() if body == (word if k % 2 else seq(lit(","), item))]
        assert rule and calls.count(rule[0]) >= (2 if k % 2 else 1), (inner, outer, g.normal.rules)
        rx = re.compile(rf"\[\([ab]{{1,{inner}}}\)(?:,\([ab]{{1,{inner}}}\)){{0,{outer - 1}}}\]")
        for n in range(1, outer + 2):
            for m in (1, inner, inner + 1):
                for _ in range(3):
                    words = ["".join(rng.choice("ab") for _ in range(rng.randint(1, m))) for _ in range(n)]
                    words[rng.randrange(n)] = "a" * m
                    text = "[" + ",".join(f"({w})" for w in words) + "]"
                    assert g.accepts(text) == bool(rx.fullmatch(text)), (inner, outer, text)
                    assert g.is_prefix(text[:-1]) == bool(rx.fullmatch(text)), (inner, outer, text)


def test_arrays_of_bounded_strings_stay_small() -> None:
    """64 items of at most 256 characters were 64 copies of a 256-character automaton (past
    ``max_states``); each item is now a call of one."""
    from pda import Grammar

    item = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 256}}, "required": ["a"],
            "additionalProperties": False}
    g = Grammar.from_json_schema({"type": "array", "items": item, "maxItems": 64})
    assert g.automaton.num_states < 30000
    doc = '[' + ",".join('{"a":"' + "é" * 256 + '"}' for _ in range(64)) + ']'
    assert g.accepts(doc)
    assert not g.accepts(doc[:-1] + ',{"a":""}]')
    assert not g.accepts(doc.replace("é" * 256, "é" * 257, 1))


def test_deep_nesting_with_a_short_repeat_at_the_bottom_compiles() -> None:
    """Weighing repeats walks the tree without recursion: 700 levels, deeper than Python recurses
    (two nodes a level), with ``[ab]{0,3}`` at the bottom, leave nothing to split and compile."""
    deep = repeat(chars([(97, 98)]), 0, 3)
    for _ in range(700):
        deep = alt(lit(""), seq(chars([(97, 98)]), deep))
    g = G({"root": deep})
    assert g.accepts("ab" * 350 + "aaa") and not g.accepts("a" * 704)
    assert counted_repeats.unrolled_size(deep, {}) == 700 * 4 + 4  # a level: Alt, "", Seq, [ab]


def test_item_rules_beside_nesting_deeper_than_python_recurses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The other copies of an item are found without recursion too, past 700 nested levels."""
    monkeypatch.setattr(counted_repeats, "REPEAT_SPLIT_SIZE", 8)
    monkeypatch.setattr(counted_repeats, "REPEAT_ITEM_RULE_SIZE", 3)
    deep = lit("x")
    for _ in range(700):
        deep = alt(lit(""), seq(chars([(97, 98)]), deep))
    item = seq(lit("("), repeat(chars([(99, 100)]), 1, 4), lit(")"))
    g = G({"root": seq(deep, lit("["), item, repeat(seq(lit(","), item), 0, 5), lit("]"))})
    assert any(n.startswith("$rep") for n in g.normal.rules)
    assert g.accepts("ab" * 300 + "[(cd),(c)]") and g.accepts("ab" * 350 + "x[(cdcd),(c),(c),(c),(c),(c)]")
    assert not g.accepts("[(cdcdc)]") and not g.accepts("[(c),(c),(c),(c),(c),(c),(c)]")
