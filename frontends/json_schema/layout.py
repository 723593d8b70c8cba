"""Where whitespace goes in the JSON text: :class:`Layout`, for the three ``whitespace`` modes of
:func:`~pda.frontends.json_schema.json_schema_to_ir` (``"flexible"``, ``"compact"``, an indent)."""

from __future__ import annotations

from typing import Literal

from pda.ir import EPSILON, Expr, chars, lit, repeat, seq

__all__ = ["Layout", "Whitespace"]

Whitespace = Literal["flexible", "compact"] | int
_WS = chars([(0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20)])


class Layout:
    """Where whitespace may go, for one of the three ``whitespace`` modes."""

    def __init__(self, mode: Whitespace, max_ws: int | None,
                 separators: tuple[str, str] | None) -> None:
        self.mode = mode
        self.indent = mode if isinstance(mode, int) and not isinstance(mode, bool) else None
        if self.indent is not None:
            item, key = separators or (",", ": ")
        else:
            item, key = separators or (",", ":")
        self.item, self.key = item, key
        self.ws = repeat(_WS, 0, max_ws) if mode == "flexible" else EPSILON

    def pieces(self, depth: int, brackets: str) -> tuple[Expr, Expr, Expr, Expr]:
        """(open, separator, close, empty) of a container at ``depth`` (0 = the top level)."""
        o, c = brackets
        if self.mode == "flexible":
            w = self.ws
            return seq(lit(o), w), seq(w, lit(","), w), seq(w, lit(c)), seq(lit(o), w, lit(c))
        if self.indent is not None:
            inner = "\n" + " " * (self.indent * (depth + 1))
            outer = "\n" + " " * (self.indent * depth)
            return lit(o + inner), lit(self.item + inner), lit(outer + c), lit(o + c)
        return lit(o), lit(self.item), lit(c), lit(o + c)

    def colon(self) -> Expr:
        if self.mode == "flexible":
            return seq(self.ws, lit(":"), self.ws)
        return lit(self.key)
