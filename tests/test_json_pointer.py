"""pda.json_pointer: the JSON pointer of the value being written at a byte offset of a document.

The property tests check :func:`pointer_at` at every offset of generated documents against an
oracle that writes the document itself and notes, byte by byte, which value it is writing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pda import Grammar
from pda.errors import ValidationError
from pda.frontends.json_schema import json_schema_to_ir
from pda.json_pointer import escape_token, format_pointer, path_at, pointer_at, unescape

MARK = "‸"  # where the offset is, in the table below; removed before the call


def at(marked: str) -> str:
    """pointer_at on ``marked`` without its MARK, at the MARK's byte offset."""
    prefix, _, rest = marked.partition(MARK)
    return pointer_at(prefix + rest, len(prefix.encode("utf-8")))


@pytest.mark.parametrize(
    "marked, pointer",
    [
        ("‸{}", ""),
        ("{‸}", ""),
        ('{"a"‸: 1}', "/a"),
        ('{"a":‸ 1}', "/a"),
        ('{"a": ‸1}', "/a"),
        ('{"a": 1‸}', "/a"),  # touching the number: it could still go on
        ('{"a": 1 ‸}', ""),  # after the value: the object
        ('{"a": 1,‸ "b": 2}', ""),
        ('{"a": 1, "b‸": 2}', ""),  # inside a key: the object's pointer
        ('{"a": "xyz‸"}', "/a"),
        ('{"a": "xyz"‸}', ""),
        ("[1, 2,‸", "/2"),
        ("[‸", "/0"),
        ("[ ‸]", "/0"),
        ("[1, [2]‸", ""),
        ("[1, [2]‸]", ""),
        ("[1, [2‸]]", "/1/0"),
        ("[1, [2,‸ 3]]", "/1/1"),
        ('{"items": [{}, {}, {}, {"name": "dd‸dd"}]}', "/items/3/name"),
        ('{"a": {"b": [true, nul‸', "/a/b/1"),
        ('{"a": {"b": [true, null]}‸', ""),
        ('{"a": {"b": [true, null]‸', "/a"),
        ("tru‸e", ""),
        ('"str‸', ""),
    ],
)
def test_table(marked: str, pointer: str) -> None:
    assert at(marked) == pointer


@pytest.mark.parametrize(
    "key, token",
    [
        ("a/b", "a~1b"),
        ("m~n", "m~0n"),
        ("~1", "~01"),  # '~' first, so '~1' is not read back as '/'
        ("/~", "~1~0"),
        ("", ""),
        ("é 😀", "é 😀"),
    ],
)
def test_keys_are_escaped_as_rfc_6901_says(key: str, token: str) -> None:
    assert escape_token(key) == token
    doc = json.dumps({key: [0]})
    assert pointer_at(doc, doc.index("[") + 1) == "/" + token + "/0"


@pytest.mark.parametrize(
    "spelling, key",
    [
        (r'"\u00e9t\u00e9"', "été"),
        (r'"\ud83d\ude00"', "😀"),  # a surrogate pair is one character
        (r'"tab\there\n"', "tab\there\n"),
        (r'"q\"uote\\back\/slash"', 'q"uote\\back/slash'),
        ('"été"', "été"),
        (r'"lone\ud800"', "lone\ud800"),
        (r'"bad\q\u12"', "badqu12"),  # invalid escapes are read tolerantly
    ],
)
def test_escape_sequences_in_keys(spelling: str, key: str) -> None:
    doc = "{" + spelling + ": 1}"
    assert path_at(doc, doc.index(":") + 2) == [key]


def test_offset_counts_bytes_and_str_is_utf8() -> None:
    doc = '{"é": [1, "日本", 3]}'
    data = doc.encode("utf-8")
    offset = data.index(b"3")
    assert pointer_at(doc, offset) == pointer_at(data, offset) == "/é/2"
    assert pointer_at(bytearray(data), offset) == "/é/2"


def test_offset_outside_the_document() -> None:
    assert pointer_at("[1]", 3) == ""
    for offset in (-1, 4):
        with pytest.raises(ValueError, match="outside the document"):
            pointer_at("[1]", offset)


def test_invalid_json_is_read_tolerantly() -> None:
    assert at('{"a": 1]]]}, "b": ‸') == ""  # stray closers close what is open, then the top level
    assert at('{a: [1, 2, ‸') == "/a/2"  # a bare word where a key is due is the key
    assert at('[1 2 ‸') == ""
    assert at('{"a" "b": ‸') == "/a"
    assert at('{"a": \xff\xfe‸') == "/a"
    assert at("[1, {,‸") == "/1"
    assert at(":,:,{[‸") == "/0"


def test_format_pointer() -> None:
    assert format_pointer([]) == ""
    assert format_pointer(["a/b", 0, "", "~"]) == "/a~1b/0//~0"


def test_unescape_joins_pairs_only() -> None:
    assert unescape(rb"\ud83d\ude00\ude00") == "😀\ude00"
    assert unescape("ü\\n".encode()) == "ü\n"
    assert unescape(b"\xff") == "\ufffd"


