"""JSON Schema → grammar IR, built directly (no detour through a regex string).

:func:`json_schema_to_ir` accepts draft 2020-12 schemas and the draft-04/06/07 spellings
(``definitions``, array ``items`` + ``additionalItems``, boolean ``exclusiveMinimum``).  Every
keyword it accepts is enforced *exactly*: a text the grammar accepts is valid against the schema.
Keywords it cannot enforce exactly raise :class:`~pda.errors.UnsupportedSchemaError` naming the
keyword and its JSON pointer, or, with ``lenient=True``, are ignored with a warning.

How the schema becomes a grammar:

* ``$ref`` (JSON pointers with ``~0 ~1`` and percent-escapes, ``$anchor``, ``$id``-relative refs
  within the document) — a ``$ref`` standing alone becomes a rule call, so recursive schemas are
  pushdown calls; a ``$ref`` with sibling keywords is merged like ``allOf`` (the referenced
  schema's properties first), except under drafts 3-7 (``$schema``), where the siblings are
  ignored as those drafts say.
* ``allOf``/``anyOf``/``oneOf`` are expanded into a union of conjunctions; each conjunction is
  merged keyword by keyword (types intersected, bounds tightened, properties and items
  intersected position by position, patterns intersected as automata).  ``oneOf`` is a plain
  union where its branches are provably disjoint, type category by type category (types,
  ``const``/``enum`` values, a required property with disjoint values, disjoint string automata
  or number ranges, closed objects with no key in common), a category that two branches accept
  whole being left out; otherwise each branch is taken together with the complements of the
  others, when those can be built.  Branches of the union that are strings alone and need
  automata (patterns with their complements, formats) become one automaton, their union
  (:func:`.patterns.emit_string_union`): one lexical state for the value, not one per branch.
* ``not`` and the ``if`` of ``if``/``then``/``else`` through complements (:mod:`.negate`:
  types but integer alone, bounds, lengths, patterns, formats, ``required``, ``properties``,
  ``enum``/``const`` of scalars, ``allOf``/``anyOf``/``not``/``$ref``);
  ``dependentRequired``/``dependentSchemas``/``dependencies`` as "without k, or with k and what
  it brings"; ``unevaluatedProperties``/``unevaluatedItems`` see what the atoms of their own
  object (and its in-place applicators) evaluate.
* Strings: see :mod:`.strings` (every spelling ``json.dumps`` can write, and all
  other JSON escapes but ``\\u`` for printable ASCII; lengths count code points); formats:
  :mod:`.formats`; numbers: :mod:`.numbers`.
* ``uniqueItems`` when ``maxItems`` <= 1, or when the items are drawn from a small finite set
  (``enum``, ``const``, booleans, null): every sequence of distinct values, spelled out.
* Refused: other ``uniqueItems``, ``maxContains``, ``contains`` with
  ``prefixItems``/``minItems``/``maxItems``, ``$dynamicRef``/``$recursiveRef``, remote ``$ref``,
  regex back-references and lookarounds, string constraints whose combined automaton exceeds
  300 states, a ``$ref`` that applies itself in place (``{"allOf": [{"$ref": "#"}]}``), more
  than 512 conjunctions, ``minProperties`` that two or more undeclared names must make up (a
  repeated name would count twice; JSON parsers keep one member).  (A ``$ref`` with sibling keywords met again inside its own
  properties or items is a rule of its own, called recursively.)

Departures from plain JSON Schema validation (all make the grammar *stricter*, never looser):

* **Property order**: declared properties appear in the order the schema lists them (optional ones
  may be left out), then undeclared ones (where allowed); ``{"b":1,"a":2}`` is refused when the
  schema declares ``a`` before ``b``.  Required names that no ``properties`` declares may come
  anywhere among the undeclared ones (in any order while every order written out stays small:
  a few members with light values; else in the order of ``required``).  With
  ``property_order="any"`` members may come in any order (required ones exactly once, and in
  the order of ``properties`` when their orders written out would be too large); an optional or
  undeclared key may then be repeated (JSON parsers keep the last value, which the grammar
  checked like every other), except under ``minProperties``/``maxProperties``, where each
  declared key comes at most once, every member counts towards ``maxProperties`` and at most
  one undeclared name towards ``minProperties`` (a repeated name would count twice).
* ``strict=True`` forbids undeclared properties of objects that declare ``properties`` or
  ``patternProperties`` (when ``additionalProperties`` is not given) and items after
  ``prefixItems`` (when ``items`` is not given), as XGrammar does, unless an
  ``unevaluatedProperties``/``unevaluatedItems`` that sees the schema decides about them.
* ``oneOf``/``anyOf`` combinations under ``unevaluatedProperties`` count only the properties of
  the chosen branch as evaluated; an ``if`` without ``then``/``else`` evaluates nothing.
* Numbers: exponent spellings only in the forms :mod:`.numbers` lists; ``multipleOf`` is exact
  decimal arithmetic (``jsonschema`` divides binary floats, so ``0.07`` with ``multipleOf: 0.01``
  is valid here and invalid there).
* A schema no value satisfies (``false``) gives a grammar with an empty language, which
  :class:`pda.Grammar` refuses with :class:`~pda.errors.EmptyLanguageError`.
* Whitespace: ``"flexible"`` allows JSON whitespace where JSON does, at most ``max_whitespace``
  characters in a row (default 16: enough for ``json.dumps(indent=2)`` up to 7 levels, while a
  model cannot stall in endless blanks), none before or after the top-level value;
  ``"compact"`` allows none (``separators`` default ``(",", ":")``); an integer ``n`` is exactly the
  layout of ``json.dumps(value, indent=n)`` (``separators`` default ``(",", ": ")``), with
  recursive schemas unrolled to depth :data:`MAX_INDENT_DEPTH`.
"""

