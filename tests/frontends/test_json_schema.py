"""JSON Schema → IR: keyword tables checked against the ``jsonschema`` validator, options, errors.

Each table row is ``(schema, valid instances, invalid instances)``.  Every instance is first
checked with ``jsonschema`` (Draft 2020-12, with format assertion) so a wrong row fails loudly,
then serialised with ``json.dumps(x, ensure_ascii=False)`` and fed to the compiled grammar.
"""

from __future__ import annotations

import json
import warnings
from functools import lru_cache
from typing import Any

import pytest

from pda import Grammar
from pda.errors import SchemaError, UnsupportedSchemaError
from pda.frontends.json_schema import json_any_ir, json_schema_to_ebnf, json_schema_to_ir

jsonschema = pytest.importorskip("jsonschema")

OBJ = {"type": "object"}
CASES: list[tuple[str, Any, list[Any], list[Any]]] = [
    # ------------------------------------------------------------------ types, enum, const
    ("true", True, [None, 1, "a", [1, {"a": []}], {"x": {"y": [True]}}], []),
    ("false", {"not": {}}, [], [None, 0, ""]),
    ("type-string", {"type": "string"}, ["", "a b", 'q"\\/', "é😀\n\t\u0001"], [1, None, True, [], {}]),
    ("type-integer", {"type": "integer"}, [0, -5, 12345678901234567890, 1.0, -0.0], [1.5, "1", True, None]),
    ("type-number", {"type": "number"}, [0, -1.5, 1e-05, 2.5e+20, 10 ** 30], ["1", None, [1]]),
    ("type-list", {"type": ["string", "null"]}, ["x", None], [0, False, {}]),
    ("type-boolean", {"type": "boolean"}, [True, False], [0, "true", None]),
    ("enum", {"enum": ["a", 1, None, [1, "x"], {"k": True}]}, ["a", 1, 1.0, None, [1, "x"], {"k": True}],
     ["b", 2, True, [1], {"k": False}, {}]),
    ("enum-type", {"type": "string", "enum": ["a", 1, "bb"], "maxLength": 1}, ["a"], [1, "bb", "c"]),
    ("const-object", {"const": {"a": 1, "b": [None]}}, [{"a": 1, "b": [None]}, {"b": [None], "a": 1.0}],
     [{"a": 1}, {"a": 1, "b": [None], "c": 0}]),
    ("const-string-escapes", {"const": 'a"\\\n😀'}, ['a"\\\n😀'], ["a", 'a"\\\n😁']),
    ("const-false", {"const": False}, [False], [0, None, True]),
    # ------------------------------------------------------------------ numbers
    ("minimum", {"minimum": 1.5}, [1.5, 1.51, 2, 100, 1e20, "any string"], [1.49, 1, -2, -0.0, 1e-05]),
    ("exclusiveMinimum", {"type": "number", "exclusiveMinimum": 0}, [1e-05, 0.1, 3], [0, -0.0, -1e-05]),
    ("maximum-negative", {"type": "number", "maximum": -2.25}, [-2.25, -3, -1e20], [-2.2, 0, 5, -0.0]),
    ("exclusiveMaximum", {"type": "integer", "exclusiveMaximum": 10}, [9, -100, 9.0], [10, 11, 9.5]),
    ("range-integer", {"type": "integer", "minimum": -12, "maximum": 305}, [-12, 0, 99, 305],
     [-13, 306, 1000, 50.5]),
    ("range-number", {"type": "number", "minimum": 0.001, "maximum": 100}, [0.001, 0.5, 99.99, 100, 5e-3],
     [0.0009, 100.01, 0, -1, 1e-4]),
    ("draft4-exclusive", {"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "minimum": 5, "exclusiveMinimum": True, "maximum": 6,
                          "exclusiveMaximum": True}, [5.5, 5.000001], [5, 6, 4]),
    ("multipleOf-int", {"type": "integer", "multipleOf": 3}, [0, 3, -9, 300, 12345], [1, 4, -10, 3.5]),
    ("multipleOf-7", {"type": "integer", "multipleOf": 7, "minimum": 0}, [0, 7, 49, 700], [1, 50, -7]),
    ("multipleOf-decimal", {"type": "number", "multipleOf": 0.25}, [0.25, 1, -2.75, 100.5], [0.1, 1.3, -0.2]),
    ("multipleOf-money", {"type": "number", "multipleOf": 0.5, "maximum": 10}, [0.5, 10, -3], [10.5, 0.3]),
    # ------------------------------------------------------------------ strings
    ("minLength", {"type": "string", "minLength": 2}, ["ab", "😀😀", "é\n"], ["", "a", "😀"]),
    ("maxLength", {"type": "string", "maxLength": 2}, ["", "ab", "😀😀", '"\\'], ["abc", "😀😀😀"]),
    ("pattern-anchored", {"type": "string", "pattern": "^[a-z]+-[0-9]{2}$"}, ["ab-12", "z-00"],
     ["ab-1", "Ab-12", "ab-123", ""]),
    ("pattern-search", {"type": "string", "pattern": "o+b"}, ["foob", "ob", 'x"oob\\'], ["fb x", "oo", ""]),
    ("pattern-length", {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 4},
     ["ab", "abcd"], ["a", "abcde", "ab1"]),
    ("pattern-two", {"allOf": [{"pattern": "a"}, {"pattern": "b"}], "type": "string", "maxLength": 3},
     ["ab", "bxa"], ["aa", "b", "abab"]),
    ("pattern-quote", {"type": "string", "pattern": '^"[\\\\]$'}, ['"\\'], ['"', "\\"]),
    ("format-date", {"type": "string", "format": "date"}, ["2024-02-29", "1999-12-31"],
     ["2023-02-29", "2024-13-01", "2024-1-01", "0000-01-01"]),
    ("format-date-time", {"format": "date-time"}, ["2024-01-02T03:04:05Z", "2024-01-02t03:04:05.5+05:30", 3],
     ["2024-01-02 03:04:05Z", "2024-01-02T03:04:05", "2024-01-02T24:00:00Z"]),
    ("format-email", {"format": "email"}, ["a.b@example.com", "x@[127.0.0.1]"], ["ab", "a.b"]),
    ("format-ipv4", {"format": "ipv4"}, ["127.0.0.1", "255.255.255.255"], ["256.1.1.1", "01.2.3.4", "1.2.3"]),
    ("format-ipv6", {"format": "ipv6"}, ["::1", "fe80::1:2", "1:2:3:4:5:6:7:8", "::ffff:1.2.3.4"],
     ["1:2:3:4:5:6:7:8:9", ":::", "12345::"]),
    ("format-uuid", {"format": "uuid"}, ["2EB8AA08-AA98-11EA-B4AA-73B441D16380"],
     ["2eb8aa08aa9811eab4aa73b441d16380", "2eb8aa08-aa98-11ea-b4aa-73b441d1638"]),
    ("format-uri", {"format": "uri"}, ["https://a.b/c?d=e#f", "urn:isbn:123", "mailto:a@b.c"],
     ["//a.b/c", "a b:c", "/relative"]),
    ("format-hostname", {"format": "hostname"}, ["example.com", "a-b.c"], ["-a.com", "a..b", "a_b.com"]),
    ("format-duration", {"format": "duration"}, ["P1Y2M3DT4H5M6S", "PT1H", "P2W"], ["P", "PT", "P1H", "1D"]),
    ("format-json-pointer", {"format": "json-pointer"}, ["", "/a~0b/c~1"], ["a", "/~2"]),
    ("format-unknown", {"format": "shoe-size"}, ["anything", 1.5], []),
    # ------------------------------------------------------------------ arrays
    ("items", {"type": "array", "items": {"type": "integer"}}, [[], [1], [1, 2, 3]], [[1.5], ["a"], {}]),
    ("min-maxItems", {"type": "array", "minItems": 1, "maxItems": 2}, [[1], [1, "x"]], [[], [1, 2, 3]]),
    ("prefixItems", {"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
     [[], ["a"], ["a", 1]], [[1], ["a", "b"], ["a", 1, 2]]),
    ("prefixItems-rest", {"prefixItems": [{"const": 0}], "items": {"type": "string"}, "minItems": 2},
     [[0, "a"], [0, "a", "b"]], [[0], [1, "a"], [0, 1]]),
    ("draft4-items-array", {"$schema": "http://json-schema.org/draft-04/schema#", "items": [{"type": "null"}], "additionalItems": {"type": "boolean"}},
     [[None], [None, True, False]], [[True], [None, None]]),
    ("contains", {"type": "array", "contains": {"const": 5}}, [[5], [1, 5], [5, 2, 5]], [[], [1, 2]]),
    ("minContains", {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 10},
                     "minContains": 2}, [[10, 11], [1, 10, 2, 20]], [[10], [1, 2], [10, "x", 11]]),
    ("uniqueItems-enum", {"type": "array", "uniqueItems": True, "items": {"enum": ["a", "b", 1, {"k": [None]}]}},
     [[], ["a"], ["a", "b", 1], [1, "b"], [1.0, "a"], [{"k": [None]}, "b"]],
     [["a", "a"], [1, 1.0], ["c"], ["a", "b", 1, "a"], [{"k": [None]}, {"k": [None]}]]),
    ("uniqueItems-boolean", {"type": "array", "uniqueItems": True, "items": {"type": ["boolean", "null"]},
                             "minItems": 2}, [[True, None], [False, True, None]], [[], [True], [True, True], [1, 2]]),
    ("uniqueItems-prefix", {"type": "array", "uniqueItems": True, "prefixItems": [{"enum": [1, 2]}],
                            "items": {"enum": [2, 3]}, "maxItems": 2}, [[], [1], [1, 2], [2, 3]],
     [[2, 2], [3], [1, 3, 2], [1, 1]]),
    ("uniqueItems-one", {"type": "array", "uniqueItems": True, "maxItems": 1}, [[], [1]], [[1, 1]]),
    # ------------------------------------------------------------------ objects
    ("properties", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}},
     [{}, {"a": 1}, {"b": "x"}, {"a": 1, "b": "x"}, {"a": 1, "z": [None]}], [{"a": "x"}, {"b": 1}, []]),
    ("required", {"properties": {"a": {}, "b": {}}, "required": ["b"], "type": "object"},
     [{"b": 1}, {"a": 1, "b": 2}, {"b": 0, "c": 0}], [{}, {"a": 1}]),
    ("required-undeclared", {"type": "object", "required": ["id"]}, [{"id": 1}, {"id": None, "x": 1}], [{}, {"x": 1}]),
    ("additional-false", {"type": "object", "properties": {"a": {}}, "additionalProperties": False},
     [{}, {"a": [1]}], [{"b": 1}, {"a": 1, "b": 1}, {"ab": 0}]),
    ("additional-schema", {"type": "object", "properties": {"ab": {"type": "string"}},
                           "additionalProperties": {"type": "integer"}},
     [{"a": 1}, {"ab": "s", "abc": 2}, {"ab": "s", "\"": 1}], [{"ab": 1}, {"a": "s"}, {"abc": "s"}]),
    ("patternProperties", {"type": "object", "patternProperties": {"^x-": {"type": "integer"}},
                           "additionalProperties": False}, [{}, {"x-a": 1, "x-b": 2}], [{"y": 1}, {"x-a": "s"}]),
    ("pattern-and-props", {"type": "object", "properties": {"x-id": {"minimum": 5}},
                           "patternProperties": {"^x-": {"type": "integer"}}},
     [{"x-id": 5}, {"x-id": 7, "x-b": 1, "other": "s"}], [{"x-id": 5.5}, {"x-id": 3}, {"x-b": "s"}]),
    ("patternProperties-long-count", {"type": "object", "properties": {"id": {"type": "string"}},
                                      "patternProperties": {"^[0-9a-z_]{1,255}$": {"type": ["string", "null"]}}},
     [{"id": "x", "a_b": None}, {"id": "y", "zz": "q"}, {"Q": 1}, {"a" * 256: 1}, {"a" * 255: "s"}],
     [{"id": 1}, {"abc": 1}, {"id": "x", "a": 2}, {"a" * 255: 1}]),
    ("propertyNames", {"type": "object", "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 3}},
     [{}, {"abc": 1}], [{"abcd": 1}, {"A": 1}]),
    ("min-maxProperties", {"type": "object", "properties": {"a": {}, "b": {}}, "minProperties": 1,
                           "maxProperties": 2}, [{"a": 1}, {"a": 1, "b": 2}, {"z": 1}, {"a": 1, "z": 1}],
     [{}, {"a": 1, "b": 2, "c": 3}, {"x": 1, "y": 2, "z": 3}]),
    ("unevaluatedProperties", {"type": "object", "allOf": [{"properties": {"a": {}}}],
                               "unevaluatedProperties": False}, [{}, {"a": 1}], [{"b": 1}, {"a": 1, "b": 2}]),
    ("nested", {"type": "object", "properties": {"p": {"type": "array", "items": {
        "type": "object", "properties": {"q": {"type": "boolean"}}, "required": ["q"]}}}},
     [{"p": []}, {"p": [{"q": True}, {"q": False, "r": 1}]}], [{"p": [{}]}, {"p": [{"q": 1}]}]),
    # ------------------------------------------------------------------ combinators and refs
    ("allOf", {"allOf": [{"type": "integer"}, {"minimum": 2}, {"maximum": 3}]}, [2, 3], [1, 4, 2.5]),
    ("allOf-objects", {"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                                 {"properties": {"b": {"type": "string"}}}]},
     [{"a": 1}, {"a": 1, "b": "x"}], [{"b": "x"}, {"a": "x"}, {"a": 1, "b": 2}]),
    ("anyOf", {"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer", "minimum": 10}]},
     ["", "a", 10, 99], ["ab", 9, None]),
    ("oneOf-disjoint-types", {"oneOf": [{"type": "string"}, {"type": "integer"}]}, ["a", 1], [1.5, None]),
    ("oneOf-discriminator", {"type": "object", "oneOf": [
        {"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
        {"properties": {"kind": {"const": "b"}, "x": {"type": "string"}}, "required": ["kind"]}]},
     [{"kind": "a", "x": 1}, {"kind": "b", "x": "s"}], [{"kind": "a", "x": "s"}, {"kind": "c"}, {"x": 1}]),
    ("oneOf-ranges", {"oneOf": [{"type": "number", "maximum": 0}, {"type": "number", "exclusiveMinimum": 0}]},
     [0, -1, 1], ["x"]),
    ("oneOf-overlapping", {"type": "object", "oneOf": [{"required": ["r"]}, {"required": ["l", "w"]}],
                           "properties": {"r": {"type": "number"}, "l": {}, "w": {}}},
     [{"r": 1}, {"l": 1, "w": 2}, {"r": 1, "l": 2}], [{"r": 1, "l": 1, "w": 2}, {"l": 1}, {}, {"r": "x"}]),
    ("oneOf-strings", {"oneOf": [{"pattern": "^a"}, {"pattern": "b$"}], "type": "string"}, ["ax", "xb"], ["ab", "x"]),
    ("oneOf-untyped-discriminator", {"oneOf": [{"properties": {"t": {"enum": ["a"]}}, "required": ["t"]},
                                               {"properties": {"t": {"enum": ["b"]}}, "required": ["t"]}]},
     [{"t": "a"}, {"t": "b", "x": 1}], ["x", 1, None, True, [], {"t": "c"}, {}]),
    ("oneOf-closed-objects", {"oneOf": [{"type": "object", "additionalProperties": False, "properties": {"a": {}}},
                                        {"type": "object", "additionalProperties": False,
                                         "patternProperties": {"^b": {"type": "integer"}}}, {"type": "string"}]},
     [{"a": 1}, {"b": 2, "bc": 3}, "s"], [{}, {"a": 1, "b": 2}, {"c": 1}, {"b": "x"}, 1]),
    ("oneOf-arrays-overlapping-in-empty", {"oneOf": [{"type": "array", "items": {"type": "number"}},
                                                     {"type": "array", "items": {"type": "array"}}]},
     [[1, 2], [[1], []]], [[], [1, [2]], "x", {}]),
    ("oneOf-discriminator-not-always-required", {"type": "object", "oneOf": [
        {"properties": {"t": {"const": "a"}}, "required": ["t"]}, {"properties": {"t": {"const": "b"}, "x": {}}}]},
     [{"t": "a"}, {"t": "b"}, {}, {"x": 1}, {"t": "a", "x": 1}], [{"t": "c"}, [], "a"]),
    ("patternProperties-many", {"type": "object", "additionalProperties": False, "patternProperties": {
        "^a": {"type": "integer"}, "^b": {"type": "string"}, "^c": {}, "^d": {}, "^e": {}, "^f": {},
        "^g": {"type": "null"}, "^h": {}, "b$": {"maxLength": 1}}},
     [{}, {"a1": 1, "bx": "s", "g": None, "b": "s", "hb": 1}], [{"a": "x"}, {"z": 1}, {"g": 1}, {"b": "ss"}]),
    ("not-type", {"not": {"type": ["string", "null"]}}, [1, [], {}], ["a", None]),
    ("not-enum", {"type": "string", "not": {"enum": ["a", "b"]}}, ["", "c", "ab"], ["a", "b"]),
    ("not-required", {"type": "object", "not": {"required": ["a"]}}, [{}, {"b": 1}], [{"a": 1}]),
    ("not-minLength", {"not": {"minLength": 2}}, ["", "a"], ["ab", 5, None]),
    ("not-pattern", {"type": "string", "not": {"pattern": "^a"}}, ["b", ""], ["a", "abc"]),
    ("not-const-number", {"not": {"const": 3}}, [2, 3.5, "3", None], [3, 3.0]),
    ("not-anyOf", {"not": {"anyOf": [{"type": "string"}, {"maximum": 5}]}}, [6, 5.5], ["x", 5, None, []]),
    ("if-discriminator", {"type": "object", "if": {"properties": {"kind": {"const": "n"}}},
                          "then": {"properties": {"v": {"type": "number"}}},
                          "else": {"properties": {"v": {"type": "string"}}}},
     [{"kind": "n", "v": 1}, {"kind": "s", "v": "x"}, {"v": 2}], [{"kind": "n", "v": "x"}, {"kind": "s", "v": 1}]),
    ("dependentRequired", {"type": "object", "dependentRequired": {"a": ["b"]}}, [{}, {"b": 1}, {"a": 1, "b": 2}],
     [{"a": 1}]),
    ("dependentSchemas", {"type": "object", "properties": {"a": {}, "b": {}},
                          "dependentSchemas": {"a": {"properties": {"b": {"type": "integer"}}}}},
     [{"b": "x"}, {"a": 1, "b": 2}, {"a": 1}], [{"a": 1, "b": "x"}]),
    ("if-then-else", {"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}},
     ["ab", 3], ["a", 1.5, None]),
    ("ref-defs", {"$defs": {"pos": {"type": "integer", "minimum": 1}}, "type": "array",
                  "items": {"$ref": "#/$defs/pos"}}, [[1, 2]], [[0], ["a"]]),
    ("ref-definitions-escaped", {"definitions": {"a/b~c d": {"type": "null"}},
                                 "properties": {"x": {"$ref": "#/definitions/a~1b~0c%20d"}}},
     [{"x": None}], [{"x": 1}]),
    ("ref-recursive", {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#"}},
                       "additionalProperties": False},
     [{}, {"v": 1, "next": {"v": 2, "next": {}}}], [{"next": {"v": "x"}}, {"w": 1}]),
    ("ref-recursive-with-siblings", {"$defs": {"t": {"properties": {"c": {"$ref": "#/$defs/t", "required": ["x"]}}}},
                                     "$ref": "#/$defs/t"},
     [{}, {"c": {"x": 1}}, {"c": {"c": {"x": 2}, "x": 1}}, {"c": {"c": {"c": {"x": 3}, "x": 2}, "x": 1}}],
     [{"c": {}}, {"c": {"c": {}, "x": 1}}, {"c": {"c": {"c": {"y": 3}, "x": 2}, "x": 1}}]),
    ("ref-sibling-inside-its-own-allOf", {"$defs": {"a": {"type": "object", "properties": {
        "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/a", "required": ["v"]}}}}},
        "allOf": [{"$ref": "#/$defs/a"}, {"properties": {"v": {"minimum": 1}}}]},
     [{}, {"v": 1, "kids": [{"v": 0}, {"v": 5, "kids": [{"v": -1}]}]}],
     [{"v": 0}, {"kids": [{}]}, {"kids": [{"v": 1, "kids": [{"w": 1}]}]}]),
    ("ref-anchor", {"$defs": {"x": {"$anchor": "item", "type": "boolean"}}, "items": {"$ref": "#item"}},
     [[True]], [[1]]),
    ("ref-id", {"$id": "http://example.com/root.json", "$defs": {
        "a": {"$id": "other.json", "type": "string"}}, "properties": {"p": {"$ref": "other.json"}}},
     [{"p": "s"}], [{"p": 1}]),
    ("ref-with-siblings", {"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n", "maximum": 5}, [5, -1], [6, "a"]),
]


