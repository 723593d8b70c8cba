"""GrammarMatcher and GrammarCompiler, method by method: rollback, jump-forward, fork, refusal,
termination, writing into a batch bitmask, argument errors, and the compile cache under threads.

Most tests use a raw byte vocabulary (every single byte, plus a few longer tokens), where a text can
be fed byte by byte and compared with the same text fed as longer tokens.
"""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest
import torch

from pda import Grammar, GrammarCompiler, GrammarMatcher, TokenizerInfo, allocate_token_bitmask, grammars
from pda.errors import BitmaskError

JSON = grammars.path("json").read_text(encoding="utf-8")
EXTRA = [b'{"', b'":', b'"}', b"},", b"],[", b"true", b"null", b'", "', "é".encode(), b"\xc3", b"\n  ", b"hello"]
STOP = 256 + len(EXTRA)  # the id of "<eos>", after the bytes and EXTRA


@pytest.fixture(scope="module")
def info() -> TokenizerInfo:
    tokens = [bytes([b]) for b in range(256)] + EXTRA + [b"<eos>"]
    return TokenizerInfo.from_vocab_bytes(tokens, stop_token_ids=[STOP])


@pytest.fixture(scope="module")
def compiler(info: TokenizerInfo) -> GrammarCompiler:
    return GrammarCompiler(info)


@pytest.fixture(scope="module")
def json_cg(compiler: GrammarCompiler):  # type: ignore[no-untyped-def]
    return compiler.compile_grammar(JSON)


def byte_ids(data: bytes | str) -> list[int]:
    """The single-byte token ids of ``data``."""
    return list(data.encode() if isinstance(data, str) else data)


def long_document(seed: int = 3) -> bytes:
    """A JSON document of a few hundred bytes with nesting, escapes and Unicode."""
    rng = random.Random(seed)
    items = []
    for k in range(12):
        items.append(rng.choice([
            f'{{"k{k}": [1, 2.5e-3, {{"x": null}}], "s": "é\\n日本"}}', f'[[{k}], [], {{}}, "a\\"b"]', "true",
            f'{{"deep": {{"deeper": {{"deepest": [{k}, -0.0]}}}}}}',
        ]))
    return ("[\n  " + ",\n  ".join(items) + "\n]").encode()


def tokens_of(data: bytes, info: TokenizerInfo, seed: int = 0) -> list[int]:
    """``data`` cut into tokens of the test vocabulary, longer tokens where they fit (at random)."""
    rng = random.Random(seed)
    out, pos = [], 0
    while pos < len(data):
        fits = [i for i, e in enumerate(EXTRA) if data.startswith(e, pos)]
        if fits and rng.random() < 0.7:
            i = rng.choice(fits)
            out.append(256 + i)
            pos += len(EXTRA[i])
        else:
            out.append(data[pos])
            pos += 1
    assert info.decode(out) == data
    return out


# ------------------------------------------------------------------------- rollback


def test_rollback_restores_the_earlier_masks(json_cg, info: TokenizerInfo) -> None:
    ids = tokens_of(long_document(), info)
    m = GrammarMatcher(json_cg)
    masks = [m.next_token_mask()]
    for t in ids:
        assert m.accept_token(t)
        masks.append(m.next_token_mask())
    assert m.is_completed() and m.num_tokens == len(ids)
    rng = random.Random(11)
    pos = len(ids)
    for _ in range(60):
        k = rng.randrange(0, pos + 1)
        m.rollback(k)
        pos -= k
        assert m.num_tokens == pos
        assert np.array_equal(m.next_token_mask(), masks[pos]), f"rollback({k}) to {pos} gave another mask"
        assert m.is_completed() == (pos == len(ids))
        forward = rng.randrange(0, len(ids) - pos + 1)
        for t in ids[pos:pos + forward]:
            assert m.accept_token(t)
        pos += forward
        assert np.array_equal(m.next_token_mask(), masks[pos])


