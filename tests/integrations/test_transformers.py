"""End to end: a randomly initialised transformers model, constrained by pda through generate()."""

from __future__ import annotations

from typing import Any

import pytest

import pda

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from pda.integrations.transformers import GrammarLogitsProcessor  # noqa: E402

GRAMMAR = r'''
root   ::= "{" ws "\"n\":" ws num ws "," ws "\"tags\":" ws "[" ws ( str ( ws "," ws str )* )? ws "]" ws "}"
num    ::= "-"? [0-9]{1,4}
str    ::= "\"" [a-z ]{0,8} "\""
ws     ::= [ ]?
'''


def _model(vocab_size: int, seed: int) -> Any:
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=vocab_size, n_layer=1, n_head=2, n_embd=32, n_positions=256)
    return transformers.GPT2LMHeadModel(config).eval()


@pytest.mark.parametrize("seed", range(3))
def test_generate_with_random_model_always_parses(small_bpe_tokenizer: Any, seed: int) -> None:
    hf = small_bpe_tokenizer
    tok = pda.TokenizerInfo.from_huggingface(hf)
    compiled = pda.GrammarCompiler(tok).compile_grammar(GRAMMAR)
    grammar = compiled.grammar
    model = _model(tok.vocab_size, seed)
    prompt = torch.tensor([[hf.eos_token_id]] * 2)
    processor = GrammarLogitsProcessor(compiled)
    out = model.generate(
        prompt, attention_mask=torch.ones_like(prompt), logits_processor=[processor], do_sample=True,
        max_new_tokens=120, eos_token_id=hf.eos_token_id, pad_token_id=hf.pad_token_id, temperature=2.0,
    )
    for row, m in zip(out.tolist(), processor.matchers):
        body = row[1:]
        ended = hf.eos_token_id in body
        text = tok.decode(body[: body.index(hf.eos_token_id)] if ended else body)
        if ended:
            assert grammar.accepts(text), text
            # generate() stops right after sampling the stop token, so the matcher never sees it:
            # it must have been complete when the stop token was allowed
            assert m.is_completed() or m.is_terminated()
        else:
            assert grammar.is_prefix(text), text


def test_processor_refuses_a_token_the_mask_forbade(small_bpe_tokenizer: Any) -> None:
    tok = pda.TokenizerInfo.from_huggingface(small_bpe_tokenizer)
    compiled = pda.GrammarCompiler(tok).compile_grammar('root ::= "{}"')
    processor = GrammarLogitsProcessor(compiled)
    ids = torch.tensor([[0]])
    scores = torch.zeros(1, tok.vocab_size)
    processor(ids, scores)
    bad = next(t for t in range(tok.vocab_size) if tok.token_bytes[t] == b"x")
    with pytest.raises(pda.PdaError, match=f"the sampled token {bad} is not allowed"):
        processor(torch.tensor([[0, bad]]), torch.zeros(1, tok.vocab_size))
