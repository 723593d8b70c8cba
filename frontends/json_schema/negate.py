"""The complement of a schema, for ``not`` and ``if``/``then``/``else``, as a union of schemas.

A keyword that speaks about one type holds for every value of the other types, so its negation
is that type *and* the negated keyword: ``not {"minLength": 3}`` is "a string of at most 2
characters", not "anything but long strings".  A schema object is the conjunction of its
keywords, so its complement is the union of the keywords' complements (De Morgan), and
``anyOf``/``allOf``/``not``/``$ref`` recurse.  The result is a list of synthetic schema objects
(their union is the complement); the synthetic keywords ``$not`` (values to exclude),
``$notPattern`` and ``$notFormat`` are understood by :mod:`.merge`.

Refused (``None`` after :meth:`.Context.unsupported`): ``not`` of ``type: integer`` alone,
``multipleOf``, ``items``/``contains``/``additionalProperties`` and friends, ``oneOf``,
``uniqueItems``, and ``enum`` members that are arrays or objects.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from .context import Context
from .document import COMBINATORS, MERGE_KEYWORDS, UNSUPPORTED, Loc, child
from .formats import FORMATS
from .merge import to_decimal, type_set

__all__ = ["negate"]

_ALL = ["null", "boolean", "object", "array", "number", "string"]
_MAX_UNION = 64
_PAIRS = {  # keyword -> (type, complement keyword, offset added to the bound)
    "minimum": ("number", "exclusiveMaximum", 0), "maximum": ("number", "exclusiveMinimum", 0),
    "exclusiveMinimum": ("number", "maximum", 0), "exclusiveMaximum": ("number", "minimum", 0),
    "minLength": ("string", "maxLength", -1), "maxLength": ("string", "minLength", 1),
    "minItems": ("array", "maxItems", -1), "maxItems": ("array", "minItems", 1),
    "minProperties": ("object", "maxProperties", -1), "maxProperties": ("object", "minProperties", 1),
}
_IGNORED = {"$schema", "$id", "id", "$anchor", "$defs", "definitions", "$comment", "title", "description",
            "default", "examples", "deprecated", "readOnly", "writeOnly", "minContains", "maxContains"}


def negate(c: Context, loc: Loc, depth: int = 0) -> list[dict[str, Any]] | None:
    """Schemas whose union is the complement of ``loc`` (``[]``: nothing; ``[{}]``: everything)."""
    s = loc.schema
    if s is True:
        return []
    if s is False:
        return [{}]
    if not isinstance(s, dict) or depth > 8:
        return _refuse(c, loc, "this schema")
    out: list[dict[str, Any]] = []
    draft4 = {k for k in ("exclusiveMinimum", "exclusiveMaximum") if isinstance(s.get(k), bool)}
    known = MERGE_KEYWORDS | COMBINATORS | set(UNSUPPORTED) | {"dependentRequired", "dependentSchemas"}
    for kw, v in s.items():
        if kw not in known or kw in _IGNORED or kw in draft4 or kw in ("then", "else"):
            continue  # annotations and unknown keywords assert nothing
        got = _negate_keyword(c, loc, kw, v, s, depth)
        if got is None:
            return None
        out += got
        if len(out) > _MAX_UNION:
            return _refuse(c, loc, "a schema this large")
    return out


def _refuse(c: Context, loc: Loc, what: str) -> None:
    c.unsupported(f"'not' (or the 'if' of if/then/else) of {what} is not supported", loc.ptr)
    return None


def _negate_keyword(c: Context, loc: Loc, kw: str, v: Any, s: dict[str, Any],
                    depth: int) -> list[dict[str, Any]] | None:
    if kw == "type":
        ts = type_set(loc) or set()
        if "integer" in ts and "number" not in ts:
            return _refuse(c, loc, "type integer")
        return [{"type": [t for t in _ALL if t not in ts]}] if len(ts - {"integer"}) < 6 else []
    if kw == "nullable":
        return []  # folded into "type"
    if kw in ("enum", "const"):
        return _negate_values(c, loc, [v] if kw == "const" else v)
    if kw in _PAIRS:
        t, other, delta = _PAIRS[kw]
        if kw in ("minimum", "maximum") and s.get("exclusive" + kw[:1].upper() + kw[1:]) is True:
            other = {"minimum": "maximum", "maximum": "minimum"}[kw]  # draft-04 exclusive bound
        bound = to_decimal(v) + delta if delta else v
        if delta and bound < 0:
            return []  # e.g. minLength 0 holds for every string
        return [{"type": t, other: int(bound) if delta else bound}]
    if kw == "pattern":
        return [{"type": "string", "$notPattern": v}]
    if kw == "format":
        return [{"type": "string", "$notFormat": v}] if v in FORMATS else []
    if kw == "required":
        return [{"type": "object", "properties": {k: False}} for k in v]
    if kw == "properties":
        out = []
        for k in v:
            neg = negate(c, child(loc, "properties", k), depth + 1)
            if neg is None:
                return None
            if neg:
                out.append({"type": "object", "required": [k], "properties": {k: {"anyOf": neg}}})
        return out
    if kw == "allOf":
        out = []
        for i in range(len(v)):
            neg = negate(c, child(loc, "allOf", i), depth + 1)
            if neg is None:
                return None
            out += neg
        return out
    if kw == "anyOf":
        acc: list[dict[str, Any]] = [{}]
        for i in range(len(v)):
            neg = negate(c, child(loc, "anyOf", i), depth + 1)
            if neg is None:
                return None
            acc = [{"allOf": [a, b]} for a in acc for b in neg]
            if len(acc) > _MAX_UNION:
                return _refuse(c, loc, "an anyOf this large")
        return acc
    if kw == "not":
        return [{"allOf": [v]}]
    if kw == "$ref":
        return negate(c, c.resolve(v, loc), depth + 1)
    return _refuse(c, loc, f"'{kw}'")


def _negate_values(c: Context, loc: Loc, vals: Any) -> list[dict[str, Any]] | None:
    """Everything but the given values: other types, other strings/booleans, numbers in between."""
    if not isinstance(vals, list) or any(isinstance(x, (list, dict)) for x in vals):
        return _refuse(c, loc, "an enum/const with arrays or objects")
    scalars = [x for x in vals if x is None or isinstance(x, (str, bool))]
    numbers = sorted({to_decimal(x) for x in vals if x is not None and not isinstance(x, (str, bool))})
    if not numbers:
        return [{"$not": scalars}]
    out: list[dict[str, Any]] = [{"type": [t for t in _ALL if t != "number"], "$not": scalars}]
    lo: Decimal | None = None
    for n in numbers + [None]:  # type: ignore[list-item]
        d: dict[str, Any] = {"type": "number"}
        if lo is not None:
            d["exclusiveMinimum"] = lo
        if n is not None:
            d["exclusiveMaximum"] = n
        out.append(d)
        lo = n
    return out
