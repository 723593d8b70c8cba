"""The token-walk kernel equals its plain-Python definition, token by token.

:func:`pda.token_walk.walk_tokens` shares the work of common prefixes over the sorted token trie
(``lcp``/``skip`` for whole-vocabulary walks, a byte comparison with the previous token for a
subset) and keeps stacks as hash-consed nodes in fixed buffers.  :func:`pda.walk_reference.walk_tokens_reference`
walks every token on its own over plain sets of ``(state, stack tuple, cx)`` threads.  For each
grammar, vocabulary, start state and stack, both classify every token, and the codes must be equal
(a kernel ``TOKEN_OVERFLOW`` is "undecided": counted, required to be rare, not compared).

* grammars: the bundled ``json.gbnf`` and ``arithmetic.lark``, hand-written recursive EBNF grammars
  (nested calls, rules that end at several depths at once, end states with outgoing bytes, a root
  that calls itself, rules that are optional at the end of their caller), and random grammars
  (hypothesis) over ``ab()``;
* vocabularies: every token of up to 3 bytes over a small alphabet of the grammar (one byte per
  byte class; 3 bytes over 10 of them when the grammar has many classes), pieces of the grammar's
  texts (longer tokens), and a seeded sample of 2,000 tokens of DeepSeek's real 129,280-token
  tokenizer (a quarter of them made only of bytes the texts use);
* starts: the tops of :class:`pda.walker.Walker` configurations that the grammar's texts pass
  through, each over the linear stacks below it; and every state that reads a byte (at most 150,
  evenly spread) over the empty stack and over some of those real stacks; each with ``expand`` on
  (as precompute walks) and off (as the run-time check walks; over the empty stack, for half the
  states);
* candidates: the whole vocabulary (the trie's ``lcp``/``skip`` path, and the start state's
  self-loop shortcut) and a sorted random half of it (the prefix-comparison path).

On real stacks without ``expand`` (the run-time check) the byte walker is a second oracle: the
token is accepted exactly when :class:`~pda.walker.Walker` can feed its bytes from that stack.
``escape_rules`` (frames that may be left without expanding) is checked on the reference alone, and
against the kernel once the kernel takes an escape argument.

By default about 2.4 million (start, stack, expand, token) cases are compared in ~15 s.
``PDA_FULL_TESTS=1`` adds c_like.gbnf and xml.gbnf, more stacks, the DeepSeek sample for every
grammar, the whole DeepSeek vocabulary from a few json.gbnf starts, and more random grammars.
"""

from __future__ import annotations

import os
import random
import warnings
import zlib
from collections import Counter
from itertools import product
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from pda import Grammar, TokenizerInfo, grammars
from pda.automaton import Automaton
from pda.ir import Expr, Ref, alt, lit, opt, plus, seq, star
from pda.token_walk import (
    TOKEN_ACCEPTED, TOKEN_OVERFLOW, TOKEN_REJECTED, TOKEN_UNCERTAIN, walk_listing, walk_tokens,
)
from pda.walk_workspace import make_workspace
from pda.walker import Config, Walker
from pda.token_walk import KernelAutomaton
from pda.precompute import kernel_automaton, max_token_length
from pda.stack import BOTTOM, StackArena
from pda.token_trie import TokenTrie
from pda.walk_reference import ClosureTooLarge, ReferenceWalk, walk_tokens_reference

from .util import G

FULL = os.environ.get("PDA_FULL_TESTS") == "1"

# ----------------------------------------------------------------------------------- grammars