def test_rollback_errors_and_stop_token(json_cg) -> None:
    m = GrammarMatcher(json_cg)
    with pytest.raises(ValueError, match="cannot roll back 1 tokens: 0 in the history"):
        m.rollback(1)
    assert all(m.accept_token(t) for t in byte_ids("[1]"))
    with pytest.raises(ValueError, match="cannot roll back 4 tokens"):
        m.rollback(4)
    with pytest.raises(ValueError):
        m.rollback(-1)
    assert m.accept_token(STOP) and m.is_terminated()
    m.rollback(1)  # a stop token counts as a token
    assert not m.is_terminated() and m.is_completed() and m.num_tokens == 3
    m.rollback(0)
    assert m.num_tokens == 3


def test_max_rollback_tokens(json_cg) -> None:
    m = GrammarMatcher(json_cg, max_rollback_tokens=5)
    fresh = m.next_token_mask()
    masks = []
    for t in byte_ids('{"abc": [10, 20]}'):
        masks.append(m.next_token_mask())
        assert m.accept_token(t)
    assert m.num_tokens == 5
    with pytest.raises(ValueError, match="cannot roll back 6 tokens: 5 in the history"):
        m.rollback(6)
    m.rollback(5)
    assert np.array_equal(m.next_token_mask(), masks[-5])
    m.reset()
    assert m.num_tokens == 0 and np.array_equal(m.next_token_mask(), fresh)
    unlimited = GrammarMatcher(json_cg)
    for t in byte_ids('{"abc": [10, 20]}'):
        unlimited.accept_token(t)
    unlimited.rollback(17)
    assert np.array_equal(unlimited.next_token_mask(), fresh)


# ------------------------------------------------------------------------- jump forward

# (grammar, text accepted first, the forced text)
JUMP_CASES = [
    ('root ::= "hello" " "? "world"', "", "hello"),
    ('root ::= "hello" " "? "world"', "hello", ""),           # a space or "w": not forced
    ('root ::= "hello" " "? "world"', "hello ", "world"),
    ('root ::= "hello" " "? "world"', "hel", "lo"),
    ('root ::= "hello" " "? "world"', "helloworld", ""),      # complete
    ('root ::= "a" "b"?', "", "a"),
    ('root ::= "a" "b"?', "a", ""),                           # could end here: not forced
    ('root ::= "{\\"name\\":" str ",\\"age\\":" [0-9]+ "}"\nstr ::= "\\"" [a-z]* "\\""', "", '{"name":"'),
    ('root ::= "{\\"name\\":" str ",\\"age\\":" [0-9]+ "}"\nstr ::= "\\"" [a-z]* "\\""', '{"name":"bob', ""),
    ('root ::= "{\\"name\\":" str ",\\"age\\":" [0-9]+ "}"\nstr ::= "\\"" [a-z]* "\\""', '{"name":"bob"', ',"age":'),
    ('root ::= "日本" [a-z]', "", "日本"),
    ('root ::= "ab" ( "é" | "è" )', "", "ab"),              # C3 is forced, but half a character is not returned
    ('root ::= x x\nx ::= "(" x? ")"', "((", ""),
    ('root ::= "[" x "]"\nx ::= "<" x? ">"', "[<<>", ">]"),   # forced through rule returns
    ('root ::= [a-z]+', "", ""),
]


