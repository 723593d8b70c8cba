"""Group keys for states with many live tokens (pda.precompute.LOOKAHEAD_MIN_LIVE).

A state whose first bytes start fewer than half the vocabulary's tokens is walked over the whole
vocabulary at once, unless at least LOOKAHEAD_MIN_LIVE tokens start so and it has no plain run:
each position of a bounded restricted-alphabet string (``[0-9a-zA-Z_-]{1,255}``, about 25,800 of
DeepSeek's tokens live) is a state of its own, and the positions far from the bound share their
groups' classes through the keys.  The masks and classes must equal those of a tokenizer without
groups (every state walked on its own).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from pda import GrammarCompiler, GrammarMatcher, TokenizerInfo, precompute

SCHEMA = {"type": "object", "properties": {"k": {"type": "string", "pattern": "^[0-9a-zA-Z_-]{1,255}$"},
                                           "n": {"type": "integer"}}, "required": ["k"]}
DOCS = [{"k": "device-type_0123456789-abcdefXYZ", "n": 3}, {"k": "a"}, {"k": "Z-" * 40 + "end_of_it"}]


def test_positions_of_a_bounded_restricted_alphabet_share_their_classes(deepseek_tokenizer: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    hf = deepseek_tokenizer
    docs = [hf.encode(json.dumps(d), add_special_tokens=False) for d in DOCS]
    with monkeypatch.context() as mp:
        mp.setattr(precompute, "LOOKAHEAD_GROUPS", None)
        ref_tok = TokenizerInfo.from_huggingface(hf)
        ref = GrammarCompiler(ref_tok, cache=False, precompute="lazy").compile_json_schema(SCHEMA)
    tok = TokenizerInfo.from_huggingface(hf)
    got = GrammarCompiler(tok, cache=False, precompute="lazy").compile_json_schema(SCHEMA)
    for ids in docs:
        m, r = GrammarMatcher(got), GrammarMatcher(ref)
        for k, t in enumerate([*ids, None]):
            assert np.array_equal(m.next_token_mask(), r.next_token_mask()), f"step {k}"
            assert t is None or (m.accept_token(t) and r.accept_token(t))
    classes = got.classes
    assert classes._live_tries >= 20 and 2 * classes._live_shared >= classes._live_tries
    assert classes.shared_hits >= 20  # none before: every position walked the whole vocabulary
    for s, c in classes.by_state.items():
        want = ref.classes.get(s)
        assert np.array_equal(np.sort(c.uncertain), np.sort(want.uncertain)), f"state {s}"
        assert np.array_equal(c.accepted_mask(tok.trie.order, got.words),
                              want.accepted_mask(ref_tok.trie.order, ref.words)), f"state {s}"
