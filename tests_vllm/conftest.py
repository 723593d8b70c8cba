"""The vLLM integration tests need vLLM (``make test-vllm`` builds ``.venv-vllm``); elsewhere each module skips."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache: the tiny model needs little


@pytest.fixture(scope="session")
def model_path() -> str:
    from tiny_model import ensure_model

    return str(ensure_model())
