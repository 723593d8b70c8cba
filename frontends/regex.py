"""Regular expressions to the grammar IR: a hand-written recursive-descent parser.

:func:`regex_to_ir` reads a pattern in the Python ``re`` or the ECMAScript dialect and returns an
:class:`~pda.ir.Expr` over Unicode code points whose language is:

* ``search=False`` — the strings the pattern matches *entirely* (``re.fullmatch``), what Lark
  terminals mean;
* ``search=True`` — the strings in which the pattern matches somewhere (``RegExp.test``, JSON
  Schema ``pattern``): an unanchored start gets an any-string prefix, an unanchored end an
  any-string suffix.

``\\u{...}`` (a code point of 1 to 6 hex digits, ECMAScript with the ``u`` flag, e.g. ``\\u{20BB7}``)
is read in both dialects: Python's ``re`` refuses it, so reading it changes no Python pattern.

Features that a finite automaton cannot express, or that would change the language when ignored
(back-references, lookarounds, ``\\b``, atomic groups, possessive quantifiers, conditionals, anchors
in the middle of the pattern) raise :class:`~pda.errors.UnsupportedRegexError`; malformed patterns
raise :class:`~pda.errors.RegexError`.  Both carry the 0-based ``offset`` of the problem.

Parsing goes through a tiny private tree (:class:`Cat`, :class:`Or`, :class:`Rep`,
:class:`Anchor`, with IR nodes as leaves) so that anchors can be checked and, in search mode,
turned into prefixes and suffixes before the IR is built.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal

from pda.errors import RegexError, UnsupportedRegexError
from pda.ir import MAX_CODE_POINT, Bytes, CharClass, Expr, chars, normalize_ranges, seq

from . import _regex_unicode as uni
from ._regex_tree import Anchor, Cat, Node, Or, Rep, check_anchors, open_end, open_start, to_ir
from ._regex_unicode import Ranges

__all__ = ["regex_to_ir", "literal_to_ir"]

Dialect = Literal["python", "ecmascript"]

_MAX_REPEAT = 4294967294  # what Python's re accepts as a repeat bound
_PY_FLAGS = "aiLmsux"
_ECMA_FLAGS = "imsux"
_FLAG_ARGS = {"python": "aimsux", "ecmascript": "imsux"}
_PY_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
_ECMA_ESCAPES = {"f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
_WHITESPACE = " \t\n\r\v\f"
_ANY: Ranges = ((0, MAX_CODE_POINT),)


@dataclass
class _ClassItems:
    """What one ``[...]`` (or one escape) contributes: plain code points and category sets."""

    ranges: list[tuple[int, int]]
    cats: list[tuple[int, int]]


# ----------------------------------------------------------------------------- public API


def regex_to_ir(pattern: str, *, flags: str = "", dialect: Dialect = "python", search: bool = False) -> Expr:
    """Parse ``pattern`` and return an IR expression for its language (see the module docstring).

    ``flags`` holds letters among ``i s x m u`` (and ``a`` for Python): ignore case, dot matches
    newline, verbose, multiline anchors, Unicode (ECMAScript ``u``).
    """
    if dialect not in _FLAG_ARGS:
        raise ValueError(f"unknown regex dialect {dialect!r}; expected 'python' or 'ecmascript'")
    for letter in flags:
        if letter not in _FLAG_ARGS[dialect]:
            raise RegexError(f"unknown flag {letter!r} for the {dialect} dialect", pattern=pattern, offset=0)
    parser = _Parser(pattern, set(flags), dialect)
    tree = parser.parse()
    check_anchors(tree, True, True, pattern)
    if search:
        tree = open_end(open_start(tree, 3, parser.line_breaks), 3, parser.line_breaks)
    return to_ir(tree)


def literal_to_ir(text: str, *, ignore_case: bool = False) -> Expr:
    """A literal string; with ``ignore_case``, each character matches what Python's
    ``re.IGNORECASE`` would let it match."""
    if not ignore_case:
        return seq(*(_set_expr(((ord(c), ord(c)),)) for c in text))
    table = uni.case_table("python")
    return seq(*(_set_expr(_fold_python(table, ((ord(c), ord(c)),), ())) for c in text))


# ----------------------------------------------------------------------------- helpers


def _set_expr(ranges: Ranges) -> Expr:
    """One code point as a literal (``Bytes``), anything else as one ``CharClass``."""
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1] and not 0xD800 <= ranges[0][0] <= 0xDFFF:
        return Bytes(chr(ranges[0][0]).encode("utf-8"))
    return chars(ranges)


def _fold_python(table: uni.CaseTable, ranges: Ranges, cats: Ranges) -> Ranges:
    """What a case-insensitive Python class matches.  Mirrors ``re``: when no member is cased
    (and none is outside the BMP) nothing is folded; otherwise the subject character is
    lower-cased before the test, also for the category sets (``\\w``...) in the class."""
    if not uni.is_cased(table, ranges) and not any(hi > 0xFFFF for _, hi in ranges):
        return normalize_ranges(ranges + cats)
    return uni.fold(table, ranges, cats)


# ----------------------------------------------------------------------------- the parser


class _Parser:
    """Recursive descent over ``pattern``; ``pos`` is the next character to read."""

    def __init__(self, pattern: str, flags: set[str], dialect: Dialect) -> None:
        self.pattern = pattern
        self.pos = 0
        self.py = dialect == "python"
        self.flags = frozenset(flags)
        self.names: set[str] = set()
        self.line_breaks: Ranges = ((10, 10),) if self.py else uni.ECMA_LINE_TERMINATORS

    # -- errors and low-level reading

    def error(self, message: str, offset: int) -> RegexError:
        return RegexError(message, pattern=self.pattern, offset=offset)

    def unsupported(self, message: str, offset: int) -> UnsupportedRegexError:
        return UnsupportedRegexError(message, pattern=self.pattern, offset=offset)

    def peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.pattern[i] if i < len(self.pattern) else ""

    def startswith(self, text: str) -> bool:
        return self.pattern.startswith(text, self.pos)

    def skip_verbose(self) -> None:
        """In verbose mode, skip whitespace and ``#`` comments."""
        if "x" not in self.flags:
            return
        while self.pos < len(self.pattern):
            c = self.pattern[self.pos]
            if c in _WHITESPACE:
                self.pos += 1
            elif c == "#":
                end = self.pattern.find("\n", self.pos)
                self.pos = len(self.pattern) if end < 0 else end + 1
            else:
                break

    # -- structure

    def parse(self) -> Node:
        tree = self.alternation(top=True)
        if self.pos < len(self.pattern):  # only a ')' stops a top-level alternation early
            raise self.error("unbalanced parenthesis", self.pos)
        return tree

    def alternation(self, top: bool = False) -> Node:
        branches = [self.sequence(first=top)]
        while self.peek() == "|":
            self.pos += 1
            branches.append(self.sequence(first=False))
        return branches[0] if len(branches) == 1 else Or(tuple(branches))

    def sequence(self, first: bool) -> Node:
        items: list[Node] = []
        quantified = False  # the last item came from a quantifier
        while True:
            self.skip_verbose()
            c = self.peek()
            if c in ("", "|", ")"):
                break
            start = self.pos
            bounds = self.quantifier()
            if bounds is not None:
                if not items or isinstance(items[-1], Anchor):
                    raise self.error("nothing to repeat", start)
                if quantified:
                    raise self.error("multiple repeat", start)
                if self.peek() == "?":
                    self.pos += 1  # lazy: same language
                elif self.peek() == "+":
                    if self.py:
                        raise self.unsupported("possessive quantifiers are not supported", start)
                    raise self.error("nothing to repeat", self.pos)
                items[-1] = Rep(items[-1], *bounds)
                quantified = True
                continue
            if c == "(" and self.startswith("(?") and self.global_flags(first and not items):
                continue
            item = self.atom()
            quantified = False
            if item is not None:
                items.append(item)
        return items[0] if len(items) == 1 else Cat(tuple(items))

    def quantifier(self) -> tuple[int, int | None] | None:
        """Read ``* + ? {m} {m,} {m,n}`` (Python also ``{,n}``); None (nothing read) otherwise."""
        c = self.peek()
        if c in "*+?" and c:
            self.pos += 1
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        if c != "{":
            return None
        p, i = self.pattern, self.pos + 1
        j = i
        while j < len(p) and p[j].isascii() and p[j].isdigit():
            j += 1
        lo_text, hi_text, k = p[i:j], p[i:j], j
        if k < len(p) and p[k] == ",":
            k += 1
            while k < len(p) and p[k].isascii() and p[k].isdigit():
                k += 1
            hi_text = p[j + 1:k]
        if k >= len(p) or p[k] != "}" or (not lo_text and (not self.py or k == i)):
            return None  # not a quantifier: '{' is a literal
        lo = int(lo_text) if lo_text else 0
        hi = int(hi_text) if hi_text else None
        if lo > _MAX_REPEAT or (hi is not None and hi > _MAX_REPEAT):
            raise self.error("the repetition number is too large", i)
        if hi is not None and hi < lo:
            raise self.error("min repeat greater than max repeat", i)
        self.pos = k + 1
        return lo, hi

    def global_flags(self, allowed: bool) -> bool:
        """Read ``(?imsx)`` (flags for the whole pattern) if that is what comes; True if read."""
        start, p = self.pos, self.pattern
        end = start + 2
        while end < len(p) and p[end] in (_PY_FLAGS if self.py else _ECMA_FLAGS):
            end += 1
        if end == start + 2 or end >= len(p) or p[end] != ")":
            return False
        if not allowed:
            raise self.error("global flags not at the start of the expression", start)
        letters = set(p[start + 2:end])
        self.check_flags(letters, start + 2)
        self.flags = self.flags | letters
        self.pos = end + 1
        return True

    def check_flags(self, letters: set[str], offset: int) -> None:
        """Refuse flag combinations Python refuses for str patterns."""
        if "L" in letters:
            raise self.error("bad inline flags: cannot use 'L' flag with a str pattern", offset)
        if "a" in letters and "u" in letters:
            raise self.error("bad inline flags: flags 'a' and 'u' are incompatible", offset)

    def atom(self) -> Node | None:
        """One atom (None for things that match nothing, e.g. ``(?#...)``)."""
        c = self.peek()
        start = self.pos
        if c == "(":
            return self.group()
        if c == "[":
            return self.char_class()
        if c == "\\":
            return self.escape()
        if not self.py and "u" in self.flags and c in "]{}":
            raise self.error(f"lone {c!r}: escape it with the u flag", start)
        self.pos += 1
        if c == ".":
            if "s" in self.flags:
                return CharClass(_ANY)
            return chars(self.line_breaks, negate=True)
        if c == "^":
            return Anchor(True, 2 if "m" in self.flags else 0, start, c)
        if c == "$":
            mode = 2 if "m" in self.flags else (1 if self.py else 0)
            return Anchor(False, mode, start, c)
        return self.char_set([(ord(c), ord(c))], [], False)

    def group(self) -> Node | None:
        """``(...)`` in all its forms; None for a comment."""
        start = self.pos
        self.pos += 1
        saved = self.flags
        if self.peek() == "?" and self.group_extension(start):
            return None  # a comment
        body = self.alternation()
        if self.peek() != ")":
            raise self.error("missing ), unterminated subpattern", start)
        self.pos += 1
        self.flags = saved
        return body

    def group_extension(self, start: int) -> bool:
        """After ``(?``: read a name or flags, or skip a comment (then return True); refuse what
        is unsupported.  Returns False when a group body follows."""
        self.pos += 1
        c = self.peek()
        if c == ":":
            self.pos += 1
            return False
        if c in ("=", "!"):
            raise self.unsupported("lookahead assertions are not supported", start)
        if c == "<" and self.peek(1) in ("=", "!"):
            raise self.unsupported("lookbehind assertions are not supported", start)
        if c == ">":
            raise self.unsupported("atomic groups are not supported", start)
        if c == "(":
            raise self.unsupported("conditional groups are not supported", start)
        if c == "#" and self.py:
            end = self.pattern.find(")", self.pos)
            if end < 0:
                raise self.error("missing ), unterminated comment", start)
            self.pos = end + 1
            return True
        if c == "P" and self.py:
            if self.peek(1) == "=":
                raise self.unsupported("back-references are not supported", start)
            if self.peek(1) != "<":
                raise self.error(f"unknown extension ?P{self.peek(1)}", start + 1)
            self.pos += 1
            c = "<"
        if c == "<":
            self.pos += 1
            self.group_name()
            return False
        if not self.scoped_flags():
            raise self.error(f"unknown extension ?{c}", start + 1)
        return False

    def group_name(self) -> None:
        """Read ``name>`` of a named group."""
        end = self.pattern.find(">", self.pos)
        if end < 0:
            raise self.error("missing >, unterminated name", self.pos)
        name = self.pattern[self.pos:end]
        if not name:
            raise self.error("missing group name", self.pos)
        if not (name if self.py else name.replace("$", "_")).isidentifier():
            raise self.error(f"bad character in group name {name!r}", self.pos)
        if name in self.names:
            raise self.error(f"redefinition of group name {name!r}", self.pos)
        self.names.add(name)
        self.pos = end + 1

    def scoped_flags(self) -> bool:
        """Read ``on-off:`` after ``(?`` and set ``self.flags`` for the group body; False if what
        comes is not a flags group."""
        p, known = self.pattern, (_PY_FLAGS if self.py else _ECMA_FLAGS)
        i = self.pos
        on, off = set(), set()
        while i < len(p) and p[i] in known:
            on.add(p[i])
            i += 1
        if i < len(p) and p[i] == "-":
            i += 1
            if i >= len(p) or p[i] not in "imsx":
                raise self.error("missing flag", i)
            while i < len(p) and p[i] in "imsx":
                off.add(p[i])
                i += 1
        if i >= len(p):
            raise self.error("missing -, : or )", i)
        if p[i] != ":":
            if not on and not off:
                return False
            if p[i] == ")" and off:
                raise self.error("missing :", i)
            raise self.error("unknown flag", i)
        if on & off:
            raise self.error("bad inline flags: flag turned on and off", self.pos)
        self.check_flags(on, self.pos)
        self.flags = (self.flags | on) - off - ({"a"} if "u" in on else {"u"} if "a" in on else set())
        self.pos = i + 1
        return True

    # -- characters

    def char_set(self, ranges: list[tuple[int, int]], cats: list[tuple[int, int]], negate: bool) -> Expr:
        """The IR of a set of code points (plus category sets), folded when ignoring case."""
        base = normalize_ranges(ranges)
        extra = normalize_ranges(cats)
        if "i" in self.flags:
            if self.py:
                table = uni.case_table("python-ascii" if "a" in self.flags else "python")
                result = _fold_python(table, base, extra)
            else:
                table = uni.case_table("ecma-u" if "u" in self.flags else "ecma")
                result = uni.fold(table, normalize_ranges(base + extra))
        else:
            result = normalize_ranges(base + extra)
        return chars(result, negate=True) if negate else _set_expr(result)

    def category(self, letter: str) -> Ranges:
        """``\\d \\w \\s`` (lower case) for the dialect and flags."""
        if not self.py:
            return uni.ECMA_CATEGORIES[letter]
        return uni.ascii_category(letter) if "a" in self.flags else uni.python_category(letter)

    def char_class(self) -> Expr:
        """``[...]``: members, ranges, category escapes, negation; one set in the end."""
        start = self.pos
        self.pos += 1
        negate = self.peek() == "^"
        if negate:
            self.pos += 1
        items = _ClassItems([], [])
        first = True
        while True:
            if self.pos >= len(self.pattern):
                raise self.error("unterminated character set", start)
            if self.peek() == "]" and (not first or not self.py):
                self.pos += 1
                break
            first = False
            lo_at = self.pos
            lo = self.class_atom(items)
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                hi = self.class_atom(items)
                text = self.pattern[lo_at:self.pos]
                if lo is None or hi is None:
                    if self.py or "u" in self.flags:
                        raise self.error(f"bad character range {text}", lo_at)
                    items.ranges.append((0x2D, 0x2D))  # Annex B: [\d-z] is \d, '-' and 'z'
                    for cp in (lo, hi):
                        if cp is not None:
                            items.ranges.append((cp, cp))
                elif hi < lo:
                    raise self.error(f"bad character range {text}", lo_at)
                else:
                    items.ranges.append((lo, hi))
            elif lo is not None:
                items.ranges.append((lo, lo))
        return self.char_set(items.ranges, items.cats, negate)

    def class_atom(self, items: _ClassItems) -> int | None:
        """One class member: returns its code point, or None after adding a category set."""
        if self.peek() != "\\":
            cp = ord(self.peek())
            self.pos += 1
            return cp
        start = self.pos
        c = self.peek(1)
        if c and c in "dDsSwW":
            self.pos += 2
            cat = self.category(c.lower())
            items.cats.extend(uni.complement(cat) if c.isupper() else cat)
            return None
        if c and c in "pP" and not self.py:
            cat = self.property_escape()
            items.cats.extend(cat)
            return None
        if c == "b":
            self.pos += 2
            return 8
        return self.char_escape(start, in_class=True)

    def escape(self) -> Node:
        """An escape outside a class."""
        start = self.pos
        c = self.peek(1)
        if c == "":
            raise self.error("bad escape (end of pattern)", start)
        if c in "bB":
            raise self.unsupported(f"word boundaries (\\{c}) are not supported", start)
        if c in "dDsSwW":
            self.pos += 2
            cat = self.category(c.lower())
            return self.char_set([], list(uni.complement(cat) if c.isupper() else cat), False)
        if c in "pP" and not self.py:
            return self.char_set([], list(self.property_escape()), False)
        if self.py and c in "AZz":
            self.pos += 2
            return Anchor(c == "A", 0, start, "\\" + c)
        if (c.isdigit() and c != "0" and not self.is_octal_escape()) or (c == "k" and not self.py and self.peek(2) == "<"):
            raise self.unsupported("back-references are not supported", start)
        cp = self.char_escape(start, in_class=False)
        return self.char_set([(cp, cp)], [], False)

    def is_octal_escape(self) -> bool:
        """Python: ``\\ddd`` with three octal digits is a character, not a group reference."""
        p = self.pattern[self.pos + 1:self.pos + 4]
        return self.py and len(p) == 3 and all(ch in "01234567" for ch in p)

    def property_escape(self) -> Ranges:
        """ECMAScript ``\\p{..}`` / ``\\P{..}``."""
        start = self.pos
        negate = self.peek(1) == "P"
        if self.peek(2) != "{":
            raise self.error("missing { after \\p", start)
        end = self.pattern.find("}", self.pos)
        if end < 0:
            raise self.error("missing }, unterminated property name", start)
        name = self.pattern[self.pos + 3:end]
        ranges = uni.general_category(name)
        if ranges is None:
            raise self.unsupported(f"unknown or unsupported Unicode property {name!r}", start)
        self.pos = end + 1
        return uni.complement(ranges) if negate else ranges

    def char_escape(self, start: int, in_class: bool) -> int:
        """An escape that stands for one code point (``\\n``, ``\\x41``, ``\\.``...)."""
        c = self.peek(1)
        if c == "":
            raise self.error("bad escape (end of pattern)", start)
        self.pos += 2
        simple = _PY_ESCAPES if self.py else _ECMA_ESCAPES
        if c in simple:
            return simple[c]
        if c == "x":
            return self.hex_digits(start, 2, "\\x")
        if c == "u" and self.peek() == "{":  # ECMAScript's \u{...} (Python's re has no meaning for it)
            end = self.pattern.find("}", self.pos)
            digits = self.pattern[self.pos + 1:end] if end > 0 else ""
            if not digits or any(d not in "0123456789abcdefABCDEF" for d in digits) or int(digits, 16) > MAX_CODE_POINT:
                raise self.error(f"bad escape {self.pattern[start:end + 1 if end > 0 else self.pos]}", start)
            self.pos = end + 1
            return int(digits, 16)
        if c == "u":
            cp = self.hex_digits(start, 4, "\\u")
            if not self.py and 0xD800 <= cp <= 0xDBFF and self.startswith("\\u"):
                save = self.pos
                low = self.hex_digits(self.pos, 4, "\\u", advance=2)
                if 0xDC00 <= low <= 0xDFFF:
                    return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                self.pos = save
            return cp
        if c == "U" and self.py:
            cp = self.hex_digits(start, 8, "\\U")
            if cp > MAX_CODE_POINT:
                raise self.error(f"bad escape {self.pattern[start:self.pos]}", start)
            return cp
        if c == "N" and self.py:
            return self.named_char(start)
        if c == "c" and not self.py and self.peek().isascii() and self.peek().isalpha():
            self.pos += 1
            return ord(self.pattern[self.pos - 1]) % 32
        if c in "01234567" and (self.py or in_class or c == "0"):
            return self.octal(start, c)
        if c.isascii() and c.isalnum():
            if self.py or "u" in self.flags or c.isdigit():
                raise self.error(f"bad escape \\{c}", start)
        elif "u" in self.flags and not self.py and c not in "^$\\.*+?()[]{}|/" + ("-" if in_class else ""):
            raise self.error(f"bad escape \\{c}", start)
        return ord(c)

    def octal(self, start: int, first: str) -> int:
        """An octal escape whose first digit was read: Python reads up to three digits (``\\0``
        up to two more); ECMAScript reads ``\\0`` alone, or a legacy octal escape without ``u``."""
        if not self.py and first == "0" and not self.peek().isdigit():
            return 0
        if not self.py and "u" in self.flags:
            raise self.error("octal escapes are not allowed with the u flag", start)
        digits = first
        limit = 2 if not self.py and first in "4567" else 3
        while len(digits) < limit and self.peek() and self.peek() in "01234567":
            digits += self.peek()
            self.pos += 1
        value = int(digits, 8)
        if value > 0o377:
            raise self.error(f"octal escape value \\{digits} outside of range 0-0o377", start)
        return value

    def hex_digits(self, start: int, n: int, prefix: str, advance: int = 0) -> int:
        """Read exactly ``n`` hex digits (after skipping ``advance`` characters)."""
        self.pos += advance
        digits = self.pattern[self.pos:self.pos + n]
        good = len(digits) == n and all(d in "0123456789abcdefABCDEF" for d in digits)
        if not good:
            seen = ""
            for d in digits:
                if d not in "0123456789abcdefABCDEF":
                    break
                seen += d
            raise self.error(f"incomplete escape {prefix}{seen}", start)
        self.pos += n
        return int(digits, 16)

    def named_char(self, start: int) -> int:
        """Python ``\\N{NAME}`` (after the ``\\N``)."""
        if self.peek() != "{":
            raise self.error("missing {", self.pos)
        end = self.pattern.find("}", self.pos)
        if end < 0:
            raise self.error("missing }, unterminated name", self.pos)
        name = self.pattern[self.pos + 1:end]
        try:
            cp = ord(unicodedata.lookup(name))
        except KeyError:
            raise self.error(f"undefined character name {name!r}", start) from None
        self.pos = end + 1
        return cp