@pytest.mark.parametrize(("grammar", "prefix", "forced"), JUMP_CASES)
def test_find_jump_forward_string(grammar: str, prefix: str, forced: str, compiler: GrammarCompiler) -> None:
    cg = compiler.compile_grammar(grammar)
    m = GrammarMatcher(cg)
    assert m.accept_string(prefix)
    before = m.next_token_mask()
    assert m.find_jump_forward_string() == forced
    assert np.array_equal(m.next_token_mask(), before) and m.num_tokens == 1  # it only reads the state
    by_bytes = GrammarMatcher(cg)
    assert all(by_bytes.accept_token(t) for t in byte_ids(prefix + forced))
    assert m.accept_string(forced)
    assert np.array_equal(m.next_token_mask(), by_bytes.next_token_mask())
    assert m.is_completed() == by_bytes.is_completed()
    assert m.find_jump_forward_string() == by_bytes.find_jump_forward_string()
    g = Grammar.from_ebnf(grammar)
    assert g.is_prefix(prefix + forced)
    for b in range(256):  # nothing but the forced text could have come (where it is not empty)
        if forced and b != (prefix + forced).encode()[len(prefix.encode())]:
            assert not g.is_prefix(prefix.encode() + bytes([b]))


def test_jump_forward_after_termination_is_empty(compiler: GrammarCompiler) -> None:
    m = GrammarMatcher(compiler.compile_grammar('root ::= "a" "bc"'))
    assert m.find_jump_forward_string() == "abc"
    assert m.accept_string("abc") and m.accept_token(STOP)
    assert m.find_jump_forward_string() == ""


# ------------------------------------------------------------------------- fork, refusal, termination


def test_fork_copies_are_independent(json_cg) -> None:
    m = GrammarMatcher(json_cg)
    assert m.accept_string('{"a": [')
    base = m.next_token_mask()
    a, b = m.fork(), m.fork()
    assert a.accept_string("1, 2]") and b.accept_string('"x"')
    assert np.array_equal(m.next_token_mask(), base) and m.num_tokens == 1
    assert not np.array_equal(a.next_token_mask(), b.next_token_mask())
    a.rollback(1)
    assert np.array_equal(a.next_token_mask(), base) and b.num_tokens == 2
    assert b.accept_string("]}") and b.accept_token(STOP) and b.is_terminated()
    assert not m.is_terminated() and not a.is_terminated()
    m.reset()
    assert b.is_terminated() and a.num_tokens == 1