from __future__ import annotations

import json
from typing import Any, Literal
from urllib.parse import urldefrag

from pda.errors import FsmTooLarge, SchemaError, SchemaTooDeep, UnsupportedSchemaError
from pda.ir import NOTHING, Expr, GrammarIR, Ref, alt, lit, repeat, seq, to_ebnf

from .context import Context, PropertyOrder
from .disjoint import one_of_by_types
from .document import (
    COMBINATORS, MERGE_KEYWORDS, UNSUPPORTED, Call, Conj, Loc, SchemaIndex, draft4_ids, inplace, is_draft4,
    refs_override,
)
from .emit import emit_merged
from .layout import Layout, Whitespace
from .merge import Merged, merge
from .negate import negate
from .numbers import any_number
from .patterns import emit_string_union
from .strings import ANY_CHAR, quoted, spell
from .tidy import inline_single_use
from .values import ValueChecker

__all__ = ["json_schema_to_ir", "json_schema_to_ebnf", "json_any_ir", "MAX_INDENT_DEPTH", "Compiler"]

MAX_INDENT_DEPTH = 20
MAX_CONJUNCTIONS = 512
MAX_REF_INLINING = 8  # $ref chains inlined into one check (flat_dnf)



def json_schema_to_ir(
    schema: str | bytes | dict[str, Any] | bool | Any, *, whitespace: Whitespace = "flexible",
    max_whitespace: int | None = 16, separators: tuple[str, str] | None = None, strict: bool = False,
    lenient: bool = False, property_order: Literal["schema", "any"] = "schema",
) -> GrammarIR:
    """The grammar of the JSON texts valid against ``schema`` (see the module docstring).

    ``schema`` is JSON text, a parsed schema (dict or bool), or an object with
    ``model_json_schema()`` (a pydantic model class).  ``property_order="any"`` lets object
    members come in any order (see the module docstring).  Raises :class:`~pda.errors.SchemaError`
    for a malformed schema and :class:`~pda.errors.UnsupportedSchemaError` for a keyword that
    cannot be enforced exactly (unless ``lenient``).
    """
    root = _load(schema)
    if is_draft4(root):
        root = draft4_ids(root)
    layout = _layout(whitespace, max_whitespace, separators)
    if property_order not in ("schema", "any"):
        raise ValueError(f"property_order must be 'schema' or 'any', not {property_order!r}")
    c = Compiler(root, layout, strict=strict, lenient=lenient, property_order=property_order)
    try:
        body = c.compile([c.index.root], 0)
        rules = {"root": body}
        rules.update(c.rules)
    finally:
        # The compiler and its helpers refer to each other: drop their tables now, so the IR they
        # hold is freed at once rather than by the next full garbage collection (a pause of 0.1-0.3 s
        # in a server holding many objects, whichever request's step it falls in).
        c.__dict__.clear()
    return GrammarIR(inline_single_use(rules, "root"), "root")


