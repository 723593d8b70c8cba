"""Batches, the shared mask cache, shared token classes and matchers used from several threads.

Every test here compares against a reference that does not use the feature under test: a batch
against one matcher at a time, cached masks against masks of a grammar compiled with sharing off
(every piece inlined, every rule walked with context expansion), threads against one thread.
"""

from __future__ import annotations

import gc
import json
import threading
from typing import Any

import numpy as np
import pytest
import torch

import pda
import pda.batch
import pda.share
import pda.matcher
import pda.precompute
import pda.state_classes
from pda import BatchGrammarMatcher, GrammarCompiler, GrammarMatcher, TokenizerInfo, grammars

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"}, "city": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0}, "tags": {"type": "array", "items": {"type": "string"}},
        "extra": {"type": "object"},
    },
    "required": ["name", "age"],
}
DOCS = [
    {"name": "Ada \"the\" Lovelace", "age": 36, "tags": ["math", "é\u4e2d"], "extra": {"k": [1, {"x": "y"}]}},
    {"name": "", "city": "Zürich", "age": 0, "tags": [], "other": "z"},
]


@pytest.fixture(scope="module")
def tok(deepseek_tokenizer: Any) -> TokenizerInfo:
    return TokenizerInfo.from_huggingface(deepseek_tokenizer)


