"""Plain-character runs (:mod:`pda.plain_runs`): sound against the reference walk (in a frame and
over real stacks), tight on counted strings, and classes and masks with the shortcut equal those
without it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pda import GrammarCompiler, GrammarMatcher, TokenizerInfo, precompute
from pda.grammar import Grammar
from pda.plain_runs import (
    BEYOND_LEAVES, BEYOND_MAYBE, BEYOND_NOWHERE, RUN_CAP, beyond_run, plain_char_counts, plain_prefix_counts, plain_runs,
    plain_shapes, plain_to_end, stack_most, stack_run,
)
from pda.token_walk import TOKEN_ACCEPTED, TOKEN_REJECTED
from pda.walk_reference import walk_tokens_reference

GRAMMARS = Path(__file__).resolve().parents[2] / "grammars"

SCHEMAS: list[dict[str, Any]] = [
    {"type": "string", "maxLength": 5},
    {"type": "string", "minLength": 2, "maxLength": 9},
    {"type": "object", "properties": {"a": {"type": "string", "minLength": 1, "maxLength": 300},
                                      "b": {"type": "string", "maxLength": 40}}, "required": ["a"]},
    {"type": "array", "items": {"type": "string", "pattern": "^[a-z é]{2,12}$"}},
    {"enum": ["alpha", "beta", "ünï", "x y"]},
    {"type": "array", "items": {"type": "string", "pattern": "^a.*$", "maxLength": 20}},  # "." has no U+2028
]
# plain characters of 1 to 4 UTF-8 bytes (U+2027 and U+202A beside the separators, which are not plain)
PLAIN = ["a", "Z", "7", " ", "~", "é", "中", "😀", "\u2027", "\u202a", "—", "\x7f"]


def _runs(g: Grammar) -> np.ndarray:
    a = g.automaton
    return plain_runs(a.trans, a.byte_class, a.call_ptr, a.call_rule, a.rule_start)


def test_plain_char_counts() -> None:
    tokens = [b"abc", b'a"', b"\\n", b"\x1f", b"\xc3", b"\xc3\xa9", b"\xed\xa0\x80", "😀x".encode(), b" ", b"\x7f",
              b"\xa9", "中文".encode(), "\u2028".encode(), "a\u2029".encode(), "\u2027\u202a—€".encode()]
    info = TokenizerInfo.from_vocab_bytes(tokens)
    trie = info.trie
    got = {trie.data[trie.offsets[i]:trie.offsets[i + 1]].tobytes(): int(c)
           for i, c in enumerate(plain_char_counts(trie))}
    assert got == {b"abc": 3, b'a"': -1, b"\\n": -1, b"\x1f": -1, b"\xc3": -1, b"\xc3\xa9": 1, b"\xed\xa0\x80": -1,
                   "😀x".encode(): 2, b" ": 1, b"\x7f": 1, b"\xa9": -1, "中文".encode(): 2, "\u2028".encode(): -1,
                   "a\u2029".encode(): -1, "\u2027\u202a—€".encode(): 4}


def test_plain_prefix_counts() -> None:
    """Whole plain characters count as in plain_char_counts; a token may end inside one more plain
    character (counted), but not start inside one, break one off in its middle, or end inside a
    sequence that no character starts with (an overlong form, a surrogate, beyond U+10FFFF)."""
    tokens = {b"abc": 3, b'a"': -1, b"\xc3": 1, b"\xc3\xa9": 1, b"ab\xe4\xb8": 3, b"\xe4": 1, b"\xa9": -1,
              b"a\xc3b": -1, b"\xed\xa0": -1, b"\xed\x9f": 1, b"\xe0\x80": -1, b"\xe0\xa0": 1, b"\xf4\x90": -1,
              b"\xf4\x8f\xbf": 1, "😀x".encode(): 2, b"x\x1f": -1, b"\xc3\\": -1, b"\xc3\xa9\xc3": 2,
              b"a\xe2\x80": 2, b"\xe2\x81": 1, "\u2028".encode(): -1, b"a\xe2\x80\xa9b": -1}
    trie = TokenizerInfo.from_vocab_bytes(list(tokens)).trie
    got = {trie.data[trie.offsets[i]:trie.offsets[i + 1]].tobytes(): int(c)
           for i, c in enumerate(plain_prefix_counts(trie))}
    assert got == tokens
    full = plain_char_counts(trie)
    assert np.array_equal(full[full >= 0], plain_prefix_counts(trie)[full >= 0])


@pytest.mark.parametrize("source", [*range(len(SCHEMAS)), "json.gbnf", "c_like.gbnf"])
def test_runs_are_sound(source: int | str) -> None:
    """Every sequence of at most ``run[s]`` plain characters is consumed inside ``s``'s frame, as the
    reference walk says (random sequences, at most 8 characters, every state with a run)."""
    g = (Grammar.from_json_schema(SCHEMAS[source]) if isinstance(source, int)
         else Grammar.from_ebnf((GRAMMARS / source).read_text()))
    run = _runs(g)
    rng = random.Random(str(source))
    states = np.flatnonzero(run > 0).tolist()
    assert bool(states) == (source not in (3, 4))  # a pattern of a few letters, an enum: no run of every character
    if source == 5:  # after the "a" of "^a.*$", as many as the length allows (none while the separators were plain)
        assert run[_after(g, '["a')].tolist() == [19]
    for s in rng.sample(states, min(len(states), 150)):
        texts = ["".join(rng.choice(PLAIN) for _ in range(rng.randint(1, min(8, int(run[s]))))) for _ in range(6)]
        codes = walk_tokens_reference(g.automaton, [t.encode() for t in texts], s, [], False)
        assert codes == [TOKEN_ACCEPTED] * len(texts), (s, int(run[s]), texts, codes)


def _after(g: Grammar, text: str) -> list[int]:
    from pda.stack import StackArena
    from pda.walker import Walker

    w = Walker(g.automaton, StackArena())
    cfg = w.initial()
    for b in text.encode():
        cfg = w.step(cfg, b)
    return [s for s, _ in cfg.tops]


def test_runs_are_tight_on_counted_strings() -> None:
    short = Grammar.from_json_schema(SCHEMAS[0])
    assert _runs(short)[_after(short, '"')].tolist() == [5]
    assert _runs(short)[_after(short, '"ab')].tolist() == [3]
    ranged = Grammar.from_json_schema(SCHEMAS[1])
    assert _runs(ranged)[_after(ranged, '"')].tolist() == [9]
    long = Grammar.from_json_schema({"type": "string", "maxLength": 3000})  # blocks called as rules
    assert long.normal.rules.keys() - {"$root"}
    assert _runs(long)[_after(long, '"')].max() == 55  # inside the first block of ~√3000 characters
    assert _runs(long)[_after(long, '"' + "x" * 2990)].max() == 10
    free = Grammar.from_json_schema({"type": "string"})
    assert _runs(free)[_after(free, '"')].tolist() == [RUN_CAP]


def _beyond(g: Grammar, s: int) -> int:
    a = g.automaton
    is_end = a.is_end if a.is_end.dtype == np.bool_ else a.is_end.astype(np.bool_)
    return int(beyond_run(a.trans, a.call_ptr, *plain_shapes(a.byte_class), is_end, s, int(_runs(g)[s])))


def test_beyond_the_run() -> None:
    """Inside a counted string no plain sequence longer than the run is consumed and none reaches
    an end (a longer plain token is rejected: the reference walk agrees); a loop may go on; in a
    rule that a string of plain characters ends, the longer token may leave the frame."""
    short = Grammar.from_json_schema(SCHEMAS[0])
    for text in ('"', '"ab', '"abcd'):
        (s,) = _after(short, text)
        assert _beyond(short, s) == BEYOND_NOWHERE, text
        longer = [("x" * (int(_runs(short)[s]) + 1)).encode(), ("é" * 6).encode()]
        assert walk_tokens_reference(short.automaton, longer, s, [], True) == [TOKEN_REJECTED] * 2
    free = Grammar.from_json_schema({"type": "string", "maxLength": 200})
    assert {_beyond(free, s) for s in _after(free, '"' + "a" * 150)} == {BEYOND_NOWHERE}
    loop = Grammar.from_json_schema({"type": "string", "pattern": "^a.*$", "maxLength": 200})
    assert {_beyond(loop, s) for s in _after(loop, '"a')} == {BEYOND_NOWHERE}
    nested = Grammar.from_ebnf('root ::= "<" inner ">"\ninner ::= [^"\\\\\\x00-\\x1f]{3} | "(" inner ")"\n')
    assert {_beyond(nested, s) for s in _after(nested, "<a")} == {BEYOND_LEAVES}  # 2 more end the rule: what follows decides
    assert {_beyond(nested, s) for s in _after(nested, "<")} == {BEYOND_MAYBE}  # a call on the way: cannot tell
    unbounded = Grammar.from_ebnf('root ::= [a-z]{2} [^"\\\\\\x00-\\x1f]* "!"\n')
    (s,) = _after(unbounded, "ab")
    assert _beyond(unbounded, s) == BEYOND_MAYBE


# a recursive rule (called with context expansion, not escaping) whose chain of any 3 plain
# characters ends it: a longer plain token is rejected by what follows, not uncertain
NESTED = 'root ::= "<" inner ">"\ninner ::= [^"\\\\\\x00-\\x1f]{3} | "(" inner ")"\n'

# a rule called from 17 places (so it escapes, pda.precompute) whose first 2 characters are any
# plain ones and the rest letters: a plain token of letters longer than 2 is still accepted in it
ESCAPING = ("root ::= " + " | ".join(f'"{c}" r "{c.lower()}"' for c in "ABCDEFGHIJKLMNOPQ") + "\n"
            'r ::= [^"\\\\\\x00-\\x1f]{2} [a-z]* | "(" r ")"\n')


def _all_classes(info: TokenizerInfo, source: dict[str, Any] | str) -> dict[int, tuple[list[int], list[int]]]:
    compiler = GrammarCompiler(info, cache=False)
    compiled = compiler.compile_grammar(source) if isinstance(source, str) else compiler.compile_json_schema(source)
    classes = compiled.classes
    out = {}
    for s in classes.states:
        c = classes.get(s)
        acc = np.flatnonzero(c.accepted_mask(info.trie.order, classes.words)).tolist()
        out[s] = (acc, c.uncertain.tolist())
    return out


@pytest.mark.parametrize("schema", [*SCHEMAS[1:4], SCHEMAS[5], {"type": "string", "minLength": 3, "maxLength": 3000},
                                    NESTED, ESCAPING])
def test_classes_equal_without_the_shortcut(schema: dict[str, Any] | str, deepseek_tokenizer: Any,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The token classes of every state, with and without plain runs, over 6,000 DeepSeek tokens
    (each mode with a tokenizer of its own: the class cache is per tokenizer); the long string's
    blocks take the shortcut to uncertain tokens too."""
    every = [b for b in TokenizerInfo.from_huggingface(deepseek_tokenizer).token_bytes if b]
    rng = random.Random(0)
    tokens = sorted(set(rng.sample(every, 6000)) | {b'"', b'",', b"a", b"ab", b"\\n", "é".encode(), "\u2028".encode(),
                                                    "a\u2029b".encode(), "\u2027".encode(), 'a\u2028"'.encode(),
                                                    b"ab\xc3", "x中文".encode()[:6], "é".encode()[:1], b"\xe4\xb8"})
    with_runs = _all_classes(TokenizerInfo.from_vocab_bytes(tokens), schema)
    monkeypatch.setattr(precompute, "plain_runs", lambda trans, *rest, **options: np.zeros(trans.shape[0], np.int16))
    without = _all_classes(TokenizerInfo.from_vocab_bytes(tokens), schema)
    assert with_runs == without