HAND_GRAMMARS: dict[str, tuple[str, list[str]]] = {
    # lists nest; an item ends at the end of an atom, of a list, of the items: several depths at once
    "nested_lists": (
        r'''
        root  ::= list
        list  ::= "[" items? "]"
        items ::= item ("," item)*
        item  ::= list | atom
        atom  ::= "a" | "b" "c"? | "d"+
        ''',
        ["[]", "[a]", "[[b],[bc,[dd]],a]", "[[[[[a]]]],[]]", "[ddd,[bc],[[[]]]]"],
    ),
    # a term may end inside a factor that still reads bytes ("y"+), expressions nest in parentheses
    "expr": (
        r'''
        root   ::= expr
        expr   ::= term ("+" term)*
        term   ::= factor factor?
        factor ::= "x" | "(" expr ")" | "y"+ | "z" sub
        sub    ::= "_" factor | ""
        ''',
        ["x", "xy+(x)", "((x+yy)+z_x)y", "(((z_(x)+x)))", "z_z_z_yyy+x"],
    ),
    # mutual recursion whose rules may all end at the same byte
    "mutual": (
        r'''
        root ::= a
        a    ::= "p" b | "q"
        b    ::= a "r"? | "s" c
        c    ::= b? "t"
        ''',
        ["q", "pq", "ppqr", "psqt", "pspsqtrt", "ppppqrrr", "pst"],
    ),
    # the root calls itself: its return sites are real
    "self_root": (
        r'''
        root ::= "(" root ")" root? | "z" | "<" inner* ">"
        inner ::= "i" | root
        ''',
        ["z", "(z)", "((z)z)(z)", "<iz(z)i>", "(<(<>)>)z"],
    ),
    # long counted repeats, split into blocks (a rule per block, called beside a tail rule that
    # ends at every item: two callees alive at once after every block)
    "long_repeat": (
        r'''
        root ::= "\"" [a-c]{0,20000} "\"" ("," [ab]{2,30000})?
        ''',
        ['""', '"abc"', '"' + "abcab" * 60 + '"', '"' + "c" * 290 + '",' + "ab" * 200, '"a",bb'],
    ),
    # C's unary minus beside `--` and a binary minus: a run of dashes splits every way, so a set
    # holds a thread per distinct stack depth (tens of threads, many local stack nodes: the hash
    # tables of pda.thread_sets)
    "dashes": (
        r'''
        root  ::= expr
        expr  ::= unary (ws "-" ws unary)*
        unary ::= ("-" | "--") ws unary ws | atom "--"?
        atom  ::= "x" | "(" expr ")"
        ws    ::= " "?
        ''',
        ["x", "-x", "x--", "x - -x", "--x--", "x" + "-" * 40 + "x", "(" + "-" * 25 + "(x)--)-- --x"],
    ),
    # identifiers, numbers and strings that loop on one state, ending where expressions go on: the
    # kernel decides the tokens after a looping prefix (words, `` word`` after a space, string
    # bodies with whole UTF-8 characters) in runs, without a walk
    "identifiers": (
        r'''
        root  ::= stmt (";" ws stmt)*
        stmt  ::= ident ws "=" ws expr | "call" ws1 ident "(" ws args? ws ")"
        args  ::= expr (ws "," ws expr)*
        expr  ::= term (ws [-+] ws term)*
        term  ::= ident ("." ident)? | [0-9]+ | "'" [^']* "'" | "(" ws expr ws ")"
        ident ::= [a-zA-Z_] [a-zA-Z0-9_]*
        ws    ::= [ \t]*
        ws1   ::= [ \t]+
        ''',
        ["x = y", "call f(a, b.c + 'été')", "abc_1 = (x + 12) - 'ü  z'; y=z", "call  g( )"],
    ),
}

BUNDLED = ["json.gbnf", "arithmetic.lark"] + (["c_like.gbnf", "xml.gbnf"] if FULL else [])


class Case(NamedTuple):
    """One grammar with everything both walks need."""

    name: str
    aut: Automaton
    texts: list[bytes]  # valid texts: the real stacks, and the pieces of the longer tokens
    kernel: KernelAutomaton  # kernel_automaton(aut)


_CASES: dict[str, Case] = {}


