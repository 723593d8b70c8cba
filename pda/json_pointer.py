"""Where in a JSON document a byte offset lies, as a JSON pointer (RFC 6901).

:func:`pointer_at` answers "which value was being written when validation stopped at this
byte?".  It reads only the bytes before the offset, and reads them tolerantly: the text may be cut
anywhere, and invalid JSON is read on as well as it can be (a stray closer closes the innermost
container, a bare word is a value, or a key where a key is due); it never raises on its input.

The innermost value being written at an offset, for the prefix that ends there:

* before a value (after ``:``, ``[``, a ``,`` in an array, or at the start) — that value's
  pointer: after ``[1, 2,`` it is ``/2``, after ``{"a":`` it is ``/a``;
* inside a string value, or touching the end of a number or ``true``/``false``/``null`` (which
  could still go on: ``{"n": 1`` could become ``{"n": 10``) — that value's pointer;
* inside an object key, or where a key is due (after ``{`` or a ``,`` in an object) — the
  object's pointer; once the key's closing quote has been read, the object's pointer plus the key;
* after a complete value (a closed string or container, or a number followed by blanks) — the
  pointer of the container holding it (the root, ``""``, at the top level).

Standard library only.
"""

from __future__ import annotations

import re

__all__ = ["pointer_at", "path_at", "format_pointer", "escape_token"]

Segment = str | int

_BLANKS = re.compile(rb"[ \t\n\r]*")
_WORD = re.compile(rb'[^ \t\n\r{}\[\],:"]+')
_STRING_BODY = re.compile(rb'[^"\\]*')
_ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|.?)', re.S)
_SIMPLE_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}

# What a container expects next.
_KEY, _COLON, _VALUE, _AFTER = range(4)


class _Frame:
    """An open object or array: what it expects next and the slot (key or index) being filled."""

    __slots__ = ("is_object", "phase", "slot")

    def __init__(self, is_object: bool) -> None:
        self.is_object = is_object
        self.phase = _KEY if is_object else _VALUE
        self.slot: Segment | None = None if is_object else 0


def escape_token(token: Segment) -> str:
    """One reference token of a JSON pointer: ``~`` written ``~0`` and ``/`` written ``~1``."""
    return str(token).replace("~", "~0").replace("/", "~1")


def format_pointer(path: list[Segment]) -> str:
    """The JSON pointer of a path of keys and indices: ``["a/b", 0]`` -> ``"/a~1b/0"``."""
    return "".join("/" + escape_token(token) for token in path)


def pointer_at(text: str | bytes, offset: int) -> str:
    """The JSON pointer of the value being written at byte ``offset`` of ``text`` (module docstring).

    ``text`` is the document (``str`` is read as its UTF-8 encoding); ``offset`` counts bytes,
    from 0 to the length of the document.
    """
    return format_pointer(path_at(text, offset))


def path_at(text: str | bytes, offset: int) -> list[Segment]:
    """The keys (``str``) and array indices (``int``) that :func:`pointer_at` joins into a pointer."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    if not 0 <= offset <= len(data):
        raise ValueError(f"offset {offset} is outside the document (0 to {len(data)} bytes)")
    return _Scanner(data[:offset]).path()


class _Scanner:
    """Reads a JSON prefix once and keeps the stack of open containers."""

    def __init__(self, data: bytes) -> None:
        self.frames: list[_Frame] = []
        self.open_key = False  # the prefix ends inside an object key
        self.open_value = False  # ... inside a string value, or touching a number or literal
        self._scan(data)

    def path(self) -> list[Segment]:
        path = [f.slot for f in self.frames[:-1]]
        if not self.frames:
            return []
        last = self.frames[-1]
        if self.open_value or (not self.open_key and last.phase in (_COLON, _VALUE)):
            path.append(last.slot)
        return [s for s in path if s is not None]

    def _scan(self, data: bytes) -> None:
        pos, end = 0, len(data)
        while pos < end:
            pos = _BLANKS.match(data, pos).end()  # type: ignore[union-attr]
            if pos >= end:
                return
            c = data[pos]
            if c == 0x22:  # '"'
                pos = self._string(data, pos + 1)
            elif c in b"{[":
                self.frames.append(_Frame(c == 0x7B))
                pos += 1
            elif c in b"}]":
                if self.frames:
                    self.frames.pop()
                self._value_done()
                pos += 1
            elif c == 0x2C:  # ','
                self._comma()
                pos += 1
            elif c == 0x3A:  # ':'
                if self.frames and self.frames[-1].is_object:
                    self.frames[-1].phase = _VALUE
                pos += 1
            else:
                word_end = _WORD.match(data, pos).end()  # type: ignore[union-attr]
                if word_end == end:
                    self.open_value = not self._expects_key()
                    self.open_key = self._expects_key()
                    return
                if self._expects_key():  # a bare word where a key is due: read it as the key
                    self._key_done(data[pos:word_end].decode("utf-8", "replace"))
                else:
                    self._value_done()
                pos = word_end

    def _string(self, data: bytes, pos: int) -> int:
        """Read a string whose opening quote ends before ``pos``; return the position after it."""
        start, end = pos, len(data)
        while True:
            pos = _STRING_BODY.match(data, pos).end()  # type: ignore[union-attr]
            if pos >= end or (data[pos] == 0x5C and pos + 1 >= end):
                self.open_key = self._expects_key()
                self.open_value = not self.open_key
                return end
            if data[pos] == 0x22:
                break
            pos += 2  # a backslash and the byte it escapes
        if self._expects_key():
            self._key_done(unescape(data[start:pos]))
        else:
            self._value_done()
        return pos + 1

    def _expects_key(self) -> bool:
        return bool(self.frames) and self.frames[-1].is_object and self.frames[-1].phase == _KEY

    def _key_done(self, key: str) -> None:
        frame = self.frames[-1]
        frame.slot, frame.phase = key, _COLON

    def _value_done(self) -> None:
        if self.frames:
            self.frames[-1].phase = _AFTER

    def _comma(self) -> None:
        if not self.frames:
            return
        frame = self.frames[-1]
        if frame.is_object:
            frame.slot, frame.phase = None, _KEY
        else:
            frame.slot = (frame.slot if isinstance(frame.slot, int) else 0) + 1
            frame.phase = _VALUE


def unescape(body: bytes) -> str:
    """The text of a JSON string body (no quotes): escapes resolved, surrogate pairs joined.

    Tolerant: invalid UTF-8 becomes U+FFFD, an unknown escape ``\\x`` stands for ``x``, and a
    lone surrogate (``\\ud800``) is kept as it is.
    """

    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        if len(e) == 5:
            return chr(int(e[1:], 16))
        return _SIMPLE_ESCAPES.get(e, e)

    text = _ESCAPE.sub(one, body.decode("utf-8", "replace"))
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text
