"""pda.warm_up_kernels: once per process, and afterwards a mask fill or a schema's compile loads no kernel.

The check runs in a fresh interpreter (in this one, earlier tests have loaded the kernels already):
after the warm-up, the compile of a schema with a pattern and a format (code-point automata,
minimised) and the masks of JSON documents under the built-in grammar, under a schema with a
long ``maxLength`` (blocks, plain runs over the stack) and of a SQL query on a byte-level vocabulary
with words, and the warm-up's own document again (whose thousands of uncertain tokens take the
matcher's loop over the stack), must give no kernel of the fill or compile path a new signature,
and no call may take numba's slow path
(``Dispatcher._compile_for_args``: typing the arguments in Python, ~100 us a call, where the
compiled entry is found in ~1 us).  An argument left to its default took it on every call: each
kernel's parameters have no defaults (``tests/test_house.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numba
import numpy as np
import pytest
import torch

import pda
from pda.errors import BitmaskError

_SCRIPT = r'''
import collections, json, sys
import numba
from numba.core.dispatcher import Dispatcher
import pda
from pda import grammars
from pda import kernel_warmup
from pda.kernel_warmup import warm_up_kernels

KERNEL_MODULES = ("pda.token_walk", "pda.group_kernels", "pda.plain_runs", "pda.lookahead", "pda.kernels",
                  "pda.loop_bytes", "pda.thread_sets", "pda.dfa_kernels", "pda.rule_kernels", "pda.nfa_kernels")

def signatures():
    out = {}
    for name, mod in list(sys.modules.items()):
        if name in KERNEL_MODULES:
            for k, v in vars(mod).items():
                if isinstance(v, numba.core.registry.CPUDispatcher) and v.py_func.__module__ == name:
                    out[f"{name}.{k}"] = sorted(map(str, v.signatures))
    return out

first = warm_up_kernels()
again = warm_up_kernels()
words = [bytes([b]) for b in range(256)] + [w.encode() for w in
         ('", "', '": ', '"}', '}]', "]]", "},", '{"', "true", "null", "hello", " world", "abc", "abcdefghijklmnopqrstu")]
tok = pda.TokenizerInfo.from_vocab_bytes(words + [b""], stop_token_ids=len(words))
compiler = pda.GrammarCompiler(tok, cache=False)
before = signatures()
slow = collections.Counter()  # kernel name -> calls that took the dispatcher's slow path
_compile_for_args = Dispatcher._compile_for_args

def counted(self, *args, **kws):
    slow[self.py_func.__name__] += 1
    return _compile_for_args(self, *args, **kws)

Dispatcher._compile_for_args = counted
compiler.compile_json_schema({"type": "object", "properties": {"k": {"type": "string", "pattern": "^x[0-9]+y$"},
                             "d": {"type": "string", "format": "date"}}})
docs = [(compiler.compile_builtin_json(), '[{"a": [1, 2.5, {"b": null}], "c": "hello world"}, [[true]]]'),
        (compiler.compile_json_schema({"type": "object", "properties": {"s": {"type": "string", "maxLength": 3000},
                                       "n": {"type": "integer"}}, "required": ["s", "n"]}),
         json.dumps({"s": "abcdefghijklmnopqrstu " * 12, "n": 42})),
        (compiler.compile_grammar(grammars.path("sql_select").read_text(encoding="utf-8")),
         grammars.samples("sql_select")[0][0].read_text(encoding="utf-8"))]
by_bytes = {b: i for i, b in enumerate(words)}
for compiled, text in docs:
    m = pda.GrammarMatcher(compiled)
    data, i = text.encode(), 0
    while i < len(data):
        n = min(21, len(data) - i)
        while data[i:i + n] not in by_bytes:
            n -= 1
        m.next_token_mask()
        assert m.accept_token(by_bytes[data[i:i + n]])
        i += n
    m.next_token_mask()
kernel_warmup._run()  # its document again: thousands of uncertain tokens (the matcher's loop over the stack)
after = signatures()
print(json.dumps({"first": first, "again": again, "new": {k: v for k, v in after.items() if v != before.get(k, [])},
                  "loaded": sum(map(len, after.values())), "slow": dict(slow)}))
'''


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="no kernels to load under NUMBA_DISABLE_JIT")
def test_after_the_warm_up_a_fill_or_a_schema_compile_loads_no_kernel() -> None:
    got = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-3000:]
    assert "warm_up_kernels failed" not in got.stderr, got.stderr[-3000:]
    result = json.loads(got.stdout.strip().splitlines()[-1])
    assert result["first"] > 0 and result["again"] == 0.0
    assert result["loaded"] >= 10  # the walk, the group kernels, plain runs, keys: loaded by the warm-up
    assert result["new"] == {}
    assert result["slow"] == {}


def test_warm_up_is_exported_and_idempotent() -> None:
    pda.warm_up_kernels()
    assert pda.warm_up_kernels() == 0.0


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="no warm-up under NUMBA_DISABLE_JIT")
def test_a_failing_warm_up_warns_and_lets_the_caller_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from pda import kernel_warmup

    def broken() -> None:
        raise RuntimeError("no")

    monkeypatch.setattr(kernel_warmup, "_done", False)
    monkeypatch.setattr(kernel_warmup, "_run", broken)
    with pytest.warns(RuntimeWarning, match="warm_up_kernels failed"):
        kernel_warmup.warm_up_kernels()
    assert kernel_warmup.warm_up_kernels() == 0.0  # not tried again


def test_a_cpu_or_other_device_needs_nothing_more() -> None:
    pda.warm_up_kernels()
    assert pda.warm_up_kernels("cpu") == 0.0
    assert pda.warm_up_kernels(torch.device("cpu")) == 0.0
    assert pda.warm_up_kernels("meta") == 0.0


def test_the_device_steps_run_on_the_cpu_too() -> None:
    """What a CUDA device's warm-up runs (its batch fills, stop tokens and masking in three dtypes),
    on the CPU: checked where CI has no GPU."""
    from pda import kernel_warmup

    kernel_warmup._run_on("cpu")


def test_a_device_torch_does_not_know_is_a_clear_error() -> None:
    with pytest.raises(BitmaskError, match="not a torch device"):
        pda.warm_up_kernels("gpu:0")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the error for a machine without CUDA")
def test_cuda_without_a_device_is_a_clear_error() -> None:
    with pytest.raises(BitmaskError, match="torch sees no CUDA device"):
        pda.warm_up_kernels("cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_device_is_warmed_once() -> None:
    """The first call for a device runs its batch fills and masking; ``cuda`` and ``cuda:N`` of the
    current device are the same device; afterwards a batch fill there gives the single fills' rows."""
    first = pda.warm_up_kernels("cuda")
    index = torch.cuda.current_device()
    assert pda.warm_up_kernels(f"cuda:{index}") == 0.0 and pda.warm_up_kernels(torch.device("cuda")) == 0.0
    assert first >= 0.0
    tok = pda.TokenizerInfo.from_vocab_bytes([bytes([b]) for b in range(256)] + [b'{"', b'":', b""], stop_token_ids=258)
    compiled = pda.GrammarCompiler(tok, cache=False).compile_builtin_json()
    matchers = [pda.GrammarMatcher(compiled) for _ in range(3)]
    assert matchers[1].accept_string('{"a"') and matchers[2].accept_string("[1, 2]")
    bitmask = pda.allocate_token_bitmask(3, tok.vocab_size, device="cuda")
    pda.BatchGrammarMatcher(max_threads=2).batch_fill_next_token_bitmask(matchers, bitmask)
    for k, m in enumerate(matchers):
        assert np.array_equal(bitmask[k].cpu().numpy(), m.next_token_mask())


def test_a_failing_device_warm_up_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from pda import kernel_warmup

    def broken(device: str) -> None:
        raise RuntimeError("no launch")

    pda.warm_up_kernels()
    monkeypatch.setattr(kernel_warmup, "_devices_done", set())
    monkeypatch.setattr(kernel_warmup, "_cuda_device", lambda device: "cuda:7")
    monkeypatch.setattr(kernel_warmup, "_run_on", broken)
    with pytest.warns(RuntimeWarning, match="first batch fill on cuda:7"):
        kernel_warmup.warm_up_kernels("cuda:7")
    assert kernel_warmup.warm_up_kernels("cuda:7") == 0.0  # not tried again
