"""pda: grammars (GBNF/EBNF, Lark, JSON Schema, regex) compiled to a byte-level pushdown automaton.

The package ``pda`` lives in ``pda/``; ``pda.frontends`` in ``frontends/``; ``pda.cache`` in
``cache/``; bundled grammars (``pda.grammars``) in ``grammars/``.
"""

from __future__ import annotations

from .errors import (
    EmptyLanguageError, GrammarError, GrammarSyntaxError, LimitExceededError, PdaError, RegexError, SchemaError,
    SerializationError, TokenizerError, UndefinedRuleError, UnsupportedRegexError, UnsupportedSchemaError, ValidationError,
)
from .grammar import Grammar
from .matcher import ByteMatcher, GrammarMatcher
from .tokenizer import TokenizerInfo, VocabType
from .compiler import CompiledGrammar, GrammarCompiler
from .bitmask import (
    allocate_token_bitmask, apply_token_bitmask_inplace, bitmask_to_bool, bool_to_bitmask, get_bitmask_shape,
    reset_token_bitmask,
)

__version__ = "0.1.0"


def json_schema_to_ebnf(schema: object, **options: object) -> str:
    """The GBNF grammar pda builds for a JSON Schema (for reading and debugging)."""
    from pda.frontends.json_schema import json_schema_to_ebnf as convert

    return convert(schema, **options)


__all__ = [
    "Grammar", "ByteMatcher", "GrammarMatcher", "GrammarCompiler", "CompiledGrammar", "TokenizerInfo", "VocabType",
    "allocate_token_bitmask", "apply_token_bitmask_inplace", "bitmask_to_bool", "bool_to_bitmask",
    "get_bitmask_shape", "reset_token_bitmask", "json_schema_to_ebnf", "PdaError", "GrammarError", "GrammarSyntaxError", "UndefinedRuleError",
    "EmptyLanguageError", "RegexError", "UnsupportedRegexError", "SchemaError", "UnsupportedSchemaError",
    "ValidationError", "LimitExceededError", "TokenizerError", "SerializationError", "__version__",
]