@lru_cache(maxsize=None)
def _validator(schema_text: str) -> Any:
    schema = json.loads(schema_text)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _grammar(schema: Any, **options: Any) -> Grammar:
    return Grammar.from_ir(json_schema_to_ir(schema, **options))


@pytest.mark.parametrize("name,schema,valid,invalid", CASES, ids=[c[0] for c in CASES])
def test_keyword_table(name: str, schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    oracle = _validator(json.dumps(schema))
    for x in valid:
        assert oracle.is_valid(x), f"table error: jsonschema rejects {x!r}"
    for x in invalid:
        assert not oracle.is_valid(x), f"table error: jsonschema accepts {x!r}"
    if not valid and not invalid:
        return
    if not valid:
        with pytest.raises(Exception, match="[Ee]mpty language"):
            _grammar(schema)
        return
    g = _grammar(schema)
    for x in valid:
        text = json.dumps(x, ensure_ascii=False)
        assert g.accepts(text), f"false reject: {text}"
        assert g.accepts(json.dumps(x)), f"false reject (ASCII escapes): {json.dumps(x)}"
    for x in invalid:
        text = json.dumps(x, ensure_ascii=False)
        assert not g.accepts(text), f"false accept: {text}"


# ----------------------------------------------------------------------------- spellings

TEXTS = [
    ({"const": 1}, ["1", "1.0", "1.00", "1e0", "1E+00", "1.0e0"], ["01", "1.", "+1", "10e-1", "2"]),
    ({"const": -0.5}, ["-0.5", "-0.50", "-5e-1", "-5.0E-01"], ["-.5", "0.5", "-0.05e1"]),
    ({"type": "integer"}, ["1", "-0", "1.0", "1e3", "1E+3"], ["1.5", "1e-3", "01", "-", "1.0e-1"]),
    ({"type": "number", "minimum": 0}, ["0", "-0", "0e5", "1e300", "0.0"], ["-1", "-1e-300"]),
    ({"const": "aé/😀"}, ['"aé/😀"', '"a\\u00e9\\/\\ud83d\\ude00"', '"a\\u00E9/\\uD83D\\uDE00"'],
     ['"a\\u00e9\\/\\ud83d"', '"\\u0061é/😀"', '"aé/😀 "']),
    ({"type": "string", "maxLength": 1}, ['"\\ud83d\\ude00"', '"\\n"', '"\\u0000"', '"\\""'],
     ['"\\ud83d"', '"ab"', '"\\q"', '"\t"']),
    ({"type": "object", "properties": {"a": {}}, "additionalProperties": False},
     ['{"a":1}', '{ "a" : 1 }', '{\n  "a": 1\n}', "{}", "{ }"], ['{"\\u0062":1}', '{"a":1,}', ' {"a":1}']),
]


@pytest.mark.parametrize("schema,good,bad", TEXTS, ids=[json.dumps(t[0])[:30] for t in TEXTS])
def test_spellings(schema: Any, good: list[str], bad: list[str]) -> None:
    g = _grammar(schema)
    for t in good:
        assert g.accepts(t), t
    for t in bad:
        assert not g.accepts(t), t


# Formats where pda is stricter than jsonschema's checker (which only looks for "@" in an email,
# and accepts any string for an unknown format): the RFC grammar decides.
FORMAT_STRICT = [
    ("email", ["a@b.co", '"a b"@c.d', "x@[IPv6:::1]"], ["a@", "@b", "a b@c.d", "a..b@c.d", "a@b..c"]),
    ("time", ["23:59:59Z", "00:00:00.5-05:00"], ["24:00:00Z", "12:00:00", "12:00:60Z"]),
    ("relative-json-pointer", ["0", "10/a", "2#"], ["-1", "01", "/a"]),
    ("hostname", ["a" * 63 + ".com"], ["a" * 64 + ".com", "xn--nxasmq6b.com"]),
]


@pytest.mark.parametrize("fmt,good,bad", FORMAT_STRICT, ids=[f[0] for f in FORMAT_STRICT])
def test_formats_beyond_the_oracle(fmt: str, good: list[str], bad: list[str]) -> None:
    g = _grammar({"type": "string", "format": fmt})
    assert all(g.accepts(json.dumps(x)) for x in good)
    assert not any(g.accepts(json.dumps(x)) for x in bad)


def test_openapi_nullable() -> None:  # not a JSON Schema keyword, so no jsonschema oracle here
    g = _grammar({"type": "integer", "nullable": True})
    assert g.accepts("3") and g.accepts("null") and not g.accepts('"3"') and not g.accepts("1.5")


def test_property_order_is_schema_order() -> None:
    g = _grammar({"type": "object", "properties": {"a": {}, "b": {}}})
    assert g.accepts('{"a": 1, "b": 2}')
    assert not g.accepts('{"b": 2, "a": 1}')


# ----------------------------------------------------------------------------- layout options

LAYOUT_SCHEMA = {"type": "object", "properties": {"k": {"type": "array", "items": {"type": "integer"}},
                                                   "o": {"type": "object"}}, "required": ["k"]}
LAYOUT_VALUES = [{"k": []}, {"k": [1, 2]}, {"k": [1], "o": {}}, {"k": [], "o": {"x": [1, {"y": None}]}}]


@pytest.mark.parametrize("indent", [0, 2, 4])
def test_indent_is_json_dumps_layout(indent: int) -> None:
    g = _grammar(LAYOUT_SCHEMA, whitespace=indent)
    for v in LAYOUT_VALUES:
        assert g.accepts(json.dumps(v, indent=indent)), json.dumps(v, indent=indent)
        assert not g.accepts(json.dumps(v)) or indent is None
    assert not g.accepts(json.dumps({"k": [1]}, indent=indent + 1))


def test_compact_and_separators() -> None:
    g = _grammar(LAYOUT_SCHEMA, whitespace="compact")
    assert all(g.accepts(json.dumps(v, separators=(",", ":"))) for v in LAYOUT_VALUES)
    assert not g.accepts(json.dumps(LAYOUT_VALUES[1]))
    g = _grammar(LAYOUT_SCHEMA, whitespace="compact", separators=(", ", ": "))
    assert all(g.accepts(json.dumps(v)) for v in LAYOUT_VALUES)


def test_flexible_whitespace_bound() -> None:
    g = _grammar({"type": "array"}, max_whitespace=3)
    assert g.accepts("[ \n\t1 ,\r\n 2 ]")
    assert not g.accepts("[    1]")
    assert not g.accepts(" [1]")


def test_strict_forbids_undeclared() -> None:
    schema = {"type": "object", "properties": {"a": {}}, "prefixItems": [{}]}
    loose, strict = _grammar(schema), _grammar(schema, strict=True)
    assert loose.accepts('{"a": 1, "b": 2}') and not strict.accepts('{"a": 1, "b": 2}')
    assert strict.accepts('{"a": 1}')
    s2 = {"type": "array", "prefixItems": [{"type": "integer"}]}
    assert _grammar(s2).accepts("[1, 2]") and not _grammar(s2, strict=True).accepts("[1, 2]")


def test_inputs_text_pydantic_and_ebnf() -> None:
    assert _grammar('{"type": "boolean"}').accepts("true")
    pydantic = pytest.importorskip("pydantic")

    class Point(pydantic.BaseModel):
        x: int
        label: str = "p"

    g = _grammar(Point)
    assert g.accepts('{"x": 1}') and g.accepts('{"x": 1, "label": "q"}') and not g.accepts('{"label": "q"}')
    text = json_schema_to_ebnf({"enum": ["a", None]})
    assert text.startswith("root ::= ") and '"null"' in text


def test_json_any() -> None:
    g = Grammar.from_ir(json_any_ir())
    for v in [None, 1.5, "s", [], {}, {"a": [1, {"b": None}]}]:
        assert g.accepts(json.dumps(v))
    assert not g.accepts("{'a': 1}") and not g.accepts("[1,]")


# ----------------------------------------------------------------------------- errors

ERRORS = [
    ("{not json", SchemaError, "", r"not valid JSON"),
    ([1], SchemaError, "", r"object or a boolean"),
    ({"type": "str"}, SchemaError, "/type", r"'str' is not a JSON Schema type"),
    ({"type": ["string", "any"]}, SchemaError, "/type/1", r"no 'any' type"),
    ({"$ref": "#/$defs/missing"}, SchemaError, "/$ref", r"points to nothing"),
    ({"items": {"$ref": "#nope"}}, SchemaError, "/items/$ref", r"no \$anchor 'nope'"),
    ({"minimum": 5, "maximum": 1}, SchemaError, "/minimum", r"minimum 5 is greater than maximum 1"),
    ({"minLength": -1}, SchemaError, "/minLength", r"non-negative integer"),
    ({"pattern": "(a"}, SchemaError, "/pattern", r"not a valid regular expression"),
    ({"properties": {"a": {"pattern": "(a)\\1"}}}, UnsupportedSchemaError, "/properties/a/pattern",
     r"back-references"),
    ({"uniqueItems": True}, UnsupportedSchemaError, "/uniqueItems", r"uniqueItems"),
    ({"dependentRequired": []}, SchemaError, "/dependentRequired", r"must be an object"),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, UnsupportedSchemaError, "/oneOf", r"oneOf"),
    ({"not": {"multipleOf": 3}}, UnsupportedSchemaError, "/not", r"'not' .* of 'multipleOf' is not supported"),
    ({"$ref": "http://example.com/s.json"}, UnsupportedSchemaError, "/$ref", r"remote \$ref"),
    ({"format": "uri-template"}, UnsupportedSchemaError, "/format", r"format 'uri-template'"),
    ({"allOf": [{"multipleOf": 9973}, {"multipleOf": 9967}]}, UnsupportedSchemaError, "/allOf/1/multipleOf",
     r"multipleOf 9973, 9967 is too large"),
    ({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}], "type": "object"}}, "$ref": "#/$defs/a"},
     UnsupportedSchemaError, "/$defs/a", r"\$ref that applies itself in place"),
]


