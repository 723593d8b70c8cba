""":func:`pda.token_walk.walk_tokens` calls the kernel's compiled entry point directly: for a triple
(automaton, trie, workspace) it has seen, and, for a new one, the entry of arguments of the same
kinds.  Either way the codes are the dispatcher's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numba import njit

from pda import GrammarCompiler, TokenizerInfo, kernel_entry, kernel_refs, token_walk
from pda.token_walk import walk_tokens
from pda.walk_workspace import thread_workspace


class _Counting:
    """The kernel's dispatcher, counting the calls that go through it."""

    def __init__(self, dispatcher: Any) -> None:
        self.dispatcher = dispatcher
        self.calls = 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        return self.dispatcher(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.dispatcher, name)


@njit
def _trans_at(ref: Any) -> int:
    return ref.trans.ctypes.data  # type: ignore[no-any-return]


@njit
def _order_at(ref: Any) -> int:
    return ref.order.ctypes.data  # type: ignore[no-any-return]


@njit
def _states_at(ref: Any) -> int:
    return ref.states.ctypes.data  # type: ignore[no-any-return]


def test_a_new_automaton_reuses_the_entry_of_its_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = [bytes([b]) for b in range(32, 127)] + [b'"a', b'bc"', b"12", b"<eos>"]
    info = TokenizerInfo.from_vocab_bytes(tokens, stop_token_ids=[len(tokens) - 1])
    compiler = GrammarCompiler(info, cache=False)
    trie = info.trie
    cand = np.arange(trie.order.shape[0], dtype=np.int32)
    stack = np.zeros(0, dtype=np.int32)
    kernel_of = token_walk._walk_tokens
    counting = _Counting(kernel_of)
    for k, schema in enumerate([{"type": "string", "maxLength": 4}, {"type": "array", "items": {"type": "integer"}},
                                {"enum": ["bc", 12, None]}]):
        kernel = compiler.compile_json_schema(schema).kernel
        ws = thread_workspace(int(np.diff(trie.offsets).max()))
        kinds = len(kernel_entry._by_kinds)
        for s in range(min(kernel.trans.shape[0], 12)):
            got = np.empty(cand.shape[0], np.int8)
            want = np.empty(cand.shape[0], np.int8)
            read = walk_tokens(kernel, trie, cand, s, stack, True, got, ws)
            refs = [kernel_refs.reference(x) for x in (kernel, trie, ws)]  # the dispatcher, on the same specialisation
            assert read == kernel_of(refs[0], refs[1], cand, s, stack, True, want, refs[2], token_walk._NO_FOUND)[0]
            assert got.tolist() == want.tolist()
        entry = kernel_entry._entries[("walk", id(kernel), id(trie), id(ws))]
        refs = dict(entry[4])  # passed by reference: the same arrays, not copies
        assert sorted(refs) == [0, 1, 7]
        for pos, tup, address in ((0, kernel, _trans_at), (1, trie, _order_at), (7, ws, _states_at)):
            assert refs[pos] is kernel_refs.reference(tup)
            assert address(refs[pos]) == tup[0].ctypes.data
        if k:  # the first schema may have brought the first entry of these kinds
            assert len(kernel_entry._by_kinds) == kinds
            assert counting.calls == 0  # no walk went through the dispatcher
        monkeypatch.setattr(token_walk, "_walk_tokens", counting)