def test_stack_runs_are_sound_across_blocks() -> None:
    """On real stacks inside a long string (blocks of ~55 characters called as rules), every
    sequence within :func:`stack_run`'s run is consumed on that stack (reference walk, run-time
    check), and the run reaches past the block the top is in."""
    tokens = [bytes([b]) for b in range(32, 127)] + ["é".encode(), b"<eos>"]
    info = TokenizerInfo.from_vocab_bytes(tokens, stop_token_ids=[len(tokens) - 1])
    compiled = GrammarCompiler(info, cache=False).compile_json_schema({"type": "string", "maxLength": 3000})
    aut = compiled.grammar.automaton
    run, to_end = plain_runs(aut.trans, aut.byte_class, aut.call_ptr, aut.call_rule, aut.rule_start), \
        plain_to_end(aut.trans, aut.byte_class, aut.is_end)
    rng = random.Random(1)
    crossed = 0
    for n in [0, 1, 40, 50, 54, 55, 56, 100, 1500, 2950, 2990, 2999]:
        m = GrammarMatcher(compiled)
        assert m.accept_string('"' + "x" * n)
        for s, parents in m._cfg.tops:
            for path in m._stacks.paths(parents) or ():
                got, frames = stack_run(run, to_end, s, path, RUN_CAP)
                assert got <= 3000 - n
                crossed += got > run[s]
                if got == 0:
                    continue
                texts = ["".join(rng.choice(PLAIN) for _ in range(rng.randint(max(1, got - 3), got))) for _ in range(4)]
                codes = walk_tokens_reference(aut, [t.encode() for t in texts], s, path, False)
                assert codes == [TOKEN_ACCEPTED] * len(texts), (n, s, path.tolist(), got, frames, texts)
    assert crossed


