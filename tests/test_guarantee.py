"""The guarantee: a sampler constrained by pda's masks only ever produces text of the grammar.

A decode loop with random logits (a seeded torch generator, and a tiny randomly initialised GPT-2
whose vocabulary is the small BPE's) masks the logits with :func:`pda.apply_token_bitmask_inplace`
and samples.  Over thousands of steps across every bundled grammar:

* every sampled token is accepted by the matcher, and the text stays a prefix of the grammar (a
  byte-level :class:`~pda.ByteMatcher` fed the same bytes, which shares nothing with the token
  masks; :meth:`Grammar.is_prefix` when a generation reaches the cap);
* the stop token is allowed exactly when the text so far is complete (the byte matcher's
  ``is_complete``, checked against :meth:`Grammar.accepts` every 8 steps);
* whenever the stop token is picked, the text decoded from the tokens' bytes is a sentence
  (:meth:`Grammar.accepts`), and the HF tokenizer decodes the ids to the same text;
* some token is always allowed (no dead end: the small BPE has every single byte as a token).

After ``BIAS_AFTER`` steps the stop token's logit is raised a little more at every step, and the
logits of closing characters too, so that generations end; a generation that reaches the length
cap only has to be a prefix.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
import torch

from pda import (
    Grammar, GrammarCompiler, GrammarMatcher, TokenizerInfo, allocate_token_bitmask, apply_token_bitmask_inplace,
    bitmask_to_bool, grammars,
)

GRAMMAR_FILES = [p.name for p in grammars.files()]
CAP = 64  # tokens per generation
BIAS_AFTER = 12  # steps before the stop token and closing characters are favoured
CLOSERS = [b"}", b"]", b")", b'"', b"'", b">", b";", b"\n", b"0", b"1", b"a", b"/", b"*/"]


@pytest.fixture(scope="module")
def env(request: pytest.FixtureRequest) -> tuple[Any, TokenizerInfo, GrammarCompiler]:
    """The small BPE (HF), its TokenizerInfo and a compiler for it."""
    hf = request.getfixturevalue("small_bpe_tokenizer")
    info = TokenizerInfo.from_huggingface(hf)
    return hf, info, GrammarCompiler(info)


def closer_bias(info: TokenizerInfo) -> torch.Tensor:
    """+1 on the tokens that close or end things (see :data:`CLOSERS`), 0 elsewhere."""
    bias = torch.zeros(info.vocab_size)
    for i, b in enumerate(info.token_bytes):
        if b in CLOSERS:
            bias[i] = 1.0
    return bias


def generate(
    matcher: GrammarMatcher, grammar: Grammar, info: TokenizerInfo, logits_fn: Callable[[list[int]], torch.Tensor],
    gen: torch.Generator, closers: torch.Tensor,
) -> tuple[list[int], bool, int]:
    """One constrained generation; checks the guarantee at every step.  Returns (ids, stopped, steps)."""
    stop = info.stop_token_ids[0]
    bitmask = allocate_token_bitmask(1, info.vocab_size)
    ids: list[int] = []
    text = b""
    follow = grammar.matcher()  # a byte-level matcher fed the same text: completeness at each step
    for step in range(CAP):
        matcher.fill_next_token_bitmask(bitmask)
        allowed = bitmask_to_bool(bitmask, info.vocab_size)[0]
        complete = follow.is_complete()
        if step % 8 == 0:  # the whole-text check too (it rebuilds its walker: too slow for every step)
            assert grammar.accepts(text) == complete, f"the byte matcher and Grammar.accepts disagree on {text!r}"
        assert bool(allowed[stop]) == complete, f"stop allowed={bool(allowed[stop])}, complete={complete}: {text!r}"
        assert allowed.any(), f"dead end after {text!r}"
        logits = logits_fn(ids).clone()
        if step >= BIAS_AFTER:
            logits[stop] += 0.5 * (step - BIAS_AFTER)
            logits += closers * 0.25 * (step - BIAS_AFTER)
        apply_token_bitmask_inplace(logits, bitmask[0])
        assert torch.equal(torch.isfinite(logits), allowed), "apply_token_bitmask_inplace disagrees with the mask"
        t = int(torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=gen))
        assert matcher.accept_token(t), f"the matcher refused token {t} ({info.token_bytes[t]!r}) its mask allowed"
        if t == stop:
            assert matcher.is_terminated()
            decoded = info.decode(ids)
            assert decoded == text and grammar.accepts(decoded), f"stopped on a text that is not a sentence: {text!r}"
            return ids, True, step + 1
        ids.append(t)
        text += info.token_bytes[t]
        assert follow.feed(info.token_bytes[t]), f"the text left the grammar: {text!r}"
    assert grammar.is_prefix(info.decode(ids)) and not matcher.is_terminated()
    return ids, False, CAP


# grammar file -> (generations, least number of them that must reach the stop token)
RUNS = {
    "arithmetic.lark": (40, 20), "c_like.gbnf": (25, 5), "csv.gbnf": (40, 20), "json.gbnf": (50, 25),
    "json.lark": (30, 15), "sql_select.gbnf": (30, 8), "xml.gbnf": (30, 2),
}


@pytest.mark.parametrize("name", GRAMMAR_FILES)
def test_random_logits_sampler_stays_in_the_grammar(name: str, env, grammar_of) -> None:
    hf, info, compiler = env
    grammar = grammar_of[name]
    cg = compiler.compile_grammar(grammar)
    generations, least_stopped = RUNS[name]
    gen = torch.Generator().manual_seed(1234)
    closers = closer_bias(info)
    scale = 3.0  # spread of the random logits: larger picks fewer, more decided tokens

    def logits_fn(ids: list[int]) -> torch.Tensor:
        return torch.randn(info.vocab_size, generator=gen) * scale

    stopped = steps = 0
    for _ in range(generations):
        ids, done, n = generate(GrammarMatcher(cg), grammar, info, logits_fn, gen, closers)
        stopped += done
        steps += n
        if done:  # the HF tokenizer decodes the same text
            text = hf.decode(ids, clean_up_tokenization_spaces=False)
            assert text.encode() == info.decode(ids)
    assert stopped >= least_stopped, f"only {stopped} of {generations} generations reached the stop token"
    assert steps >= generations


def test_tiny_gpt2_sampler_stays_in_the_grammar(env, grammar_of) -> None:
    """The same loop with a real (random, 1-layer) model's logits, batch of 2 with bitmask rows."""
    transformers = pytest.importorskip("transformers")
    hf, info, compiler = env
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=info.vocab_size, n_positions=CAP + 2,
                                     bos_token_id=info.stop_token_ids[0], eos_token_id=info.stop_token_ids[0])
    model = transformers.GPT2LMHeadModel(config).eval()
    gen = torch.Generator().manual_seed(99)
    closers = closer_bias(info)
    stopped = total = 0

    @torch.no_grad()
    def logits_fn(ids: list[int]) -> torch.Tensor:
        inp = torch.tensor([[info.stop_token_ids[0]] + ids])
        return model(inp).logits[0, -1] * 20.0  # sharpen the near-uniform random model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small runs ten times faster on one thread
    try:
        for name in ["json.gbnf", "arithmetic.lark", "csv.gbnf"]:
            grammar = grammar_of[name]
            cg = compiler.compile_grammar(grammar)
            for _ in range(6):
                ids, done, n = generate(GrammarMatcher(cg), grammar, info, logits_fn, gen, closers)
                stopped += done
                total += n
    finally:
        torch.set_num_threads(threads)
    assert stopped >= 4 and total >= 100


