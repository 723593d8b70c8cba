"""Merging a conjunction of JSON Schema objects into one set of per-type constraints.

After ``allOf``/``anyOf``/``oneOf``/``$ref`` have been expanded (see :mod:`.compiler`), a
schema is a union of *conjunctions*; each conjunction is a list of schema objects whose own
keywords must all hold.  :func:`merge` reads those keywords, checks that their values are well
formed (a :class:`~pda.errors.SchemaError` with the keyword's JSON pointer otherwise), and folds
them into one :class:`Merged`: the allowed types, the tightest bounds, every pattern, and per
object/array the atoms whose sub-schemas the emitter intersects position by position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pda.errors import SchemaError

from .document import Loc, child
from .numbers import Bound

__all__ = ["Merged", "ObjAtom", "ArrAtom", "merge", "TYPES", "type_set", "json_equal", "json_key", "to_decimal"]

TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")


@dataclass
class ObjAtom:
    props: dict[str, Loc]
    patterns: list[tuple[str, Loc]]
    additional: Loc | None  # None: not given (any value)
    ptr: str
    scope: tuple[str, ...] = ()  # this object and the ones it is applied in place of
    closed_by_strict: bool = False  # ``additional`` is the ``false`` of strict=True


@dataclass
class ArrAtom:
    prefix: list[Loc]
    rest: Loc | None  # None: not given (any value)
    ptr: str
    scope: tuple[str, ...] = ()
    closed_by_strict: bool = False  # ``rest`` is the ``false`` of strict=True


@dataclass
class Merged:
    types: set[str]
    enum: list[Any] | None = None
    enum_ptr: str = ""
    lo: Bound | None = None
    hi: Bound | None = None
    multiples: list[Decimal] = field(default_factory=list)
    multiple_ptr: str = ""
    min_len: int = 0
    max_len: int | None = None
    patterns: list[tuple[str, str]] = field(default_factory=list)  # (pattern, pointer)
    formats: list[tuple[str, str]] = field(default_factory=list)
    arr: list[ArrAtom] = field(default_factory=list)
    min_items: int = 0
    max_items: int | None = None
    contains: list[tuple[Loc, int, int | None]] = field(default_factory=list)
    unique: str | None = None  # pointer of a uniqueItems: true
    # (schema, pointer of its object, that object's scope)
    uneval_items: list[tuple[Loc, str, tuple[str, ...]]] = field(default_factory=list)
    obj: list[ObjAtom] = field(default_factory=list)
    required: list[str] = field(default_factory=list)
    min_props: int = 0
    min_props_ptr: str = ""  # pointer of the minProperties that set min_props
    max_props: int | None = None
    names: list[Loc] = field(default_factory=list)
    uneval_props: list[tuple[Loc, str, tuple[str, ...]]] = field(default_factory=list)
    excluded: list[Any] = field(default_factory=list)  # values a `not: {enum}` forbids (strings/null/bools)
    not_patterns: list[tuple[str, str]] = field(default_factory=list)  # patterns a string must not match
    not_formats: list[tuple[str, str]] = field(default_factory=list)


def json_equal(a: Any, b: Any) -> bool:
    """JSON value equality as JSON Schema defines it (1 == 1.0, True != 1, key order ignored)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return to_decimal(a) == to_decimal(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def json_key(v: Any) -> Any:
    """A hashable key with ``json_key(a) == json_key(b)`` exactly when :func:`json_equal` holds."""
    if isinstance(v, bool) or v is None:
        return ("c", v)
    if isinstance(v, (int, float, Decimal)):
        return ("d", to_decimal(v))  # equal Decimals hash alike (1 and 1.0, 0 and -0)
    if isinstance(v, str):
        return ("s", v)
    if isinstance(v, list):
        return ("l", tuple(json_key(x) for x in v))
    if isinstance(v, dict):
        return ("o", frozenset((k, json_key(x)) for k, x in v.items()))
    return ("?", repr(v))


def to_decimal(v: Any) -> Decimal:
    if isinstance(v, Decimal):
        return v
    if isinstance(v, float):
        return Decimal(repr(v))
    return Decimal(v)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)


def _nonneg_int(v: Any, ptr: str, kw: str) -> int:
    if _is_number(v) and not isinstance(v, bool) and to_decimal(v) == to_decimal(v).to_integral_value() and v >= 0:
        return int(v)
    raise SchemaError(f"'{kw}' must be a non-negative integer, not {v!r}", pointer=ptr)


def _number(v: Any, ptr: str, kw: str) -> Decimal:
    if not _is_number(v):
        raise SchemaError(f"'{kw}' must be a number, not {v!r}", pointer=ptr)
    d = to_decimal(v)
    if not d.is_finite():
        raise SchemaError(f"'{kw}' must be a finite number", pointer=ptr)
    return d


def _tighter_lo(a: Bound | None, b: Bound) -> Bound:
    if a is None or b[0] > a[0] or (b[0] == a[0] and b[1]):
        return b
    return a


