"""Helpers for the core tests: grammars straight from IR, no frontend involved."""

from __future__ import annotations

from typing import Any

from pda import Grammar
from pda.ir import Expr, GrammarIR


def G(rules: dict[str, Expr], start: str = "root", **options: Any) -> Grammar:
    return Grammar.from_ir(GrammarIR(rules, start), **options)
