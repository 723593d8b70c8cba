"""CompiledGrammar.to_bytes / from_bytes: identical masks, and clear errors for unsound bytes."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pda
from pda import CompiledGrammar, GrammarCompiler, GrammarMatcher, SerializationError, TokenizerInfo
from pda.serialize import FORMAT_VERSION, MAGIC

ROOT = Path(__file__).resolve().parents[2]
CORPORA = ROOT.parent.parent / "shared" / "corpora"

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "tags": {"type": "array", "items": {"enum": ["a", "b"]}}},
          "required": ["name"]}


@pytest.fixture(scope="module")
def deepseek(deepseek_tokenizer: Any) -> TokenizerInfo:
    return TokenizerInfo.from_huggingface(deepseek_tokenizer)


@pytest.fixture(scope="module")
def compiled(deepseek: TokenizerInfo) -> CompiledGrammar:
    return GrammarCompiler(deepseek, cache=False, precompute="lazy").compile_json_schema(SCHEMA)


def _masks(compiled: CompiledGrammar, tokens: list[int]) -> list[np.ndarray]:
    m = GrammarMatcher(compiled)
    bm = pda.allocate_token_bitmask(1, compiled.tokenizer_info.vocab_size)
    out = []
    for t in tokens:
        m.fill_next_token_bitmask(bm, 0)
        out.append(bm[0].numpy().copy())
        assert m.accept_token(t)
    m.fill_next_token_bitmask(bm, 0)
    out.append(bm[0].numpy().copy())
    return out


def test_round_trip_same_masks_and_classes(compiled: CompiledGrammar, deepseek: TokenizerInfo,
                                           deepseek_tokenizer: Any) -> None:
    tokens = deepseek_tokenizer.encode('{"name": "abc", "tags": ["a", "b"]}', add_special_tokens=False)
    before = _masks(compiled, tokens)  # computes classes lazily: they travel in the bytes
    data = compiled.to_bytes()
    back = CompiledGrammar.from_bytes(data, deepseek)
    assert back.class_sizes() == compiled.class_sizes()
    assert back.num_states == compiled.num_states
    assert back.grammar.to_ebnf() == compiled.grammar.to_ebnf()
    assert back.grammar.to_ebnf(normalized=True) == compiled.grammar.to_ebnf(normalized=True)
    assert back.grammar.start == compiled.grammar.start
    assert back.grammar.max_stack_depth == compiled.grammar.max_stack_depth
    after = _masks(back, tokens)
    assert all((a == b).all() for a, b in zip(before, after)) and len(before) == len(after)
    # grammar-level checks work too, JSON pointers included
    assert back.grammar.accepts('{"name": "x"}')
    with pytest.raises(pda.ValidationError) as err:
        back.grammar.validate('{"name": "x", "tags": ["c"]}')
    assert err.value.pointer == "/tags/0"
    assert back.to_bytes() == data  # nothing lost or added


def test_round_trip_in_a_fresh_process() -> None:
    """Every bundled grammar and (when the corpus is here) a few JSONSchemaBench schemas; the full
    100 run with ``python benchmarks/serialize_roundtrip.py --corpora PATH``."""
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "serialize_roundtrip.py"), "--schemas", "3",
                           "--corpora", str(CORPORA)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all identical" in proc.stdout


def test_another_tokenizer_is_refused(compiled: CompiledGrammar, small_bpe_tokenizer: Any) -> None:
    other = TokenizerInfo.from_huggingface(small_bpe_tokenizer)
    with pytest.raises(SerializationError, match="another tokenizer"):
        CompiledGrammar.from_bytes(compiled.to_bytes(), other)


def test_another_format_version_is_refused(compiled: CompiledGrammar, deepseek: TokenizerInfo) -> None:
    data = bytearray(compiled.to_bytes())
    struct.pack_into("<I", data, len(MAGIC), FORMAT_VERSION + 1)
    with pytest.raises(SerializationError, match=f"version {FORMAT_VERSION + 1}"):
        CompiledGrammar.from_bytes(bytes(data), deepseek)


def test_corrupted_or_truncated_bytes_are_refused(compiled: CompiledGrammar, deepseek: TokenizerInfo) -> None:
    data = compiled.to_bytes()
    # a flipped bit anywhere: magic, header, JSON metadata, every part of the arrays
    for at in [0, 9, 20, 30, 45, 100, len(data) // 3, len(data) // 2, len(data) - 1]:
        bad = bytearray(data)
        bad[at] ^= 0x10
        with pytest.raises(SerializationError):
            CompiledGrammar.from_bytes(bytes(bad), deepseek)
    for n in [0, 10, 40, len(data) // 2, len(data) - 1]:
        with pytest.raises(SerializationError, match="truncated|shorter"):
            CompiledGrammar.from_bytes(data[:n], deepseek)
    with pytest.raises(SerializationError, match="truncated"):
        CompiledGrammar.from_bytes(data + b"\0", deepseek)
    with pytest.raises(SerializationError, match="not a pda compiled grammar"):
        CompiledGrammar.from_bytes(b"PK\x03\x04" + data[4:], deepseek)
    assert isinstance(SerializationError("x"), pda.PdaError)


def test_format_is_json_and_raw_arrays(compiled: CompiledGrammar) -> None:
    """No pickle: the metadata is JSON naming plain numeric dtypes."""
    from pda.serialize import read_header

    meta, _ = read_header(compiled.to_bytes())
    json.dumps(meta)
    assert {dtype for _, dtype, _, _ in meta["arrays"]} <= {"<i4", "<i8", "|u1", "|b1", "<u4"}


def test_from_bytes_checks_its_arguments(compiled: CompiledGrammar) -> None:
    with pytest.raises(TypeError, match="TokenizerInfo"):
        CompiledGrammar.from_bytes(compiled.to_bytes(), "deepseek")  # type: ignore[arg-type]
