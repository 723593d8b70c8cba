"""The cases the peers' test tables (XGrammar, llguidance) and the official JSON-Schema-Test-Suite
found on pda's side, each pinned: leap seconds, ``property_order="any"`` under
``minProperties``/``maxProperties``, ``strict`` beside ``unevaluatedItems``, RFC 1123 hostnames,
Lark ranges Lark itself cannot read, and ECMAScript's ``\\u{...}`` escape."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from pda import Grammar
from pda.errors import GrammarSyntaxError, UnsupportedSchemaError


def _accepts(schema: dict[str, Any], value: Any, **options: Any) -> bool:
    return Grammar.from_json_schema(schema, **options).accepts(json.dumps(value))


# ----------------------------------------------------------------------------- leap seconds

LEAP_VALID = ["23:59:60Z", "23:59:60z", "23:59:60+00:00", "23:59:60-00:00", "15:59:60-08:00", "01:29:60+01:30",
              "23:29:60+23:30", "00:29:60-23:30", "23:59:60.5Z", "08:59:60+09:00"]
LEAP_INVALID = ["22:59:60Z", "23:58:60Z", "22:59:60+00:00", "23:59:60+01:00", "23:59:60+00:30", "23:59:60-01:00",
                "23:59:60-00:30", "15:59:60+08:00", "23:59:61Z", "12:00:60Z"]


@pytest.mark.parametrize("text", LEAP_VALID)
def test_leap_second_accepted_at_2359_utc(text: str) -> None:
    assert _accepts({"format": "time"}, text)
    assert _accepts({"format": "date-time"}, "1990-12-31T" + text)


@pytest.mark.parametrize("text", LEAP_INVALID)
def test_leap_second_refused_elsewhere(text: str) -> None:
    assert not _accepts({"format": "time"}, text)
    assert not _accepts({"format": "date-time"}, "1990-12-31T" + text)


def test_leap_second_exhaustive_against_utc() -> None:
    """Every local time HH:MM:60 with every whole- or half-hour offset: accepted exactly when it
    is 23:59 UTC (other offsets' leap seconds are refused, a stricter subset)."""
    g = Grammar.from_json_schema({"format": "time"})
    for hh in range(24):
        for mm in range(60):
            for sign in "+-":
                for off in range(0, 24 * 60, 30):
                    text = f"{hh:02d}:{mm:02d}:60{sign}{off // 60:02d}:{off % 60:02d}"
                    local = hh * 60 + mm
                    utc = (local - off if sign == "+" else local + off) % 1440
                    assert g.accepts(json.dumps(text)) == (utc == 1439), text


# ----------------------------------------------------------------------------- property_order="any"

COUNTED = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}


@pytest.mark.parametrize("extra,value,valid", [
    ({"minProperties": 2}, {"b": "x", "a": 1}, True),
    ({"minProperties": 2}, {"a": 1, "b": "x"}, True),
    ({"minProperties": 2}, {"c": None, "a": 1}, True),
    ({"minProperties": 1}, {}, False),
    ({"maxProperties": 1}, {"b": "x", "a": 1}, False),
    ({"maxProperties": 2}, {"b": "x", "a": 1}, True),
    ({"maxProperties": 2, "required": ["a"]}, {"c": 0, "a": 1}, True),
    ({"maxProperties": 2, "required": ["a"]}, {"b": "x"}, False),
    ({"minProperties": 1, "maxProperties": 1, "additionalProperties": False}, {"b": "x"}, True),
    ({"minProperties": 1, "maxProperties": 1, "additionalProperties": False}, {"a": 1, "b": "x"}, False),
])
def test_any_order_with_property_counts(extra: dict[str, Any], value: Any, valid: bool) -> None:
    schema = {**COUNTED, **extra}
    assert jsonschema.Draft202012Validator(schema).is_valid(value) == valid
    assert _accepts(schema, value, property_order="any") == valid


@pytest.mark.parametrize("text", ['{"a":1,"a":2}', '{"b":"x","b":"y"}', '{"c":1,"c":2}'])
def test_any_order_counts_no_repeated_name_counts_twice(text: str) -> None:
    """Two members with one name are one property: they never make up minProperties 2."""
    g = Grammar.from_json_schema({**COUNTED, "minProperties": 2}, property_order="any")
    assert not g.accepts(text)


def test_any_order_counts_refuses_what_it_cannot_count() -> None:
    with pytest.raises(UnsupportedSchemaError, match="minProperties"):
        Grammar.from_json_schema({**COUNTED, "minProperties": 4}, property_order="any")


# ----------------------------------------------------------------------------- strict beside unevaluated*

@pytest.mark.parametrize("schema", [
    {"type": "array", "prefixItems": [{"type": "integer"}], "unevaluatedItems": {"type": "string"}},
    {"allOf": [{"prefixItems": [{"type": "integer"}]}], "unevaluatedItems": {"type": "string"}},
])
def test_strict_leaves_items_to_unevaluated_items(schema: dict[str, Any]) -> None:
    g = Grammar.from_json_schema(schema, strict=True)
    assert g.accepts('[1,"a","b"]') and g.accepts("[1]")
    assert not g.accepts("[1,2]")


def test_strict_still_closes_prefix_items_alone() -> None:
    g = Grammar.from_json_schema({"type": "array", "prefixItems": [{"type": "integer"}]}, strict=True)
    assert g.accepts("[1]") and not g.accepts('[1,"a"]')


def test_strict_leaves_members_to_unevaluated_properties() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "unevaluatedProperties": {"type": "string"}}
    g = Grammar.from_json_schema(schema, strict=True)
    assert g.accepts('{"a":1,"b":"x"}') and not g.accepts('{"a":1,"b":2}')


# ----------------------------------------------------------------------------- hostnames

@pytest.mark.parametrize("name", ["w--ww.git---hub.co----m", "a--b.com", "ab--c", "xn-a.com", "x--n", "xnn--a"])
def test_hostname_ldh_labels(name: str) -> None:
    assert _accepts({"format": "hostname"}, name)


@pytest.mark.parametrize("name", ["xn--X", "XN--abc.com", "example.xn--9t4b11yi5a", "-a.com", "a-.com", "a_b.com",
                                  "co--", ""])
def test_hostname_refused(name: str) -> None:
    assert not _accepts({"format": "hostname"}, name)


# ----------------------------------------------------------------------------- Lark ranges

@pytest.mark.parametrize("grammar,line,column", [
    ('start: x\nx: "a"i.."z"', 2, 4),
    ('start: "ab".."c"', 1, 8),
    ('start: "a".."yz"', 1, 8),
])
def test_lark_bad_range_is_a_grammar_error(grammar: str, line: int, column: int) -> None:
    with pytest.raises(GrammarSyntaxError, match="bad range") as info:
        Grammar.from_lark(grammar)
    assert (info.value.line, info.value.column) == (line, column)


# ----------------------------------------------------------------------------- \u{...}

def test_braced_unicode_escape_in_schema_pattern() -> None:
    schema = {"type": "string", "pattern": "^\\u{20BB7}[\\u{1F600}-\\u{1F64F}]?$"}
    g = Grammar.from_json_schema(schema)
    assert g.accepts(json.dumps("\U00020BB7", ensure_ascii=False)) and g.accepts(json.dumps("\U00020BB7\U0001F600"))
    assert not g.accepts(json.dumps("u"))


def test_braced_unicode_escape_in_regex() -> None:
    g = Grammar.from_regex(r"\u{20BB7}+")
    assert g.accepts("\U00020BB7\U00020BB7") and not g.accepts("u{20BB7}")