@pytest.fixture
def sharing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shared pieces on (off by default, see pda.share): the tests below need shared rules."""
    monkeypatch.setattr(pda.share, "SHARE_MIN_STATES", 12)


def workloads(hf: Any) -> list[tuple[str, Any, list[list[int]]]]:
    """(name, compile function, token sequences) over a schema, the bundled JSON and SQL grammars."""
    schema_docs = [hf.encode(json.dumps(d), add_special_tokens=False) for d in DOCS]
    sql = [hf.encode(p.read_text(encoding="utf-8"), add_special_tokens=False) for p in grammars.samples("sql_select")[0]]
    js = [hf.encode(p.read_text(encoding="utf-8"), add_special_tokens=False) for p in grammars.samples("json")[0][:3]]
    strings = {"type": "object", "properties": {k: {"type": "string"} for k in "abc"}, "required": list("abc")}
    strings_docs = [hf.encode(json.dumps({"a": "hello world", "b": "more words", "c": "the last one"}),
                              add_special_tokens=False)]
    return [
        ("schema", lambda c: c.compile_json_schema(SCHEMA), schema_docs),
        ("strings", lambda c: c.compile_json_schema(strings), strings_docs),
        ("json", lambda c: c.compile_builtin_json(), js),
        ("sql", lambda c: c.compile_grammar(grammars.path("sql_select").read_text(encoding="utf-8")), sql),
    ]


def masks_along(compiled: pda.CompiledGrammar, ids: list[int]) -> list[np.ndarray]:
    m = GrammarMatcher(compiled)
    out = []
    for t in ids:
        out.append(m.next_token_mask())
        assert m.accept_token(t)
    out.append(m.next_token_mask())
    return out


def test_shared_classes_equal_unshared_per_state_classes(tok: TokenizerInfo, deepseek_tokenizer: Any,
                                                          monkeypatch: pytest.MonkeyPatch, sharing: None) -> None:
    shared = GrammarCompiler(tok, cache=False, precompute="lazy")
    for name, build, docs in workloads(deepseek_tokenizer):
        with monkeypatch.context() as mp:  # every piece inlined, every rule expanded: no sharing
            mp.setattr(pda.share, "SHARE_MIN_STATES", None)
            mp.setattr(pda.precompute, "ESCAPE_RETURN_SITES", 10**9)
            mp.setattr(pda.precompute, "LOOKAHEAD_GROUPS", None)
            plain = build(GrammarCompiler(TokenizerInfo.from_huggingface(deepseek_tokenizer), cache=False,
                                          precompute="lazy"))
        assert not any(n.startswith(pda.share.SHARED_PREFIX) for n in plain.grammar.automaton.rule_names)
        a = build(shared)
        if name in ("schema", "strings"):
            assert any(n.startswith(pda.share.SHARED_PREFIX) for n in a.grammar.automaton.rule_names)
        for ids in docs:
            for k, (x, y) in enumerate(zip(masks_along(a, ids), masks_along(plain, ids))):
                assert np.array_equal(x, y), f"{name}: masks differ at step {k}"
            # the second pass reads the shared mask cache: the same masks again
            for k, (x, y) in enumerate(zip(masks_along(a, ids), masks_along(plain, ids))):
                assert np.array_equal(x, y), f"{name}: cached masks differ at step {k}"
        assert a.mask_cache_stats()["hits"] > 0


CHAINS = {
    "type": "object",
    "properties": {
        "short": {"type": "string", "minLength": 3, "maxLength": 40},
        "long": {"type": "string", "maxLength": 300},
        "block": {"type": "string", "minLength": 2, "maxLength": 2000},
        "word": {"type": "string", "pattern": "^[a-z_]{2,30}$"},
        "kind": {"enum": [f"value number {i} of the long enumeration" for i in range(60)]},
        "n": {"type": "integer"},
        "same": {"const": "example"},  # two regions that differ only in their 7th byte
        "other": {"const": "examplX"},
    },
    "patternProperties": {"^x-[a-z]+$": {"type": "string", "maxLength": 24}},
    "additionalProperties": {"type": "string", "maxLength": 50},
    "required": ["short"],
}
CHAIN_DOCS = [
    {"short": "abc", "long": "a long string " * 12, "block": "Ünïcödé 中文 and words " * 30, "word": "snake_case",
     "kind": "value number 17 of the long enumeration", "n": -12, "same": "example", "other": "examplX",
     "x-tag": "tagged", "more": "the rest"},
    {"short": "x" * 40, "long": "", "block": "\"quoted\" and \\ escaped\n" * 4, "x-a": "", "zz": "é" * 50},
]


@pytest.mark.parametrize("plain_split", [16, None])
def test_grouped_classes_equal_per_state_classes(tok: TokenizerInfo, deepseek_tokenizer: Any,
                                                 monkeypatch: pytest.MonkeyPatch, plain_split: int | None) -> None:
    """Token classes taken from bounded-lookahead keys (pda.lookahead, pda.token_groups) equal
    the classes of every state walked over the whole vocabulary, on chains of counted strings,
    long-repeat blocks, a long enum, patternProperties, extra keys and a C-like grammar; twice
    over, so that the second grammar takes its classes from the tokenizer's cache.  Every state
    goes through the keys (``LOOKAHEAD_MIN_SHARE`` 0), not only the wide ones; with
    ``PLAIN_SPLIT_CHARS`` 16, those that surely consume 16 plain characters take the plain split
    instead (only the tokens beyond it walked, pda.token_groups.plain_split)."""
    hf = deepseek_tokenizer
    monkeypatch.setattr(pda.precompute, "LOOKAHEAD_MIN_SHARE", 0.0)
    monkeypatch.setattr(pda.precompute, "GROUP_KEY_TRIAL", 10**9)  # the keys even when they do not pay
    monkeypatch.setattr(pda.precompute, "PLAIN_SPLIT_CHARS", plain_split or 10**6)
    c_like = grammars.path("c_like")
    cases = [
        (lambda c: c.compile_json_schema(CHAINS), [hf.encode(json.dumps(d), add_special_tokens=False) for d in CHAIN_DOCS]),
        (lambda c: c.compile_grammar(c_like.read_text(encoding="utf-8")),
         [hf.encode(p.read_text(encoding="utf-8"), add_special_tokens=False) for p in grammars.samples("c_like")[0][:2]]),
    ]
    with monkeypatch.context() as mp:
        mp.setattr(pda.precompute, "LOOKAHEAD_GROUPS", None)
        plain_tok = TokenizerInfo.from_huggingface(hf)
        plain = [build(GrammarCompiler(plain_tok, cache=False, precompute="lazy")) for build, _ in cases]
    shared_tok = TokenizerInfo.from_huggingface(hf)
    for round_ in range(2):
        for (build, docs), ref in zip(cases, plain):
            got = build(GrammarCompiler(shared_tok, cache=False, precompute="lazy"))
            for ids in docs:
                for k, (x, y) in enumerate(zip(masks_along(got, ids), masks_along(ref, ids))):
                    assert np.array_equal(x, y), f"round {round_}: masks differ at step {k}"
            for s, c in got.classes.by_state.items():  # every state classified, uncertain sets too
                r = ref.classes.get(s)
                assert np.array_equal(np.sort(c.uncertain), np.sort(r.uncertain)), f"state {s}"
                assert np.array_equal(c.accepted_mask(shared_tok.trie.order, got.words),
                                      r.accepted_mask(plain_tok.trie.order, ref.words)), f"state {s}"
            if round_ == 1:
                assert got.classes.shared_hits > 0
    assert shared_tok.class_cache.hits > 0


def test_frame_classes_give_the_masks_of_walks_on_the_stack(tok: TokenizerInfo, deepseek_tokenizer: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Uncertain tokens decided through frame classes (pda.precompute.TokenClasses.frame_codes:
    one return state below the top, keyed by pda.lookahead.frame_key and shared through the
    tokenizer's cache) get the masks that walks on the real stack give: at every top with an
    uncertain token (``FRAME_MIN_UNCERTAIN`` 0), over long-repeat blocks, counted strings, the
    JSON, SQL and C-like grammars; and the blocks of a long string share their frame classes.  The
    rule of any JSON value, called from 40 properties (so it escapes), has its frame codes walked
    with no key and kept per (state, return state)."""
    hf = deepseek_tokenizer
    c_like = grammars.path("c_like")
    values = {"type": "object", "properties": {f"p{i}": {} for i in range(40)}}
    value_docs = [{"p3": [1, {"a": "b"}, None], "p4": {"x": [True, "y"]}, "p17": "text", "p39": -2.5e3}]
    cases = [(lambda c: c.compile_json_schema(CHAINS), [hf.encode(json.dumps(d), add_special_tokens=False) for d in CHAIN_DOCS]),
             (lambda c: c.compile_grammar(c_like.read_text(encoding="utf-8")),
              [hf.encode(p.read_text(encoding="utf-8"), add_special_tokens=False) for p in grammars.samples("c_like")[0][:2]]),
             (lambda c: c.compile_json_schema(values), [hf.encode(json.dumps(d), add_special_tokens=False) for d in value_docs])]
    cases += [(build, docs[:2]) for name, build, docs in workloads(hf) if name in ("schema", "json", "sql")]
    framed_tok = TokenizerInfo.from_huggingface(hf)
    for case, (build, docs) in enumerate(cases):
        walked = build(GrammarCompiler(TokenizerInfo.from_huggingface(hf), cache=False, precompute="lazy"))
        framed = build(GrammarCompiler(framed_tok, cache=False, precompute="lazy"))
        for ids in docs:
            monkeypatch.setattr(pda.matcher, "FRAME_MIN_UNCERTAIN", 10**9)
            want = masks_along(walked, ids)
            monkeypatch.setattr(pda.matcher, "FRAME_MIN_UNCERTAIN", 0)
            got = masks_along(framed, ids)
            for k, (x, y) in enumerate(zip(got, want)):
                assert np.array_equal(x, y), f"masks differ at step {k}"
        if case == 2:
            assert framed.classes._frame_memo  # the unkeyed frame codes were used
    # a 1,500-character string crosses about 40 blocks: their frame classes come from few walks
    long = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 2000}}, "required": ["a"]}
    ids = hf.encode(json.dumps({"a": "plain words and more words " * 60}), add_special_tokens=False)
    monkeypatch.setattr(pda.matcher, "FRAME_MIN_UNCERTAIN", 10**9)
    want = masks_along(GrammarCompiler(TokenizerInfo.from_huggingface(hf), cache=False).compile_json_schema(long), ids)
    monkeypatch.undo()
    fresh = TokenizerInfo.from_huggingface(hf)
    got = masks_along(GrammarCompiler(fresh, cache=False).compile_json_schema(long), ids)
    assert all(np.array_equal(x, y) for x, y in zip(got, want))
    assert fresh.class_cache.hits > fresh.class_cache.misses


