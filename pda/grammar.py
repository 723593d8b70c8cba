"""The public :class:`Grammar`: any input language in, a pushdown automaton and text checks out."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .automaton import DEFAULT_MAX_STATES, Automaton, automaton_of
from .errors import GrammarError
from .grammars import dialect_of, source_text
from .ir import GrammarIR, to_ebnf
from .limits import DEFAULT_MAX_COMPILE_SECONDS, compile_budget
from .walker import ByteMatcher, Walker, as_bytes, validate_bytes
from .normalize import ROOT
from .stack import DEFAULT_MAX_STACK_DEPTH, StackArena

__all__ = ["Grammar"]


class Grammar:
    """A compiled grammar: normalised rules and their byte-level pushdown automaton.

    Build one with a ``from_*`` constructor.  Compilation happens at construction, so every error
    in the grammar is raised there (a :class:`~pda.errors.GrammarError` naming the place).
    ``max_states`` bounds the automaton, ``max_stack_depth`` the nesting of a matched text and
    ``max_compile_seconds`` the time to build it (frontend included; ``None``: no limit); hitting
    any of them raises :class:`~pda.errors.LimitExceededError`.
    """

    json_pointers = False
    """True for a grammar of JSON texts (from a JSON Schema): ``validate`` then sets the error's ``pointer``."""

    def __init__(
        self, ir: GrammarIR, *, max_states: int = DEFAULT_MAX_STATES,
        max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH, max_compile_seconds: float | None = DEFAULT_MAX_COMPILE_SECONDS,
    ) -> None:
        self.ir = ir
        with compile_budget(max_compile_seconds):
            self.normal, self.automaton = automaton_of(ir, max_states=max_states)
        self.max_stack_depth = max_stack_depth

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_ir(cls, ir: GrammarIR, **options: Any) -> Grammar:
        return cls(ir, **options)

    @classmethod
    def from_ebnf(cls, text: str, *, start: str = "root", filename: str | None = None, **options: Any) -> Grammar:
        """A GBNF / XGrammar-style EBNF grammar (``root ::= ...``)."""
        from pda.frontends.ebnf import parse_ebnf

        with _budget(options):
            return cls(parse_ebnf(text, start=start, filename=filename), **options)

    @classmethod
    def from_lark(cls, text: str, *, start: str = "start", filename: str | None = None, **options: Any) -> Grammar:
        """A Lark grammar (``start: ...``), with ``%import common`` and ``%ignore``."""
        from pda.frontends.lark_format import parse_lark

        with _budget(options):
            return cls(parse_lark(text, start=start, filename=filename), **options)

    @classmethod
    def from_regex(cls, pattern: str, *, flags: str = "", **options: Any) -> Grammar:
        """The strings a regular expression matches entirely (Python ``re`` syntax)."""
        from pda.frontends.regex import regex_to_ir

        with _budget(options):
            return cls(GrammarIR({"root": regex_to_ir(pattern, flags=flags)}, "root", source=pattern), **options)

    @classmethod
    def from_json_schema(cls, schema: Any, **options: Any) -> Grammar:
        """The JSON texts a JSON Schema allows (see :func:`pda.frontends.json_schema.json_schema_to_ir`)."""
        from pda.frontends.json_schema import json_schema_to_ir

        limits: dict[str, Any] = {k: options.pop(k) for k in ("max_states", "max_stack_depth", "max_compile_seconds") if k in options}
        with _budget(limits):
            grammar = cls(json_schema_to_ir(schema, **options), **limits)
        grammar.json_pointers = True
        return grammar

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, start: str | None = None, **options: Any) -> Grammar:
        """A grammar file; the dialect comes from the extension (.gbnf/.ebnf, .lark, .regex, .json)."""
        p = Path(path)
        dialect = options.pop("format", None) or dialect_of(p)
        if dialect is None:
            raise GrammarError(f"cannot tell the grammar dialect of {p.name!r}: use .gbnf, .ebnf, .lark or .regex",
                               filename=str(p))
        text = source_text(p.read_text(encoding="utf-8"), dialect)
        if dialect == "ebnf":
            return cls.from_ebnf(text, start=start or "root", filename=str(p), **options)
        if dialect == "lark":
            return cls.from_lark(text, start=start or "start", filename=str(p), **options)
        if dialect == "regex":
            return cls.from_regex(text, **options)
        if dialect == "json_schema":
            return cls.from_json_schema(text, **options)
        raise GrammarError(f"unknown grammar format {dialect!r}", filename=str(p))

    @classmethod
    def _restored(cls, automaton: Automaton, *, start: str, ebnf: bytes, ebnf_normalized: bytes, max_stack_depth: int,
                  json_pointers: bool) -> Grammar:
        """A grammar read back by :mod:`pda.serialize`: its automaton and the UTF-8 texts of its rules.

        It matches, validates and prints (``to_ebnf``) like the original; it holds no ``ir`` or
        ``normal`` (those are not serialised).
        """
        g = cls.__new__(cls)
        g.automaton = automaton
        g.max_stack_depth = max_stack_depth
        g.json_pointers = json_pointers
        g._texts = (start, ebnf, ebnf_normalized)
        return g

    # ------------------------------------------------------------------ matching

    def _walker(self) -> Walker:
        return Walker(self.automaton, StackArena(self.max_stack_depth))

    def accepts(self, text: str | bytes) -> bool:
        """True when ``text`` is a complete sentence of the grammar."""
        return validate_bytes(self._walker(), as_bytes(text), prefix=False) is None

    def is_prefix(self, text: str | bytes) -> bool:
        """True when ``text`` can still be completed into a sentence (a sentence is its own prefix)."""
        return validate_bytes(self._walker(), as_bytes(text), prefix=True) is None

    def validate(self, text: str | bytes) -> None:
        """Raise :class:`~pda.errors.ValidationError` (offset, line, column, expected bytes) unless
        ``text`` is a complete sentence."""
        err = validate_bytes(self._walker(), as_bytes(text), prefix=False)
        if err is not None:
            if self.json_pointers:
                from .json_pointer import pointer_at

                err.pointer = pointer_at(err.data, err.offset)
            raise err

    def first_states(self) -> list[int]:
        """The automaton states that can read the first byte (the tops of the start configuration)."""
        return [s for s, _ in self._walker().initial().tops]

    def matcher(self) -> ByteMatcher:
        """A new incremental byte matcher (``feed``, ``is_complete``, ``rollback``)."""
        return ByteMatcher(self._walker())

    # ------------------------------------------------------------------ introspection

    _texts: tuple[str, bytes, bytes] | None = None  # (start, ebnf, normalised ebnf) of a deserialised grammar

    @property
    def start(self) -> str:
        return self._texts[0] if self._texts is not None else self.ir.start

    def to_ebnf(self, *, normalized: bool = False) -> str:
        """The grammar as GBNF text: as written (default) or after normalisation."""
        if self._texts is not None:
            return (self._texts[2] if normalized else self._texts[1]).decode()
        if normalized:
            rules = self.normal.rules
            return "\n".join(f"{'root' if n == ROOT else n} ::= {to_ebnf(b)}" for n, b in rules.items()) + "\n"
        return "\n".join(f"{n} ::= {to_ebnf(b)}" for n, b in self.ir.rules.items()) + "\n"

    def __repr__(self) -> str:
        a = self.automaton
        nrules = len(self.ir.rules) if self._texts is None else self._texts[1].count(b"\n")
        return (f"<pda.Grammar start={self.start!r} rules={nrules} pda_rules={len(a.rule_names)} "
                f"states={a.num_states} classes={a.num_classes}>")


def _budget(options: dict[str, Any]):  # type: ignore[no-untyped-def]
    """The compile budget of a constructor's options (the frontend's work counts too)."""
    return compile_budget(options.get("max_compile_seconds", DEFAULT_MAX_COMPILE_SECONDS))