def _tighter_hi(a: Bound | None, b: Bound) -> Bound:
    if a is None or b[0] < a[0] or (b[0] == a[0] and b[1]):
        return b
    return a


def type_set(loc: Loc) -> set[str] | None:
    s = loc.schema
    if "type" not in s:
        return None
    t = s["type"]
    names = [t] if isinstance(t, str) else t
    if not isinstance(names, list) or not names:
        raise SchemaError(f"'type' must be a type name or a non-empty list of them, not {t!r}", pointer=loc.at("type"))
    out: set[str] = set()
    for i, n in enumerate(names):
        if n not in TYPES:
            where = loc.at("type") if isinstance(t, str) else loc.at("type", i)
            hint = " (JSON Schema has no 'any' type: leave 'type' out)" if n == "any" else ""
            raise SchemaError(f"{n!r} is not a JSON Schema type{hint}", pointer=where)
        out.add(n)
    if s.get("nullable") is True:
        out.add("null")
    if "number" in out:
        out.add("integer")
    return out


def merge(atoms: list[Loc], *, strict: bool) -> Merged:
    """Fold the keywords of every schema object in ``atoms`` (a conjunction) into one :class:`Merged`."""
    types = set(TYPES)
    m = Merged(types)
    for loc in atoms:
        s = loc.schema
        ts = type_set(loc)
        if ts is not None:
            types &= ts
        for kw in ("enum", "const"):
            if kw not in s:
                continue
            vals = s[kw]
            if kw == "const":
                vals = [vals]
            elif not isinstance(vals, list):
                raise SchemaError(f"'enum' must be an array, not {vals!r}", pointer=loc.at(kw))
            if m.enum is None:
                m.enum = list(vals)
                m.enum_ptr = loc.at(kw)
            else:
                keys = {json_key(w) for w in vals}
                m.enum = [v for v in m.enum if json_key(v) in keys]
        if "$not" in s:  # synthetic keywords made by .negate
            m.excluded += s["$not"]
        if "$notPattern" in s:
            m.not_patterns.append((s["$notPattern"], loc.ptr))
        if "$notFormat" in s:
            m.not_formats.append((s["$notFormat"], loc.ptr))
        _merge_numbers(m, loc)
        _merge_strings(m, loc)
        _merge_arrays(m, loc, strict)
        _merge_objects(m, loc, strict)
    if None in m.excluded:
        types.discard("null")
    m.types = types
    # strict=True closes only what nothing else speaks of: an unevaluatedItems/-Properties that
    # sees the schema decides about its later items and undeclared members instead.
    for a in m.arr:
        if a.closed_by_strict and any(ptr in a.scope for _, ptr, _ in m.uneval_items):
            a.rest, a.closed_by_strict = None, False
    for o in m.obj:
        if o.closed_by_strict and any(ptr in o.scope for _, ptr, _ in m.uneval_props):
            o.additional, o.closed_by_strict = None, False
    return m


def _merge_numbers(m: Merged, loc: Loc) -> None:
    s = loc.schema
    draft4_lo = s.get("exclusiveMinimum") is True
    draft4_hi = s.get("exclusiveMaximum") is True
    if "minimum" in s:
        m.lo = _tighter_lo(m.lo, (_number(s["minimum"], loc.at("minimum"), "minimum"), draft4_lo))
    if "maximum" in s:
        m.hi = _tighter_hi(m.hi, (_number(s["maximum"], loc.at("maximum"), "maximum"), draft4_hi))
    for kw, lo in (("exclusiveMinimum", True), ("exclusiveMaximum", False)):
        v = s.get(kw)
        if v is None or isinstance(v, bool):
            continue
        b = (_number(v, loc.at(kw), kw), True)
        if lo:
            m.lo = _tighter_lo(m.lo, b)
        else:
            m.hi = _tighter_hi(m.hi, b)
    if "minimum" in s and "maximum" in s and _number(s["minimum"], "", "") > _number(s["maximum"], "", ""):
        raise SchemaError(f"minimum {s['minimum']} is greater than maximum {s['maximum']}", pointer=loc.at("minimum"))
    if "multipleOf" in s:
        d = _number(s["multipleOf"], loc.at("multipleOf"), "multipleOf")
        if d <= 0:
            raise SchemaError("'multipleOf' must be greater than 0", pointer=loc.at("multipleOf"))
        if d not in m.multiples:
            m.multiples.append(d)
            m.multiple_ptr = loc.at("multipleOf")


def _tighten(loc: Loc, lo_kw: str, hi_kw: str, lo: int, hi: int | None) -> tuple[int, int | None]:
    """``(lo, hi)`` narrowed by the schema's ``lo_kw``/``hi_kw`` bounds (non-negative integers)."""
    s = loc.schema
    if lo_kw in s:
        lo = max(lo, _nonneg_int(s[lo_kw], loc.at(lo_kw), lo_kw))
    if hi_kw in s:
        v = _nonneg_int(s[hi_kw], loc.at(hi_kw), hi_kw)
        hi = v if hi is None else min(hi, v)
    return lo, hi


