"""The constraint one vLLM request names in ``SamplingParams.extra_args["pda"]``: read, checked, compiled.

The entry is a dict (or its JSON text) with exactly one source key and the options that go with it::

    {"json_schema": {...} or "<JSON text>", "whitespace": "compact", "strict": True, ...}
    {"grammar": "root ::= ...", "start": "root"}          # GBNF / XGrammar-style EBNF
    {"lark": "start: ...", "start": "start"}              # a Lark grammar
    {"regex": "[0-9]+"}                                   # the strings the pattern matches entirely
    {"builtin": "json"}                                   # a bundled grammar (``pda list``)

JSON Schema options are those of :meth:`pda.Grammar.from_json_schema`: ``whitespace``,
``max_whitespace``, ``separators``, ``strict``, ``lenient``, ``property_order``.  This module
imports neither vLLM nor torch, and pda's compiler (numba) only when a constraint is built.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Mapping

from pda.errors import ConstraintError, GrammarError

if TYPE_CHECKING:
    from pda.compiler import CompiledGrammar, GrammarCompiler
    from pda.grammar import Grammar

__all__ = ["EXTRA_ARGS_KEY", "SOURCES", "Constraint"]

EXTRA_ARGS_KEY = "pda"
"""The key of ``SamplingParams.extra_args`` that holds a request's constraint."""

SCHEMA_OPTIONS = ("whitespace", "max_whitespace", "separators", "strict", "lenient", "property_order")

SOURCES: dict[str, tuple[str, ...]] = {
    # source key -> the options allowed beside it
    "json_schema": SCHEMA_OPTIONS,
    "grammar": ("start",),
    "lark": ("start",),
    "regex": (),
    "builtin": (),
}
"""The keys that name a constraint's source, each with the options allowed beside it."""

_DEFAULT_START = {"grammar": "root", "lark": "start"}


@dataclass(frozen=True)
class Constraint:
    """One request's constraint: its ``kind`` (a key of :data:`SOURCES`), its ``text`` (a grammar,
    pattern, bundled grammar name, or the schema as canonical JSON text) and its ``options``."""

    kind: str
    text: str
    options: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def from_extra_args(cls, extra_args: Mapping[str, Any] | None) -> Constraint | None:
        """The constraint in ``extra_args["pda"]``, or None when there is none (an unconstrained
        request).  Raises :class:`~pda.errors.ConstraintError` for a malformed entry."""
        if not extra_args or EXTRA_ARGS_KEY not in extra_args:
            return None
        return cls.from_spec(extra_args[EXTRA_ARGS_KEY])

    @classmethod
    def from_spec(cls, spec: Any) -> Constraint:
        """The constraint of one ``{"json_schema": ...}``-style dict, or of its JSON text (the form
        the OpenAI-compatible server's ``vllm_xargs`` carries: its values are flat)."""
        if isinstance(spec, str):
            try:
                spec = json.loads(spec)
            except ValueError as error:
                raise ConstraintError(f'extra_args["pda"] is a string but not JSON text: {error}') from None
        if not isinstance(spec, Mapping):
            raise ConstraintError(
                f'extra_args["pda"] must be a dict such as {{"json_schema": {{...}}}}, got {type(spec).__name__}')
        kinds = [k for k in spec if k in SOURCES]
        if len(kinds) != 1:
            named = f"several ({', '.join(kinds)})" if kinds else "none"
            raise ConstraintError(
                f'extra_args["pda"] must name exactly one of {", ".join(SOURCES)}; it names {named}')
        kind = kinds[0]
        allowed = SOURCES[kind]
        unknown = sorted(str(k) for k in spec if k != kind and k not in allowed)
        if unknown:
            raise ConstraintError(
                f'extra_args["pda"]: unknown option(s) {", ".join(unknown)} for {kind!r}; '
                f"allowed: {', '.join(allowed) or 'none'}")
        source = spec[kind]
        if kind == "json_schema":
            if isinstance(source, (dict, bool)):
                text = json.dumps(source)  # key order kept: it is the order of "properties"
            elif isinstance(source, str):
                text = source
            else:
                raise ConstraintError(
                    f'extra_args["pda"]["json_schema"] must be a schema (dict or bool) or its JSON text, '
                    f"got {type(source).__name__}")
        elif isinstance(source, str):
            text = source
        else:
            raise ConstraintError(f'extra_args["pda"][{kind!r}] must be a string, got {type(source).__name__}')
        options = []
        for key in sorted(k for k in spec if k != kind):
            value = spec[key]
            if key == "separators" and isinstance(value, list):
                value = tuple(value)  # JSON has no tuples
            if key == "start" and not isinstance(value, str):
                raise ConstraintError(f'extra_args["pda"]["start"] must be a rule name, got {value!r}')
            options.append((key, value))
        return cls(kind, text, tuple(options))

    # ------------------------------------------------------------------ building

    def check(self) -> None:
        """Raise the pda error of a constraint that cannot be built (no tokenizer needed).

        Builds the grammar once per distinct constraint (an LRU cache of recent ones), so repeated
        requests with the same schema are checked for free."""
        try:
            hash(self)
        except TypeError:  # an option value that is not hashable (it is refused by the frontend)
            self.grammar()
            return
        _checked(self)

    def grammar(self) -> Grammar:
        """The grammar of this constraint (tokenizer-independent)."""
        from pda.grammar import Grammar

        options = dict(self.options)
        if self.kind == "json_schema":
            return Grammar.from_json_schema(self.text, **options)
        if self.kind == "grammar":
            return Grammar.from_ebnf(self.text, start=options.get("start", _DEFAULT_START["grammar"]))
        if self.kind == "lark":
            return Grammar.from_lark(self.text, start=options.get("start", _DEFAULT_START["lark"]))
        if self.kind == "regex":
            return Grammar.from_regex(self.text)
        return Grammar.from_file(_builtin_path(self.text))

    def compile(self, compiler: GrammarCompiler) -> CompiledGrammar:
        """This constraint compiled by ``compiler`` (and kept in the compiler's cache)."""
        options = dict(self.options)
        if self.kind == "json_schema":
            return compiler.compile_json_schema(self.text, **options)
        if self.kind == "grammar":
            return compiler.compile_grammar(self.text, start=options.get("start", _DEFAULT_START["grammar"]))
        if self.kind == "lark":
            return compiler.compile_lark(self.text, start=options.get("start", _DEFAULT_START["lark"]))
        if self.kind == "regex":
            return compiler.compile_regex(self.text)
        path = _builtin_path(self.text)
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".lark":
            return compiler.compile_lark(text)
        return compiler.compile_grammar(text)


def _builtin_path(name: str):  # type: ignore[no-untyped-def]
    """The file of bundled grammar ``name``; a GrammarError naming the known ones when there is none."""
    from pda import grammars

    try:
        return grammars.path(name)
    except KeyError:
        raise GrammarError(f"no bundled grammar {name!r}; known: {', '.join(grammars.names())}") from None


@lru_cache(maxsize=256)
def _checked(constraint: Constraint) -> None:
    """Build the constraint's grammar once (errors are not cached: they raise every time)."""
    constraint.grammar()