def test_frame_classes_of_most_of_the_vocabulary_equal_a_walk_of_theirs(tok: TokenizerInfo) -> None:
    """Near the end of a long string's block every token that crosses it is uncertain: most of the
    vocabulary, whose frame classes come from a walk of the whole vocabulary, picked out
    (TokenClasses.frame_codes).  They equal the codes of a walk of those tokens alone."""
    from pda.token_walk import TOKEN_OVERFLOW, TOKEN_UNCERTAIN, walk_tokens
    from pda.walk_workspace import thread_workspace

    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 2000}}, "required": ["a"]}
    compiled = GrammarCompiler(tok, cache=False).compile_json_schema(schema)
    classes, n = compiled.classes, compiled.trie.order.shape[0]
    dense = 0
    for k in range(64):
        m = GrammarMatcher(compiled)
        assert m.accept_string('{"a": "' + "x" * k)
        for s, parents in m._cfg.tops:
            unc = classes.get(s).uncertain
            paths = m._stacks.paths(parents)
            if 4 * unc.shape[0] < 3 * n or not paths or not paths[0].shape[0]:
                continue
            ret = int(paths[0][-1])
            got = classes.frame_codes(s, ret, unc)
            assert got is not None
            cand = unc[classes.short_tokens(s)]
            want = np.empty(cand.shape[0], dtype=np.int8)
            walk_tokens(classes.kernel, compiled.trie, cand, s, np.array([ret], dtype=np.int32), True, want,
                        thread_workspace(compiled.max_token_length))
            want[want == TOKEN_OVERFLOW] = TOKEN_UNCERTAIN
            assert np.array_equal(got, want), f"after {k} characters, state {s}"
            dense += 1
    assert dense  # tops with most of the vocabulary uncertain were met


def test_plain_tokens_past_the_most_the_stack_takes_are_rejected_exactly(deepseek_tokenizer: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A token of more plain characters than a top may consume over its stack
    (pda.plain_runs.stack_most, TokenClasses.within_most) is rejected without a walk: along counted
    strings, long strings of blocks and their ends, every mask equals the one walked in full, with
    no top walked on its own bypassing the bound (one-call survivors off), and tokens were dropped."""
    hf = deepseek_tokenizer
    long = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 400}, "b": {"type": "string", "maxLength": 70}},
            "required": ["a"]}
    cases = [(CHAINS, [json.dumps(CHAIN_DOCS[0])]),
             (long, [json.dumps({"a": "plain words and more words " * 14, "b": "x" * 70}), json.dumps({"a": "é" * 399})])]
    monkeypatch.setattr(pda.matcher, "ONE_CALL_SURVIVORS", False)
    dropped = []
    within_most = pda.precompute.TokenClasses.within_most

    def counting(self: Any, s: int, path: Any, unc: Any, todo: Any) -> Any:
        kept, read = within_most(self, s, path, unc, todo)
        dropped.append(todo.shape[0] - kept.shape[0])
        return kept, read

    walked_tok, bounded_tok = TokenizerInfo.from_huggingface(hf), TokenizerInfo.from_huggingface(hf)
    for schema, texts in cases:
        walked = GrammarCompiler(walked_tok, cache=False).compile_json_schema(schema)
        bounded = GrammarCompiler(bounded_tok, cache=False).compile_json_schema(schema)
        for text in texts:
            ids = hf.encode(text, add_special_tokens=False)
            monkeypatch.setattr(pda.precompute.TokenClasses, "within_most", lambda self, s, path, unc, todo: (todo, 0))
            want = masks_along(walked, ids)
            monkeypatch.setattr(pda.precompute.TokenClasses, "within_most", counting)
            got = masks_along(bounded, ids)
            for k, (x, y) in enumerate(zip(got, want)):
                assert np.array_equal(x, y), f"masks differ at step {k} of {text[:40]!r}"
    assert sum(dropped) > 10000


def _reference_min_lengths(A: Any) -> list[int]:
    """The fewest bytes each rule derives, by iterating ``dist(q) = min(1 + dist(byte successor),
    minlen(callee) + dist(call return); 0 at an end)`` to its fixed point."""
    from pda.lookahead import NO_STRING

    n, nrules = A.trans.shape[0], A.rule_start.shape[0]
    dist = [0 if A.is_end[q] else NO_STRING for q in range(n)]
    succ = [sorted({int(t) for t in A.trans[q] if t >= 0}) for q in range(n)]
    changed = True
    while changed:
        changed = False
        for q in range(n):
            best = dist[q]
            for t in succ[q]:
                best = min(best, 1 + dist[t])
            for e in range(A.call_ptr[q], A.call_ptr[q + 1]):
                best = min(best, dist[A.rule_start[A.call_rule[e]]] + dist[A.call_return[e]])
            if best < dist[q]:
                dist[q] = best
                changed = True
    return [min(dist[A.rule_start[r]], NO_STRING) for r in range(nrules)]


def _reference_key(A: Any, minlen: list[int], runs: tuple[np.ndarray, np.ndarray], name: str, state: int, k: int,
                   cap: int, ret: int = -1) -> bytes | None:
    """The bounded-lookahead key of pda.lookahead's module docstring, written plainly: a layered
    breadth-first search closed under the moves that read no byte, a call's return state met as
    many layers later as its callee's fewest bytes, then the encoding.  With ``ret``, the frame
    key (pda.lookahead.frame_key): ``ret`` met second in layer 0, its number first in the code."""
    import xxhash

    run_start, run_class = runs[0].tolist(), runs[1].tolist()
    ids: dict[int, int] = {}
    order: list[int] = []
    depth: list[int] = []
    pending: list[tuple[int, int]] = []

    def meet(t: int, d: int) -> None:
        if t not in ids:
            ids[t] = len(order)
            order.append(t)
            depth.append(d)

    def close(i: int, d: int) -> None:
        while i < len(order):
            q = order[i]
            i += 1
            for e in range(A.call_ptr[q], A.call_ptr[q + 1]):
                meet(int(A.rule_start[A.call_rule[e]]), d)
                skip = minlen[A.call_rule[e]]
                if skip == 0:
                    meet(int(A.call_return[e]), d)
                elif d + skip <= k:
                    pending.append((int(A.call_return[e]), d + skip))
            r = A.state_rule[q]
            if A.is_end[q] and not A.rule_escape[r]:
                for e in range(A.ret_ptr[r], A.ret_ptr[r + 1]):
                    meet(int(A.ret_state[e]), d)

    meet(state, 0)
    if ret >= 0:
        meet(ret, 0)
    close(0, 0)
    lo = 0
    for d in range(k):
        hi = len(order)
        for q in order[lo:hi]:
            for c in run_class:
                if A.trans[q, c] >= 0:
                    meet(int(A.trans[q, c]), d + 1)
        for t, at in pending:
            if at == d + 1:
                meet(t, d + 1)
        if len(order) == hi and not any(at > d + 1 for _, at in pending):
            break
        close(hi, d + 1)
        lo = hi
    if len(order) > cap:
        return None
    code: list[int] = [ids[ret]] if ret >= 0 else []
    for q, d in zip(order, depth):
        r = A.state_rule[q]
        esc = bool(A.rule_escape[r])
        code += [int(A.is_end[q]) | 2 * esc | 4 * (d < k), A.call_ptr[q + 1] - A.call_ptr[q]]
        for e in range(A.call_ptr[q], A.call_ptr[q + 1]):
            code += [ids[A.rule_start[A.call_rule[e]]], ids.get(int(A.call_return[e]), -1)]
        if A.is_end[q] and not esc:
            code += [A.ret_ptr[r + 1] - A.ret_ptr[r]] + [ids[A.ret_state[e]] for e in range(A.ret_ptr[r], A.ret_ptr[r + 1])]
        if d < k:
            pairs: list[int] = []
            last = -2
            for b, c in zip(run_start, run_class):
                t = int(A.trans[q, c])
                tid = ids[t] if t >= 0 else -1
                if tid != last:
                    pairs += [b, tid]
                    last = tid
            code += [len(pairs) // 2] + pairs
    head = "pda-lookahead-frame-v1" if ret >= 0 else "pda-lookahead-v1"
    h = xxhash.xxh3_128(f"{head}|{name}|{k}|".encode())
    h.update(np.array(code, dtype=np.int32).tobytes())
    return h.digest()


def test_lookahead_keys_equal_the_reference(tok: TokenizerInfo) -> None:
    """The kernel's keys, several bounds from one search (the regions of the smaller bounds are its
    first layers), equal a plain search per bound, for states spread over counted strings and a
    C-like grammar, every byte set; the kernel's scratch is left clean."""
    from pda.lookahead import frame_key, lookahead_keys, rule_min_lengths

    compiler = GrammarCompiler(tok, cache=False, precompute="lazy")
    for compiled in (compiler.compile_json_schema(CHAINS),
                     compiler.compile_grammar(grammars.path("c_like").read_text(encoding="utf-8"))):
        classes = compiled.classes
        A, scratch = classes.kernel, classes._scratch()
        minlen = _reference_min_lengths(A)
        assert rule_min_lengths(A).tolist() == minlen == classes._minlen.tolist()
        keyed = framed = 0
        rets = A.call_return.tolist()
        for s in np.linspace(0, compiled.grammar.automaton.num_states - 1, 24).astype(int).tolist():
            for name, (_, ks, caps) in classes._bounds.items():
                runs = classes._runs[name]
                got = lookahead_keys(A, classes._minlen, runs, name, s, ks, caps, scratch)
                want = [_reference_key(A, minlen, runs, name, s, int(k), int(c)) for k, c in zip(ks, caps)]
                assert got == want, (s, name)
                keyed += sum(k is not None for k in want)
            ret = rets[s % len(rets)]
            want_frame = _reference_key(A, minlen, classes._all_runs, "all", s, 8, 4096, ret)
            assert frame_key(A, classes._minlen, classes._all_runs, "all", s, ret, 8, 4096, scratch) == want_frame, s
            unskipped = lookahead_keys(A, np.zeros(len(minlen), np.int32), classes._all_runs, "all", s, np.array([8]),
                                       np.array([4096]), scratch)  # every call's return in the call's layer
            assert unskipped == [_reference_key(A, [0] * len(minlen), classes._all_runs, "all", s, 8, 4096)], s
            framed += want_frame is not None
        assert (scratch.ids == -1).all()
        assert keyed > 20 and framed > 10


