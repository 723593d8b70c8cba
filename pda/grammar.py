"""The public :class:`Grammar`: any input language in, a pushdown automaton and text checks out."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from .automaton import DEFAULT_MAX_STATES, Automaton, automaton_of
from .errors import GrammarError
from .grammars import dialect_of, source_text
from .ir import GrammarIR, to_ebnf
from .limits import DEFAULT_MAX_COMPILE_SECONDS, compile_budget
from .walker import ByteMatcher, Walker, as_bytes, validate_bytes
from .normalize import ROOT, NormalGrammar
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
        with compile_budget(max_compile_seconds):
            normal, self.automaton = automaton_of(ir, max_states=max_states)
        self._trees: tuple[GrammarIR, NormalGrammar] | None = (ir, normal)
        self._start, self._num_rules = ir.start, len(ir.rules)
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
        g._trees = None
        g._start, g._num_rules = start, ebnf.count(b"\n")
        g._texts = (ebnf, ebnf_normalized)
        return g

    # ------------------------------------------------------------------ the rules' trees

    _rebuild: Callable[[], Grammar] | None = None  # makes the trees again after _release_trees
    _texts: tuple[bytes, bytes] | None = None  # to_ebnf's two texts, once asked for (or read back)

    @property
    def ir(self) -> GrammarIR:
        """The rules as the frontend gave them."""
        return self._kept_trees()[0]

    @property
    def normal(self) -> NormalGrammar:
        """The rules after normalisation (what the automaton was built from)."""
        return self._kept_trees()[1]

    def _kept_trees(self) -> tuple[GrammarIR, NormalGrammar]:
        trees = self._trees
        if trees is None:
            if self._rebuild is None:
                raise AttributeError("a grammar read back from bytes holds no ir or normal form (to_ebnf gives its rules)")
            trees = self._trees = self._rebuild()._kept_trees()
        return trees

    def _release_trees(self, rebuild: Callable[[], Grammar]) -> None:
        """Let go of ``ir`` and ``normal``; ``rebuild`` (the same grammar built again) makes them
        on demand.  Nothing that matches, fills masks or validates reads them.

        Their nodes are most of a compiled grammar's Python objects (Snowplow/sp_0_Normalized: about
        12,500 of 14,900), and every full garbage collection walks each object alive: in a server
        holding many compiled grammars, that is the pause every request waits through.
        :class:`~pda.compiler.GrammarCompiler` releases the grammars it builds once their compile
        (and disk write) is done; ``to_ebnf`` then reads its texts when they were made (a disk
        write makes them), else rebuilds.
        """
        self._rebuild = rebuild
        self._trees = None

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

    @property
    def start(self) -> str:
        return self._start

    def to_ebnf(self, *, normalized: bool = False) -> str:
        """The grammar as GBNF text: as written (default) or after normalisation."""
        texts = self._texts
        if texts is None:
            ir, normal = self._kept_trees()
            written = "\n".join(f"{n} ::= {to_ebnf(b)}" for n, b in ir.rules.items()) + "\n"
            rules = normal.rules
            norm = "\n".join(f"{'root' if n == ROOT else n} ::= {to_ebnf(b)}" for n, b in rules.items()) + "\n"
            texts = self._texts = (written.encode(), norm.encode())
        return texts[1 if normalized else 0].decode()

    def __repr__(self) -> str:
        a = self.automaton
        return (f"<pda.Grammar start={self.start!r} rules={self._num_rules} pda_rules={len(a.rule_names)} "
                f"states={a.num_states} classes={a.num_classes}>")


def _budget(options: dict[str, Any]):  # type: ignore[no-untyped-def]
    """The compile budget of a constructor's options (the frontend's work counts too)."""
    return compile_budget(options.get("max_compile_seconds", DEFAULT_MAX_COMPILE_SECONDS))