def _merge_strings(m: Merged, loc: Loc) -> None:
    s = loc.schema
    m.min_len, m.max_len = _tighten(loc, "minLength", "maxLength", m.min_len, m.max_len)
    if "pattern" in s:
        if not isinstance(s["pattern"], str):
            raise SchemaError(f"'pattern' must be a string, not {s['pattern']!r}", pointer=loc.at("pattern"))
        if s["pattern"] not in [p for p, _ in m.patterns]:
            m.patterns.append((s["pattern"], loc.at("pattern")))
    if "format" in s and isinstance(s["format"], str):
        if s["format"] not in [f for f, _ in m.formats]:
            m.formats.append((s["format"], loc.at("format")))


def _schema_at(loc: Loc, kw: str) -> Loc:
    v = loc.schema[kw]
    if not isinstance(v, (dict, bool)):
        raise SchemaError(f"'{kw}' must be a schema (an object or a boolean), not {v!r}", pointer=loc.at(kw))
    return child(loc, kw)


def _false(loc: Loc, ptr_kw: str) -> Loc:
    return Loc(False, loc.at(ptr_kw), loc.base)


def _merge_arrays(m: Merged, loc: Loc, strict: bool) -> None:
    s = loc.schema
    prefix: list[Loc] = []
    rest: Loc | None = None
    items = s.get("items")
    if "prefixItems" in s:
        if not isinstance(s["prefixItems"], list):
            raise SchemaError("'prefixItems' must be an array of schemas", pointer=loc.at("prefixItems"))
        prefix = [child(loc, "prefixItems", i) for i in range(len(s["prefixItems"]))]
        if items is not None:
            rest = _schema_at(loc, "items")
    elif isinstance(items, list):
        prefix = [child(loc, "items", i) for i in range(len(items))]
        if "additionalItems" in s:
            rest = _schema_at(loc, "additionalItems")
    elif items is not None:
        rest = _schema_at(loc, "items")
    closed = strict and bool(prefix) and rest is None
    if closed:
        rest = _false(loc, "items")
    if prefix or rest is not None:
        m.arr.append(ArrAtom(prefix, rest, loc.ptr, loc.parents + (loc.ptr,), closed))
    m.min_items, m.max_items = _tighten(loc, "minItems", "maxItems", m.min_items, m.max_items)
    if "contains" in s:
        lo = _nonneg_int(s.get("minContains", 1), loc.at("minContains"), "minContains")
        hi = s.get("maxContains")
        hi = None if hi is None else _nonneg_int(hi, loc.at("maxContains"), "maxContains")
        m.contains.append((_schema_at(loc, "contains"), lo, hi))
    if s.get("uniqueItems") is True:
        m.unique = loc.at("uniqueItems")
    if "unevaluatedItems" in s:
        m.uneval_items.append((_schema_at(loc, "unevaluatedItems"), loc.ptr, loc.parents + (loc.ptr,)))


def _merge_objects(m: Merged, loc: Loc, strict: bool) -> None:
    s = loc.schema
    props: dict[str, Loc] = {}
    if "properties" in s:
        if not isinstance(s["properties"], dict):
            raise SchemaError("'properties' must be an object", pointer=loc.at("properties"))
        for k, v in s["properties"].items():
            if not isinstance(v, (dict, bool)):
                raise SchemaError(f"property schema must be an object or a boolean, not {v!r}",
                                  pointer=loc.at("properties", k))
            props[k] = child(loc, "properties", k)
    patterns: list[tuple[str, Loc]] = []
    if "patternProperties" in s:
        if not isinstance(s["patternProperties"], dict):
            raise SchemaError("'patternProperties' must be an object", pointer=loc.at("patternProperties"))
        patterns = [(k, child(loc, "patternProperties", k)) for k in s["patternProperties"]]
    additional = _schema_at(loc, "additionalProperties") if "additionalProperties" in s else None
    closed = strict and additional is None and bool(props or patterns)
    if closed:
        additional = _false(loc, "additionalProperties")
    if props or patterns or additional is not None:
        m.obj.append(ObjAtom(props, patterns, additional, loc.ptr, loc.parents + (loc.ptr,), closed))
    if "required" in s:
        req = s["required"]
        if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
            raise SchemaError(f"'required' must be an array of strings, not {req!r}", pointer=loc.at("required"))
        for r in req:
            if r not in m.required:
                m.required.append(r)
    lo, m.max_props = _tighten(loc, "minProperties", "maxProperties", m.min_props, m.max_props)
    if lo > m.min_props:
        m.min_props, m.min_props_ptr = lo, loc.at("minProperties")
    if "propertyNames" in s:
        m.names.append(_schema_at(loc, "propertyNames"))
    if "unevaluatedProperties" in s:
        m.uneval_props.append((_schema_at(loc, "unevaluatedProperties"), loc.ptr, loc.parents + (loc.ptr,)))
