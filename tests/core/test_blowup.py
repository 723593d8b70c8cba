"""Rules whose subset construction blows up keep their inlined parts as calls
(:func:`pda.automaton.automaton_of`, :class:`pda.fsm.SubsetBlowup`), with the same language."""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest

from pda import Grammar
from pda.automaton import automaton_of, build_automaton
from pda.errors import LimitExceededError
from pda.ir import ref_names
from pda.normalize import normalize

GRAMMARS = Path(__file__).resolve().parents[2] / "grammars"

# "[ab]*a[ab]{12}": the last-13th-letter language, whose DFA needs 2^13 states.  Written as two
# rules called once, both are inlined into root and the subset construction blows up.
SPLIT = 'root ::= x y\nx ::= [ab]* "a"\ny ::= [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab]\n'
WHOLE = 'root ::= [ab]* "a" [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab] [ab]\n'
LANGUAGE = re.compile("[ab]*a[ab]{12}")


def test_a_blown_up_rule_calls_its_parts_and_keeps_its_language() -> None:
    g = Grammar.from_ebnf(SPLIT, max_states=2000)  # the inlined root alone would need 8192
    assert g.normal.keep_calls == {("root", "y")}  # the heavier part first; that was enough
    assert g.automaton.num_states < 100
    rng = random.Random(0)
    for n in range(0, 40):
        for text in {"".join(rng.choice("ab") for _ in range(n)) for _ in range(20)}:
            assert g.accepts(text) == bool(LANGUAGE.fullmatch(text)), text
            assert g.is_prefix(text)
    assert not g.is_prefix("abc")


def test_a_blown_up_rule_with_nothing_inlined_is_still_refused_by_max_states() -> None:
    with pytest.raises(LimitExceededError, match="max_states=2000"):
        Grammar.from_ebnf(WHOLE, max_states=2000)
    g = Grammar.from_ebnf(WHOLE)
    assert g.automaton.num_states == 2 ** 13 and g.normal.keep_calls == frozenset()


def test_rules_built_again_after_a_blowup_equal_a_fresh_build() -> None:
    """The DFAs reused across rounds (:class:`pda.fsm.BuiltRules`) have their calls renumbered."""
    text = SPLIT + 'z ::= "(" z ")" | root\n'
    g = Grammar.from_ebnf(text.replace("root ::= x y", "root ::= x y | \"[\" z \"]\""))
    fresh = build_automaton(normalize(g.ir, keep_calls=g.normal.keep_calls))
    assert g.normal.keep_calls
    for a, b in zip(g.automaton.arrays(), fresh.arrays()):
        assert np.array_equal(a, b)


def test_kept_calls_stay_calls_in_that_rule_only() -> None:
    ir = Grammar.from_ebnf('root ::= c d\nd ::= "(" d ")" | c\nc ::= "z"+\n').ir
    plain = normalize(ir)
    assert "c" not in plain.rules and plain.inlined["$root"] == (("root", "c"),)
    kept = normalize(ir, keep_calls=frozenset({("root", "c")}))
    assert "c" in ref_names(kept.rules["$root"])
    assert "c" not in ref_names(kept.rules["d"])
    g = Grammar.from_ebnf('root ::= c d\nd ::= "(" d ")" | c\nc ::= "z"+\n')
    for text in ["zz", "zzz", "z(z)", "zz((zz))", "z(", "(z)", "z()"]:
        assert g.accepts(text) == bool(re.fullmatch(r"z+(\(*)z+(\)*)", text)) and (
            not g.accepts(text) or text.count("(") == text.count(")")), text


@pytest.mark.parametrize("name", ["json.gbnf", "c_like.gbnf", "sql_select.gbnf"])
def test_grammars_that_fit_build_once(name: str) -> None:
    g = Grammar.from_file(GRAMMARS / name)
    assert g.normal.keep_calls == frozenset()
    normal, automaton = automaton_of(g.ir)
    assert automaton.num_states == g.automaton.num_states
