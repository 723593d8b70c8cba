"""A Hugging Face ``transformers`` logits processor that constrains ``generate`` with pda.

>>> processor = GrammarLogitsProcessor(compiled)            # one grammar for every row
>>> model.generate(**inputs, logits_processor=[processor], max_new_tokens=256)

Each call first accepts the token sampled at the previous step (the last column of
``input_ids``), then masks the scores.  A row whose matcher has terminated (its stop token was
accepted) is left to the caller's padding: only its stop tokens stay allowed.
"""

from __future__ import annotations

from typing import Sequence

import torch
from transformers import LogitsProcessor

from ..bitmask import allocate_token_bitmask, apply_token_bitmask_inplace
from ..compiler import CompiledGrammar
from ..errors import PdaError
from ..matcher import GrammarMatcher

__all__ = ["GrammarLogitsProcessor"]


class GrammarLogitsProcessor(LogitsProcessor):
    """Constrain each row of a batch with a compiled grammar (one for all rows, or one per row)."""

    def __init__(self, compiled: CompiledGrammar | Sequence[CompiledGrammar]) -> None:
        self._compiled = [compiled] if isinstance(compiled, CompiledGrammar) else list(compiled)
        if not self._compiled:
            raise ValueError("give at least one CompiledGrammar")
        self.matchers: list[GrammarMatcher] = []
        self._bitmask: torch.Tensor | None = None
        self._prompt_len = 0

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        batch = input_ids.shape[0]
        if not self.matchers:
            if len(self._compiled) not in (1, batch):
                raise ValueError(f"{len(self._compiled)} grammars for a batch of {batch} rows")
            grammars = self._compiled * batch if len(self._compiled) == 1 else self._compiled
            self.matchers = [GrammarMatcher(c) for c in grammars]
            self._bitmask = allocate_token_bitmask(batch, self._compiled[0].tokenizer_info.vocab_size)
            self._prompt_len = input_ids.shape[1]
        elif input_ids.shape[1] > self._prompt_len:
            for row, m in enumerate(self.matchers):
                if m.is_terminated():
                    continue
                token = int(input_ids[row, -1])
                if not m.accept_token(token):
                    raise PdaError(f"row {row}: the sampled token {token} is not allowed by the grammar "
                                   "(was the mask applied before sampling?)")
        assert self._bitmask is not None
        for row, m in enumerate(self.matchers):
            if m.is_terminated():
                self._bitmask[row].zero_()
                for t in m.stop_token_ids:
                    self._bitmask[row, t >> 5] |= 1 << (t & 31) if (t & 31) != 31 else -(1 << 31)
            else:
                m.fill_next_token_bitmask(self._bitmask, row)
        apply_token_bitmask_inplace(scores, self._bitmask.to(scores.device))
        return scores
