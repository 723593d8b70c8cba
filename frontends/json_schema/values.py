"""Checking single JSON values against merged constraints (a small exact validator).

``enum``/``const`` members are emitted only when they also satisfy the sibling keywords
(``{"type": "string", "enum": ["a", 1]}`` allows only ``"a"``): :meth:`ValueChecker.check_merged`.
:func:`member_locs` and :meth:`ValueChecker.item_locs` say which schemas a member's value or an
array item must meet (``properties``, ``patternProperties``, ``additional*``, ``unevaluated*``).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Callable

from pda import codepoint_fsm as fsm
from pda.errors import SchemaError, SchemaTooDeep

from .context import Context
from .document import Loc
from .merge import Merged, json_equal, json_key, merge, to_decimal
from .patterns import format_dfa, pattern_matches

__all__ = ["ValueChecker", "json_type", "member_locs", "unevaluated", "MAX_VALUE_DEPTH"]

MAX_VALUE_DEPTH = 64


def json_type(v: Any) -> str:
    """The JSON Schema type name of a Python JSON value ('integer' for integral numbers)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, (float, Decimal)):
        return "integer" if to_decimal(v) == to_decimal(v).to_integral_value() else "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    raise SchemaError(f"{v!r} is not a JSON value")


def member_locs(m: Merged, hits: Callable[[int], list[Loc]]) -> list[Loc]:
    """The schemas a member's value must satisfy, given the ones that name it in each object
    schema of ``m`` (``hits(i)``: matching ``properties``/``patternProperties`` of ``m.obj[i]``):
    those, or that schema's ``additionalProperties`` when none names it, then the
    ``unevaluatedProperties`` of the schemas that evaluated none."""
    locs: list[Loc] = []
    evaluators = []
    for i, a in enumerate(m.obj):
        got = hits(i)
        if got:
            locs += got
            evaluators.append(a.scope)
        elif a.additional is not None:
            locs.append(a.additional)
            evaluators.append(a.scope)
    return locs + unevaluated(m.uneval_props, evaluators)


def unevaluated(owners: list[tuple[Loc, str, tuple[str, ...]]], evaluators: list[tuple[str, ...]]) -> list[Loc]:
    """The ``unevaluated*`` schemas that apply to a member which the atoms with the given scopes
    evaluate: those whose object sees none of those atoms and holds no nested ``unevaluated*``
    (which evaluates every member it sees)."""
    out = []
    for u, ptr, _ in owners:
        if any(ptr in scope for scope in evaluators):
            continue
        if any(other != ptr and ptr in scope for _, other, scope in owners):
            continue
        out.append(u)
    return out


class ValueChecker:
    """Validates Python JSON values against the compiler's schemas (a small exact validator)."""

    def __init__(self, c: Context) -> None:
        self.c = c
        self._enums: dict[int, tuple[list[Any], set[Any]]] = {}  # id(enum list) -> (it, its keys)

    def _enum_keys(self, enum: list[Any]) -> set[Any]:
        got = self._enums.get(id(enum))
        if got is None or got[0] is not enum:
            got = self._enums[id(enum)] = (enum, {json_key(e) for e in enum})
        return got[1]

    def validate(self, v: Any, locs: list[Loc], depth: int = 0) -> bool:
        """Whether ``v`` is valid against every schema in ``locs``."""
        if depth > MAX_VALUE_DEPTH:
            raise SchemaTooDeep("a value nested too deep to check", MAX_VALUE_DEPTH)
        return any(self.check_merged(v, merge(conj, strict=self.c.strict), depth)
                   for conj in self.c.flat_dnf(locs))

    def value_locs(self, m: Merged, key: str) -> list[Loc]:
        """The schemas the value of property ``key`` must satisfy in an object of ``m``."""

        def hits(i: int) -> list[Loc]:
            a = m.obj[i]
            got = [loc for p, loc in a.patterns if pattern_matches(self.c, p, loc.ptr, key)]
            return ([a.props[key]] if key in a.props else []) + got

        return member_locs(m, hits)

    def item_locs(self, m: Merged, i: int | None) -> list[Loc]:
        """The schemas item ``i`` of an array of ``m`` must satisfy (None: every item after the
        longest prefix)."""
        locs: list[Loc] = []
        evaluators = []
        for a in m.arr:
            if i is not None and i < len(a.prefix):
                locs.append(a.prefix[i])
            elif a.rest is not None:
                locs.append(a.rest)
            else:
                continue
            evaluators.append(a.scope)
        return locs + unevaluated(m.uneval_items, evaluators)

    def check_merged(self, v: Any, m: Merged, depth: int = 0) -> bool:
        """Whether the value ``v`` satisfies every constraint of ``m``."""
        if m.enum is not None and json_key(v) not in self._enum_keys(m.enum):
            return False
        if any(json_equal(v, x) for x in m.excluded):
            return False
        t = json_type(v)
        if t not in m.types:
            return False
        if t in ("integer", "number"):
            return self._number_ok(to_decimal(v), m)
        if t == "string":
            return self._string_ok(v, m)
        if t == "array":
            return self._array_ok(v, m, depth)
        if t == "object":
            return self._object_ok(v, m, depth)
        return True

    def _number_ok(self, d: Decimal, m: Merged) -> bool:
        if m.lo is not None and (d < m.lo[0] or (m.lo[1] and d == m.lo[0])):
            return False
        if m.hi is not None and (d > m.hi[0] or (m.hi[1] and d == m.hi[0])):
            return False
        return all(d % k == 0 for k in m.multiples)

    def _string_ok(self, s: str, m: Merged) -> bool:
        if len(s) < m.min_len or (m.max_len is not None and len(s) > m.max_len):
            return False
        if not all(pattern_matches(self.c, p, ptr, s) for p, ptr in m.patterns):
            return False
        for f, ptr in m.formats:
            d = format_dfa(self.c, f, ptr)
            if d is not None and not fsm.matches(d, s):
                return False
        if any(pattern_matches(self.c, p, ptr, s) for p, ptr in m.not_patterns):
            return False
        for f, ptr in m.not_formats:
            d = format_dfa(self.c, f, ptr)
            if d is not None and fsm.matches(d, s):
                return False
        return True

    def _array_ok(self, v: list[Any], m: Merged, depth: int) -> bool:
        if len(v) < m.min_items or (m.max_items is not None and len(v) > m.max_items):
            return False
        if m.unique is not None and any(json_equal(a, b) for i, a in enumerate(v) for b in v[i + 1:]):
            return False
        for i, item in enumerate(v):
            locs = self.item_locs(m, i)
            if locs and not self.validate(item, locs, depth + 1):
                return False
        for loc, lo, hi in m.contains:
            n = sum(1 for item in v if self.validate(item, [loc], depth + 1))
            if n < lo or (hi is not None and n > hi):
                return False
        return True

    def _object_ok(self, v: dict[str, Any], m: Merged, depth: int) -> bool:
        if len(v) < m.min_props or (m.max_props is not None and len(v) > m.max_props):
            return False
        if any(k not in v for k in m.required):
            return False
        for k, x in v.items():
            if m.names and not self.validate(k, m.names, depth + 1):
                return False
            locs = self.value_locs(m, k)
            if locs and not self.validate(x, locs, depth + 1):
                return False
        return True
