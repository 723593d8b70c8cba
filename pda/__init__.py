"""pda: grammars (GBNF/EBNF, Lark, JSON Schema, regex) compiled to a byte-level pushdown automaton.

The package ``pda`` lives in ``pda/``; ``pda.frontends`` in ``frontends/``; ``pda.cache`` in
``cache/``; bundled grammars (``pda.grammars``) in ``grammars/``.

``import pda`` is light: each public name is imported from its module the first time it is used
(PEP 562), so ``import pda`` loads neither numba nor torch, ``pda.Grammar`` loads numba but not
torch, and only the bitmask functions load torch.  To export a new name, add it to ``_EXPORTS``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"  # the one place: pyproject.toml reads it (tool.setuptools.dynamic)

_EXPORTS: dict[str, str] = {
    # name -> the module (relative to pda) that defines it
    "Grammar": ".grammar",
    "ByteMatcher": ".walker",
    "GrammarMatcher": ".matcher",
    "BatchGrammarMatcher": ".batch",
    "GrammarCompiler": ".compiler",
    "warm_up_kernels": ".kernel_warmup",
    "CompiledGrammar": ".compiler",
    "TokenizerInfo": ".tokenizer",
    "VocabType": ".tokenizer",
    "allocate_token_bitmask": ".bitmask",
    "apply_token_bitmask_inplace": ".bitmask",
    "bitmask_to_bool": ".bitmask",
    "bool_to_bitmask": ".bitmask",
    "get_bitmask_shape": ".bitmask",
    "reset_token_bitmask": ".bitmask",
    "PdaError": ".errors",
    "GrammarError": ".errors",
    "GrammarSyntaxError": ".errors",
    "UndefinedRuleError": ".errors",
    "EmptyLanguageError": ".errors",
    "RegexError": ".errors",
    "UnsupportedRegexError": ".errors",
    "SchemaError": ".errors",
    "UnsupportedSchemaError": ".errors",
    "ValidationError": ".errors",
    "LimitExceededError": ".errors",
    "TokenizerError": ".errors",
    "BitmaskError": ".errors",
    "SerializationError": ".errors",
    "ConstraintError": ".errors",
    "generate": ".generation",  # loads transformers' model machinery on first use
    "GenerationResult": ".generation",
}


def json_schema_to_ebnf(schema: object, **options: object) -> str:
    """The GBNF grammar pda builds for a JSON Schema (for reading and debugging)."""
    from pda.frontends.json_schema import json_schema_to_ebnf as convert

    return convert(schema, **options)


__all__ = [*_EXPORTS, "json_schema_to_ebnf", "__version__"]


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (and keep it in the package's namespace)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pda' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # the names as static type checkers and IDEs should see them
    from .bitmask import (
        allocate_token_bitmask, apply_token_bitmask_inplace, bitmask_to_bool, bool_to_bitmask, get_bitmask_shape,
        reset_token_bitmask,
    )
    from .compiler import CompiledGrammar, GrammarCompiler
    from .kernel_warmup import warm_up_kernels
    from .batch import BatchGrammarMatcher
    from .errors import (
        BitmaskError, ConstraintError, EmptyLanguageError, GrammarError, GrammarSyntaxError, LimitExceededError, PdaError, RegexError,
        SchemaError, SerializationError, TokenizerError, UndefinedRuleError, UnsupportedRegexError, UnsupportedSchemaError,
        ValidationError,
    )
    from .generation import GenerationResult, generate
    from .grammar import Grammar
    from .matcher import GrammarMatcher
    from .walker import ByteMatcher
    from .tokenizer import TokenizerInfo, VocabType
