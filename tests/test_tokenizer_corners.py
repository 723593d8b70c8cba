"""Tokenizer corners of token masks, each pinned by a test with a real vocabulary.

* a token that crosses rule boundaries (``"},`` closes a string, a member and an object, and is
  allowed only where the stack below says an outer object or array continues);
* a token that holds part of a UTF-8 character (DeepSeek byte-level tokens such as ``E6 97``, Mistral's
  byte-fallback ``<0xE6>``): allowed exactly where the grammar allows that byte prefix, and only
  prefixes of valid UTF-8 are allowed where the grammar asks for characters;
* tokens with a leading space (``▁`` / ``Ġ``): the space is really in the token's bytes;
* special tokens whose text looks like grammar text (``<｜end▁of▁sentence｜>``, ``</s>`` in XML) are
  never allowed as text, while added tokens that are not special (``<think>``, ``<tool>``) are text;
* several stop tokens; a model vocabulary larger than the tokenizer's.

The oracle is :meth:`Grammar.is_prefix` on the text plus the token's bytes (and Python's UTF-8
decoder for what UTF-8 allows).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pytest

from pda import Grammar, GrammarCompiler, GrammarMatcher, TokenizerInfo, allocate_token_bitmask, grammars
from pda.errors import BitmaskError

from .core.util import utf8_viable

JSON = grammars.path("json").read_text(encoding="utf-8")
XML = grammars.path("xml").read_text(encoding="utf-8")
NULL_LIST = 'root ::= "[" ( "null" ( "," "null" )* )? "]"'  # JSON-like, with no whitespace anywhere


def allowed(row: np.ndarray, vocab_size: int) -> np.ndarray:
    """Bool mask ``[vocab_size]`` of an int32 bitmask row."""
    return np.unpackbits(np.ascontiguousarray(row).view(np.uint8), bitorder="little")[:vocab_size].astype(bool)


class Setup(NamedTuple):
    hf: Any
    info: TokenizerInfo
    compiler: GrammarCompiler

    def token(self, data: bytes) -> int:
        """The id of the (first) normal token with exactly these bytes."""
        return self.info.token_bytes.index(data)

    def mask_after(self, grammar: str, prefix: bytes) -> np.ndarray:
        m = GrammarMatcher(self.compiler.compile_grammar(grammar))
        assert m.accept_string(prefix), prefix
        return allowed(m.next_token_mask(), self.info.vocab_size)


@pytest.fixture(scope="module")
def setups(request: pytest.FixtureRequest) -> dict[str, Setup]:
    """Lazily built :class:`Setup` per tokenizer fixture name."""

    class Lazy(dict):
        def __missing__(self, name: str) -> Setup:
            hf = request.getfixturevalue(name)
            info = TokenizerInfo.from_huggingface(hf)
            self[name] = Setup(hf, info, GrammarCompiler(info))
            return self[name]

    return Lazy()


@pytest.fixture(scope="module")
def json_grammar() -> Grammar:
    return Grammar.from_ebnf(JSON)


# ------------------------------------------------------------------------- rule boundaries

# (text so far, token bytes, allowed by json.gbnf)
BOUNDARY_CASES = [
    (b'{"a', b'":', True),            # ends the key string and starts the member's value
    (b'["a', b'":', False),           # in an array, a string is not a key
    (b'[{"a":1', b"},", True),        # ends the object; the array goes on
    (b'{"a":1', b"},", False),        # ends the top-level object: nothing may follow
    (b'{"a":{"b":1', b"}}", True),
    (b'{"a":1', b"}}", False),
    (b"[[1", b"],[", True),
    (b"[1", b"],[", False),
    (b'[{"k":"v', b'"},', True),
    (b'{"k":"v', b'"},', False),
    (b'{"k":"v', b'"}', True),
    (b'["v', b'"}', False),
    (b"", b'{"', True),
    (b'{"a":', b' {"', True),
    (b'{"a":[1', b"]]", False),
    (b'[[{"a":[1', b"]}", True),
]


@pytest.mark.parametrize("tokenizer", ["deepseek_tokenizer", "mistral_tokenizer", "small_bpe_tokenizer"])
def test_tokens_that_cross_rule_boundaries(tokenizer: str, setups, json_grammar: Grammar) -> None:
    setup = setups[tokenizer]
    tried = 0
    for prefix, data, expected in BOUNDARY_CASES:
        if data not in setup.info.token_bytes:
            continue
        assert json_grammar.is_prefix(prefix + data) == expected, "the table itself is wrong"
        got = setup.mask_after(JSON, prefix)[setup.token(data)]
        assert got == expected, f"{tokenizer}: after {prefix!r}, token {data!r} allowed={got}"
        tried += 1
    assert tried >= (10 if tokenizer == "deepseek_tokenizer" else 2)


# ------------------------------------------------------------------------- partial UTF-8


def not_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


@pytest.mark.parametrize("prefix", [b'["', b'["\xe6', b'["\xe6\x97', b'{"\xf0\x9f', b'["\xed', b"[", b'{"a":1'])
def test_deepseek_tokens_holding_partial_utf8(prefix: bytes, setups, json_grammar: Grammar) -> None:
    """Every DeepSeek token that is not valid UTF-8 on its own (byte-level BPE has 1,470) is allowed
    exactly where the text plus its bytes is a prefix of the grammar."""
    setup = setups["deepseek_tokenizer"]
    broken = [i for i, b in enumerate(setup.info.token_bytes) if b and not_utf8(b)]
    assert len(broken) > 1000
    mask = setup.mask_after(JSON, prefix)
    got = {i for i in broken if mask[i]}
    want = {i for i in broken if json_grammar.is_prefix(prefix + setup.info.token_bytes[i])}
    assert got == want, f"after {prefix!r}: only the mask {sorted(got - want)[:5]}, only the grammar {sorted(want - got)[:5]}"
    inside = prefix.count(b'"') % 2 == 1
    if inside:  # tokens of bytes >= 0x80 only: there UTF-8 alone decides
        tail, high = prefix.rsplit(b'"', 1)[1], [i for i in broken if min(setup.info.token_bytes[i]) >= 0x80]
        assert {i for i in high if mask[i]} == {i for i in high if utf8_viable(tail + setup.info.token_bytes[i])}
    assert bool(got) == inside  # outside a string no byte beyond ASCII is allowed


def test_deepseek_partial_token_then_its_completion(setups) -> None:
    """``E6 97`` (DeepSeek 431) then ``A5`` gives 日; after ``E6 97`` only continuation bytes may come."""
    setup = setups["deepseek_tokenizer"]
    m = GrammarMatcher(setup.compiler.compile_grammar(JSON))
    assert m.accept_string(b'["')
    part, cont, quote = setup.token(b"\xe6\x97"), setup.token(b"\xa5"), setup.token(b'"')
    assert m.accept_token(part)
    mask = allowed(m.next_token_mask(), setup.info.vocab_size)
    assert mask[cont] and not mask[quote] and not mask[part]
    firsts = {setup.info.token_bytes[i][0] for i in np.flatnonzero(mask)}
    assert firsts and firsts <= set(range(0x80, 0xC0))
    assert m.accept_token(cont) and m.accept_token(quote)
    assert not m.accept_token(part)  # refused: E6 97 cannot follow a closed string
    assert m.accept_string("]") and m.is_completed()


def test_byte_fallback_tokens_follow_utf8_exactly(setups) -> None:
    """Mistral's ``<0xNN>`` tokens inside a JSON string: allowed exactly when the bytes so far plus NN
    start valid UTF-8 (overlong forms, surrogates, code points past U+10FFFF and stray continuation
    bytes refused), for every start of one, two and three bytes."""
    setup = setups["mistral_tokenizer"]
    byte_token = [setup.hf.convert_tokens_to_ids(f"<0x{b:02X}>") for b in range(256)]
    assert [setup.info.token_bytes[t] for t in byte_token] == [bytes([b]) for b in range(256)]
    cg = setup.compiler.compile_grammar(JSON)
    leads = [b""] + [bytes([b]) for b in range(0xC0, 0x100)]
    leads += [b"\xe0\xa0", b"\xed\x9f", b"\xef\xbf", b"\xf0\x90", b"\xf0\x90\x80", b"\xf4\x8f", b"\xf4\x8f\xbf"]
    for lead in leads:
        m = GrammarMatcher(cg)
        assert m.accept_string(b'["')
        if not all(m.accept_token(byte_token[b]) for b in lead):
            assert not utf8_viable(lead), lead
            continue
        mask = allowed(m.next_token_mask(), setup.info.vocab_size)
        for b in range(0x80, 0x100):
            assert mask[byte_token[b]] == utf8_viable(lead + bytes([b])), (lead + bytes([b])).hex()
        if lead:  # mid-character: no normal token either, unless it starts with a continuation byte
            assert not mask[setup.token(b"a")] and not mask[byte_token[0x22]]


@pytest.mark.parametrize(("prefix", "byte", "expected"), [
    (b'["', 0x22, True),      # <0x22> is the quote: it closes the string
    (b'["', 0x0A, False),     # a raw newline is a control character inside a string
    (b"[", 0x0A, True),       # ... and whitespace outside
    (b"", 0x7B, True),        # <0x7B> is "{"
    (b'["', 0xE4, True),
    (b'["', 0xB8, False),     # a continuation byte cannot start a character
    (b"[", 0xE4, False),      # no character outside a string
    (b'["\xe4', 0xB8, True),
    (b'["\xe4', 0x41, False),
    (b'["', 0xFF, False),     # never in UTF-8
    (b'["', 0xC0, False),     # overlong lead
])
def test_byte_fallback_token_table(prefix: bytes, byte: int, expected: bool, setups, json_grammar: Grammar) -> None:
    setup = setups["mistral_tokenizer"]
    t = setup.hf.convert_tokens_to_ids(f"<0x{byte:02X}>")
    assert json_grammar.is_prefix(prefix + bytes([byte])) == expected
    assert setup.mask_after(JSON, prefix)[t] == expected


# ------------------------------------------------------------------------- leading spaces


@pytest.mark.parametrize(("tokenizer", "piece"), [("mistral_tokenizer", "▁null"), ("deepseek_tokenizer", "Ġnull")])
def test_tokens_with_a_leading_space(tokenizer: str, piece: str, setups) -> None:
    """``▁null`` / ``Ġnull`` stand for `` null``: allowed where whitespace may come, refused where not."""
    setup = setups[tokenizer]
    spaced = setup.hf.convert_tokens_to_ids(piece)
    bare = setup.token(b"null")
    assert setup.info.token_bytes[spaced] == b" null"
    for prefix, with_ws, without_ws in [(b"[", True, True), (b"[null,", True, True), (b"", True, False)]:
        mask_json, mask_tight = setup.mask_after(JSON, prefix), setup.mask_after(NULL_LIST, prefix)
        assert mask_json[spaced] == with_ws
        assert not mask_tight[spaced], f"{piece} allowed after {prefix!r} where no space may come"
        if prefix:
            assert mask_json[bare] and mask_tight[bare] == without_ws
    space = setup.token(b" ")
    assert setup.mask_after(JSON, b'["')[space] and not setup.mask_after(NULL_LIST, b"[")[space]


def test_sentencepiece_prefix_space_is_text(setups) -> None:
    """Mistral encodes ``[null]`` as ``▁[`` ...: the dummy prefix is a real space, which JSON allows
    and a grammar without whitespace refuses (the matcher sees bytes, not intentions)."""
    setup = setups["mistral_tokenizer"]
    ids = setup.hf.encode("[null]", add_special_tokens=False)
    assert setup.info.decode(ids) == b" [null]" and setup.info.add_prefix_space
    for grammar, ok in [(JSON, True), (NULL_LIST, False)]:
        m = GrammarMatcher(setup.compiler.compile_grammar(grammar))
        assert all(m.accept_token(t) for t in ids) == ok


# ------------------------------------------------------------------------- special tokens

# A grammar whose sentences include the text of DeepSeek's special tokens.
ANGLE = 'root ::= "<" [^<>]+ ">" "."'


def test_deepseek_special_tokens_are_never_text(setups) -> None:
    setup = setups["deepseek_tokenizer"]
    g = Grammar.from_ebnf(ANGLE)
    bos, eos = 0, 1
    assert setup.info.stop_token_ids == (eos,) and {bos, eos} <= set(setup.info.special_token_ids)
    assert g.accepts("<｜end▁of▁sentence｜>.") and g.accepts("<｜begin▁of▁sentence｜>.")
    cg = setup.compiler.compile_grammar(ANGLE)
    m = GrammarMatcher(cg)
    mask = allowed(m.next_token_mask(), setup.info.vocab_size)
    assert not mask[list(setup.info.special_token_ids)].any()
    user = setup.hf.convert_tokens_to_ids("<｜User｜>")  # an added token that is not special: text
    assert mask[user] and mask[setup.token(b"<")]
    before = m.next_token_mask()
    assert not m.accept_token(bos) and not m.accept_token(eos)
    assert np.array_equal(m.next_token_mask(), before)
    assert m.accept_string("<｜end▁of▁sentence｜>")
    mask = allowed(m.next_token_mask(), setup.info.vocab_size)
    assert not mask[list(setup.info.special_token_ids)].any() and mask[setup.token(b".")]
    assert m.accept_string(".") and m.is_completed()
    mask = allowed(m.next_token_mask(), setup.info.vocab_size)
    assert np.flatnonzero(mask).tolist() == [eos]  # the only thing left: the stop token, as a stop token


def test_mistral_special_tokens_in_xml(setups) -> None:
    """``<s>`` and ``</s>`` are XML tags as text, but Mistral's specials: never allowed as text;
    ``</s>`` (the stop token) only once the document is complete."""
    setup = setups["mistral_tokenizer"]
    bos, eos = setup.hf.convert_tokens_to_ids("<s>"), setup.hf.convert_tokens_to_ids("</s>")
    assert setup.info.stop_token_ids == (eos,)
    cg = setup.compiler.compile_grammar(XML)
    m = GrammarMatcher(cg)
    start = allowed(m.next_token_mask(), setup.info.vocab_size)
    assert not start[bos] and start[setup.token(b"<")]
    assert m.accept_string("<s>x")
    mid = allowed(m.next_token_mask(), setup.info.vocab_size)
    assert not mid[eos] and not mid[bos] and mid[setup.token(b"</")]
    assert not m.accept_token(eos)
    assert m.accept_string("</s>") and m.is_completed()
    end = allowed(m.next_token_mask(), setup.info.vocab_size)
    assert end[eos] and not end[bos]
    assert m.accept_token(eos) and m.is_terminated()


@pytest.mark.parametrize(("grammar", "prefix", "expected"), [
    (XML, b"", True), (XML, b"<a>", True), (XML, b"<a", False), (JSON, b'["', True), (JSON, b"[", False),
])
def test_added_tokens_that_are_not_special_are_text(grammar: str, prefix: bytes, expected: bool, setups) -> None:
    """The small BPE's ``<tool>`` (added, not special) and DeepSeek's ``<think>`` are literal text;
    the small BPE's ``<|end|>`` is special: never allowed, even inside a string."""
    small, deep = setups["small_bpe_tokenizer"], setups["deepseek_tokenizer"]
    assert small.mask_after(grammar, prefix)[small.token(b"<tool>")] == expected
    assert deep.mask_after(grammar, prefix)[deep.hf.convert_tokens_to_ids("<think>")] == expected
    end = small.hf.convert_tokens_to_ids("<|end|>")
    assert small.info.token_bytes[end] == b"" and not small.mask_after(grammar, prefix)[end]


# ------------------------------------------------------------------------- stop tokens, vocab size


def test_several_stop_tokens(setups) -> None:
    setup = setups["small_bpe_tokenizer"]
    eos = setup.info.stop_token_ids[0]
    end, pad = (setup.hf.convert_tokens_to_ids(t) for t in ("<|end|>", "<|pad|>"))
    cg = setup.compiler.compile_grammar(JSON)
    m = GrammarMatcher(cg, stop_token_ids=[end, pad])
    start = allowed(m.next_token_mask(), setup.info.vocab_size)
    assert not start[[eos, end, pad]].any()
    assert not m.accept_token(end)
    assert m.accept_string("[1]")
    done = allowed(m.next_token_mask(), setup.info.vocab_size)
    assert done[end] and done[pad] and not done[eos]  # eos is not a stop token of this matcher
    assert not m.accept_token(eos)
    for stop in (end, pad):
        assert m.accept_token(stop) and m.is_terminated()
        assert not m.next_token_mask().any() and not m.accept_token(stop)
        m.rollback(1)
        assert not m.is_terminated() and m.is_completed()
    one = GrammarMatcher(cg, stop_token_ids=pad)
    assert one.accept_string("1") and allowed(one.next_token_mask(), setup.info.vocab_size)[[eos, end, pad]].tolist() \
        == [False, False, True]
    with pytest.raises(ValueError, match="outside the vocabulary"):
        GrammarMatcher(cg, stop_token_ids=[setup.info.vocab_size])
    # stop tokens given to the tokenizer are the matcher's default
    info2 = TokenizerInfo.from_huggingface(setup.hf, stop_token_ids=[eos, end])
    m2 = GrammarMatcher(GrammarCompiler(info2).compile_grammar(JSON))
    assert m2.accept_string("[]") and allowed(m2.next_token_mask(), info2.vocab_size)[[eos, end, pad]].tolist() \
        == [True, True, False]


@pytest.mark.parametrize("tokenizer", ["small_bpe_tokenizer", "mistral_tokenizer"])
def test_model_vocab_larger_than_the_tokenizer(tokenizer: str, setups) -> None:
    hf = setups[tokenizer].hf
    size = len(hf) + 64
    info = TokenizerInfo.from_huggingface(hf, vocab_size=size)
    cg = GrammarCompiler(info).compile_grammar(JSON)
    m = GrammarMatcher(cg)
    words = (size + 31) // 32
    assert m.next_token_mask().shape == (words,)
    bitmask = allocate_token_bitmask(2, size)
    for prefix in ["", '["', '["x', "[1"]:
        m.reset()
        assert m.accept_string(prefix)
        m.fill_next_token_bitmask(bitmask, 1)
        row = allowed(bitmask[1].numpy(), words * 32)
        assert row[: len(hf)].any() and not row[len(hf):].any(), f"an id past the tokenizer is allowed after {prefix!r}"
        assert not m.accept_token(len(hf)) and not m.accept_token(size - 1)
    narrow = allocate_token_bitmask(1, len(hf) - 64)
    with pytest.raises(BitmaskError, match="ceil"):
        m.fill_next_token_bitmask(narrow)
    xgr = pytest.importorskip("xgrammar")
    xm = xgr.GrammarMatcher(xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(hf, vocab_size=size))
                            .compile_grammar(JSON))
    m.reset()
    for prefix in ["", '["x']:
        assert m.accept_string(prefix) and xm.accept_string(prefix)
        xgr_mask = xgr.allocate_token_bitmask(1, size)
        xm.fill_next_token_bitmask(xgr_mask)
        theirs, mine = allowed(xgr_mask[0].numpy(), size), allowed(m.next_token_mask(), size)
        normal = np.ones(size, dtype=bool)
        normal[list(info.special_token_ids)] = False  # xgrammar treats special tokens' text as text
        assert np.array_equal(mine & normal, theirs & normal) and not theirs[len(hf):].any()
