"""Grammar-constrained generation with a Hugging Face causal LM: every step masked, jump-forward
decoding (:mod:`pda.jump_forward`) and grammar-aware speculative decoding with a draft model.

    import pda
    result = pda.generate(model, tokenizer, {"type": "object", ...}, "Describe a user as JSON:",
                          seed=0, draft_model=small_model)
    result.text, result.token_ids, result.stats["forward_passes"]

The loop, per step:

0. with ``jump_forward`` (first, at every step): the text the grammar forces next is appended,
   retokenised at the boundary; it reaches the model with the next forward pass.  Where the mask
   allows exactly one token, that token is taken without a forward pass, and where it allows only
   stop tokens, generation ends there (the end of the grammar) without one;
1. without a draft model, one target forward pass (feeding every token not yet in the KV cache:
   the last sampled one and any forced ones), then a sample from the masked distribution;
2. with a draft model, the draft proposes up to ``draft_tokens`` tokens under the masks of a fork
   of the matcher (a token the mask forces costs no draft pass; with jump-forward the draft stops
   where text is forced), the target scores them all in one forward pass, and
   :func:`pda.sampling.speculative_accept` keeps a prefix and draws one more token, so the output
   follows the target's masked distribution (greedy: exactly the greedy text).

Without ``jump_forward`` this is a standard constrained decoder: every output token, and the stop
token that ends a complete output, comes from a target forward pass (one pass per token; with a
draft, the target verifies forced tokens in its verification pass like any other), so
``forward_passes == tokens + 1`` for a complete output without a draft, ``tokens`` when it stopped
at ``max_new_tokens``.

torch and transformers are imported here, never by ``import pda``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import torch

from .bitmask import allocate_token_bitmask
from .compiler import CompiledGrammar, GrammarCompiler
from .errors import PdaError
from .grammar import Grammar
from .jump_forward import JumpForward
from .kernel_warmup import warm_up_kernels
from .matcher import GrammarMatcher
from .sampling import ModelRunner, Sampler, speculative_accept
from .tokenizer import TokenizerInfo

__all__ = ["generate", "GenerationResult", "resolve_grammar", "tokenizer_info"]

STATS_KEYS = ("tokens", "forward_passes", "draft_forward_passes", "jump_forward_tokens", "draft_proposed",
              "draft_accepted", "mask_us_mean", "wall_s", "complete")
"""The keys every :attr:`GenerationResult.stats` holds (``pda generate --stats`` prints them)."""


@dataclass
class GenerationResult:
    """What :func:`generate` produced.

    ``text`` is the UTF-8 decoding of ``token_ids`` (the output tokens, stop token excluded).
    ``stats`` holds at least :data:`STATS_KEYS`: ``tokens`` (output tokens), ``forward_passes``
    (target model calls; the first one is the prompt's prefill, which also gives the first token's
    logits, so without jump-forward and a draft: one per output token, plus one for the stop token
    that ends a complete output), ``draft_forward_passes``, ``jump_forward_tokens``
    (output tokens placed by jump-forward, not sampled), ``draft_proposed``/``draft_accepted``,
    ``mask_us_mean`` (microseconds per token mask), ``wall_s``, and ``complete``: the grammar accepts
    the output and generation stopped on a stop token or at the end of the grammar (not at
    ``max_new_tokens``).  Also ``stopped_by`` ('stop_token', 'end_of_grammar' (jump-forward ends a
    complete output without sampling the stop token), 'dead_end' or 'max_new_tokens') and
    ``sampled_tokens``."""

    text: str
    token_ids: list[int]
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return bool(self.stats.get("complete"))


_INFOS: dict[int, tuple[Any, TokenizerInfo, GrammarCompiler]] = {}


def tokenizer_info(tokenizer: Any, vocab_size: int | None = None) -> tuple[TokenizerInfo, GrammarCompiler]:
    """The :class:`TokenizerInfo` and a caching :class:`GrammarCompiler` for a Hugging Face
    tokenizer (built once per tokenizer object and vocabulary size)."""
    key = id(tokenizer) * 31 + (vocab_size or 0)
    got = _INFOS.get(key)
    if got is None or got[0] is not tokenizer:
        info = TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
        got = _INFOS[key] = (tokenizer, info, GrammarCompiler(info))
        warm_up_kernels()  # once per process: the first generation's mask fills load no kernel
    return got[1], got[2]


def resolve_grammar(grammar: Any, compiler: GrammarCompiler) -> CompiledGrammar:
    """A :class:`CompiledGrammar` from what :func:`generate` accepts: a CompiledGrammar, a
    :class:`~pda.Grammar`, a JSON Schema as a dict or bool (compact whitespace: the forced text
    jump-forward skips), or GBNF/EBNF text."""
    if isinstance(grammar, CompiledGrammar):
        return grammar
    if isinstance(grammar, Grammar):
        return compiler.compile_grammar(grammar)
    if isinstance(grammar, (dict, bool)):
        return compiler.compile_json_schema(grammar, whitespace="compact")
    if isinstance(grammar, str):
        return compiler.compile_grammar(grammar)
    raise TypeError("grammar must be a CompiledGrammar, a Grammar, a JSON Schema dict or GBNF text, "
                    f"got {type(grammar).__name__}")


class _Masks:
    """Token masks from a matcher, timed; rows also come back as numpy for counting."""

    def __init__(self, vocab_size: int, rows: int) -> None:
        self.bitmask = allocate_token_bitmask(rows, vocab_size)
        self.np = self.bitmask.numpy()
        self.vocab_size = vocab_size
        self.calls = 0
        self.seconds = 0.0

    def fill(self, matcher: GrammarMatcher, row: int) -> torch.Tensor:
        t0 = time.perf_counter()
        matcher.fill_next_token_bitmask(self.bitmask, row)
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        return self.bitmask[row]

    def allowed(self, row: int, limit: int = 2) -> list[int]:
        """Up to ``limit`` allowed token ids of ``row`` (enough to tell 0, 1 or more)."""
        words = np.flatnonzero(self.np[row])
        out: list[int] = []
        for w in words[:limit].tolist():
            bits = int(self.np[row, w]) & 0xFFFFFFFF
            while bits and len(out) < limit:
                low = bits & -bits
                out.append(w * 32 + low.bit_length() - 1)
                bits ^= low
            if len(out) >= limit:
                break
        return [t for t in out if t < self.vocab_size]


class _Decoder:
    """One generation: the state shared by plain steps, speculative steps and jump-forward."""

    def __init__(self, *, target: ModelRunner, draft: ModelRunner | None, matcher: GrammarMatcher,
                 sampler: Sampler, jump: JumpForward | None, prompt: list[int], max_new: int,
                 draft_tokens: int, vocab_size: int) -> None:
        self.target, self.draft, self.matcher, self.sampler, self.jump = target, draft, matcher, sampler, jump
        self.prompt, self.max_new, self.k = prompt, max_new, draft_tokens
        self.masks = _Masks(vocab_size, max(1, draft_tokens) + 1)
        self.stops = frozenset(matcher.stop_token_ids)
        self.out: list[int] = []
        self.forced: list[bool] = []
        self.stopped_by = "max_new_tokens"
        self.proposed = 0
        self.accepted = 0

    # ------------------------------------------------------------------ helpers

    def _take(self, token: int, forced: bool = False) -> bool:
        """Accept ``token`` into the matcher and the output; True when generation ends here."""
        if not self.matcher.accept_token(token):
            raise PdaError(f"internal error: the matcher refused token {token}, which its mask allowed")
        if token in self.stops:
            self.stopped_by = "stop_token"
            return True
        self.out.append(token)
        self.forced.append(forced)
        return False

    def _trivial(self, matcher: GrammarMatcher, row: int) -> tuple[str, int]:
        """Fill mask ``row`` for ``matcher``: ('end', -1) when nothing may follow, ('stop', -1) when
        only stop tokens may (the end of the grammar), ('one', t) when exactly one token may,
        ('many', -1) otherwise."""
        self.masks.fill(matcher, row)
        allowed = self.masks.allowed(row)
        if not allowed:
            return "end", -1
        if matcher.is_completed() and self._only_stops(row):
            return "stop", -1
        if len(allowed) == 1:
            return "one", allowed[0]
        return "many", -1

    def _only_stops(self, row: int) -> bool:
        mask = self.masks.np[row].copy()
        for t in self.stops:
            mask[t >> 5] &= ~np.int32(np.uint32(1 << (t & 31)).view(np.int32))
        return not mask.any()

    def _forced_next(self, matcher: GrammarMatcher) -> bool:
        """True when jump-forward is on and the grammar forces text from ``matcher``'s state."""
        return self.jump is not None and bool(matcher.find_jump_forward_string())

    def _seq(self, extra: Iterable[int] = ()) -> list[int]:
        return self.prompt + self.out + list(extra)

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        jump = self.jump
        jf = jump is not None
        while len(self.out) < self.max_new:
            if jump is not None:
                jump.apply(self.matcher, self.out, self.forced, self.max_new)
                if len(self.out) >= self.max_new:
                    return
            kind, token = self._trivial(self.matcher, 0)
            if kind == "end" or (kind == "stop" and jf):
                self._ended()
                return
            if kind == "one" and jf:
                if self._take(token, forced=True):
                    return
            elif self.draft is not None and self.k > 0 and kind != "stop":
                if self._speculate(token if kind == "one" else -1):
                    return
            else:  # one pass per token, forced or not (a one-hot masked distribution gives it)
                logits = self.target.logits(self._seq(), 1)[0]
                if self._take(self._sample(logits, 0)):
                    return

    def _ended(self) -> None:
        self.stopped_by = "end_of_grammar" if self.matcher.is_completed() else "dead_end"

    def _sample(self, logits: torch.Tensor, row: int) -> int:
        return self.sampler.draw(self.sampler.probs(self.sampler.masked(logits, self.masks.bitmask[row])))

    def _speculate(self, forced: int) -> bool:
        """One draft-and-verify round from the current state (mask row 0 already filled).
        ``forced``: the one token mask row 0 allows (without jump-forward), else -1."""
        budget = self.max_new - len(self.out)
        fork = self.matcher.fork()
        drafts: list[int] = []
        qs: list[torch.Tensor | None] = []
        for i in range(min(self.k, budget)):
            kind, token = ("one", forced) if i == 0 and forced >= 0 else \
                ("many", -1) if i == 0 else self._trivial(fork, i)
            if kind in ("end", "stop"):
                break  # (a stop token comes from the target's pass below, or jump-forward ends here)
            if kind == "one":
                drafts.append(token)
                qs.append(None)  # certain under the mask: the target's masked p is one-hot too
                if token in self.stops or not fork.accept_token(token) or self._forced_next(fork):
                    break
                continue
            q_logits = self.draft.logits(self._seq(drafts), 1)[0]  # type: ignore[union-attr]
            q = self.sampler.probs(self.sampler.masked(q_logits, self.masks.bitmask[i]))
            d = self.sampler.draw(q)
            drafts.append(d)
            qs.append(q)
            if d in self.stops or not fork.accept_token(d) or self._forced_next(fork):
                break
        self.proposed += len(drafts)
        fed = drafts[:-1] if drafts and drafts[-1] in self.stops else drafts
        p_logits = self.target.logits(self._seq(fed), len(fed) + 1)
        for i, d in enumerate(drafts):  # mask row i was filled for the fork in this same state
            p = self.sampler.probs(self.sampler.masked(p_logits[i], self.masks.bitmask[i]))
            q = qs[i]
            if q is None:
                ok, token = True, d
            else:
                ok, token = speculative_accept(p, q, d, self.sampler)
            if ok:
                self.accepted += 1
            if self._take(token):
                return True
            if not ok:
                return False
        if len(fed) < len(drafts) or len(self.out) >= self.max_new or self._forced_next(self.matcher):
            return False  # (forced text first: the loop jumps, as decoding without a draft does)
        kind, token = self._trivial(self.matcher, 0)
        if kind == "end" or (kind == "stop" and self.jump is not None):
            return False  # the loop sees the end again and records it
        if kind == "one" and self.jump is not None:
            return self._take(token, forced=True)
        return self._take(self._sample(p_logits[len(fed)], 0))  # this pass's token after the drafts