def case_of(name: str) -> Case:
    got = _CASES.get(name)
    if got is None:
        if name in HAND_GRAMMARS:
            text, samples = HAND_GRAMMARS[name]
            grammar = Grammar.from_ebnf(text)
            texts = [s.encode() for s in samples]
        else:
            grammar = Grammar.from_file(grammars.path(name))
            texts = [p.read_bytes() for p in grammars.samples(name)[0]]
        for t in texts:
            assert grammar.accepts(t), f"{name}: sample {t[:40]!r} is not in the grammar"
        aut = grammar.automaton
        got = _CASES[name] = Case(name, aut, texts, kernel_automaton(aut))
    return got


GRAMMAR_NAMES = list(HAND_GRAMMARS) + BUNDLED

# ------------------------------------------------------------------------------ vocabularies


def alphabet(aut: Automaton, size: int) -> list[int]:
    """One byte per byte class (a printable one where the class has it), the classes with the
    fewest bytes first (the grammar's punctuation), at most ``size`` of them."""
    members: dict[int, list[int]] = {}
    for b in range(256):
        members.setdefault(int(aut.byte_class[b]), []).append(b)
    reps = []
    for bs in sorted(members.values(), key=lambda bs: (len(bs), bs[0])):
        printable = [b for b in bs if 0x21 <= b < 0x7F] or [b for b in bs if b == 0x20] or bs
        reps.append(printable[0])
    return reps[:size]


def small_vocab(case: Case) -> list[bytes]:
    """Every token of 1 to 3 bytes over a small alphabet (3 bytes only over its first 10 bytes for
    large alphabets), every single byte of a class, and pieces of the texts up to 8 bytes long."""
    big = alphabet(case.aut, 64)
    small = big[:10] if len(big) > 14 else big
    out = {bytes(p) for n in (1, 2) for p in product(big, repeat=n)}
    out |= {bytes(p) for p in product(small, repeat=3)}
    rng = random.Random(f"vocab:{case.name}")
    for text in case.texts:
        for _ in range(40):
            a = rng.randrange(len(text))
            out.add(text[a:a + rng.randint(4, 8)])
    return sorted(out)


_DEEPSEEK: list[bytes] = []