def json_schema_to_ebnf(schema: Any, **options: Any) -> str:
    """The grammar of :func:`json_schema_to_ir` as GBNF text, one rule per line."""
    ir = json_schema_to_ir(schema, **options)
    return "".join(f"{name} ::= {to_ebnf(body)}\n" for name, body in ir.rules.items())


def json_any_ir(*, whitespace: Whitespace = "flexible", max_whitespace: int | None = 16,
                separators: tuple[str, str] | None = None) -> GrammarIR:
    """Any JSON value (the grammar of the schema ``true``)."""
    return json_schema_to_ir(True, whitespace=whitespace, max_whitespace=max_whitespace, separators=separators)


def _layout(whitespace: Whitespace, max_ws: int | None, separators: tuple[str, str] | None) -> Layout:
    if isinstance(whitespace, bool) or not (whitespace in ("flexible", "compact") or
                                            (isinstance(whitespace, int) and whitespace >= 0)):
        raise ValueError(f"whitespace must be 'flexible', 'compact' or an indent >= 0, not {whitespace!r}")
    if max_ws is not None and max_ws < 0:
        raise ValueError("max_whitespace must be >= 0 or None")
    if separators is not None and (len(separators) != 2 or not all(isinstance(s, str) for s in separators)):
        raise ValueError("separators must be a pair of strings (item separator, key separator)")
    return Layout(whitespace, max_ws, separators)