def generate(model: Any, tokenizer: Any, grammar: Any, prompt: str | list[int], *, max_new_tokens: int = 256,
             temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False, seed: int | None = None,
             jump_forward: bool = True, draft_model: Any = None, draft_tokens: int = 4,
             stop_token_ids: int | list[int] | None = None) -> GenerationResult:
    """Generate text that ``grammar`` accepts with the causal LM ``model`` (a Hugging Face model with
    a KV cache, e.g. ``LlamaForCausalLM``) and its Hugging Face ``tokenizer``.

    ``grammar``: a :class:`CompiledGrammar` (for this tokenizer), a :class:`~pda.Grammar`, a JSON
    Schema dict, or GBNF text.  ``prompt``: text (encoded with the tokenizer's special tokens) or
    token ids.  Every sampled token is drawn from the grammar-masked distribution (``greedy``: its
    argmax; else temperature and nucleus ``top_p``), with a torch generator seeded by ``seed``, so
    the same arguments give the same output.  ``jump_forward`` appends forced text without
    sampling; ``draft_model`` (same tokenizer) turns on speculative decoding with up to
    ``draft_tokens`` proposals per round.  ``stop_token_ids`` default to the tokenizer's eos.
    """
    t0 = time.perf_counter()
    if max_new_tokens < 0 or draft_tokens < 0:
        raise ValueError("max_new_tokens and draft_tokens must be >= 0")
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    info, compiler = tokenizer_info(tokenizer, vocab)
    compiled = resolve_grammar(grammar, compiler)
    if compiled.tokenizer_info.vocab_size != info.vocab_size:
        raise PdaError(f"the grammar was compiled for a vocabulary of {compiled.tokenizer_info.vocab_size} "
                       f"tokens, the model has {info.vocab_size}")
    if isinstance(prompt, str):
        ids = list(tokenizer.encode(prompt, add_special_tokens=True))
    else:
        ids = [int(t) for t in prompt]
    if not ids:
        bos = getattr(tokenizer, "bos_token_id", None)
        if bos is None:
            raise PdaError("the prompt is empty and the tokenizer has no bos token to start from")
        ids = [bos]
    matcher = GrammarMatcher(compiled, stop_token_ids=stop_token_ids)
    sampler = Sampler(temperature=temperature, top_p=top_p, greedy=greedy, seed=seed)
    target = ModelRunner(model, info.vocab_size, "model")
    draft = ModelRunner(draft_model, info.vocab_size, "draft_model") if draft_model is not None else None
    jump = JumpForward(tokenizer, compiled.tokenizer_info) if jump_forward else None
    dec = _Decoder(target=target, draft=draft, matcher=matcher, sampler=sampler, jump=jump, prompt=ids,
                   max_new=max_new_tokens, draft_tokens=draft_tokens, vocab_size=info.vocab_size)
    dec.run()
    text = b"".join(info.token_bytes[t] for t in dec.out).decode("utf-8", errors="replace")
    complete = dec.stopped_by in ("stop_token", "end_of_grammar")
    stats = {
        "tokens": len(dec.out), "forward_passes": target.passes,
        "draft_forward_passes": draft.passes if draft is not None else 0,
        "jump_forward_tokens": sum(dec.forced), "draft_proposed": dec.proposed, "draft_accepted": dec.accepted,
        "mask_us_mean": round(dec.masks.seconds / max(1, dec.masks.calls) * 1e6, 1),
        "wall_s": round(time.perf_counter() - t0, 4), "complete": complete,
        "stopped_by": dec.stopped_by, "sampled_tokens": len(dec.out) - sum(dec.forced),
    }
    return GenerationResult(text, list(dec.out), stats)