# ----------------------------------------------------------------------------- the oracle


class Writer:
    """Writes a JSON value and notes, for each offset, the pointer of the value being written there.

    ``marks[i]`` is the path for the prefix of ``i`` bytes; ``blank()`` draws the whitespace
    between tokens.
    """

    def __init__(self, blank: Any, ensure_ascii: bool) -> None:
        self.out = bytearray()
        self.marks: list[list[str | int]] = [[]]
        self.blank = blank
        self.ensure_ascii = ensure_ascii

    def put(self, text: str, path: list[str | int], last: list[str | int] | None = None) -> None:
        """Write ``text``: the offsets after its bytes are marked ``path``, after the last ``last``."""
        data = text.encode("utf-8")
        self.out += data
        self.marks += [path] * len(data)
        if data and last is not None:
            self.marks[-1] = last

    def value(self, v: Any, path: list[str | int], after: list[str | int]) -> None:
        if isinstance(v, (dict, list)):
            is_object = isinstance(v, dict)
            members = list(v.items()) if is_object else list(enumerate(v))

            def due(i: int) -> list[str | int]:  # where member i is due: the object, or the item itself
                return path if is_object else [*path, i]

            self.put("{" if is_object else "[", due(0))
            self.put(self.blank(), due(0))
            for i, (slot, item) in enumerate(members):
                if i:
                    self.put(",", due(i))
                    self.put(self.blank(), due(i))
                if is_object:
                    self.put(json.dumps(slot, ensure_ascii=self.ensure_ascii), path, last=[*path, slot])
                    for token in (self.blank(), ":", self.blank()):
                        self.put(token, [*path, slot])
                self.value(item, [*path, slot], after=path)
                self.put(self.blank(), path)
            self.put("}" if is_object else "]", after)
        elif isinstance(v, str):
            self.put(json.dumps(v, ensure_ascii=self.ensure_ascii), path, last=after)
        else:
            self.put(json.dumps(v), path)  # a number or literal: touching it, it is being written


keys = st.text(alphabet=st.sampled_from("ab~/ é😀\"\\\n\t\x01"), max_size=4) | st.text(max_size=3)
scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) \
    | st.text(max_size=4)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
                      max_leaves=12)
blanks = st.sampled_from(["", "", " ", "\n  ", "\t", "\r\n "])


@given(value=values, ensure_ascii=st.booleans(), data=st.data())
def test_every_offset_of_a_document(value: Any, ensure_ascii: bool, data: st.DataObject) -> None:
    w = Writer(lambda: data.draw(blanks), ensure_ascii)
    w.put(w.blank(), [])
    w.value(value, [], after=[])
    w.put(w.blank(), [])
    doc = bytes(w.out)
    assert json.loads(doc) == value
    for offset, path in enumerate(w.marks):
        assert path_at(doc, offset) == path, (doc[:offset], doc[offset:])
        assert path_at(doc[:offset], offset) == path  # the bytes after the offset do not matter
        assert pointer_at(doc, offset) == format_pointer(path)


@given(st.binary(max_size=60))
def test_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    for offset in range(len(data) + 1):
        pointer = pointer_at(data, offset)
        assert pointer == "" or pointer.startswith("/")


# ----------------------------------------------------------------------------- Grammar.validate

SCHEMA = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {
        "type": "object", "properties": {"name": {"type": "string", "maxLength": 3}, "a/b~": {"type": "integer"}},
    }}},
}


@pytest.fixture(scope="module")
def schema_grammars() -> tuple[Grammar, Grammar]:
    """The grammar of SCHEMA from Grammar.from_json_schema, and the same one built from its IR."""
    return Grammar.from_json_schema(SCHEMA), Grammar.from_ir(json_schema_to_ir(SCHEMA))


@pytest.mark.parametrize(
    "doc, pointer",
    [
        ('{"items": [{}, {}, {}, {"name": "dddd"}]}', "/items/3/name"),
        ('{"items": [{"a/b~": 1.5}]}', "/items/0/a~1b~0"),
        ('{"items": [{"name": "x"}, 5]}', "/items/1"),
        ('{"items": [{}, {}', "/items"),  # the text ends early
        ("[]", ""),
    ],
)
def test_grammar_validate_sets_the_pointer(schema_grammars: tuple[Grammar, Grammar], doc: str, pointer: str) -> None:
    from_schema, from_ir = schema_grammars
    with pytest.raises(ValidationError) as info:
        from_schema.validate(doc)
    assert info.value.pointer == pointer
    with pytest.raises(ValidationError) as plain:  # the same grammar, not known to be JSON
        from_ir.validate(doc)
    assert plain.value.pointer is None
    assert str(plain.value) == str(info.value)  # the message is unchanged


def test_other_grammars_leave_the_pointer_unset() -> None:
    grammar = Grammar.from_ebnf('root ::= "[" [0-9]* "]"')
    with pytest.raises(ValidationError) as info:
        grammar.validate("[1x]")
    assert info.value.pointer is None
