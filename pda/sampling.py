"""Masked next-token distributions, seeded sampling, the speculative-sampling acceptance rule, and a
Hugging Face causal LM behind a KV cache that follows the token sequence it is given.

Imports torch (and transformers' cache class on first use); :mod:`pda.generate` is the only user.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .errors import PdaError

__all__ = ["Sampler", "ModelRunner", "speculative_accept"]


class Sampler:
    """Turns one row of logits and one bitmask row into a token, with a seeded torch generator.

    ``greedy`` (or ``temperature <= 0``) takes the argmax of the masked logits; otherwise the
    masked logits are divided by ``temperature``, softmaxed and cut to the smallest set of tokens
    whose mass reaches ``top_p`` (nucleus sampling), then renormalised."""

    def __init__(self, *, temperature: float, top_p: float, greedy: bool, seed: int | None) -> None:
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        self.greedy = greedy or temperature <= 0.0
        self.temperature = temperature
        self.top_p = top_p
        self.generator = torch.Generator(device="cpu")
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(int(seed))

    def masked(self, logits: torch.Tensor, bitmask_row: torch.Tensor) -> torch.Tensor:
        """A float32 copy of ``logits`` (1-D, moved to the CPU) with the tokens that the bitmask row
        (int32 words, bit ``t & 31`` of word ``t >> 5`` for token ``t``) does not allow at -inf."""
        out = logits.detach().to("cpu", torch.float32).clone()
        words = bitmask_row.numpy() if isinstance(bitmask_row, torch.Tensor) else np.asarray(bitmask_row)
        allowed = np.unpackbits(words.view(np.uint8), bitorder="little")[: out.shape[0]]
        out.masked_fill_(torch.from_numpy(allowed == 0), float("-inf"))
        return out

    def probs(self, masked_logits: torch.Tensor) -> torch.Tensor:
        """The sampling distribution over the vocabulary (one-hot on the argmax when greedy)."""
        if self.greedy:
            p = torch.zeros_like(masked_logits)
            p[int(torch.argmax(masked_logits))] = 1.0
            return p
        p = torch.softmax(masked_logits / self.temperature, dim=-1)
        if self.top_p < 1.0:
            sorted_p, idx = torch.sort(p, descending=True)
            before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # mass of the tokens ranked above
            sorted_p[before >= self.top_p] = 0.0
            p = torch.zeros_like(p).scatter_(0, idx, sorted_p)
            p /= p.sum()
        return p

    def draw(self, p: torch.Tensor) -> int:
        """One token from distribution ``p`` (the argmax when greedy)."""
        if self.greedy:
            return int(torch.argmax(p))
        return _multinomial(p, self.generator)

    def uniform(self) -> float:
        return float(torch.rand((), generator=self.generator))


def speculative_accept(p: torch.Tensor, q: torch.Tensor, token: int, sampler: Sampler) -> tuple[bool, int]:
    """The speculative-sampling rule (Leviathan et al. 2023; Chen et al. 2023) for a draft ``token``
    drawn from ``q``, where ``p`` is the target's distribution (both masked by the grammar).

    Returns ``(True, token)`` when the draft token is kept (with probability min(1, p/q)), else
    ``(False, t)`` with ``t`` drawn from the residual ``max(p - q, 0)`` normalised; the token so
    produced follows ``p`` exactly.  Greedy: kept when it is the target's argmax, else the argmax."""
    if sampler.greedy:
        best = int(torch.argmax(p))
        return best == token, best
    pt, qt = float(p[token]), float(q[token])
    if qt > 0.0 and sampler.uniform() * qt < pt:
        return True, token
    residual = torch.clamp(p - q, min=0.0)
    total = float(residual.sum())
    if total <= 0.0:  # p == q up to rounding: any draw from p is right
        return False, sampler.draw(p)
    return False, _multinomial(residual / total, sampler.generator)


def _multinomial(p: torch.Tensor, generator: torch.Generator) -> int:
    """One draw from ``p`` by inverting its cumulative sum (torch.multinomial over 129k entries
    costs tens of milliseconds)."""
    cdf = torch.cumsum(p.to(torch.float64), dim=0)
    u = float(torch.rand((), generator=generator, dtype=torch.float64)) * float(cdf[-1])
    i = int(torch.searchsorted(cdf, torch.tensor([u], dtype=torch.float64), right=True)[0])
    i = min(i, p.shape[0] - 1)
    while float(p[i]) <= 0.0:  # u fell on the last bucket's right edge: step back to a token with mass
        i -= 1
    return i


class ModelRunner:
    """A causal LM and its KV cache.  :meth:`logits` takes the whole token sequence; the cache keeps
    the longest prefix it shares with the sequence fed before (cropping the rest: rollbacks after
    jump-forward retokenisation or rejected draft tokens) and feeds only the new tokens, in one
    forward pass.  ``passes`` counts the forward passes."""

    def __init__(self, model: Any, vocab_size: int, what: str = "model") -> None:
        if not callable(model) or not hasattr(model, "parameters"):
            raise PdaError(f"{what} must be a Hugging Face causal LM (a torch module), got {type(model).__name__}")
        self.model = model
        self.vocab_size = vocab_size
        self.device = next(model.parameters()).device
        out_dim = getattr(getattr(model, "config", None), "vocab_size", None)
        if out_dim is not None and out_dim < vocab_size:
            raise PdaError(f"{what} has {out_dim} output logits but the tokenizer has {vocab_size} tokens")
        self.fed: list[int] = []
        self.cache: Any = None
        self.passes = 0

    def logits(self, seq: list[int], n_out: int) -> torch.Tensor:
        """Float logits ``[n_out, vocab]``: row ``i`` predicts the token after ``seq[: len(seq) - n_out + i + 1]``."""
        if not 1 <= n_out <= len(seq):
            raise ValueError(f"n_out={n_out} for a sequence of {len(seq)} tokens")
        limit = min(len(self.fed), len(seq) - n_out)
        common = 0
        if self.fed[:limit] == seq[:limit]:
            common = limit
        else:
            while self.fed[common] == seq[common]:
                common += 1
        if self.cache is None:
            from transformers import DynamicCache

            self.cache = DynamicCache()
        elif common < len(self.fed):
            self.cache.crop(common - len(self.fed))  # negative: tokens to drop (old and new transformers)
        new = torch.tensor([seq[common:]], dtype=torch.long, device=self.device)
        with torch.no_grad():
            out = self.model(input_ids=new, past_key_values=self.cache, use_cache=True, logits_to_keep=n_out)
        self.cache = out.past_key_values
        self.fed = list(seq)
        self.passes += 1
        return out.logits[0, -n_out:, : self.vocab_size]
