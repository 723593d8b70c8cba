"""The requests the vLLM tests and benchmarks send, and the oracles that judge their outputs.

Every constraint here has a bounded language (bounded strings, numbers, arrays and repetitions),
so a request finishes even with a random model, and is judged by an oracle that is not pda:
``jsonschema`` for schemas, Python's ``re`` for regexes, Lark's parser for Lark grammars.  (GBNF
grammars, which have no other parser here, are checked with an equivalent regex.)
"""

from __future__ import annotations

import json
import re
from typing import Any

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
COLORS = {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 4}
ITEM = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 1, "maximum": 9999},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
        "ok": {"type": "boolean"},
        "kind": {"enum": ["a", "b", None]},
    },
    "required": ["id", "tags", "ok", "kind"],
    "additionalProperties": False,
}
SCHEMAS = {"person": PERSON, "colors": COLORS, "item": ITEM}

GRAMMARS: dict[str, tuple[dict[str, Any], str]] = {
    # name -> (the "pda" entry, an equivalent regex used as the oracle)
    "yes_no": ({"grammar": 'root ::= ("yes" | "no") " " [0-9]{1,3}'}, r"(yes|no) [0-9]{1,3}"),
    "sum": ({"grammar": 'root ::= term (("+" | "-") term){0,3}\nterm ::= [1-9] [0-9]?'},
            r"[1-9][0-9]?([+-][1-9][0-9]?){0,3}"),
}
LARK = 'start: "(" NAME ("," NAME)? ")"\nNAME: /[a-z]{1,6}/'
REGEXES = {"code": r"[a-z]{2}-\d{3}", "email": r"[a-z]{1,8}@[a-z]{1,8}\.(com|org)"}


def schema_entry(name: str, **options: Any) -> dict[str, Any]:
    return {"json_schema": SCHEMAS[name], **options}


def mixed_entries() -> list[tuple[str, dict[str, Any] | None]]:
    """(label, "pda" entry or None for a free request): schemas, grammars, Lark, regexes, builtin."""
    entries: list[tuple[str, dict[str, Any] | None]] = []
    entries += [(f"schema:{n}", schema_entry(n)) for n in SCHEMAS]
    entries += [("schema:person:compact", schema_entry("person", whitespace="compact"))]
    entries += [(f"grammar:{n}", spec) for n, (spec, _) in GRAMMARS.items()]
    entries += [("lark", {"lark": LARK})]
    entries += [(f"regex:{n}", {"regex": p}) for n, p in REGEXES.items()]
    entries += [("builtin:json", {"builtin": "json"})]
    entries += [("free", None), ("free", None)]
    return entries


def is_valid(entry: dict[str, Any], text: str) -> bool:
    """Whether ``text`` belongs to the language of ``entry`` (judged by an oracle that is not pda)."""
    if "json_schema" in entry:
        import jsonschema

        schema = entry["json_schema"]
        schema = json.loads(schema) if isinstance(schema, str) else schema
        try:
            jsonschema.validate(json.loads(text), schema)
        except (ValueError, jsonschema.ValidationError):
            return False
        return True
    if "regex" in entry:
        return re.fullmatch(entry["regex"], text) is not None
    if "grammar" in entry:
        oracle = next(regex for spec, regex in GRAMMARS.values() if spec["grammar"] == entry["grammar"])
        return re.fullmatch(oracle, text) is not None
    if "lark" in entry:
        from lark import Lark
        from lark.exceptions import LarkError

        try:
            Lark(entry["lark"], start="start").parse(text)
        except LarkError:
            return False
        return True
    if entry.get("builtin") == "json":
        try:
            json.loads(text)
        except ValueError:
            return False
        return True
    raise ValueError(f"no oracle for {entry!r}")