@pytest.mark.parametrize("schema,exc,pointer,match", ERRORS, ids=[e[3][:30] for e in ERRORS])
def test_errors(schema: Any, exc: type[Exception], pointer: str, match: str) -> None:
    with pytest.raises(exc, match=match) as info:
        json_schema_to_ir(schema)
    assert info.value.pointer == pointer  # type: ignore[attr-defined]
    if exc is SchemaError:
        assert not isinstance(info.value, UnsupportedSchemaError)


def test_lenient_warns_and_ignores() -> None:
    with pytest.warns(UserWarning, match=r"'/uniqueItems'.*uniqueItems"):
        ir = json_schema_to_ir({"type": "array", "uniqueItems": True}, lenient=True)
    assert Grammar.from_ir(ir).accepts("[1, 1]")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        json_schema_to_ir({"title": "t", "description": "d", "default": 1, "examples": [1], "$comment": "c"})


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="whitespace"):
        json_schema_to_ir(True, whitespace="pretty")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="separators"):
        json_schema_to_ir(True, separators=(",",))  # type: ignore[arg-type]


def test_property_order_any() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}, "c": {}}, "required": ["c", "a"],
              "additionalProperties": {"type": "string"}}
    g = _grammar(schema, property_order="any")
    # required a and c once each, in any order; b and undeclared keys anywhere, maybe repeated
    for text in ['{"a": 2, "c": 1}', '{"c": 1, "a": 2}', '{"b": 0, "a": 1, "x": "s", "c": 2}',
                 '{"a": 1, "b": 0, "c": 2, "b": 1}']:
        assert g.accepts(text), text
    for text in ['{"a": 1, "c": 1, "a": 2}', '{"a": 1}', '{"a": "x", "c": 1}', '{"a": 2, "c": 1, "x": 3}', "{}"]:
        assert not g.accepts(text), text
    with pytest.raises(ValueError, match="property_order"):
        json_schema_to_ir(schema, property_order="sorted")  # type: ignore[arg-type]


