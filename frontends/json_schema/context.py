"""The compile context: what the emitting layers may ask of the compiler, and nothing more.

:class:`Context` holds the state one compilation shares — the options, the text
:class:`~.layout.Layout`, the rules made so far, the per-document caches and the ``$ref`` index —
and declares the few recursive operations the layers below the compiler need
(:meth:`~Context.compile` a sub-schema, :meth:`~Context.expand` one into conjunctions, check a
value).  :class:`~.compiler.Compiler` implements them; the layers below import this module, never
the compiler.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from typing import Any, Literal

from pda.errors import UnsupportedSchemaError
from pda.ir import EPSILON, NOTHING, Expr, Ref, size_exceeds

from .document import Conj, Loc, SchemaIndex
from .layout import Layout
from .merge import Merged

__all__ = ["Context", "PropertyOrder", "SHARE_MIN_NODES"]

PropertyOrder = Literal["schema", "any"]
SHARE_MIN_NODES = 201  # pda.normalize inlines rules of up to 200 nodes anyway


class Context(ABC):
    """One schema document being compiled: options, layout, rules, caches, ``$ref`` index."""

    def __init__(self, index: SchemaIndex, layout: Layout, *, strict: bool, lenient: bool,
                 property_order: PropertyOrder, ref_overrides: bool) -> None:
        self.index = index
        self.layout = layout
        self.strict = strict
        self.lenient = lenient
        self.property_order: PropertyOrder = property_order
        # Drafts 3 to 7: a schema with "$ref" is only the reference (its other keywords are ignored).
        self.ref_overrides = ref_overrides
        self.rules: dict[str, Expr] = {}
        self.memo: dict[tuple[str, ...], Any] = {}  # per-document caches (patterns, automata ...)
        self.probing = False  # set while trying something that may fail quietly
        self._counter = 0

    # ------------------------------------------------------------------ rules

    def fresh(self, hint: str) -> str:
        """A new rule name starting with ``hint``."""
        self._counter += 1
        return f"{hint}_{self._counter}"

    def add_rule(self, name: str, body: Expr) -> str:
        self.rules[name] = body
        return name

    def share(self, e: Expr, hint: str) -> Expr:
        """``e`` itself when small; otherwise a call of a new rule holding it (shared, not copied)."""
        if isinstance(e, Ref) or e in (NOTHING, EPSILON) or not size_exceeds(e, SHARE_MIN_NODES - 1):
            return e
        return Ref(self.add_rule(self.fresh(hint), e))

    # ------------------------------------------------------------------ refusals and references

    def unsupported(self, message: str, pointer: str) -> None:
        """Refuse (UnsupportedSchemaError) or, when lenient, warn and let the caller ignore it."""
        if not self.lenient or self.probing:
            raise UnsupportedSchemaError(message, pointer=pointer)
        warnings.warn(f"JSON Schema at '{pointer or '#'}': {message}; ignored (lenient)", stacklevel=3)

    def resolve(self, ref: Any, loc: Loc) -> Loc:
        """The schema a ``$ref`` written at ``loc`` points to."""
        return self.index.resolve(ref, loc)

    # ------------------------------------------------------------------ what the compiler provides

    @abstractmethod
    def expand(self, loc: Loc) -> list[Conj]:
        """``loc`` as a union of conjunctions of schema objects (combinators and refs expanded)."""

    @abstractmethod
    def flat_dnf(self, locs: list[Loc]) -> list[list[Loc]]:
        """Conjunctions of plain schema objects, every ``$ref`` inlined (for checks, not emission)."""

    @abstractmethod
    def compile(self, locs: list[Loc], depth: int) -> Expr:
        """The texts valid against every schema in ``locs`` at nesting ``depth``."""

    @abstractmethod
    def value_ok(self, v: Any, m: Merged) -> bool:
        """Whether the JSON value ``v`` satisfies every constraint of ``m``."""

    @abstractmethod
    def value_locs(self, m: Merged, key: str) -> list[Loc]:
        """The schemas the value of property ``key`` must satisfy in an object of ``m``."""

    @abstractmethod
    def item_locs(self, m: Merged, pos: int | None) -> list[Loc]:
        """The schemas item ``pos`` must satisfy in an array of ``m`` (None: past every prefix)."""