def test_threads_with_forks_of_one_matcher(json_cg, info: TokenizerInfo) -> None:
    """Forks stepped in four threads at once give the masks a single thread gives."""
    doc = tokens_of(long_document(5), info, seed=2)
    ref = GrammarMatcher(json_cg)
    expected = []
    for t in doc:
        expected.append(ref.next_token_mask())
        ref.accept_token(t)
    root = GrammarMatcher(json_cg)
    errors: list[str] = []

    def work(m: GrammarMatcher) -> None:
        for i, t in enumerate(doc):
            if not np.array_equal(m.next_token_mask(), expected[i]) or not m.accept_token(t):
                errors.append(f"step {i}")
                return

    threads = [threading.Thread(target=work, args=(root.fork(),)) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []


@pytest.mark.parametrize(("prefix", "refused"), [
    ("", b"]"), ("[1", b"}"), ('{"a"', b"},"), ('["', "é".encode()[1:]), ("[1]", b"1"), ("tru", b"true"),
])
def test_refused_token_changes_nothing(prefix: str, refused: bytes, json_cg, info: TokenizerInfo) -> None:
    m = GrammarMatcher(json_cg)
    assert m.accept_string(prefix)
    t = info.token_bytes.index(refused)
    before, n, done = m.next_token_mask(), m.num_tokens, m.is_completed()
    assert not before[t >> 5] >> (t & 31) & 1
    assert not m.accept_token(t)
    assert not m.accept_string(refused)
    assert np.array_equal(m.next_token_mask(), before) and m.num_tokens == n and m.is_completed() == done
    assert not m.accept_token(-1) and not m.accept_token(info.vocab_size)  # out of range: refused too


def test_after_termination_only_rollback_and_reset_change_anything(json_cg) -> None:
    m = GrammarMatcher(json_cg)
    assert not m.accept_token(STOP)  # not complete yet
    assert m.accept_string("[true]") and m.accept_token(STOP)
    assert m.is_terminated() and m.num_tokens == 2
    empty = m.next_token_mask()
    assert not empty.any()
    for attempt in (lambda: m.accept_token(ord(" ")), lambda: m.accept_token(STOP), lambda: m.accept_string(" ")):
        assert attempt() is False
        assert m.is_terminated() and m.num_tokens == 2 and not m.next_token_mask().any()
    bitmask = allocate_token_bitmask(1, STOP + 1)
    m.fill_next_token_bitmask(bitmask)
    assert not bitmask.any()
    m.rollback(1)
    assert not m.is_terminated() and m.next_token_mask().any()
    assert m.accept_token(STOP)
    m.reset()
    assert not m.is_terminated() and m.num_tokens == 0 and m.accept_string("1")


def test_terminate_without_stop_token(compiler: GrammarCompiler) -> None:
    cg = compiler.compile_grammar('root ::= "ab"')
    m = GrammarMatcher(cg, terminate_without_stop_token=True)
    assert m.accept_string("ab") and m.is_terminated() and not m.next_token_mask().any()
    other = GrammarMatcher(cg)
    assert other.accept_string("ab") and not other.is_terminated()


# ------------------------------------------------------------------------- bitmask writing


def test_fill_writes_only_its_row(json_cg, info: TokenizerInfo) -> None:
    m = GrammarMatcher(json_cg)
    assert m.accept_string('{"a": ')
    bitmask = allocate_token_bitmask(2, info.vocab_size)
    sentinel = torch.arange(bitmask.shape[1], dtype=torch.int32) * 7919 - 5
    bitmask[0] = sentinel
    bitmask[1] = 0x5A5A5A5A
    assert m.fill_next_token_bitmask(bitmask, 1) is True
    assert torch.equal(bitmask[0], sentinel)
    assert np.array_equal(bitmask[1].numpy(), m.next_token_mask())
    flat = torch.zeros(bitmask.shape[1], dtype=torch.int32)  # a 1-D bitmask is one row
    m.fill_next_token_bitmask(flat)
    assert torch.equal(flat, bitmask[1])
    rows = np.full((3, bitmask.shape[1]), -1, dtype=np.int32)  # a numpy bitmask works too
    m.fill_next_token_bitmask(rows, 2)
    assert np.array_equal(rows[2], m.next_token_mask()) and (rows[:2] == -1).all()
    padding = np.unpackbits(rows[2].view(np.uint8), bitorder="little")[info.vocab_size:]
    assert not padding.any()  # bits past the vocabulary are clear


def test_refilling_one_bitmask_follows_its_changes(json_cg, info: TokenizerInfo) -> None:
    """A decode loop fills one tensor again and again (the matcher keeps its numpy view): a
    tensor changed in place in between (resized, given other storage) is written as it is now."""
    m = GrammarMatcher(json_cg)
    want = m.next_token_mask()
    words = want.shape[0]
    bitmask = allocate_token_bitmask(2, info.vocab_size)
    for index in (0, 1, 1):
        bitmask.fill_(0)
        m.fill_next_token_bitmask(bitmask, index)
        assert np.array_equal(bitmask[index].numpy(), want) and not bitmask[1 - index].any()
    bitmask.resize_(1, words)
    with pytest.raises(BitmaskError, match="row index 1 is out of range for 1 rows"):
        m.fill_next_token_bitmask(bitmask, 1)
    other = torch.zeros(3, words, dtype=torch.int32)
    bitmask.set_(other)  # the same tensor object, another storage
    m.fill_next_token_bitmask(bitmask, 2)
    assert np.array_equal(other[2].numpy(), want) and not other[:2].any()
    assert m.accept_string('{"a": ')
    fresh = allocate_token_bitmask(3, info.vocab_size)  # maybe at the freed tensor's address
    del bitmask, other
    m.fill_next_token_bitmask(fresh, 0)
    assert np.array_equal(fresh[0].numpy(), m.next_token_mask())


@pytest.mark.parametrize(("make", "message"), [
    (lambda w: torch.zeros(1, w, dtype=torch.int64), "dtype torch.int32"),
    (lambda w: torch.zeros(1, w, dtype=torch.uint8), "dtype torch.int32"),
    (lambda w: torch.zeros(1, w + 1, dtype=torch.int32), r"must have \d+ int32 words \(ceil\(vocab_size / 32\)\)"),
    (lambda w: torch.zeros(1, w - 1, dtype=torch.int32), "allocate it with allocate_token_bitmask"),
    (lambda w: torch.zeros(1, 1, w, dtype=torch.int32), "1-D or 2-D"),
    (lambda w: np.zeros((1, w), dtype=np.int64), "dtype int32"),
    (lambda w: [0] * w, "must be a torch.Tensor"),
])
def test_wrong_bitmask_raises_bitmask_error(make, message: str, json_cg, info: TokenizerInfo) -> None:  # type: ignore[no-untyped-def]
    m = GrammarMatcher(json_cg)
    words = (info.vocab_size + 31) // 32
    with pytest.raises(BitmaskError, match=message):
        m.fill_next_token_bitmask(make(words))


@pytest.mark.parametrize("index", [2, -1, 5])
def test_bitmask_row_index_out_of_range(index: int, json_cg, info: TokenizerInfo) -> None:
    bitmask = allocate_token_bitmask(2, info.vocab_size)
    with pytest.raises(BitmaskError, match=f"row index {index} is out of range for 2 rows"):
        GrammarMatcher(json_cg).fill_next_token_bitmask(bitmask, index)
    assert (bitmask == -1).all()


# ------------------------------------------------------------------------- compiler cache


def test_compiler_cache_same_and_different(info: TokenizerInfo) -> None:
    compiler = GrammarCompiler(info)
    a = compiler.compile_grammar('root ::= "a"+')
    assert compiler.compile_grammar('root ::= "a"+') is a
    assert compiler.compile_grammar('root ::= "b"+') is not a
    assert compiler.compile_grammar('top ::= "a"+', start="top") is not a
    assert compiler.compile_builtin_json() is compiler.compile_builtin_json()
    assert compiler.compile_regex("[0-9]+") is compiler.compile_regex("[0-9]+")
    assert compiler.compile_lark('start: "a"+') is not a
    g = Grammar.from_ebnf('root ::= "c"+')
    assert compiler.compile_grammar(g) is compiler.compile_grammar(g)
    other = GrammarCompiler(info)
    assert other.compile_grammar('root ::= "a"+') is not a  # each compiler has its own cache
    uncached = GrammarCompiler(info, cache=False)
    assert uncached.compile_grammar('root ::= "a"+') is not uncached.compile_grammar('root ::= "a"+')
    compiler.clear_cache()
    assert compiler.compile_grammar('root ::= "a"+') is not a


def test_compiling_from_four_threads_gives_one_object(info: TokenizerInfo) -> None:
    compiler = GrammarCompiler(info)
    grammar_text = grammars.path("sql_select").read_text(encoding="utf-8")  # slow enough to overlap
    barrier = threading.Barrier(4)
    results: list[object] = [None] * 4
    other: list[object] = [None] * 4

    def work(i: int) -> None:
        barrier.wait()
        results[i] = compiler.compile_grammar(grammar_text)
        other[i] = compiler.compile_grammar(JSON)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results[0] is not None and all(r is results[0] for r in results)
    assert other[0] is not None and all(o is other[0] for o in other) and other[0] is not results[0]


def test_failed_compile_is_not_cached_and_raises_in_every_thread(info: TokenizerInfo) -> None:
    compiler = GrammarCompiler(info)
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def work() -> None:
        barrier.wait()
        try:
            compiler.compile_grammar("root ::= undefined-rule")
        except ValueError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(errors) == 3 and all("undefined-rule" in str(e) for e in errors)
