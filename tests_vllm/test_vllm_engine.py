"""PdaLogitsProcessor inside a real vLLM engine (the CPU build, a tiny random Llama).

The engine is built once, with the processor passed as a class object (the form that vLLM sends
to its worker by pickling, so it checks the light import too); the server test uses the string form.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed: run `make test-vllm`")

from cases import LARK, REGEXES, is_valid, mixed_entries, schema_entry

MAX_NUM_SEQS = 4  # fewer slots than requests: rows are removed, added and moved as requests finish


@pytest.fixture(scope="module")
def llm(model_path: str) -> Any:
    from vllm import LLM

    from pda.integrations.vllm import PdaLogitsProcessor

    engine = LLM(model=model_path, logits_processors=[PdaLogitsProcessor], max_model_len=512,
                 max_num_seqs=MAX_NUM_SEQS, seed=0, dtype="bfloat16")
    yield engine
    engine.llm_engine.engine_core.shutdown()
    del engine
    gc.collect()


def params(entry: dict[str, Any] | None, **kwargs: Any) -> Any:
    from vllm import SamplingParams

    return SamplingParams(extra_args=None if entry is None else {"pda": entry}, **kwargs)


def test_mixed_batch_every_finished_output_valid(llm: Any) -> None:
    entries = mixed_entries() * 2  # 26 requests through 4 slots
    sampling = [params(e, max_tokens=256 if e is not None else 24, seed=i) for i, (_, e) in enumerate(entries)]
    outputs = llm.generate(["Answer:"] * len(entries), sampling, use_tqdm=False)
    unfinished = []
    for (label, entry), out in zip(entries, outputs):
        completion = out.outputs[0]
        if entry is None:
            assert completion.finish_reason == "length" and len(completion.token_ids) == 24, label
            continue
        if completion.finish_reason != "stop":
            unfinished.append(label)
            assert label == "builtin:json", f"{label} did not finish: {completion.text!r}"
            continue
        assert is_valid(entry, completion.text), f"{label}: {completion.text!r}"
        assert completion.stop_reason is None, label  # ended by EOS
    assert len(unfinished) <= 2, unfinished


def test_free_requests_are_untouched(llm: Any) -> None:
    """A greedy free request gives the same tokens alone and beside constrained requests."""
    alone = llm.generate(["Once upon a time"], params(None, max_tokens=12, temperature=0), use_tqdm=False)
    entries = [schema_entry("person"), None, {"regex": REGEXES["code"]}, schema_entry("colors")]
    mixed = llm.generate(["Answer:", "Once upon a time", "Answer:", "Answer:"],
                         [params(e, max_tokens=12, temperature=0) for e in entries], use_tqdm=False)
    assert list(mixed[1].outputs[0].token_ids) == list(alone[0].outputs[0].token_ids)
    for entry, out in zip(entries, mixed):
        if entry is not None and out.outputs[0].finish_reason == "stop":
            assert is_valid(entry, out.outputs[0].text)


def test_greedy_constrained_requests_are_valid(llm: Any) -> None:
    entries = [schema_entry("item", whitespace="compact"), {"lark": LARK}, {"regex": REGEXES["email"]}]
    outputs = llm.generate(["Answer:"] * 3, [params(e, max_tokens=200, temperature=0) for e in entries],
                           use_tqdm=False)
    for entry, out in zip(entries, outputs):
        assert out.outputs[0].finish_reason == "stop" and is_valid(entry, out.outputs[0].text), out.outputs[0].text


def test_ignore_eos_keeps_only_stop_tokens_after_the_grammar(llm: Any) -> None:
    entry = {"regex": REGEXES["code"]}
    out = llm.generate(["Answer:"], params(entry, max_tokens=16, ignore_eos=True, seed=3), use_tqdm=False)[0]
    completion = out.outputs[0]
    assert completion.finish_reason == "length" and len(completion.token_ids) == 16
    assert is_valid(entry, completion.text), completion.text  # the stop tokens after it are not text


def test_request_stop_token_ids_are_allowed_only_when_complete(llm: Any) -> None:
    from vllm import SamplingParams

    stop = 16  # "." in DeepSeek's vocabulary: a stop token for this request only
    entry = {"regex": r"[a-z]{3,5}"}
    sampling = SamplingParams(max_tokens=32, seed=5, stop_token_ids=[stop], extra_args={"pda": entry})
    for out in llm.generate(["Answer:"] * 4, [sampling] * 4, use_tqdm=False):
        completion = out.outputs[0]
        assert completion.finish_reason == "stop" and is_valid(entry, completion.text), completion.text
        assert completion.stop_reason in (None, stop)


@pytest.mark.parametrize("entry, message", [
    ({"json_schema": {"type": "nonsense"}}, "Invalid JSON Schema"),
    ({"grammar": 'root ::= "a" missing'}, "missing"),
    ({"regex": "a(", "strict": True}, "unknown option"),
    ({"builtin": "nope"}, "no bundled grammar 'nope'"),
])
def test_bad_constraints_are_refused_and_the_engine_lives(llm: Any, entry: dict[str, Any], message: str) -> None:
    from vllm.exceptions import VLLMValidationError

    with pytest.raises(VLLMValidationError, match=message):
        llm.generate(["Answer:"], params(entry, max_tokens=8), use_tqdm=False)
    out = llm.generate(["Answer:"], params({"regex": "[0-9]{2}"}, max_tokens=8), use_tqdm=False)[0]
    assert out.outputs[0].finish_reason == "stop" and len(out.outputs[0].text) == 2