def test_batched_decode_loop_keeps_rows_apart(env, grammar_of) -> None:
    """Two sequences, two grammars, one batch bitmask and one logits tensor: each row obeys its grammar."""
    hf, info, compiler = env
    names = ["json.gbnf", "csv.gbnf"]
    gs = [grammar_of[n] for n in names]
    matchers = [GrammarMatcher(compiler.compile_grammar(g)) for g in gs]
    texts = [b"", b""]
    bitmask = allocate_token_bitmask(2, info.vocab_size)
    gen = torch.Generator().manual_seed(5)
    stop = info.stop_token_ids[0]
    done = [False, False]
    for step in range(CAP):
        for i, m in enumerate(matchers):
            if not done[i]:
                m.fill_next_token_bitmask(bitmask, i)
        logits = torch.randn(2, info.vocab_size, generator=gen) * 3
        if step >= BIAS_AFTER:
            logits[:, stop] += step - BIAS_AFTER
        live = [i for i in range(2) if not done[i]]
        apply_token_bitmask_inplace(logits, bitmask, indices=live)
        probs = torch.softmax(logits, dim=-1)
        for i in live:
            t = int(torch.multinomial(probs[i], 1, generator=gen))
            assert matchers[i].accept_token(t)
            if t == stop:
                assert gs[i].accepts(texts[i])
                done[i] = True
            else:
                texts[i] += info.token_bytes[t]
                assert gs[i].is_prefix(texts[i]), (names[i], texts[i])
        if all(done):
            break
    for g, text in zip(gs, texts):
        assert g.is_prefix(text)
    assert np.any(done)
