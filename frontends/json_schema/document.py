"""The schema document: locations, keyword tables, the ``$id``/``$anchor`` index and ``$ref``.

The leaf of :mod:`pda.frontends.json_schema`; nothing here compiles anything.

* :class:`Loc` — a schema (dict or bool) with its JSON pointer, base URI and in-place parents;
  :func:`child` and :func:`inplace` step into sub-schemas;
* the keyword tables: which keywords :mod:`.merge` folds (:data:`MERGE_KEYWORDS`), which the
  compiler expands (:data:`COMBINATORS`), which hold sub-schemas (``SUBSCHEMA_*``);
* :class:`Call` — a ``$ref`` standing alone (a rule call); a conjunction (:data:`Conj`) is a list
  of :class:`Loc` and :class:`Call`;
* :class:`SchemaIndex` — the ``$id``/``$anchor`` index of one document and :meth:`~SchemaIndex.resolve`;
* draft differences: :func:`draft4_ids` (``id`` spelled ``$id``) and :func:`refs_override`
  (drafts 3 to 7 ignore the keywords beside ``$ref``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from pda.errors import SchemaError, UnsupportedSchemaError

__all__ = [
    "Loc", "child", "inplace", "join_uri", "Call", "Atom", "Conj", "SchemaIndex", "draft4_ids", "is_draft4", "refs_override",
    "MERGE_KEYWORDS", "COMBINATORS", "UNSUPPORTED", "SUBSCHEMA_MAPS", "SUBSCHEMA_ONE", "SUBSCHEMA_LISTS",
]

MERGE_KEYWORDS = frozenset({
    "type", "enum", "const", "nullable", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minLength", "maxLength", "pattern", "format", "items", "prefixItems", "additionalItems",
    "minItems", "maxItems", "contains", "minContains", "maxContains", "uniqueItems", "unevaluatedItems",
    "properties", "patternProperties", "additionalProperties", "required", "minProperties", "maxProperties",
    "propertyNames", "unevaluatedProperties",
    "$not", "$notPattern", "$notFormat",  # synthetic, made by .negate
})
COMBINATORS = frozenset({"$ref", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentRequired",
                         "dependentSchemas", "dependencies"})
UNSUPPORTED = ("$dynamicRef", "$recursiveRef")


SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
SUBSCHEMA_ONE = ("additionalProperties", "additionalItems", "items", "contains", "propertyNames", "not", "if",
                  "then", "else", "unevaluatedItems", "unevaluatedProperties")
SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")


@dataclass(frozen=True)
class Loc:
    """A schema (dict or bool) and where it is: its JSON pointer and the base URI for ``$ref``."""

    schema: Any
    ptr: str
    base: str = ""
    # Pointers of the schema objects this one is applied in place of (through allOf/anyOf/oneOf/
    # $ref/if/then/else/not): what ``unevaluated*`` of those objects can see.
    parents: tuple[str, ...] = ()

    def at(self, *path: str | int) -> str:
        return self.ptr + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def inplace(loc: Loc, *path: str | int) -> Loc:
    """Like :func:`child`, for an in-place applicator (allOf/anyOf/...): records ``loc`` as a parent."""
    c = child(loc, *path)
    return Loc(c.schema, c.ptr, c.base, loc.parents + (loc.ptr,))


def child(loc: Loc, *path: str | int) -> Loc:
    """The sub-schema at ``path`` below ``loc`` (its base URI follows ``$id``)."""
    s = loc.schema
    for p in path:
        s = s[p]
    base = loc.base
    if isinstance(s, dict) and isinstance(s.get("$id"), str):
        base = join_uri(base, s["$id"])
    return Loc(s, loc.at(*path), base)


def join_uri(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` (also for ``urn:`` bases, which urljoin does not know)."""
    if not base or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", ref):
        return ref
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    return urljoin(base, ref)


class Call:
    """A ``$ref`` standing alone: compiled as a call of the rule for its target."""

    __slots__ = ("loc",)

    def __init__(self, loc: Loc) -> None:
        self.loc = loc


Atom = Loc | Call
Conj = list[Atom]


def refs_override(root: Any) -> bool:
    """Whether the document is drafts 3 to 7 (``$schema``), where a schema with ``$ref`` is only
    the reference (its other keywords are ignored)."""
    uri = root.get("$schema") if isinstance(root, dict) else None
    return isinstance(uri, str) and re.search(r"draft-0[3-7]/", uri) is not None


