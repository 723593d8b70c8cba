"""pda: grammars (GBNF/EBNF, Lark, JSON Schema, regex) compiled to a byte-level pushdown automaton.

The package ``pda`` lives in ``pda/``; ``pda.frontends`` in ``frontends/``; ``pda.cache`` in
``cache/``; bundled grammars (``pda.grammars``) in ``grammars/``.
"""

from __future__ import annotations

from .errors import (
    EmptyLanguageError, GrammarError, GrammarSyntaxError, LimitExceededError, PdaError, RegexError, SchemaError,
    TokenizerError, UndefinedRuleError, UnsupportedRegexError, UnsupportedSchemaError, ValidationError,
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

__all__ = [
    "Grammar", "ByteMatcher", "GrammarMatcher", "GrammarCompiler", "CompiledGrammar", "TokenizerInfo", "VocabType",
    "allocate_token_bitmask", "apply_token_bitmask_inplace", "bitmask_to_bool", "bool_to_bitmask",
    "get_bitmask_shape", "reset_token_bitmask", "PdaError", "GrammarError", "GrammarSyntaxError", "UndefinedRuleError",
    "EmptyLanguageError", "RegexError", "UnsupportedRegexError", "SchemaError", "UnsupportedSchemaError",
    "ValidationError", "LimitExceededError", "TokenizerError", "__version__",
]
