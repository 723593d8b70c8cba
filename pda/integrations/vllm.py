"""pda inside vLLM (v1): a logits processor that constrains requests with grammars and JSON Schemas.

In Python, pass the class (or its name) to the engine and name each request's constraint in
``SamplingParams.extra_args["pda"]``::

    from vllm import LLM, SamplingParams
    from pda.integrations.vllm import PdaLogitsProcessor

    llm = LLM(model, logits_processors=[PdaLogitsProcessor])   # or "pda.integrations.vllm:PdaLogitsProcessor"
    params = SamplingParams(max_tokens=200, extra_args={"pda": {"json_schema": schema}})

Under ``vllm serve --logits-processors pda.integrations.vllm:PdaLogitsProcessor`` the
OpenAI-compatible API takes the same dict as JSON text in the request's ``vllm_xargs``, whose
values must be flat: ``{"vllm_xargs": {"pda": "{\"json_schema\": {...}}"}}``.  The keys are described in
:mod:`pda.integrations.vllm_constraint`: ``json_schema`` (with the JSON Schema options),
``grammar`` (GBNF/EBNF), ``lark``, ``regex`` or ``builtin``.  Requests without ``"pda"`` are
untouched.

This module is light: importing it (and :mod:`pda`) loads neither vLLM, torch, numba nor
llvmlite.  ``PdaLogitsProcessor`` is imported from :mod:`pda.integrations.vllm_processor` on first
access, and pda's compiler (numba) when the first constrained request arrives.  vLLM's CPU worker
scans the loaded modules for Triton kernels when it starts, a scan that llvmlite breaks; a
processor class sent to the worker is imported before that scan, so it must not load numba.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["PdaLogitsProcessor"]

if TYPE_CHECKING:
    from pda.integrations.vllm_processor import PdaLogitsProcessor


def __getattr__(name: str) -> Any:
    """``PdaLogitsProcessor``, imported (with vLLM and torch) on first access."""
    if name == "PdaLogitsProcessor":
        from pda.integrations.vllm_processor import PdaLogitsProcessor

        return PdaLogitsProcessor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