def deepseek_sample(request: pytest.FixtureRequest, case: Case, size: int = 2000) -> list[bytes]:
    """``size`` distinct tokens of DeepSeek's tokenizer: three quarters drawn at random, the rest
    among the tokens made only of bytes the grammar's texts use (so many of them are accepted)."""
    if not _DEEPSEEK:
        hf = request.getfixturevalue("deepseek_tokenizer")
        _DEEPSEEK.extend(b for b in TokenizerInfo.from_huggingface(hf).token_bytes if b)
    rng = random.Random(f"deepseek:{case.name}")
    used = set(b"".join(case.texts))
    near = [t for t in _DEEPSEEK if set(t) <= used]
    picked = set(rng.sample(near, min(len(near), size // 4)))
    while len(picked) < size:
        picked.add(rng.choice(_DEEPSEEK))
    return sorted(picked)


# ------------------------------------------------------------------------------------- stacks


def linear_stacks(arena: StackArena, parents: tuple[int, ...], limit: int) -> list[tuple[int, ...]]:
    """The linear stacks (return states, bottom first) of a GSS parent set, at most ``limit``."""
    out: list[tuple[int, ...]] = []
    todo: list[tuple[tuple[int, ...], tuple[int, ...]]] = [(parents, ())]
    while todo and len(out) < limit:
        ps, above = todo.pop()
        for p in sorted(ps):
            if p == BOTTOM:
                out.append(above[::-1])
            else:
                todo.append((arena.parents[p], above + (arena.state[p],)))
    return out[:limit]


def real_tops(case: Case, count: int) -> list[tuple[int, tuple[int, ...]]]:
    """(top, stack) pairs with non-empty stacks from the configurations the texts pass through:
    ``count`` of them, of every depth met (the deepest among them)."""
    walker = Walker(case.aut, StackArena())
    seen: set[tuple[int, tuple[int, ...]]] = set()
    for text in case.texts:
        cfg = walker.initial()
        for b in text:
            cfg = walker.step(cfg, b)
            for s, parents in cfg.tops:
                seen.update((s, st) for st in linear_stacks(walker.arena, parents, 4) if st)
    by_depth = sorted(seen, key=lambda p: (len(p[1]), p))
    if len(by_depth) <= count:
        return by_depth
    picks = np.linspace(0, len(by_depth) - 1, count).round().astype(int)
    return [by_depth[k] for k in sorted(set(picks.tolist()))]


# -------------------------------------------------------------------------------- the kernel


def kernel_walk(case: Case, trie: TokenTrie, ws: Any, cand: np.ndarray, state: int, stack: tuple[int, ...],
                expand: bool, escape_rules: frozenset[int] = frozenset()) -> np.ndarray:
    """The kernel's codes for the sorted-trie indices ``cand`` (the one place that calls it); the
    rules in ``escape_rules`` escape, no other (whatever :func:`kernel_automaton` chose)."""
    out = np.empty(cand.shape[0], dtype=np.int8)
    escape = np.zeros(len(case.aut.rule_names), dtype=np.bool_)
    escape[list(escape_rules)] = True
    kernel = case.kernel._replace(rule_escape=escape)
    walk_tokens(kernel, trie, cand, state, np.asarray(stack, dtype=np.int32), expand, out, ws)
    # the listing walk names exactly the tokens the walk does not reject, with the same codes
    codes = np.full(cand.shape[0] + 1, 99, dtype=np.int8)
    found = np.full(cand.shape[0] + 1, -1, dtype=np.int32)
    n = walk_listing(kernel, trie, cand, state, np.asarray(stack, dtype=np.int32), expand, codes, ws, found)
    listed = np.flatnonzero(out != TOKEN_REJECTED)
    assert found[:n].tolist() == listed.tolist(), f"{case.name}: state {state}: listing names other tokens"
    assert codes[:n].tolist() == out[listed].tolist(), f"{case.name}: state {state}: listing's codes differ"
    return out


# ------------------------------------------------------------------------------- comparison


class Tally:
    """What a comparison covered: triples compared, kernel overflows, codes seen."""

    def __init__(self) -> None:
        self.compared = 0
        self.overflow = 0
        self.codes: Counter[int] = Counter()


def compare(case: Case, trie: TokenTrie, tokens: list[bytes], ws: tuple, ref: ReferenceWalk, cand: np.ndarray,
            state: int, stack: tuple[int, ...], tally: Tally, escape_rules: frozenset[int] = frozenset()) -> list[int]:
    """Kernel and reference agree on every token of ``cand`` from (state, stack); returns the
    reference's codes."""
    got = kernel_walk(case, trie, ws, cand, state, stack, ref.expand, escape_rules)
    start = ref.start(state, stack)
    want = [ref.classify(start, tokens[i]) for i in cand.tolist()]
    for j, i in enumerate(cand.tolist()):
        g = int(got[j])
        if g == TOKEN_OVERFLOW:
            tally.overflow += 1
            continue
        assert g == want[j], (
            f"{case.name}: token {tokens[i]!r} (trie index {i}) from state {state} over stack {list(stack)} "
            f"(expand={ref.expand}, escape={sorted(escape_rules)}, {cand.shape[0]} candidates): kernel says "
            f"{g}, the reference {want[j]} (0 rejected, 1 accepted, 2 uncertain)"
        )
        tally.compared += 1
        tally.codes[g] += 1
    return want


def subset(n: int, seed: str) -> np.ndarray:
    """A sorted random half of 0..n-1 (never the whole range: the kernel's subset path)."""
    rng = np.random.default_rng(zlib.crc32(seed.encode()))
    pick = np.flatnonzero(rng.random(n) < 0.5)
    return (pick if pick.shape[0] < n else pick[:-1]).astype(np.int32)


def vocab_trie(tokens: list[bytes]) -> tuple[TokenTrie, list[bytes]]:
    """The sorted trie of ``tokens`` (through TokenizerInfo) and the bytes of each trie index."""
    trie = TokenizerInfo.from_vocab_bytes(tokens).trie
    by_index = [bytes(trie.data[trie.offsets[i]:trie.offsets[i + 1]]) for i in range(trie.order.shape[0])]
    return trie, by_index


def run_matrix(case: Case, vocab: list[bytes], stacks_per_state: int, real: int, max_states: int = 400,
               max_threads: int = 1_000_000) -> Tally:
    """Kernel and reference on every token from: the real tops (over their stacks), every state that
    reads a byte (at most ``max_states`` of them, evenly spread) over the empty stack and over
    ``stacks_per_state`` of the real stacks; with and without ``expand``; all tokens and a subset."""
    trie, tokens = vocab_trie(vocab)
    ws = make_workspace(max_token_length(trie))
    n = trie.order.shape[0]
    everything = np.arange(n, dtype=np.int32)
    tally = Tally()
    refs = {e: ReferenceWalk(case.aut, e, max_threads=max_threads) for e in (True, False)}
    tops = real_tops(case, real)
    stacks = sorted({st for _, st in tops}, key=len)
    starts: list[tuple[int, tuple[int, ...]]] = list(tops)
    states = np.flatnonzero(case.aut.has_bytes)
    if states.shape[0] > max_states:
        states = states[np.linspace(0, states.shape[0] - 1, max_states).round().astype(int)]
    for s in states.tolist():
        starts.append((s, ()))
        for k in range(stacks_per_state if stacks else 0):
            starts.append((s, stacks[(s * 7 + k * 3) % len(stacks)]))
    for s, stack in starts:
        for expand in (True, False):
            if not stack and expand is False and s % 2:
                continue  # bare frames without expand: half the states are enough
            compare(case, trie, tokens, ws, refs[expand], everything, s, stack, tally)
            cand = subset(n, f"{case.name}:{s}:{stack}:{expand}")
            compare(case, trie, tokens, ws, refs[expand], cand, s, stack, tally)
    return tally


def check_tally(case: Case, tally: Tally, what: str) -> None:
    assert tally.compared > 1000, f"{case.name} {what}: only {tally.compared} tokens compared"
    assert tally.overflow <= tally.compared // 100, (
        f"{case.name} {what}: the kernel overflowed on {tally.overflow} tokens ({tally.compared} compared)")
    for code in (TOKEN_REJECTED, TOKEN_ACCEPTED):
        assert tally.codes[code], f"{case.name} {what}: no token was ever {code} (0 rejected, 1 accepted)"


# ------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("name", GRAMMAR_NAMES)
def test_kernel_equals_reference_on_small_vocabulary(name: str) -> None:
    case = case_of(name)
    assert real_tops(case, 1), f"{name}: the texts reach no stack"
    tally = run_matrix(case, small_vocab(case), stacks_per_state=3 if FULL else 1, real=24 if FULL else 8,
                       max_states=150)
    check_tally(case, tally, "small vocabulary")
    assert tally.codes[TOKEN_UNCERTAIN], f"{name}: no token was ever uncertain: expansion is not exercised"


@pytest.mark.parametrize("name", GRAMMAR_NAMES if FULL else ["json.gbnf", "nested_lists", "dashes", "identifiers"])
def test_kernel_equals_reference_on_deepseek_sample(name: str, request: pytest.FixtureRequest) -> None:
    case = case_of(name)
    tally = run_matrix(case, deepseek_sample(request, case), stacks_per_state=1 if FULL else 0,
                       real=12 if FULL else 4, max_states=100)
    check_tally(case, tally, "DeepSeek sample")


@pytest.mark.parametrize("text, vocab", [
    # ``vab`` right after ``uzz`` has only letters too, but ``v`` takes digits; `` xab`` after `` wzz``
    # has letters past its first byte, but ``x`` takes digits
    (r'''root ::= "u" [a-z]* | "v" [0-9]* | " " "w" [a-z]* | " " "x" [0-9]+''',
     [b"ua", b"uab", b"uzz", b"vab", b"vz", b"vz1", b" wa", b" wab", b" wzz", b" xab", b" xz1"]),
    # a state that loops on letters and calls a rule that reads ``ab!``: after a run of letters
    # from ``abc`` to ``bb``, ``bb!`` is walked from the sets of ``bb``, not from those of ``ab!``
    (r'''root ::= [a-z]* ("(" | x)
           x ::= "ab!" | "(" x ")"''', [b"ab!", b"abc", b"b", b"bb", b"bb!", b"bb("]),
])
def test_runs_of_looping_tokens_stop_where_their_prefix_does(text: str, vocab: list[bytes]) -> None:
    """After a token whose rest loops on one state, the kernel decides the tokens that follow it in
    the trie in one run, while they share its prefix, and walks the next one from its own prefix."""
    aut = Grammar.from_ebnf(text).automaton
    case = Case("runs", aut, [], kernel_automaton(aut))
    trie, tokens = vocab_trie(vocab)
    ws = make_workspace(max_token_length(trie))
    tally = Tally()
    for expand in (True, False):
        ref = ReferenceWalk(aut, expand)
        for s in np.flatnonzero(aut.has_bytes).tolist():
            compare(case, trie, tokens, ws, ref, np.arange(len(tokens), dtype=np.int32), s, (), tally)
    assert tally.codes[TOKEN_ACCEPTED] and tally.codes[TOKEN_REJECTED] and not tally.overflow


def chain_config(walker: Walker, state: int, stack: tuple[int, ...]) -> Config:
    """The closed configuration of one top ``state`` over the linear ``stack``."""
    node = BOTTOM
    for ret in stack:
        node = walker.arena.node(ret, (node,))
    return walker.closure({state: {node}})


@pytest.mark.parametrize("name", GRAMMAR_NAMES)
def test_reference_on_real_stacks_equals_the_byte_walker(name: str) -> None:
    """The run-time check (a real stack, no expansion): accepted exactly when the byte walker
    consumes the token from that stack; never uncertain."""
    case = case_of(name)
    vocab = small_vocab(case)
    walker = Walker(case.aut, StackArena())
    ref = ReferenceWalk(case.aut, expand=False)
    checked = accepted = 0
    for state, stack in real_tops(case, 16 if FULL else 6):
        start = ref.start(state, stack)
        cfg = chain_config(walker, state, stack)
        for tok in vocab:
            code = ref.classify(start, tok)
            assert code != TOKEN_UNCERTAIN
            arr = np.frombuffer(tok, dtype=np.uint8)
            _, pos = walker.run(cfg, arr, 0, len(arr))
            assert (code == TOKEN_ACCEPTED) == (pos == len(tok)), (
                f"{name}: token {tok!r} from state {state} over {list(stack)}: reference {code}, "
                f"byte walker consumed {pos} of {len(tok)} bytes")
            checked += 1
            accepted += code == TOKEN_ACCEPTED
    assert checked > 1000 and 0 < accepted < checked


def escape_sets(aut: Automaton, singles: int = 3) -> list[frozenset[int]]:
    """A few escape-rule sets: single non-root rules that something calls, and all of them."""
    called = sorted(set(aut.call_rule.tolist()) - {0})
    sets = [frozenset([r]) for r in called[:singles]]
    if len(called) > 1:
        sets.append(frozenset(called))
    return sets


@pytest.mark.parametrize("name", list(HAND_GRAMMARS) + ["json.gbnf"])
def test_escape_keeps_accepted_tokens_and_only_adds_uncertain_ones(name: str) -> None:
    """Escaping a rule never changes which tokens are accepted (they never leave the frame); a token
    uncertain without the escape stays uncertain; a rejected one may become uncertain, and does when
    its walk reaches an escaping end; and the escape is not a no-op somewhere."""
    case = case_of(name)
    vocab = small_vocab(case)
    plain = ReferenceWalk(case.aut, expand=True)
    changed = 0
    for rules in escape_sets(case.aut, 3 if name in HAND_GRAMMARS or FULL else 1):
        esc = ReferenceWalk(case.aut, expand=True, escape_rules=rules)
        for s in np.flatnonzero(case.aut.has_bytes).tolist():
            a, b = plain.start(s, ()), esc.start(s, ())
            for tok in vocab:
                p, e = plain.classify(a, tok), esc.classify(b, tok)
                assert (p == TOKEN_ACCEPTED) == (e == TOKEN_ACCEPTED), (name, sorted(rules), s, tok, p, e)
                if p == TOKEN_UNCERTAIN:
                    assert e == TOKEN_UNCERTAIN, (name, sorted(rules), s, tok, p, e)
                changed += p != e
    assert changed, f"{name}: escaping changed no token's code"


def test_escape_makes_the_rest_of_the_token_irrelevant() -> None:
    """A hand-checked case: in ``root ::= "[" item "]" "!"``, ``item ::= "a" | "a" "b" item?`` (recursive,
    so that it stays a rule of its own), with ``item`` escaping, from the start of
    ``item`` the tokens ``a`` and ``ab`` are accepted, ``a?`` and ``ab?`` are uncertain (the frame may
    end after ``a`` and after ``ab``: what follows is the caller's business), ``a]`` is uncertain with
    or without the escape, and ``?`` is rejected.  Expanded instead, ``a?`` and ``ab?`` are rejected."""
    aut = Grammar.from_ebnf('root ::= "[" item "]" "!"\nitem ::= "a" | "a" "b" item?').automaton
    item = aut.rule_names.index("item")
    start = int(aut.rule_start[item])
    tokens = [b"a", b"ab", b"a]", b"a?", b"?", b"ab?", b"aba", b"aba?"]
    got = walk_tokens_reference(aut, tokens, start, [], True, {item})
    assert got == [TOKEN_ACCEPTED, TOKEN_ACCEPTED, TOKEN_UNCERTAIN, TOKEN_UNCERTAIN, TOKEN_REJECTED, TOKEN_UNCERTAIN,
                   TOKEN_ACCEPTED, TOKEN_UNCERTAIN]
    expanded = walk_tokens_reference(aut, tokens, start, [], True)
    assert expanded == [TOKEN_ACCEPTED, TOKEN_ACCEPTED, TOKEN_UNCERTAIN, TOKEN_REJECTED, TOKEN_REJECTED,
                        TOKEN_REJECTED, TOKEN_ACCEPTED, TOKEN_REJECTED]
    inside = walk_tokens_reference(aut, tokens, start, [], False, {item})  # no expansion: no escape
    assert inside == [TOKEN_ACCEPTED, TOKEN_ACCEPTED] + [TOKEN_REJECTED] * 4 + [TOKEN_ACCEPTED, TOKEN_REJECTED]


@pytest.mark.parametrize("name", ["nested_lists", "expr", "mutual", "json.gbnf"])
def test_kernel_escape_equals_reference(name: str) -> None:
    case = case_of(name)
    trie, tokens = vocab_trie(small_vocab(case))
    ws = make_workspace(max_token_length(trie))
    n = trie.order.shape[0]
    everything = np.arange(n, dtype=np.int32)
    tally = Tally()
    for rules in escape_sets(case.aut):
        ref = ReferenceWalk(case.aut, expand=True, escape_rules=rules)
        for s in np.flatnonzero(case.aut.has_bytes).tolist():
            compare(case, trie, tokens, ws, ref, everything, s, (), tally, rules)
            compare(case, trie, tokens, ws, ref, subset(n, f"esc:{name}:{s}"), s, (), tally, rules)
    check_tally(case, tally, "escape")


# ----------------------------------------------------------------------------- random grammars

RULES = ["r0", "r1", "r2"]
_atom = st.one_of(st.sampled_from([lit("a"), lit("b"), lit("("), lit(")"), lit("ab"), lit("")]),
                  st.sampled_from(RULES).map(Ref))
_body = st.recursive(_atom, lambda xs: st.one_of(
    st.lists(xs, min_size=2, max_size=3).map(lambda items: seq(*items)),
    st.lists(xs, min_size=2, max_size=3).map(lambda items: alt(*items)),
    xs.map(opt), xs.map(star), xs.map(plus),
), max_leaves=5)
# every rule can end after one byte, so every grammar is productive
_rules = st.lists(st.tuples(_body, st.sampled_from([lit("a"), lit(")")])).map(lambda t: alt(*t)),
                  min_size=len(RULES), max_size=len(RULES)).map(lambda bodies: dict(zip(RULES, bodies)))


def random_texts(aut: Automaton, rng: random.Random, count: int = 6, length: int = 24) -> list[bytes]:
    """Viable prefixes drawn byte by byte among the bytes the byte walker allows."""
    walker = Walker(aut, StackArena())
    out = []
    for _ in range(count):
        cfg, text = walker.initial(), bytearray()
        while len(text) < length:
            nxt = walker.expected(cfg)
            if not nxt:
                break
            b = rng.choice(nxt)
            text.append(b)
            cfg = walker.step(cfg, b)
        out.append(bytes(text))
    return out


@settings(max_examples=150 if FULL else 15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules=_rules, seed=st.integers(0, 2**16))
def test_kernel_equals_reference_on_random_grammars(rules: dict[str, Expr], seed: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unused rules are expected here
        aut = G(rules, start="r0").automaton
    texts = random_texts(aut, random.Random(seed), length=16)
    case = Case("random", aut, texts, kernel_automaton(aut))
    vocab = sorted({bytes(p) for n in (1, 2, 3) for p in product(b"ab()", repeat=n)}
                   | {t[a:a + 5] for t in texts for a in range(0, len(t), 3)} - {b""})
    try:
        tally = run_matrix(case, vocab, stacks_per_state=1, real=6, max_threads=5000)
    except ClosureTooLarge:
        reject()  # too ambiguous for the unshared reference to walk in time
    # highly ambiguous random grammars may outgrow the kernel's buffers (then it answers OVERFLOW
    # and the caller decides another way): only the decided tokens are compared here
    assert tally.compared > 0


def test_kernel_equals_reference_on_the_whole_deepseek_vocabulary(request: pytest.FixtureRequest) -> None:
    """All 128k normal tokens of DeepSeek at once (the trie's real depth of shared prefixes and
    long ``skip`` jumps), from a few json.gbnf states over the empty stack and a real stack."""
    if not FULL:
        pytest.skip("slow (about a minute); run with PDA_FULL_TESTS=1")
    case = case_of("json.gbnf")
    deepseek_sample(request, case, size=10)  # loads the tokenizer
    trie, tokens = vocab_trie(list(dict.fromkeys(_DEEPSEEK)))
    ws = make_workspace(max_token_length(trie))
    everything = np.arange(trie.order.shape[0], dtype=np.int32)
    tally = Tally()
    tops = real_tops(case, 4)
    states = np.flatnonzero(case.aut.has_bytes).tolist()
    starts = [(s, ()) for s in states[::max(1, len(states) // 6)]] + tops[-2:]
    for expand in (True, False):
        ref = ReferenceWalk(case.aut, expand)
        for s, stack in starts:
            compare(case, trie, tokens, ws, ref, everything, s, stack, tally)
    check_tally(case, tally, "whole DeepSeek vocabulary")
