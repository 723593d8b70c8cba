"""The bytes that may follow plain characters (:mod:`pda.plain_stops`): each token's stop byte,
and per state a set of bytes outside which a stopped token is rejected, as the reference walk says."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pda import TokenizerInfo
from pda.grammar import Grammar
from pda.plain_stops import stop_bytes, stop_reads
from pda.token_walk import TOKEN_REJECTED
from pda.walk_reference import walk_tokens_reference

from .test_plain_runs import ESCAPING, NESTED, PLAIN, SCHEMAS, _after

GRAMMARS = Path(__file__).resolve().parents[2] / "grammars"


def test_stop_bytes() -> None:
    tokens = {b"abc": -1, b"abc\n": 0x0A, b"ab\xc3": -1, b"a\x80": 0x80, "a\u2028".encode(): 0xE2, b'a"': 0x22,
              b"\\n": 0x5C, "é\x01".encode(): 0x01, "中".encode()[:2]: -1, b"\xc3(": 0xC3, b"\xff": 0xFF,
              "😀\x7f".encode(): -1, b"\xed\xa0\x80": 0xED, b"x\xe0\x80": 0xE0}
    trie = TokenizerInfo.from_vocab_bytes(list(tokens)).trie
    got = {trie.data[trie.offsets[i]:trie.offsets[i + 1]].tobytes(): int(c) for i, c in enumerate(stop_bytes(trie))}
    assert got == tokens


def _reads(g: Grammar) -> np.ndarray:
    a = g.automaton
    return stop_reads(a.trans, a.byte_class, a.call_ptr, a.is_end)


def _in(reads: np.ndarray, b: int) -> bool:
    return bool((int(reads[b >> 6]) >> (b & 63)) & 1)


def test_a_string_reads_no_control_character() -> None:
    """Inside a JSON string, counted or not, a control character or a stray continuation byte
    cannot follow plain characters; a quote, a backslash and every character's first byte can."""
    for schema in ({"type": "string"}, {"type": "string", "maxLength": 40}):
        g = Grammar.from_json_schema(schema)
        reads = _reads(g)
        for s in _after(g, '"ab'):
            assert not any(_in(reads[s], b) for b in [*range(0x20), *range(0x80, 0xC2), *range(0xF5, 0x100)])
            assert all(_in(reads[s], b) for b in (0x22, 0x5C, 0x20, 0xC3, 0xE2, 0xF0))
    nested = Grammar.from_ebnf(NESTED)  # three characters end the rule: what follows may read anything
    assert {int(w) for s in _after(nested, "<a") for w in _reads(nested)[s]} == {0xFFFFFFFFFFFFFFFF}


@pytest.mark.parametrize("source", [*range(len(SCHEMAS)), {"type": "string", "maxLength": 3000}, NESTED, ESCAPING,
                                    "json.gbnf", "c_like.gbnf"])
def test_stopped_tokens_outside_the_set_are_rejected(source: int | dict[str, Any] | str) -> None:
    """A token of plain characters and then a byte outside ``R[s]`` is rejected by the reference
    walk from ``s`` with context expansion (every place the rule returns to), at random states."""
    if isinstance(source, int):
        g = Grammar.from_json_schema(SCHEMAS[source])
    elif isinstance(source, dict):
        g = Grammar.from_json_schema(source)
    else:
        g = Grammar.from_ebnf((GRAMMARS / source).read_text() if source.endswith(".gbnf") else source)
    reads = _reads(g)
    rng = random.Random(str(source))
    states = np.flatnonzero(g.automaton.has_bytes).tolist()
    tried = 0
    for s in rng.sample(states, min(len(states), 150)):
        outside = [b for b in range(256) if not _in(reads[s], b)]
        if not outside:
            continue
        texts = []
        for _ in range(6):
            prefix = "".join(rng.choice(PLAIN) for _ in range(rng.randint(0, 5))).encode()
            texts.append(prefix + bytes([rng.choice(outside)]) + rng.choice([b"", b"a", b'"', b"\\n"]))
        assert walk_tokens_reference(g.automaton, texts, s, [], True) == [TOKEN_REJECTED] * len(texts), (s, texts)
        tried += 1
    assert tried > 0