def test_required_names_without_properties_float() -> None:
    g = _grammar({"type": "object", "required": ["b", "a"], "additionalProperties": {"type": "integer"}})
    for text in ['{"a": 1, "b": 2}', '{"b": 1, "x": 0, "a": 2}', '{"x": 0, "a": 1, "y": 1, "b": 2, "z": 3}']:
        assert g.accepts(text), text
    for text in ['{"a": 1}', '{"a": 1, "b": 2, "a": 3}', '{"a": 1, "b": "s"}', "{}"]:
        assert not g.accepts(text), text


def test_floating_required_with_heavy_values_keep_their_order() -> None:
    # Every order of four long-string members written out would be a huge automaton: they keep
    # the order of `required` instead (stricter, never looser), and the grammar stays small.
    schema = {"type": "object", "required": ["a", "b", "c", "d"],
              "additionalProperties": {"type": "string", "maxLength": 100}}
    oracle = _validator(json.dumps(schema))
    g = _grammar(schema)
    assert g.automaton.num_states < 40000
    ok = {"a": "x", "b": "y" * 100, "e": "", "c": "z", "d": ""}
    assert oracle.is_valid(ok) and g.accepts(json.dumps(ok))
    for bad in [{"a": "x", "b": "y", "c": "z"}, {"a": "x", "b": "y" * 101, "c": "", "d": ""}]:
        assert not oracle.is_valid(bad) and not g.accepts(json.dumps(bad))
    light = _grammar({"type": "object", "required": ["a", "b", "c"], "additionalProperties": {"type": "integer"}})
    assert light.accepts('{"c": 1, "a": 2, "b": 3}')  # light values: any order


def test_compile_budget_covers_the_frontend() -> None:
    from pda import LimitExceededError
    from pda.limits import compile_budget

    schema = {"type": "string", "pattern": "^[a-z]*x[a-z]{3}$", "maxLength": 30}  # a product automaton
    json_schema_to_ir(schema)  # fine without a budget
    with compile_budget(1e-9), pytest.raises(LimitExceededError, match="max_compile_seconds"):
        json_schema_to_ir(schema)