def _most_by_search(w: Any, cfg: Any, chars: list[str], limit: int) -> int:
    """The most characters of ``chars`` some sequence consumes from ``cfg`` (at most ``limit``)."""
    front, k = {cfg}, 0
    while front and k < limit:
        nxt = set()
        for c in front:
            for ch in chars:
                d = c
                for b in ch.encode():
                    d = w.step(d, b)
                if d.tops or d.accepting:  # alive, or the text complete
                    nxt.add(d)
        if not nxt:
            break
        front, k = nxt, k + 1
    return k


@pytest.mark.parametrize("source, texts, chars, exact", [
    ('root ::= "<" item ">"\nitem ::= "(" item ")" | [a-z]{0,3}\n', ["<", "<(", "<((a", "<((abc", "<((ab)", "<abc", "<(())"],
     ["a", "(", ")", "<", ">", "é", " "], True),
    ({"type": "object", "properties": {"s": {"type": "string", "maxLength": 130}}},
     ['{"s": "' + "x" * n for n in (0, 20, 60, 100, 110, 125, 129, 130)], ["x", "é", " ", "中"], False),
])
def test_stack_most_is_sound(source: str | dict[str, Any], texts: list[str], chars: list[str], exact: bool) -> None:
    """No sequence of plain characters longer than :func:`stack_most` allows is consumed over a
    real stack (breadth-first search with the byte walker); on a small recursive grammar, whose
    characters the search tries all, some sequence reaches it."""
    from pda.stack import StackArena
    from pda.stack_paths import StackPaths
    from pda.walker import Walker

    g = Grammar.from_ebnf(source) if isinstance(source, str) else Grammar.from_json_schema(source)
    aut = g.automaton
    shapes = plain_shapes(aut.byte_class)
    bounded = 0
    for text in texts:
        w = Walker(aut, StackArena())
        stacks = StackPaths(w.arena)
        cfg = w.initial()
        for b in text.encode():
            cfg = w.step(cfg, b)
        assert cfg.tops, text
        most = 0
        for s, parents in cfg.tops:
            for path in stacks.paths(parents) or ():
                got, read = stack_most(aut.trans, aut.call_ptr, *shapes, aut.is_end, s, path, 200)
                assert 0 <= read <= path.shape[0]
                most = max(most, got)
        if most >= 200:  # no bound (a call on the way: "(" starts another item)
            continue
        found = _most_by_search(w, cfg, chars, most + 2)
        assert found <= most, (text, found, most)
        if exact:
            assert found == most, (text, found, most)
        bounded += 1
    assert bounded >= 3


