"""``PdaLogitsProcessor``: pda's grammar masks as a vLLM v1 ``LogitsProcessor`` (see :mod:`pda.integrations.vllm`).

One processor lives in each vLLM worker.  It keeps one :class:`~pda.GrammarMatcher` per
constrained row of vLLM's persistent batch, moved along with vLLM's batch updates (requests
removed, added, then moved or swapped), and before each sampling step it

1. feeds each matcher the tokens its request sampled since the last step (read from the request's
   output token list, which vLLM shares with logits processors by reference);
2. fills the bitmask rows of all constrained requests in one batched fill
   (:meth:`PdaLogitsProcessor._fill_rows`, :class:`pda.BatchGrammarMatcher`);
3. masks the logits of those rows in one :func:`~pda.apply_token_bitmask_inplace` call (on the
   rows up to the last constrained one; free requests among them get an all-allowed row).

A matcher's stop tokens are the request's (``SamplingParams.all_stop_token_ids``: the model's EOS
tokens and the request's ``stop_token_ids``): they are allowed exactly when the text is complete,
so a request ends by EOS as soon as its grammar is satisfied and never before.  After the stop
token (with ``ignore_eos``) only stop tokens stay allowed.  A constraint that fails in the worker
(a compile limit hit, a refused token) is logged and its request is ended with EOS: the engine
never dies of one request.

This module imports vLLM and torch; pda's compiler (numba) is imported by the processor's
constructor, which vLLM's worker runs after its start-up scan of the loaded modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from vllm.exceptions import VLLMValidationError
from vllm.logger import init_logger
from vllm.sampling_params import SamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from pda.bitmask import allocate_token_bitmask, apply_token_bitmask_inplace
from pda.errors import PdaError
from pda.integrations.vllm_constraint import Constraint

if TYPE_CHECKING:
    from vllm.config import VllmConfig

    from pda.batch import BatchGrammarMatcher
    from pda.compiler import GrammarCompiler
    from pda.matcher import GrammarMatcher

__all__ = ["PdaLogitsProcessor"]

logger = init_logger(__name__)


class _Row:
    """A constrained request in the batch: its matcher, its output token list (vLLM's, shared by
    reference), how many of those tokens the matcher has seen, and its stop tokens."""

    __slots__ = ("matcher", "output_ids", "consumed", "stops", "failed")

    def __init__(self, matcher: GrammarMatcher | None, output_ids: list[int], stops: list[int]) -> None:
        self.matcher = matcher
        self.output_ids = output_ids
        self.consumed = 0
        self.stops = stops
        self.failed = matcher is None

    def sync(self) -> None:
        """Feed the matcher the tokens sampled since the last call."""
        if self.failed:
            return
        assert self.matcher is not None
        ids = self.output_ids
        while self.consumed < len(ids):
            token = ids[self.consumed]
            if token < 0:  # an async-scheduling placeholder not yet filled in
                return
            if not self.matcher.accept_token(token) and not (self.matcher.is_terminated() and token in self.stops):
                logger.error("pda: the sampled token %d was refused by the grammar after %d tokens; "
                             "ending the request", token, self.consumed)
                self.failed = True
                return
            self.consumed += 1

    @property
    def stops_only(self) -> bool:
        """Only the stop tokens are allowed (the grammar is done, or failed)."""
        return self.failed or self.matcher is None or self.matcher.is_terminated()


class PdaLogitsProcessor(LogitsProcessor):
    """Constrain the requests whose ``SamplingParams.extra_args`` hold a ``"pda"`` entry.

    ``extra_args={"pda": {"json_schema": schema, "whitespace": "compact"}}``, or ``"grammar"``
    (GBNF/EBNF), ``"lark"``, ``"regex"`` or ``"builtin"`` in place of ``"json_schema"``.  Grammars
    are compiled by one :class:`~pda.GrammarCompiler` per worker, whose cache serves every request
    naming the same constraint.
    """

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        """Refuse a malformed ``"pda"`` entry, schema or grammar with its pda error (HTTP 400 under
        ``vllm serve``).  Runs in the front end, once per request; no tokenizer is needed."""
        try:
            constraint = Constraint.from_extra_args(sampling_params.extra_args)
            if constraint is not None:
                constraint.check()
        except PdaError as error:
            raise VLLMValidationError(f"pda: {error}", parameter="extra_args") from error

    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool) -> None:
        self._vllm_config = vllm_config
        self._device = torch.device(device)
        self._is_pin_memory = is_pin_memory
        self._max_rows = vllm_config.scheduler_config.max_num_seqs
        self._vocab_size = vllm_config.model_config.get_vocab_size()
        self._rows: dict[int, _Row] = {}
        self._compiler_: GrammarCompiler | None = None
        self._bitmask: torch.Tensor | None = None
        self._device_bitmask: torch.Tensor | None = None
        self._batch: BatchGrammarMatcher | None = None
        from pda.kernel_warmup import warm_up_kernels

        # at the worker's start-up, not in the first structured requests' decode steps (on CUDA, also
        # the first launches of masking the logits)
        warm_up_kernels(self._device)

    def is_argmax_invariant(self) -> bool:
        """Masks change the argmax: greedy requests are constrained too."""
        return False

    # ------------------------------------------------------------------ the compiler

    @property
    def compiler(self) -> GrammarCompiler:
        """The worker's GrammarCompiler for the model's tokenizer (built on first use)."""
        if self._compiler_ is None:
            from vllm.tokenizers import cached_tokenizer_from_config

            from pda.compiler import GrammarCompiler
            from pda.tokenizer import TokenizerInfo

            model_config = self._vllm_config.model_config
            if model_config.skip_tokenizer_init:
                raise PdaError("pda needs the model's tokenizer: start vLLM without skip_tokenizer_init")
            tokenizer = cached_tokenizer_from_config(model_config=model_config)
            info = TokenizerInfo.from_huggingface(tokenizer, vocab_size=self._vocab_size)
            self._compiler_ = GrammarCompiler(info)
        return self._compiler_

    # ------------------------------------------------------------------ batch bookkeeping

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        """Follow vLLM's persistent batch: removed rows, then added, then moved (or swapped)."""
        if batch_update is None:
            return
        rows = self._rows
        for index in batch_update.removed:
            rows.pop(index, None)
        for index, params, _prompt_ids, output_ids in batch_update.added:
            row = self._new_row(params, output_ids)
            if row is None:
                rows.pop(index, None)
            else:
                rows[index] = row
        for src, dst, direction in batch_update.moved:
            moving = rows.pop(src, None)
            other = rows.pop(dst, None)
            if direction == MoveDirectionality.SWAP and other is not None:
                rows[src] = other
            if moving is not None:
                rows[dst] = moving

    def _new_row(self, params: SamplingParams, output_ids: list[int]) -> _Row | None:
        """The row of a newly added request, or None when it names no constraint."""
        try:
            constraint = Constraint.from_extra_args(params.extra_args)
        except PdaError:
            constraint = None  # refused by validate_params in the front end; never reaches here
        if constraint is None:
            return None
        from pda.matcher import GrammarMatcher

        stops = sorted(t for t in params.all_stop_token_ids if 0 <= t < self._vocab_size)
        matcher: GrammarMatcher | None = None
        try:
            compiler = self.compiler
            stops = stops or sorted(compiler.tokenizer_info.stop_token_ids)
            matcher = GrammarMatcher(constraint.compile(compiler), stop_token_ids=stops)
        except PdaError as error:
            logger.error("pda: cannot compile the constraint of a request (%s); ending it", error)
        except Exception:  # a bug must cost one request, not the engine
            logger.exception("pda: unexpected error while compiling the constraint of a request; ending it")
        return _Row(matcher, output_ids, stops)

    # ------------------------------------------------------------------ masks

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """Mask the logits of every constrained row (in place; returns ``logits``).

        The rows ``[0, k)`` up to the last constrained one are masked in one operation on a view of
        the logits; free requests among them get an all-allowed row (vLLM keeps its batch dense, so
        this is cheaper than gathering and scattering the constrained rows)."""
        if not self._rows:
            return logits
        indices = sorted(i for i in self._rows if i < logits.shape[0])
        if not indices:
            return logits
        bitmask = self._host_bitmask()
        rows = [self._rows[i] for i in indices]
        for row in rows:
            row.sync()
        grammar_rows = [(i, r.matcher) for i, r in zip(indices, rows) if not r.stops_only]
        if grammar_rows:
            self._fill_rows([m for _, m in grammar_rows], bitmask, [i for i, _ in grammar_rows])
        for i, row in zip(indices, rows):
            if row.stops_only:
                _allow_only(bitmask, i, row.stops)
        k = indices[-1] + 1
        if len(indices) < k:
            constrained = set(indices)
            for i in range(k):
                if i not in constrained:
                    bitmask[i].fill_(-1)
        part = bitmask[:k]
        if self._device.type != "cpu":
            device_bitmask = self._device_bitmask
            if device_bitmask is None:
                device_bitmask = self._device_bitmask = torch.empty_like(bitmask, device=self._device)
            device_bitmask[:k].copy_(part, non_blocking=True)
            part = device_bitmask[:k]
        apply_token_bitmask_inplace(logits[:k], part, vocab_size=min(logits.shape[-1], self._vocab_size))
        return logits

    def _fill_rows(self, matchers: list[Any], bitmask: torch.Tensor, indices: list[int]) -> None:
        """Write each matcher's allowed tokens into its row of ``bitmask`` in one batched fill
        (:class:`pda.BatchGrammarMatcher`: the rows' cache misses are computed on worker threads)."""
        if self._batch is None:
            from pda.batch import BatchGrammarMatcher

            self._batch = BatchGrammarMatcher()
        self._batch.batch_fill_next_token_bitmask(matchers, bitmask, indices)

    def _host_bitmask(self) -> torch.Tensor:
        """The CPU bitmask, one row per batch slot (pinned when vLLM pins its host buffers)."""
        if self._bitmask is None:
            bitmask = allocate_token_bitmask(self._max_rows, self._vocab_size)
            self._bitmask = bitmask.pin_memory() if self._is_pin_memory and self._device.type != "cpu" else bitmask
        return self._bitmask


def _allow_only(bitmask: torch.Tensor, index: int, tokens: list[int]) -> None:
    """Row ``index`` of ``bitmask`` allows exactly ``tokens``."""
    words = bitmask.numpy().view(np.uint32)
    words[index] = 0
    for t in tokens:
        words[index, t >> 5] |= np.uint32(1 << (t & 31))