def _load(schema: Any) -> dict[str, Any] | bool:
    if isinstance(schema, (str, bytes, bytearray)):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise SchemaError(f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from e
    elif hasattr(schema, "model_json_schema"):
        schema = schema.model_json_schema()
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a JSON Schema is an object or a boolean, not {type(schema).__name__}")
    return schema


def _parts(conj: Conj) -> tuple[list[Call], list[Loc]]:
    """A conjunction's ``$ref`` calls and plain schema objects, each once."""
    calls: list[Call] = []
    plain: list[Loc] = []
    for a in conj:
        if isinstance(a, Call):
            if not any(x.loc.ptr == a.loc.ptr and x.loc.base == a.loc.base for x in calls):
                calls.append(a)
        elif not any(x is a or (x.ptr == a.ptr and x.schema is a.schema) for x in plain):
            plain.append(a)
    return calls, plain


def _cross(a: list[Conj], b: list[Conj]) -> list[Conj]:
    out = [x + y for x in a for y in b]
    if len(out) > MAX_CONJUNCTIONS:
        raise UnsupportedSchemaError(
            f"the combination of anyOf/oneOf/allOf expands to more than {MAX_CONJUNCTIONS} alternatives")
    return out


class Compiler(Context):
    """Compiles one schema document: expands combinators and ``$ref`` into conjunctions, merges
    each, and hands the result to :mod:`.emit`; implements what :class:`.Context` declares."""

    def __init__(self, root: dict[str, Any] | bool, layout: Layout, *, strict: bool, lenient: bool,
                 property_order: PropertyOrder = "schema") -> None:
        base = root.get("$id", "") if isinstance(root, dict) and isinstance(root.get("$id"), str) else ""
        super().__init__(SchemaIndex(Loc(root, "", urldefrag(base)[0])), layout, strict=strict, lenient=lenient,
                         property_order=property_order, ref_overrides=refs_override(root))
        self._ref_rules: dict[tuple[str, str, int], str] = {}
        self.checker = ValueChecker(self)
        self._inlining: list[str] = []
        self._conj_rules: dict[tuple[Any, ...], str] = {}
        self._doc_ids: set[int] = set()
        todo: list[Any] = [root]
        while todo:  # the schema objects of the document (compared by identity)
            x = todo.pop()
            if isinstance(x, dict):
                self._doc_ids.add(id(x))
                todo.extend(x.values())
            elif isinstance(x, list):
                todo.extend(x)

    # ------------------------------------------------------------------ value checks (for the emitter)

    def value_ok(self, v: Any, m: Merged) -> bool:
        return self.checker.check_merged(v, m)

    def value_locs(self, m: Merged, key: str) -> list[Loc]:
        return self.checker.value_locs(m, key)

    def item_locs(self, m: Merged, pos: int | None) -> list[Loc]:
        return self.checker.item_locs(m, pos)

    # ------------------------------------------------------------------ expansion into conjunctions

    def expand(self, loc: Loc) -> list[Conj]:
        """``loc`` as a union of conjunctions of schema objects (combinators and refs expanded)."""
        s = loc.schema
        if s is True:
            return [[]]
        if s is False:
            return []
        if not isinstance(s, dict):
            raise SchemaError(f"a schema must be an object or a boolean, not {s!r}", pointer=loc.ptr)
        for kw in UNSUPPORTED:
            if kw in s and s[kw] not in ({}, []):
                self.unsupported(f"'{kw}' is not supported", loc.at(kw))
        own = any(k in MERGE_KEYWORDS for k in s)
        dnf: list[Conj] = [[loc]] if own else [[]]
        if "$ref" in s:
            t = self.resolve(s["$ref"], loc)
            target = Loc(t.schema, t.ptr, t.base, loc.parents + (loc.ptr,))
            alone = not own and not any(k in s for k in COMBINATORS - {"$ref"})
            if alone or self.ref_overrides:
                return [[Call(target)]]  # up to draft 7, keywords beside $ref are ignored
            dnf = _cross([[Call(target)]], dnf)  # the referenced schema's properties come first
        for kw in ("allOf", "anyOf", "oneOf"):
            if kw not in s:
                continue
            subs = s[kw]
            if not isinstance(subs, list) or not subs:
                raise SchemaError(f"'{kw}' must be a non-empty array of schemas", pointer=loc.at(kw))
            branches = [self.expand(inplace(loc, kw, i)) for i in range(len(subs))]
            if kw == "allOf":
                for b in branches:
                    dnf = _cross(dnf, b)
                continue
            if kw == "oneOf" and len(branches) > 1:
                split = self._one_of_by_types(loc, branches, dnf)
                if split is not None:
                    dnf = split
                    continue
                exact = self._one_of_by_negation(loc)
                if exact is not None:
                    dnf = _cross(dnf, exact)
                    continue
                self.unsupported("oneOf branches that may overlap are not supported (only provably disjoint "
                                 "ones, or ones whose complements pda can build)", loc.at(kw))
            dnf = _cross(dnf, [c for b in branches for c in b])
        if "not" in s:
            neg = self._negate(inplace(loc, "not"))
            if neg is not None:
                dnf = _cross(dnf, neg)
        if "then" in s or "else" in s:
            dnf = _cross(dnf, self._if_then_else(loc))
        if any(k in s for k in ("dependentRequired", "dependentSchemas", "dependencies")):
            dnf = _cross(dnf, self._dependencies(loc))
        return dnf

    def _negate(self, loc: Loc) -> list[Conj] | None:
        """The complement of ``loc`` as conjunctions of synthetic schemas (None if refused)."""
        neg = negate(self, loc)
        if neg is None:
            return None
        # No parents: what a negation evaluates is no annotation for unevaluated* (the spec drops
        # the annotations of `not` and of a failed `if`).
        return [conj for d in neg for conj in self.expand(Loc(d, loc.ptr, loc.base, ()))]

    def _dependencies(self, loc: Loc) -> list[Conj]:
        """``dependentRequired``/``dependentSchemas``/``dependencies``: for each key k, objects
        without k, or with k and what it brings (a union, so exact)."""
        s = loc.schema
        dnf: list[Conj] = [[]]
        for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
            deps = s.get(kw)
            if deps is None:
                continue
            if not isinstance(deps, dict):
                raise SchemaError(f"'{kw}' must be an object", pointer=loc.at(kw))
            for k, dep in deps.items():
                absent = [Loc({"properties": {k: False}}, loc.at(kw, k), loc.base, loc.parents)]
                if isinstance(dep, list):
                    present = [[Loc({"required": dep}, loc.at(kw, k), loc.base, loc.parents)]]
                else:
                    req = Loc({"required": [k]}, loc.at(kw, k), loc.base, loc.parents)
                    present = [[req] + c for c in self.expand(inplace(loc, kw, k))]
                dnf = _cross(dnf, [absent] + present)
        return dnf

    def _if_then_else(self, loc: Loc) -> list[Conj]:
        s = loc.schema
        if "if" not in s:
            return [[]]
        cond = inplace(loc, "if")
        neg = self._negate(cond)
        if neg is None:
            return [[]]
        then = self.expand(inplace(loc, "then")) if "then" in s else [[]]
        other = self.expand(inplace(loc, "else")) if "else" in s else [[]]
        return _cross(self.expand(cond), then) + _cross(neg, other)

    def _one_of_by_negation(self, loc: Loc) -> list[Conj] | None:
        """``oneOf`` as "this branch and not the others", for each branch (None when a complement
        cannot be built or the union grows too large)."""
        n = len(loc.schema["oneOf"])
        saved, self.probing = self.probing, True
        try:
            negs = [self._negate(inplace(loc, "oneOf", i)) for i in range(n)]
            out: list[Conj] = []
            for i in range(n):
                part = self.expand(inplace(loc, "oneOf", i))
                for j in range(n):
                    if j != i:
                        part = _cross(part, negs[j] or [])
                out += part
                if len(out) > MAX_CONJUNCTIONS:
                    return None
            return out
        except UnsupportedSchemaError:
            return None
        finally:
            self.probing = saved

    def _one_of_by_types(self, loc: Loc, branches: list[list[Conj]], context: list[Conj]) -> list[Conj] | None:
        """``oneOf`` as a union where the branches are disjoint type by type (see
        :func:`.disjoint.one_of_by_types`); None when that is not proven."""
        try:
            out = one_of_by_types(self, loc, branches, context)
        except (SchemaTooDeep, FsmTooLarge):
            return None
        if out is not None and len(out) > MAX_CONJUNCTIONS:
            raise UnsupportedSchemaError(
                f"the combination of anyOf/oneOf/allOf expands to more than {MAX_CONJUNCTIONS} alternatives")
        return out

    def flat_dnf(self, locs: list[Loc], depth: int = 0) -> list[list[Loc]]:
        """Conjunctions of plain schema objects, every ``$ref`` inlined (for checks, not emission)."""
        dnf: list[Conj] = [[]]
        for loc in locs:
            dnf = _cross(dnf, self.expand(loc))
        out: list[list[Loc]] = []
        for conj in dnf:
            calls = [a for a in conj if isinstance(a, Call)]
            plain = [a for a in conj if isinstance(a, Loc)]
            if not calls:
                out.append(plain)
                continue
            if depth > MAX_REF_INLINING:
                raise SchemaTooDeep("a recursive $ref inlined into one check", MAX_REF_INLINING)
            for sub in self.flat_dnf([a.loc for a in calls], depth + 1):
                out.append(plain + sub)
        return out

    # ------------------------------------------------------------------ compilation

    def compile(self, locs: list[Loc], depth: int) -> Expr:
        """The texts valid against every schema in ``locs`` at nesting ``depth``."""
        if self.layout.indent is None:
            depth = 0
        elif depth > MAX_INDENT_DEPTH:
            return NOTHING
        dnf: list[Conj] = [[]]
        for loc in locs:
            dnf = _cross(dnf, self.expand(loc))
        # A new value: the references being inlined around it are no in-place recursion here.
        saved, self._inlining = self._inlining, []
        try:
            return alt(*self._compile_union(dnf, depth))
        finally:
            self._inlining = saved

    def _compile_union(self, dnf: list[Conj], depth: int) -> list[Expr]:
        """The texts of each conjunction; those that are strings alone (no ``$ref`` left, ``type``
        string, no ``enum``) and need automata, when two or more, as one string
        (:func:`.patterns.emit_string_union`)."""
        merged: dict[int, Merged] = {}
        if len(dnf) > 1:
            for i, conj in enumerate(dnf):
                calls, plain = _parts(conj)
                if plain and not calls:
                    merged[i] = merge(plain, strict=self.strict)
        strings = [i for i, m in merged.items() if m.types == {"string"} and m.enum is None]
        union = emit_string_union(self, [merged[i] for i in strings]) if len(strings) > 1 else None
        if union is None:
            return [self._compile_conj(conj, depth, merged.get(i)) for i, conj in enumerate(dnf)]
        expr, covered = union[0], {strings[k] for k in union[1]}
        return [expr] + [self._compile_conj(conj, depth, merged.get(i)) for i, conj in enumerate(dnf) if i not in covered]

    def _compile_conj(self, conj: Conj, depth: int, merged: Merged | None = None) -> Expr:
        """The texts of one conjunction (``merged``: its plain objects merged, when already done)."""
        if merged is not None:
            return emit_merged(self, merged, depth)
        calls, plain = _parts(conj)
        if not calls and not plain:
            return self.any_value(depth)
        if len(calls) == 1 and not plain:
            return Ref(self.rule_for(calls[0].loc, depth))
        if calls:
            keys = [c.loc.ptr for c in calls]
            for k in keys:
                if k in self._inlining:
                    self.unsupported("a $ref that applies itself in place (through allOf/anyOf/$ref, not inside "
                                     "a property or an item) is not supported", k)
                    return self.compile(plain, depth) if plain else self.any_value(depth)
            # One rule per conjunction: a reference met again inside a property or an item of
            # itself (a recursive $ref with sibling keywords) becomes a pushdown call of that rule.
            memo = (frozenset((c.loc.ptr, c.loc.base) for c in calls),
                    frozenset(self._loc_key(a) for a in plain), depth)
            name = self._conj_rules.get(memo)
            if name is not None:
                return Ref(name)
            name = self._conj_rules[memo] = self.fresh("all")
            self.rules[name] = NOTHING
            self._inlining += keys
            try:
                sub: list[Conj] = [list(plain)]
                for c in calls:
                    sub = _cross(sub, self.expand(c.loc))
                self.rules[name] = alt(*(self._compile_conj(x, depth) for x in sub))
            finally:
                del self._inlining[-len(keys):]
            return Ref(name)
        return emit_merged(self, merge(plain, strict=self.strict), depth)

    def _loc_key(self, loc: Loc) -> tuple[Any, ...]:
        """A hashable identity of a schema object (synthetic ones, made by negation, by content)."""
        s = loc.schema
        ident: Any = s if isinstance(s, bool) else \
            id(s) if id(s) in self._doc_ids else json.dumps(s, sort_keys=True, default=str)
        return (loc.ptr, loc.base, loc.parents, ident)

    def rule_for(self, target: Loc, depth: int) -> str:
        """The rule compiling ``target`` (created on first use; recursion makes it a pushdown call)."""
        key = (target.ptr, target.base, depth)
        name = self._ref_rules.get(key)
        if name is not None:
            return name
        last = target.ptr.rsplit("/", 1)[-1] or "root"
        clean = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in last)[:40] or "ref"
        name = self.fresh(f"def_{clean}")
        self._ref_rules[key] = name
        self.rules[name] = NOTHING
        saved, self._inlining = self._inlining, []
        try:
            self.rules[name] = self.compile([target], depth)
        finally:
            self._inlining = saved
        return name

    def any_value(self, depth: int) -> Expr:
        """Any JSON value at ``depth`` (a recursive rule)."""
        name = "json_value" if self.layout.indent is None else f"json_value_{depth}"
        if depth > MAX_INDENT_DEPTH:
            return NOTHING
        if name in self.rules:
            return Ref(name)
        self.rules[name] = NOTHING
        inner = Ref(name) if self.layout.indent is None else self.any_value(depth + 1)
        key = quoted(repeat(spell(ANY_CHAR), 0, None))
        colon = self.layout.colon()
        parts = [lit("null"), lit("true"), lit("false"), any_number(False), key]
        for brackets, item in (("[]", inner), ("{}", seq(key, colon, inner))):
            open_, sep, close, empty = self.layout.pieces(depth, brackets)
            parts += [empty, seq(open_, item, repeat(seq(sep, item), 0, None), close)]
        self.rules[name] = alt(*parts)
        return Ref(name)
