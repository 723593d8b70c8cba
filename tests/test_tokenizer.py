"""TokenizerInfo: raw token bytes of real tokenizers, special and stop tokens, fingerprint, trie.

Decoding is checked the strongest way: for many texts, the bytes of the ids a tokenizer encodes a
text to, joined, are the text's UTF-8 bytes.  SentencePiece tokenizers prepend a space when they
encode (``add_dummy_prefix``), and that space is really in the first token's bytes (``▁Hello`` is
``b" Hello"``); so for them the expected bytes are ``b" " + text``, except that the ``tokenizers``
backend does not add the space when the text already starts with one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pda.errors import TokenizerError
from pda.token_groups import WORD_BYTES, GroupSpec, token_groups
from pda.token_trie import TokenTrie, build_token_trie, select_tokens
from pda.tokenizer import TokenizerInfo, VocabType, byte_level_alphabet

SAMPLES = [
    "Hello, world!",
    " leading space",
    "  two leading spaces and trailing  ",
    "naïve café, Größe, Ελληνικά, русский, 日本語のテキスト, 中文，标点。",
    "emoji 😀🎉👩‍👩‍👧 and flags 🇫🇷",
    'def f(x):\n\treturn {"a": [1, 2.5e-3, null]}  # comment\r\n',
    "SELECT * FROM t WHERE a <> 'b' AND c >= 10;",
    "tabs\t\tand\nnewlines\n\n\nend",
    "\x00\x01\x7f control bytes \u200b zero width",
    "<xml attr=\"v\">&amp;</xml> <s> not special here? maybe",
    "1234567890 3.14159 -42 0x1F",
    "é (e + combining acute: e\u0301)",
]


def expected_bytes(tokenizer: Any, info: TokenizerInfo, text: str) -> list[bytes]:
    """What the encoded ids of ``text`` may decode to (see the module docstring)."""
    if info.vocab_type is not VocabType.BYTE_FALLBACK:
        return [text.encode()]
    if text.startswith(" ") and not hasattr(tokenizer, "sp_model"):
        return [text.encode()]
    return [b" " + text.encode()]


TOKENIZERS = ["deepseek_tokenizer", "mistral_tokenizer", "mistral_sp_tokenizer", "small_bpe_tokenizer"]


@pytest.fixture(scope="module")
def infos(request: pytest.FixtureRequest) -> dict[str, tuple[Any, TokenizerInfo]]:
    """Lazily built (tokenizer, TokenizerInfo) per fixture name, each built once."""

    class Lazy(dict):
        def __missing__(self, name: str) -> tuple[Any, TokenizerInfo]:
            tok = request.getfixturevalue(name)
            self[name] = (tok, TokenizerInfo.from_huggingface(tok))
            return self[name]

    return Lazy()


@pytest.mark.parametrize("name", TOKENIZERS)
def test_encoded_text_decodes_to_its_bytes(name: str, infos) -> None:
    tok, info = infos[name]
    for text in SAMPLES:
        if name == "mistral_sp_tokenizer" and "<s>" in text:
            continue  # the slow tokenizer parses "<s>" in text as the special token
        ids = tok.encode(text, add_special_tokens=False)
        if any(i in info.special_token_ids for i in ids):
            continue
        got = info.decode(ids)
        assert got in expected_bytes(tok, info, text), (text, ids, got)


@pytest.mark.parametrize(
    "name, vocab_type, size, stops, prefix_space",
    [
        ("deepseek_tokenizer", VocabType.BYTE_LEVEL, 129280, (1,), False),
        ("mistral_tokenizer", VocabType.BYTE_FALLBACK, 32000, (2,), True),
        ("mistral_sp_tokenizer", VocabType.BYTE_FALLBACK, 32000, (2,), True),
        ("small_bpe_tokenizer", VocabType.BYTE_LEVEL, 401, (0,), False),
    ],
)
def test_detected_metadata(name, vocab_type, size, stops, prefix_space, infos) -> None:
    _, info = infos[name]
    assert info.vocab_type is vocab_type
    assert info.vocab_size == size
    assert info.stop_token_ids == stops
    assert info.add_prefix_space is prefix_space
    assert len(info.token_bytes) == size


@pytest.mark.parametrize("name", ["mistral_tokenizer", "mistral_sp_tokenizer"])
def test_byte_fallback_pieces(name: str, infos) -> None:
    tok, info = infos[name]
    vocab = tok.get_vocab()
    for piece, raw in [("<0xE4>", b"\xe4"), ("<0x0A>", b"\n"), ("<0x00>", b"\x00"), ("<0xFF>", b"\xff"), ("▁the", b" the"), ("▁▁", b"  ")]:
        assert info.token_bytes[vocab[piece]] == raw
    # a character absent from the vocabulary is spelt with byte pieces
    ids = tok.encode("\U0001d49c", add_special_tokens=False)  # 𝒜: 4 UTF-8 bytes
    assert info.decode(ids).endswith("\U0001d49c".encode())


def test_byte_level_pieces(deepseek_tokenizer, infos) -> None:
    _, info = infos["deepseek_tokenizer"]
    vocab = deepseek_tokenizer.get_vocab()
    for piece, raw in [("Ġ", b" "), ("Ċ", b"\n"), ("Ġthe", b" the"), ("ĉ", b"\t"), ("ä½łå¥½", "你好".encode())]:
        assert info.token_bytes[vocab[piece]] == raw
    alphabet = byte_level_alphabet()
    assert len(set(alphabet)) == 256 and alphabet[ord(" ")] == "Ġ" and alphabet[ord("A")] == "A"


@pytest.mark.parametrize(
    "name, text",
    [
        ("deepseek_tokenizer", "<｜end▁of▁sentence｜>"),
        ("deepseek_tokenizer", "<｜begin▁of▁sentence｜>"),
        ("mistral_tokenizer", "</s>"),
        ("mistral_tokenizer", "<unk>"),
        ("mistral_sp_tokenizer", "</s>"),
        ("small_bpe_tokenizer", "<|end|>"),
        ("small_bpe_tokenizer", "<|endoftext|>"),
    ],
)
def test_special_tokens_have_no_text(name: str, text: str, infos) -> None:
    tok, info = infos[name]
    tid = tok.convert_tokens_to_ids(text)
    assert tid in info.special_token_ids
    assert info.token_bytes[tid] == b""
    trie = info.trie
    assert tid not in set(trie.order.tolist())


@pytest.mark.parametrize(
    "name, text",
    [
        ("deepseek_tokenizer", "<｜User｜>"),
        ("deepseek_tokenizer", "<|EOT|>"),
        ("deepseek_tokenizer", "<｜tool▁calls▁begin｜>"),
        ("small_bpe_tokenizer", "<tool>"),
    ],
)
def test_non_special_added_tokens_are_literal_text(name: str, text: str, infos) -> None:
    tok, info = infos[name]
    tid = tok.convert_tokens_to_ids(text)
    assert tid not in info.special_token_ids
    assert info.token_bytes[tid] == text.encode()
    ids = tok.encode(f"a {text} b", add_special_tokens=False)
    assert tid in ids and info.decode(ids) == f"a {text} b".encode()


def test_several_stop_tokens_and_larger_vocab(small_bpe_tokenizer) -> None:
    end = small_bpe_tokenizer.convert_tokens_to_ids("<|end|>")
    info = TokenizerInfo.from_huggingface(small_bpe_tokenizer, stop_token_ids=[0, end], vocab_size=448)
    assert info.stop_token_ids == (0, end)
    assert {0, end} <= set(info.special_token_ids)
    assert info.vocab_size == 448 and len(info.token_bytes) == 448
    assert info.token_bytes[401:] == [b""] * 47
    assert int(info.trie.order.max()) < 401
    one = TokenizerInfo.from_huggingface(small_bpe_tokenizer, stop_token_ids=end)
    assert one.stop_token_ids == (end,)


def test_eos_token_id_list_and_generic_tokenizer() -> None:
    """A duck-typed tokenizer whose eos_token_id is a list (as generation configs have)."""

    class Fake:
        eos_token_id = [3, 4]
        all_special_ids = [0]

        def get_vocab(self) -> dict[str, int]:
            return {"<pad>": 0, "a": 1, "ab": 2, "<end>": 3, "<eot>": 4}

        def __len__(self) -> int:
            return 5

    info = TokenizerInfo.from_huggingface(Fake(), vocab_type=VocabType.RAW)
    assert info.stop_token_ids == (3, 4)
    assert info.special_token_ids == (0, 3, 4)
    assert info.token_bytes == [b"", b"a", b"ab", b"", b""]


def test_xgrammar_decoded_vocab_agrees_on_normal_tokens(infos) -> None:
    """xgrammar keeps the text of special tokens in decoded_vocab; every other token is equal."""
    xgr = pytest.importorskip("xgrammar")
    for name in ["deepseek_tokenizer", "mistral_tokenizer", "small_bpe_tokenizer"]:
        tok, info = infos[name]
        theirs = xgr.TokenizerInfo.from_huggingface(tok).decoded_vocab
        special = set(info.special_token_ids)
        diff = [i for i, (a, b) in enumerate(zip(info.token_bytes, theirs)) if a != b and i not in special]
        assert diff == [], name


def test_fingerprint_is_stable_and_distinguishes(infos, small_bpe_tokenizer) -> None:
    fps = {name: infos[name][1].fingerprint for name in ["deepseek_tokenizer", "mistral_tokenizer", "small_bpe_tokenizer"]}
    assert len(set(fps.values())) == 3 and all(len(f) == 32 for f in fps.values())
    # the same tokenizer read again (or through the other backend) gives the same fingerprint
    assert TokenizerInfo.from_huggingface(small_bpe_tokenizer).fingerprint == fps["small_bpe_tokenizer"]
    assert infos["mistral_sp_tokenizer"][1].fingerprint == fps["mistral_tokenizer"]
    for variant in [{"vocab_size": 402}, {"stop_token_ids": [1]}]:
        assert TokenizerInfo.from_huggingface(small_bpe_tokenizer, **variant).fingerprint != fps["small_bpe_tokenizer"]
    # pinned: a change of this value means every stored compiled grammar is invalidated
    assert TokenizerInfo.from_vocab_bytes([b"a", b"b", b""], stop_token_ids=[2]).fingerprint == PINNED_FINGERPRINT


PINNED_FINGERPRINT = "ae132a0245de6eb239b1548605220a1a"


def brute_force_trie(token_bytes: list[bytes]) -> TokenTrie:
    """The trie arrays computed the obvious way."""
    ids = sorted((i for i, b in enumerate(token_bytes) if b), key=lambda i: (token_bytes[i], i))
    toks = [token_bytes[i] for i in ids]
    n = len(toks)
    lcp = [0] * n
    for k in range(1, n):
        a, b = toks[k - 1], toks[k]
        while lcp[k] < min(len(a), len(b)) and a[lcp[k]] == b[lcp[k]]:
            lcp[k] += 1
    skip = [next((j for j in range(i + 1, n) if not toks[j].startswith(toks[i])), n) for i in range(n)]
    offsets = np.cumsum([0] + [len(t) for t in toks])
    sets = np.array([[sum(1 << (b & 63) for b in set(t) if b >> 6 == w) for w in range(4)] for t in toks],
                    dtype=np.uint64).reshape(n, 4)
    tails = np.array([[sum(1 << (b & 63) for b in set(t[1:]) if b >> 6 == w) for w in range(4)] for t in toks],
                     dtype=np.uint64).reshape(n, 4)
    whole = np.array([_decodes(t) for t in toks], dtype=np.bool_)
    firsts = [t[0] for t in toks]
    starts = np.array([next((i for i, f in enumerate(firsts) if f >= b), n) for b in range(257)])
    # the tokens that start with (b, c) come after those that start with b and end there or go on below c
    seconds = np.array([next((i for i in range(starts[b], n) if toks[i][0] > b or len(toks[i]) > 1 and toks[i][1] >= c), n)
                        for b in range(256) for c in range(257)])
    return TokenTrie(np.array(ids), np.frombuffer(b"".join(toks), np.uint8), offsets, np.array(lcp), np.array(skip),
                     sets, tails, whole, starts, seconds)


def check_trie(trie: TokenTrie, want: TokenTrie) -> None:
    """Equal arrays, with the promised dtypes."""
    for field, dtype in zip(TokenTrie._fields, [np.int32, np.uint8, np.int32, np.int32, np.int32, np.uint64, np.uint64, np.bool_,
                                                  np.int32, np.int32]):
        got = getattr(trie, field)
        assert got.dtype == dtype, field
        assert np.array_equal(got, getattr(want, field)), field


@pytest.mark.parametrize(
    "tokens",
    [
        [b"a", b"ab", b"abc", b"b", b"abd", b"", b"ab", b"\x00", b"a\x00", b"\xff\xff", b"\xff"],
        [b"x"],
        [b"", b""],
        [bytes([i]) for i in range(256)] + [b"\xff" * k for k in range(2, 6)],
    ],
)
def test_trie_small_tables(tokens: list[bytes]) -> None:
    check_trie(build_token_trie(tokens), brute_force_trie(tokens))


def test_trie_of_small_bpe_against_brute_force(infos) -> None:
    _, info = infos["small_bpe_tokenizer"]
    check_trie(info.trie, brute_force_trie(info.token_bytes))
    assert info.trie is info.trie  # built once


def test_trie_of_deepseek_spot_checks(infos) -> None:
    _, info = infos["deepseek_tokenizer"]
    trie, tb = info.trie, info.token_bytes
    n = len(trie.order)
    assert n == sum(1 for b in tb if b) and trie.offsets[-1] == len(trie.data)
    toks = [tb[i] for i in trie.order.tolist()]
    assert all(toks[k - 1] <= toks[k] for k in range(1, n))
    rng = np.random.default_rng(0)
    for i in rng.integers(0, n, 300).tolist() + [0, n - 1]:
        assert bytes(trie.data[trie.offsets[i]:trie.offsets[i + 1]]) == toks[i]
        if i:
            assert trie.lcp[i] == len(_common_prefix(toks[i - 1], toks[i]))
        j = int(trie.skip[i])
        assert all(toks[k].startswith(toks[i]) for k in range(i + 1, j))
        assert j == n or not toks[j].startswith(toks[i])


def _common_prefix(a: bytes, b: bytes) -> bytes:
    """The longest common prefix of two byte strings."""
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return a[:k]


@pytest.mark.parametrize(
    "vocab, vocab_type, tokens",
    [
        (["a", "Ġb", "Ċ", "ÃŁ"], VocabType.BYTE_LEVEL, [b"a", b" b", b"\n", "ß".encode()]),
        (["▁hi", "<0x0A>", "<0xe4>", "x▁y", "<0x0G>"], VocabType.BYTE_FALLBACK, [b" hi", b"\n", b"\xe4", b"x y", b"<0x0G>"]),
        ([b"\xff\xfe", "é", ""], VocabType.RAW, [b"\xff\xfe", "é".encode(), b""]),
        ([b"\xc4\xa0x"], VocabType.BYTE_LEVEL, [b" x"]),  # bytes are the UTF-8 spelling of "Ġx"
        (["Ġx", "▁y"], "byte_level", [b" x", "▁y".encode()]),  # by name; "▁" is outside the alphabet
    ],
)
def test_constructor_decodes_each_vocab_type(vocab, vocab_type, tokens) -> None:
    info = TokenizerInfo(vocab, vocab_type)
    assert info.token_bytes == tokens


ERRORS = [
    (lambda: TokenizerInfo.from_huggingface(object()), r"cannot read a object: expected a Hugging Face tokenizer with get_vocab"),
    (lambda: TokenizerInfo.from_vocab_bytes([b"a", b"b"], stop_token_ids=[2]), r"stop_token_ids \[2\] out of range for vocab_size=2"),
    (lambda: TokenizerInfo.from_vocab_bytes([b"a"], special_token_ids=[-1]), r"special_token_ids \[-1\] out of range"),
    (lambda: TokenizerInfo.from_vocab_bytes([b"a"], stop_token_ids=["0"]), r"stop_token_ids must be token ids \(ints\), got '0'"),
    (lambda: TokenizerInfo.from_vocab_bytes([b"a"], vocab_size=0), r"vocab_size must be a positive int, got 0"),
    (lambda: TokenizerInfo([b"\xff"], VocabType.BYTE_LEVEL), r"token 0 is not UTF-8 .* pass vocab_type=VocabType.RAW"),
    (lambda: TokenizerInfo([3.5]), r"token 0 is a float; expected bytes or str"),
    (lambda: TokenizerInfo(["a"], "wordpiece"), r"unknown vocab_type 'wordpiece'; expected a VocabType \(RAW, BYTE_FALLBACK, BYTE_LEVEL\)"),
    (lambda: TokenizerInfo.from_vocab_bytes([b"a"]).decode([1]), r"token id 1 out of range for vocab_size=1"),
]


@pytest.mark.parametrize("call, message", ERRORS)
def test_errors(call, message) -> None:
    with pytest.raises(TokenizerError, match=message):
        call()


def test_from_vocab_bytes_and_smaller_vocab_size() -> None:
    info = TokenizerInfo.from_vocab_bytes([b"a", b"b", b"<eos>", b"c"], stop_token_ids=2, vocab_size=3)
    assert info.token_bytes == [b"a", b"b", b""]
    assert info.special_token_ids == (2,) and info.stop_token_ids == (2,)
    assert info.vocab_type is VocabType.RAW
    assert "vocab_size=3" in repr(info)


def _decodes(token: bytes) -> bool:
    try:
        token.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_selected_tokens_make_the_trie_of_those_tokens(infos) -> None:
    """select_tokens gives what building the trie of the selected tokens alone gives (same ids)."""
    _, info = infos["small_bpe_tokenizer"]
    rng = np.random.default_rng(3)
    n = info.trie.order.shape[0]
    for size in (1, 5, n // 3, n):
        sel = np.sort(rng.choice(n, size, replace=False))
        chosen = set(info.trie.order[sel].tolist())
        only = [b if i in chosen else b"" for i, b in enumerate(info.token_bytes)]
        check_trie(select_tokens(info.trie, sel), brute_force_trie(only))


def test_token_groups_keep_the_spec_they_were_asked_with() -> None:
    """Group lists that differ only in a cap are cached apart: each group keeps its own cap."""
    info = TokenizerInfo.from_vocab_bytes([b"a", b"ab", b'"', b"<eos>"], stop_token_ids=[3])
    spec = GroupSpec("word", WORD_BYTES, 0, None, 64)
    keyed = token_groups(info, (spec,))
    unkeyed = token_groups(info, (spec._replace(cap=0),))
    assert [g.spec.cap for g in keyed] == [64, 0]  # the word group, then the rest (the quote)
    assert [g.spec.cap for g in unkeyed] == [0, 0]