def _masks(info: TokenizerInfo, schema: dict[str, Any], text: str) -> list[list[int]]:
    compiled = GrammarCompiler(info, cache=False).compile_json_schema(schema)
    m = GrammarMatcher(compiled)
    out = []
    for ch in text:
        out.append(m.next_token_mask().tolist())
        assert m.accept_string(ch)
    return out


def test_masks_equal_without_the_stack_shortcut(deepseek_tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Masks along a long string (blocks called as rules) up to its last characters, with and without
    :func:`stack_run` in the matcher's survivors (each with a tokenizer of its own), over 6,000
    DeepSeek tokens.  Without it is the matcher's Python path (the one-call kernel runs its own)."""
    from pda import matcher

    every = [b for b in TokenizerInfo.from_huggingface(deepseek_tokenizer).token_bytes if b]
    rng = random.Random(2)
    tokens = sorted(set(rng.sample(every, 6000)) | {b'"', b'",', b"a", b"ab", b"\\n", "é".encode(), "\u2028".encode(),
                                                    "a\u2029b".encode(), "\u2027".encode(), 'a\u2028"'.encode(),
                                                    b"ab\xc3", "x中文".encode()[:6], "é".encode()[:1], b"\xe4\xb8"})
    schema = {"type": "object", "properties": {"a": {"type": "string", "minLength": 10, "maxLength": 600}}}
    text = '{"a": "' + "".join(rng.choice(PLAIN[:8]) for _ in range(597)) + '"}'
    with_runs = _masks(TokenizerInfo.from_vocab_bytes(tokens), schema, text)
    monkeypatch.setattr(matcher, "stack_run", lambda *args: (0, 0))
    monkeypatch.setattr(matcher, "ONE_CALL_SURVIVORS", False)  # the kernel's own stack run is not patched
    monkeypatch.setattr(matcher, "SPLIT_TOPS", False)  # nor the split tops' deep walk's
    without = _masks(TokenizerInfo.from_vocab_bytes(tokens), schema, text)
    assert with_runs == without