def is_draft4(root: Any) -> bool:
    """Whether the document declares draft 3 or 4 (``id`` instead of ``$id``)."""
    uri = root.get("$schema") if isinstance(root, dict) else None
    return isinstance(uri, str) and re.search(r"draft-0[34]/", uri) is not None


def draft4_ids(s: Any) -> Any:
    """A draft-03/04 document with its ``id`` keywords spelled ``$id`` (and its ``$id``, which
    those drafts do not know, dropped), so one code path resolves references for every draft."""
    if not isinstance(s, dict):
        return s
    out = {k: v for k, v in s.items() if k != "$id"}
    if isinstance(s.get("id"), str):
        out["$id"] = s["id"]
    for kw in SUBSCHEMA_MAPS:
        if isinstance(s.get(kw), dict):
            out[kw] = {k: draft4_ids(v) for k, v in s[kw].items()}
    for kw in SUBSCHEMA_ONE:
        if isinstance(s.get(kw), dict):
            out[kw] = draft4_ids(s[kw])
    for kw in SUBSCHEMA_LISTS:
        if isinstance(s.get(kw), list):
            out[kw] = [draft4_ids(v) for v in s[kw]]
    return out


class SchemaIndex:
    """The ``$id`` and ``$anchor`` index of one schema document, and ``$ref`` resolution."""

    def __init__(self, root: Loc) -> None:
        self.root = root
        self.ids: dict[str, Loc] = {"": root}
        self.anchors: dict[tuple[str, str], Loc] = {}
        if root.base:
            self.ids[root.base] = root
        self.add(root)

    def add(self, loc: Loc) -> None:
        s = loc.schema
        if not isinstance(s, dict):
            return
        for key in ("$id",):
            v = s.get(key)
            if isinstance(v, str):
                uri, frag = urldefrag(join_uri(loc.base, v))
                if v.startswith("#") and frag:
                    self.anchors[(uri, frag)] = loc
                elif uri:
                    self.ids.setdefault(uri, loc)
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(s.get(key), str):
                self.anchors.setdefault((urldefrag(loc.base)[0], s[key]), loc)
        for kw in SUBSCHEMA_MAPS:
            if isinstance(s.get(kw), dict):
                for k, v in s[kw].items():
                    if isinstance(v, dict):
                        self.add(child(loc, kw, k))
        for kw in SUBSCHEMA_ONE:
            if isinstance(s.get(kw), dict):
                self.add(child(loc, kw))
        for kw in SUBSCHEMA_LISTS:
            if isinstance(s.get(kw), list):
                for i, v in enumerate(s[kw]):
                    if isinstance(v, dict):
                        self.add(child(loc, kw, i))

    def resolve(self, ref: Any, loc: Loc) -> Loc:
        """The schema a ``$ref`` written at ``loc`` points to."""
        where = loc.at("$ref")
        if not isinstance(ref, str):
            raise SchemaError(f"'$ref' must be a string, not {ref!r}", pointer=where)
        full = join_uri(loc.base, ref)
        uri, frag = urldefrag(full)
        target = self.ids.get(uri)
        if target is None:
            if ":" in uri or uri.endswith(".json") or "/" in uri:
                raise UnsupportedSchemaError(f"remote $ref {ref!r} is not supported (only refs within the schema)",
                                             pointer=where)
            raise SchemaError(f"$ref {ref!r} points to nothing in this schema", pointer=where)
        frag = unquote(frag)
        if not frag:
            return target
        if not frag.startswith("/"):
            found = self.anchors.get((uri, frag))
            if found is None:
                raise SchemaError(f"$ref {ref!r}: no $anchor {frag!r} in this schema", pointer=where)
            return found
        cur = target
        for raw in frag.split("/")[1:]:
            part = raw.replace("~1", "/").replace("~0", "~")
            s = cur.schema
            if isinstance(s, dict) and part in s:
                cur = child(cur, part)
            elif isinstance(s, list) and part.isdigit() and int(part) < len(s):
                cur = child(cur, int(part))
            else:
                raise SchemaError(f"$ref {ref!r} points to nothing in this schema (no {part!r} at "
                                  f"'{cur.ptr or '#'}')", pointer=where)
        if not isinstance(cur.schema, (dict, bool)):
            raise SchemaError(f"$ref {ref!r} points to a {type(cur.schema).__name__}, not a schema", pointer=where)
        return cur