def test_token_classes_are_shared_across_grammars_of_one_tokenizer(deepseek_tokenizer: Any, sharing: None) -> None:
    """Counted strings shorter than ``PLAIN_SPLIT_CHARS`` take their classes through the keys."""
    tok = TokenizerInfo.from_huggingface(deepseek_tokenizer)
    schema = {**SCHEMA, "properties": {**SCHEMA["properties"], "name": {"type": "string", "maxLength": 12}}}
    first = GrammarCompiler(tok, precompute="lazy").compile_json_schema(schema)
    ids = deepseek_tokenizer.encode(json.dumps({"name": "Ada Lovelace", "age": 36}), add_special_tokens=False)
    masks_along(first, ids)
    second = GrammarCompiler(tok, precompute="lazy").compile_json_schema({**schema, "title": "another"})
    assert masks_along(second, ids)
    assert second.classes.shared_hits > 0
    assert tok.class_cache.hits > 0
    # the shared classes are kept as tuples of arrays, which a collection stops tracking: a
    # tokenizer's cache of thousands of classes adds nothing to every full collection's walk
    gc.collect()
    kept = [v for v, _ in tok.class_cache._done.values() if isinstance(v, tuple) and len(v) == 3
            and isinstance(v[2], np.ndarray)]
    assert kept and not any(gc.is_tracked(v) for v in kept)


