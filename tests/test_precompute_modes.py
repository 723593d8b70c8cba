"""Eager and lazy token classes give the same masks; lazy compiles classify nothing up front."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pda
import pda.precompute
from pda.grammars import path, samples

VOCAB = [bytes([i]) for i in range(256)] + [b'{"', b'":', b'",', b'"}', b'},', b"true", b"null", b"  ", b"], ", b"}]",
                                           b"SELECT", b" FROM", b" WHERE", b"int ", b"return", b"();", b"\xe4\xb8"]


@pytest.fixture(scope="module")
def tok() -> pda.TokenizerInfo:
    return pda.TokenizerInfo.from_vocab_bytes(VOCAB + [b"<eos>"], stop_token_ids=[len(VOCAB)],
                                              special_token_ids=[len(VOCAB)])


@pytest.mark.parametrize("name", ["json", "sql_select", "c_like"])
def test_lazy_masks_equal_eager_masks(tok: pda.TokenizerInfo, name: str) -> None:
    text = path(name).read_text(encoding="utf-8")
    eager = pda.GrammarCompiler(tok, precompute="eager").compile_grammar(text)
    lazy = pda.GrammarCompiler(tok, precompute="lazy").compile_grammar(text)
    assert eager.classes.complete
    assert not lazy.classes.by_state  # nothing classified before the first mask
    for doc in samples(name)[0][:2]:
        data = doc.read_bytes()
        me, ml = pda.GrammarMatcher(eager), pda.GrammarMatcher(lazy)
        for b in data:
            assert np.array_equal(me.next_token_mask(), ml.next_token_mask())
            assert me.accept_token(b) and ml.accept_token(b)
        assert np.array_equal(me.next_token_mask(), ml.next_token_mask())
    assert 0 < len(lazy.classes.by_state) <= len(lazy.classes.states)


def test_precompute_option_is_checked(tok: pda.TokenizerInfo) -> None:
    with pytest.raises(ValueError, match="precompute must be 'auto', 'eager' or 'lazy', got 'sometimes'"):
        pda.GrammarCompiler(tok, precompute="sometimes")  # type: ignore[arg-type]


def test_auto_classifies_the_states_nearest_the_start_within_its_budget(tok: pda.TokenizerInfo) -> None:
    text = path("c_like").read_text(encoding="utf-8")
    few = pda.GrammarCompiler(tok, eager_seconds=60.0, eager_max_states=5, eager_background=False).compile_grammar(text)
    # 5 states, plus the starts of the shared rules they call (classified first, to reuse)
    aut = few.grammar.automaton
    callee_starts = {int(aut.rule_start[r]) for s in few.classes.by_state for r, _ in aut.calls(s)}
    assert len(set(few.classes.by_state) - callee_starts) <= 5 <= len(few.classes.by_state)
    start = int(few.grammar.automaton.rule_start[0])
    assert start in few.classes.by_state or not few.grammar.automaton.has_bytes[start]
    none = pda.GrammarCompiler(tok, eager_seconds=0.0, eager_background=False).compile_grammar(text)
    assert not none.classes.by_state
    every = pda.GrammarCompiler(tok, eager_seconds=60.0, eager_max_states=10**6,
                                eager_background=False).compile_grammar(text)
    assert every.classes.complete


def test_auto_in_the_background_classifies_the_start_state_before_returning(tok: pda.TokenizerInfo) -> None:
    text = path("c_like").read_text(encoding="utf-8")
    compiler = pda.GrammarCompiler(tok, eager_seconds=60.0, eager_max_states=10**6)
    compiled = compiler.compile_grammar(text)
    aut = compiled.grammar.automaton
    first = compiled.grammar.first_states()
    assert first and set(first) <= set(compiled.classes.by_state)
    compiler.wait()
    assert compiled.classes.complete
    few = pda.GrammarCompiler(tok, eager_seconds=60.0, eager_max_states=5)
    got = few.compile_grammar(text)
    few.wait()
    # the first states, then 5 more, plus the starts of the shared rules they call
    callee_starts = {int(aut.rule_start[r]) for s in got.classes.by_state for r, _ in aut.calls(s)}
    assert len(set(got.classes.by_state) - callee_starts) <= 5 + len(first)
    assert len(got.classes.by_state) >= 5


def test_auto_classifies_a_small_grammar_whole_at_compile_time(tok: pda.TokenizerInfo) -> None:
    """A grammar of at most SMALL_GRAMMAR_STATES byte-reading states is classified whole by the
    compile (its first masks never classify); a larger one only at its first states; and
    ``eager_max_states=0`` classifies nothing up front, small or not."""
    from pda.compiler import SMALL_GRAMMAR_STATES

    small = pda.GrammarCompiler(tok, cache=False).compile_builtin_json()
    assert len(small.classes.states) <= SMALL_GRAMMAR_STATES and small.classes.complete
    large = pda.GrammarCompiler(tok, cache=False).compile_grammar(path("c_like").read_text(encoding="utf-8"))
    assert len(large.classes.states) > SMALL_GRAMMAR_STATES and not large.classes.complete
    none = pda.GrammarCompiler(tok, cache=False, eager_max_states=0).compile_builtin_json()
    assert not none.classes.by_state


def test_auto_makes_the_plain_run_tables_at_compile_time(tok: pda.TokenizerInfo) -> None:
    """The tables a fill reads through plain runs are made by an "auto" compile (not in the first
    fill that needs each), and a "lazy" one leaves them to the fills."""
    tables = ("plain_runs", "plain_to_end", "_plain_shapes")
    text = path("c_like").read_text(encoding="utf-8")
    auto = pda.GrammarCompiler(tok, cache=False).compile_grammar(text)
    assert all(name in vars(auto.classes) for name in tables)
    lazy = pda.GrammarCompiler(tok, cache=False, precompute="lazy").compile_grammar(text)
    assert not any(name in vars(lazy.classes) for name in tables)
    m = pda.GrammarMatcher(lazy)
    m.next_token_mask()
    assert np.array_equal(m.next_token_mask(), pda.GrammarMatcher(auto).next_token_mask())


def test_tokens_accepted_before_the_walk_leave_the_classes_alone(deepseek_tokenizer: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A state that calls escaping rules takes their starts' accepted tokens as its own before
    its walk only when they are ACCEPTED_BEFORE_SHARE of the vocabulary (the blocks of a long
    string: 126k; not the 1,122 first tokens of the rule of any JSON value, called from 40
    properties): the classes are the same either way, taken always or never."""
    schema = {"type": "object", "properties": {**{f"p{i}": {} for i in range(40)},
                                               "long": {"type": "string", "maxLength": 2000}}}
    monkeypatch.setattr(pda.precompute, "LOOKAHEAD_GROUPS", None)  # every state walked whole, on its own
    got = {}
    default = pda.precompute.ACCEPTED_BEFORE_SHARE
    for share in (0.0, default, 2.0):
        monkeypatch.setattr(pda.precompute, "ACCEPTED_BEFORE_SHARE", share)
        tok = pda.TokenizerInfo.from_huggingface(deepseek_tokenizer)
        classes = pda.GrammarCompiler(tok, cache=False, precompute="lazy").compile_json_schema(schema).classes
        callers = sorted(classes._escape_starts)[::12]  # 121 of the 1,450
        got[share] = [(classes.get(s).accepted_mask(tok.trie.order, classes.words), np.sort(classes.get(s).uncertain))
                      for s in callers]
        if share == default:  # both choices are made
            before = [bool(classes._accepted_before(s)) for s in callers]
            assert any(before) and not all(before)
    for share in got:
        for k, ((a, u), (b, v)) in enumerate(zip(got[share], got[0.0])):
            assert np.array_equal(a, b) and np.array_equal(u, v), f"share {share}: caller {k}"
