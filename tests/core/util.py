"""Helpers for the core tests: grammars straight from IR, no frontend involved."""

from __future__ import annotations

from typing import Any

from pda import Grammar
from pda.ir import Expr, GrammarIR


def G(rules: dict[str, Expr], start: str = "root", **options: Any) -> Grammar:
    return Grammar.from_ir(GrammarIR(rules, start), **options)


def utf8_viable(data: bytes) -> bool:
    """Whether ``data`` starts some valid UTF-8 text (only a sequence's second byte is narrower than
    80..BF, so these completions are enough for Python's strict decoder to decide)."""
    for tail in [b""] + [bytes([b]) + b"\x80" * k for b in range(0x80, 0xC0) for k in range(3)]:
        try:
            (data + tail).decode("utf-8")
        except UnicodeDecodeError:
            continue
        return True
    return False