@pytest.fixture(params=["passes", "loop"])
def small_batches(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A batch into a host bitmask fills fewer than ``pda.batch.LOOP_BELOW`` matchers one by one:
    "passes" sets it to 1, so that small batches take the three passes too."""
    if request.param == "passes":
        monkeypatch.setattr(pda.batch, "LOOP_BELOW", 1)
    return str(request.param)


@pytest.mark.parametrize("kind", [
    "numpy", "torch",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
])
def test_batch_fill_equals_one_matcher_at_a_time(tok: TokenizerInfo, deepseek_tokenizer: Any, kind: str,
                                                 small_batches: str) -> None:
    comp = GrammarCompiler(tok)
    batch = BatchGrammarMatcher(max_threads=2)
    matchers, seqs = [], []
    for _, build, docs in workloads(deepseek_tokenizer):
        compiled = build(comp)
        for ids in docs:
            matchers.append(GrammarMatcher(compiled))
            seqs.append(ids)
    words = comp.tokenizer_info.vocab_size + 31 >> 5
    n = len(matchers)
    rows = list(range(2 * n - 1, -1, -2))  # every other row, backwards
    step = 0
    while any(step <= len(s) for s in seqs):
        live = [k for k in range(n) if step <= len(seqs[k])]
        got = np.zeros((2 * n, words), dtype=np.int32)
        target = torch.from_numpy(got) if kind == "torch" else got
        if kind == "cuda":  # rows gathered from the grammar's device pool; only misses cross over
            target = torch.full((2 * n, words), -1, dtype=torch.int32, device="cuda")
            target[[r for r in range(2 * n) if r not in {rows[k] for k in live}]] = 0
        batch.batch_fill_next_token_bitmask([matchers[k] for k in live], target, [rows[k] for k in live])
        if kind == "cuda":
            got = target.cpu().numpy()
        for k in live:
            assert np.array_equal(got[rows[k]], matchers[k].next_token_mask()), f"matcher {k} step {step}"
        toks = [seqs[k][step] if step < len(seqs[k]) else tok.stop_token_ids[0] for k in live]
        assert all(BatchGrammarMatcher.batch_accept_token([matchers[k] for k in live], toks))
        step += 1
    assert all(m.is_terminated() for m in matchers)
    final = np.ones((n, words), dtype=np.int32)
    batch.batch_fill_next_token_bitmask(matchers, final)
    assert not final.any()  # terminated matchers allow nothing
    fresh = GrammarMatcher(comp.compile_grammar('root ::= "x"+'))  # beside grammars whose matchers all finished
    final = np.ones((n + 1, words), dtype=np.int32)
    batch.batch_fill_next_token_bitmask(matchers + [fresh], final)
    assert not final[:n].any() and np.array_equal(final[n], fresh.next_token_mask())


def test_stop_tokens_scattered_on_a_device_equal_those_set_row_by_row(tok: TokenizerInfo) -> None:
    """The stop tokens of a device bitmask go in one scatter per set of stop tokens (the tensor path,
    run here on a CPU tensor); a CPU bitmask's are set row by row.  Mixed stop sets (two in one word,
    one at bit 31), finished matchers and a row given twice included."""
    compiled = GrammarCompiler(tok).compile_grammar('root ::= "a" | "ab"')
    stop_sets = [None, [1, 2, 31, 64], [tok.vocab_size - 1]]
    matchers = [GrammarMatcher(compiled, stop_token_ids=stop_sets[k % 3]) for k in range(9)]
    for k, m in enumerate(matchers):
        if k % 4 != 3:
            assert m.accept_string("a")  # complete: its stop tokens are allowed
    finished = [k == 5 for k in range(9)]
    rows = [8, 0, 3, 5, 1, 7, 2, 6, 3]  # row 3 twice
    words = tok.vocab_size + 31 >> 5
    by_rows = np.zeros((9, words), dtype=np.int32)
    scattered = torch.zeros((9, words), dtype=torch.int32)
    complete = [k for k, m in enumerate(matchers) if not finished[k] and m._batch_state()[2]]
    assert complete == [0, 1, 2, 4, 6, 8]  # matchers 3 and 7 are not complete, 5 is finished
    BatchGrammarMatcher._set_stops(matchers, complete, by_rows, rows)
    BatchGrammarMatcher._set_stops(matchers, complete, scattered, rows)
    assert np.array_equal(scattered.numpy(), by_rows)
    assert not by_rows[5].any() and not by_rows[6].any()  # matchers 3 and 7 are not complete
    assert not by_rows[7].any()  # matcher 5 is finished
    assert by_rows[0, 0] == np.int32(-(1 << 31) | 0b110) and by_rows[0, 2] == 1  # matcher 1: 1, 2, 31, 64
    assert by_rows[8].any() and by_rows[3].any()


def test_batch_arguments_are_checked(tok: TokenizerInfo) -> None:
    m = GrammarMatcher(GrammarCompiler(tok).compile_builtin_json())
    batch = BatchGrammarMatcher(1)
    words = tok.vocab_size + 31 >> 5
    with pytest.raises(pda.errors.BitmaskError, match="1 matchers but 2 indices"):
        batch.batch_fill_next_token_bitmask([m], np.zeros((2, words), np.int32), [0, 1])
    with pytest.raises(pda.errors.BitmaskError, match="out of range"):
        batch.batch_fill_next_token_bitmask([m], np.zeros((1, words), np.int32), [3])
    with pytest.raises(pda.errors.BitmaskError, match="more than once"):
        batch.batch_fill_next_token_bitmask([m, m], np.zeros((2, words), np.int32))
    with pytest.raises(ValueError, match="max_threads"):
        BatchGrammarMatcher(0)


@pytest.mark.parametrize("n", [2, 9])
def test_a_batch_of_two_vocabulary_sizes_is_refused_before_any_row_is_written(tok: TokenizerInfo, small_bpe_tokenizer: Any,
                                                                               n: int) -> None:
    """Rows of another width are refused, by the loop of small batches and by the passes alike,
    before any row of the bitmask is written."""
    small = TokenizerInfo.from_huggingface(small_bpe_tokenizer)
    mine = GrammarMatcher(GrammarCompiler(tok).compile_builtin_json())
    other = GrammarMatcher(GrammarCompiler(small).compile_builtin_json())
    assert other._compiled.words != mine._compiled.words
    matchers = [mine] + [GrammarMatcher(mine._compiled) for _ in range(n - 2)] + [other]
    bitmask = np.full((n, mine._compiled.words), 7, dtype=np.int32)
    with pytest.raises(pda.errors.BitmaskError, match="one vocabulary size"):
        BatchGrammarMatcher(1).batch_fill_next_token_bitmask(matchers, bitmask)
    assert (bitmask == 7).all()
    assert other.accept_string("1") and other.accept_token(small.stop_token_ids[0]) and other.is_terminated()
    with pytest.raises(pda.errors.BitmaskError, match="one vocabulary size"):  # finished: still refused
        BatchGrammarMatcher(1).batch_fill_next_token_bitmask(matchers, bitmask)
    assert (bitmask == 7).all()


def test_a_cpu_tensor_filled_before_is_checked_again_by_a_batch(tok: TokenizerInfo) -> None:
    """A batch reuses the numpy view of the CPU tensor its thread filled last (checked then): a
    1-D tensor a single fill accepted, or a tensor of another width, is still refused, and a 2-D
    one is filled as a fresh tensor is."""
    m = GrammarMatcher(GrammarCompiler(tok).compile_builtin_json())
    other = GrammarMatcher(GrammarCompiler(tok).compile_builtin_json())
    batch = BatchGrammarMatcher(1)
    words = tok.vocab_size + 31 >> 5
    flat = torch.zeros(words, dtype=torch.int32)
    m.fill_next_token_bitmask(flat)
    with pytest.raises(pda.errors.BitmaskError, match=r"int32\[batch, words\]"):
        batch.batch_fill_next_token_bitmask([m, other], flat)
    wide = torch.zeros((2, words + 1), dtype=torch.int32)
    with pytest.raises(pda.errors.BitmaskError, match="words"):
        m.fill_next_token_bitmask(wide)
    with pytest.raises(pda.errors.BitmaskError, match="words"):
        batch.batch_fill_next_token_bitmask([m, other], wide)
    seen = torch.zeros((2, words), dtype=torch.int32)
    m.fill_next_token_bitmask(seen, 1)
    seen.zero_()
    batch.batch_fill_next_token_bitmask([m, other], seen)
    fresh = torch.zeros((2, words), dtype=torch.int32)
    batch.batch_fill_next_token_bitmask([m, other], fresh)
    assert torch.equal(seen, fresh) and seen.any()


def test_forks_and_matchers_filled_and_advanced_from_threads_match_one_thread(tok: TokenizerInfo, deepseek_tokenizer: Any) -> None:
    compiled = GrammarCompiler(tok).compile_json_schema(SCHEMA)
    ids = deepseek_tokenizer.encode(json.dumps(DOCS[0]), add_special_tokens=False)
    expected = masks_along(GrammarCompiler(tok, cache=False).compile_json_schema(SCHEMA), ids)
    root = GrammarMatcher(compiled)
    # forks, and matchers of their own: all of them share the grammar's stack space
    forks = [root.fork() for _ in range(3)] + [GrammarMatcher(compiled) for _ in range(3)]
    failures: list[str] = []

    def run(m: GrammarMatcher, k: int) -> None:
        for step, t in enumerate(ids):
            if not np.array_equal(m.next_token_mask(), expected[step]):
                failures.append(f"fork {k} step {step}")
            m.accept_token(t)

    threads = [threading.Thread(target=run, args=(f, k)) for k, f in enumerate(forks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_arena_stays_bounded_across_reset(tok: TokenizerInfo, monkeypatch: pytest.MonkeyPatch) -> None:
    import pda.stack_space

    monkeypatch.setattr(pda.stack_space, "ARENA_RESET_NODES", 50)
    m = GrammarMatcher(GrammarCompiler(tok).compile_builtin_json())
    text = "[" * 60 + "]" * 60
    for _ in range(3):
        assert m.accept_string(text)
        assert len(m._walker.arena) > 50
        m.reset()
        assert len(m._walker.arena) < 50
        assert m.num_tokens == 0 and not m.is_completed()


def test_matchers_in_an_old_and_a_new_stack_space_share_the_mask_cache_exactly(
        tok: TokenizerInfo, deepseek_tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Mask keys are made of states and return-state paths, never of arena node ids: a matcher left
    in a full stack space and one made in the grammar's next space share the grammar's mask cache,
    and both keep the masks of a fresh grammar, step by step."""
    import pda.stack_space

    doc = json.dumps({"a": [[1, {"b": [2, [3]]}], "x"], "c": {"d": [[[4]]]}})
    ids = deepseek_tokenizer.encode(doc, add_special_tokens=False)
    expected = masks_along(GrammarCompiler(tok, cache=False).compile_builtin_json(), ids)
    compiled = GrammarCompiler(tok, cache=False).compile_builtin_json()
    old = GrammarMatcher(compiled)
    for step, t in enumerate(ids[: len(ids) // 2]):
        assert np.array_equal(old.next_token_mask(), expected[step]), step
        assert old.accept_token(t)
    assert len(old._walker.arena) > 3
    monkeypatch.setattr(pda.stack_space, "ARENA_RESET_NODES", len(old._walker.arena) - 1)
    new = GrammarMatcher(compiled)  # the old space's arena is past the bound: a new space
    assert new._space is not old._space and compiled.stack_space() is new._space
    hits = compiled.mask_cache_stats()["hits"]
    for step, t in enumerate(ids):
        assert np.array_equal(new.next_token_mask(), expected[step]), step
        assert new.accept_token(t)
        if step >= len(ids) // 2:
            assert np.array_equal(old.next_token_mask(), expected[step]), step
            assert old.accept_token(t)
    assert old._space is not new._space
    assert compiled.mask_cache_stats()["hits"] > hits  # the two spaces read the grammar's one mask cache


def test_matchers_of_a_grammar_share_configurations_and_their_keys(tok: TokenizerInfo, deepseek_tokenizer: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Two matchers along one document hold the same configuration objects (one stack space per
    grammar, pda.stack_space), and the second keys and steps none of them: the first did, for both,
    the tokens it refused too.  Their batch masks equal a fresh grammar's."""
    source = grammars.path("json").read_text(encoding="utf-8")
    compiled = GrammarCompiler(tok, cache=False).compile_grammar(source)
    ids = deepseek_tokenizer.encode(json.dumps(DOCS[0]), add_special_tokens=False)
    expected = masks_along(GrammarCompiler(tok, cache=False).compile_grammar(source), ids)
    keyed: list[int] = []
    real_key = GrammarMatcher._key

    def counted(self: GrammarMatcher, cfg: Any, depths: dict[int, int]) -> Any:
        keyed.append(id(self))
        return real_key(self, cfg, depths)

    stepped: list[int] = []
    real_step = GrammarMatcher._step

    def counted_step(self: GrammarMatcher, cfg: Any, token_id: int) -> Any:
        stepped.append(id(self))
        return real_step(self, cfg, token_id)

    monkeypatch.setattr(GrammarMatcher, "_key", counted)
    monkeypatch.setattr(GrammarMatcher, "_step", counted_step)
    batch = BatchGrammarMatcher(1)
    out = np.zeros((1, compiled.words), np.int32)
    first, second = GrammarMatcher(compiled), GrammarMatcher(compiled)
    vocab = compiled.tokenizer_info.vocab_size
    refused = [int(np.flatnonzero(~pda.bitmask_to_bool(torch.from_numpy(e), vocab).numpy())[0]) for e in expected]
    for m in (first, second):
        for step, t in enumerate(ids):
            batch.batch_fill_next_token_bitmask([m], out)
            assert np.array_equal(out[0], expected[step]), step
            assert not m.accept_token(np.int64(refused[step]))  # a numpy integer, refused: nothing changes
            assert m.accept_token(np.int64(t)) and m.num_tokens == step + 1
    assert second._cfg is first._cfg
    assert keyed and set(keyed) == {id(first)}
    assert stepped and set(stepped) == {id(first)}
    with pytest.raises(TypeError):
        second.accept_token(ids[0] + 0.5)  # type: ignore[arg-type]


def test_cached_masks_follow_the_stack_below_a_called_rule(tok: TokenizerInfo, deepseek_tokenizer: Any) -> None:
    """Inside ``["ab`` and ``{"k": "ab`` the tops are the same states of the recursive value rule with
    different frames below; the tokens that close the string must follow those frames."""
    compiled = GrammarCompiler(tok, cache=False).compile_builtin_json()
    vocab = {deepseek_tokenizer.convert_tokens_to_ids(t): t for t in ('"]', '"}', '",')}
    assert None not in vocab
    m = GrammarMatcher(compiled)
    for prefix, yes, no in ((' [["ab', '"]', '"}'), ('"], {"k": "ab', '"}', '"]'), ('"}, ["ab', '"]', '"}')):
        assert m.accept_string(prefix)
        row = m.next_token_mask()
        allowed = {t for i, t in vocab.items() if row[i >> 5] >> (i & 31) & 1}
        assert yes in allowed and no not in allowed, (prefix, allowed)


@pytest.mark.parametrize("device", [
    "cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
])
@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_batch_matchers_with_one_lookup_key_but_other_stacks_get_their_own_masks(
        tok: TokenizerInfo, deepseek_tokenizer: Any, order: tuple[int, int], device: str, small_batches: str) -> None:
    """On a first visit both matchers' lookup keys are the bare top state (no frame read yet); the
    computation reads the frame below, so the second matcher must not take the first one's row."""
    prefixes = (' [["ab', ' [{"k": "ab')
    want = []
    for p in prefixes:
        m = GrammarMatcher(GrammarCompiler(tok, cache=False).compile_builtin_json())
        assert m.accept_string(p)
        want.append(m.next_token_mask())
    assert not np.array_equal(want[0], want[1])
    compiled = GrammarCompiler(tok, cache=False).compile_builtin_json()
    matchers = [GrammarMatcher(compiled) for _ in prefixes]
    for m, p in zip(matchers, prefixes):
        assert m.accept_string(p)
    assert matchers[0]._lookup_key(matchers[0]._cfg) == matchers[1]._lookup_key(matchers[1]._cfg)
    target = torch.zeros((2, compiled.words), dtype=torch.int32, device=device)
    BatchGrammarMatcher(2).batch_fill_next_token_bitmask([matchers[i] for i in order], target, list(order))
    got = target.cpu().numpy()
    for i in range(2):
        assert np.array_equal(got[i], want[i]), prefixes[i]


def test_context_free_masks_equal_the_cached_masks(tok: TokenizerInfo, deepseek_tokenizer: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A configuration whose tops have no uncertain token gets its mask from the tops' classes
    (GrammarMatcher._write_context_free), not from the mask cache: along the documents of a
    schema, the JSON and SQL grammars, its masks equal those of the cache path (the check turned
    off), with the accepted ids set each time or kept as a row (IDS_AS_ROW 10**9 and 0), and with
    the unions never or always kept in the cache (CONTEXT_FREE_CACHED_TOPS 10**9 and 1); the path
    is taken, the cache holds fewer rows when it keeps none of them, and a batch fill of the same
    matchers (which gathers every row from the cache) gives the same rows."""
    hf = deepseek_tokenizer
    built = {"n": 0}
    write = GrammarMatcher._write_context_free

    def counted(self: GrammarMatcher, cfg: Any, row: np.ndarray) -> None:
        built["n"] += 1
        write(self, cfg, row)

    monkeypatch.setattr(GrammarMatcher, "_write_context_free", counted)
    batch = BatchGrammarMatcher(1)
    for name, build, docs in workloads(hf):
        if name not in ("schema", "json", "sql"):
            continue
        with monkeypatch.context() as mp:
            mp.setattr(GrammarMatcher, "_context_free", lambda self, cfg, classify=True: False)
            ref = build(GrammarCompiler(tok, cache=False))
            want = [masks_along(ref, ids) for ids in docs[:2]]
        for ids_as_row, cached_tops in ((10**9, 10**9), (0, 1)):
            monkeypatch.setattr(pda.state_classes, "IDS_AS_ROW", ids_as_row)
            monkeypatch.setattr(pda.matcher, "CONTEXT_FREE_CACHED_TOPS", cached_tops)
            got = build(GrammarCompiler(tok, cache=False))
            before = built["n"]
            for ids, rows in zip(docs[:2], want):
                assert all(np.array_equal(x, y) for x, y in zip(masks_along(got, ids), rows)), name
            assert built["n"] > before, name
            if cached_tops > 1:
                assert len(got.mask_cache()) < len(ref.mask_cache()), name
            for ids, rows in zip(docs[:2], want):  # single fills first, then a batch fill, at each step
                m = GrammarMatcher(got)
                bitmask = torch.zeros((1, got.words), dtype=torch.int32)
                for k, t in enumerate([*ids, None]):
                    assert np.array_equal(m.next_token_mask(), rows[k]), f"{name}: step {k}"
                    batch.batch_fill_next_token_bitmask([m], bitmask)
                    assert np.array_equal(bitmask[0].numpy(), rows[k]), f"{name}: batch, step {k}"
                    assert t is None or m.accept_token(t)


def test_context_free_lookup_keys_equal_the_full_keys(tok: TokenizerInfo, deepseek_tokenizer: Any) -> None:
    """A batch keys a context-free configuration by its top states alone (GrammarMatcher._lookup_key,
    without the signature machinery of _key): that is the key _key builds for it, so the rows a
    computation caches are found by it.  Along the documents of every workload, batch fills made
    before any single fill of the matcher (each configuration met first by the batch) give the
    single fills' rows."""
    batch = BatchGrammarMatcher(1)
    short = 0
    for name, build, docs in workloads(deepseek_tokenizer):
        compiled = build(GrammarCompiler(tok, cache=False))
        for ids in docs[:2]:
            want = masks_along(compiled, ids)  # classifies the states met
            m = GrammarMatcher(compiled)
            bitmask = torch.zeros((1, compiled.words), dtype=torch.int32)
            for k, t in enumerate([*ids, None]):
                cfg = m._cfg
                if m._context_free(cfg, classify=False):
                    short += 1
                    assert m._lookup_key(cfg) == m._key(cfg, compiled.signature_depth), f"{name}: step {k}"
                batch.batch_fill_next_token_bitmask([m], bitmask)
                assert np.array_equal(bitmask[0].numpy(), want[k]), f"{name}: step {k}"
                assert t is None or m.accept_token(t)
    assert short > 100


def test_group_keys_are_used_while_they_pay(deepseek_tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A grammar classifies its states through the group keys only while at least half of them take
    a group from the tokenizer's cache (GROUP_KEY_TRIAL): with a fresh tokenizer, the SQL grammar's
    keys stop after the trial; compiled again for a tokenizer that has every state's groups, they
    keep paying, and are used for every state.  The classes are the same either way."""
    monkeypatch.setattr(pda.precompute, "LOOKAHEAD_MIN_SHARE", 0.0)  # every state is a candidate
    monkeypatch.setattr(pda.precompute, "PLAIN_SPLIT_CHARS", 10**6)
    sql = grammars.path("sql_select").read_text(encoding="utf-8")
    tok = TokenizerInfo.from_huggingface(deepseek_tokenizer)
    with monkeypatch.context() as mp:
        mp.setattr(pda.precompute, "GROUP_KEY_TRIAL", 10**9)
        ref = GrammarCompiler(tok, cache=False, precompute="lazy").compile_grammar(sql).classes
        ref.compute_all(threads=1)
    fresh = GrammarCompiler(TokenizerInfo.from_huggingface(deepseek_tokenizer), cache=False,
                            precompute="lazy").compile_grammar(sql).classes
    fresh.compute_all(threads=1)
    assert fresh._keyed_tries < len(fresh.by_state) // 2 and 2 * fresh._keyed_shared < fresh._keyed_tries
    warm = GrammarCompiler(tok, cache=False, precompute="lazy").compile_grammar(sql).classes
    warm.compute_all(threads=1)
    assert warm._keyed_tries == ref._keyed_tries and 2 * warm._keyed_shared >= warm._keyed_tries
    for classes in (fresh, warm):
        for s, c in classes.by_state.items():
            r = ref.by_state[s]
            assert np.array_equal(c.uncertain, r.uncertain), s
            assert np.array_equal(c.accepted_mask(tok.trie.order, ref.words), r.accepted_mask(tok.trie.order, ref.words)), s


def test_mask_key_ids_stay_exact_when_their_table_is_cleared(tok: TokenizerInfo, deepseek_tokenizer: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Mask keys are ids of the grammar's table (pda.mask_keys): equal key tuples get one id, and a
    table cleared when full numbers on without reusing an id.  With the table's bound at 3 (cleared
    many times along a document), single fills and batch fills of the schema and SQL grammars equal
    a fresh grammar's masks at every step."""
    import pda.mask_keys

    keys = pda.mask_keys.MaskKeys()
    a = keys.id_of(((5, ()), (7, ((1, 2),))))
    assert keys.id_of(((5, ()), (7, ((1, 2),)))) == a and keys.id_of(((5, ()),)) != a
    monkeypatch.setattr(pda.mask_keys, "KEY_ID_LIMIT", 3)
    batch = BatchGrammarMatcher(1)
    for name, build, docs in workloads(deepseek_tokenizer):
        if name not in ("schema", "sql"):
            continue
        ids = docs[0]
        expected = masks_along(build(GrammarCompiler(tok, cache=False)), ids)
        compiled = build(GrammarCompiler(tok, cache=False))
        single, batched, other = (GrammarMatcher(compiled) for _ in range(3))
        out = np.zeros((2, compiled.words), np.int32)
        for step, t in enumerate([*ids, None]):
            assert np.array_equal(single.next_token_mask(), expected[step]), f"{name}: step {step}"
            batch.batch_fill_next_token_bitmask([other, batched], out, [0, 1])
            assert np.array_equal(out[1], expected[step]), f"{name}: batch, step {step}"
            assert t is None or (single.accept_token(t) and batched.accept_token(t))
        assert len(compiled.mask_keys) <= 3 and next(compiled.mask_keys._next) > 6, name


def test_a_configuration_is_one_object_however_it_is_reached(tok: TokenizerInfo, deepseek_tokenizer: Any) -> None:
    """Matchers of a grammar hold one object per configuration (StackSpace.canonical), whichever
    text or tokens led there and across reset: their memo lookups then compare no configurations."""
    compiled = GrammarCompiler(tok, cache=False).compile_builtin_json()
    a, b = GrammarMatcher(compiled), GrammarMatcher(compiled)
    a.reset()
    assert a._cfg is b._cfg
    assert a.accept_string("[") and b.accept_string("[ ")
    assert a._cfg == b._cfg and a._cfg is b._cfg
    for t in deepseek_tokenizer.encode('{"k": 1', add_special_tokens=False):
        assert a.accept_token(t)
    assert b.accept_string(' {  "k" :1')
    assert a._cfg is b._cfg
