"""GBNF / XGrammar-style EBNF grammars -> :class:`pda.ir.GrammarIR`.

The accepted language is the union of what llama.cpp's GBNF parser and XGrammar's EBNF parser
accept, with the corner cases settled as follows:

* ``name ::= expr``.  Names are ``[A-Za-z0-9_.-]+`` but do not start or end with ``.`` (a lone
  ``.`` is the any-character wildcard, as in llama.cpp).  A rule starts where a name is followed by
  ``::=`` on the same line; that name must be the first thing on its line.  A rule body runs until
  the next rule, so it may span lines anywhere (llama.cpp only allows a line break after ``::=``,
  after ``|`` and inside parentheses; every grammar it reads is read the same way here).
* ``|``, grouping ``( )``, quantifiers ``?`` ``*`` ``+`` ``{m}`` ``{m,}`` ``{m,n}`` (they may be
  stacked, as llama.cpp allows: ``"a"?*``).  ``{,n}`` is refused, as both parsers refuse it.
* Empty alternatives (``ws ::= | " "``, ``( "a" | )``, ``( )``) are the empty string; a rule whose
  whole body is empty is refused (write ``""``).
* String literals ``"..."`` on one line; character classes ``[...]``, ``[^...]`` with ranges; ``[^]``
  and ``.`` are any character; ``[]`` is refused.  In a class, ``-`` is literal first, last, or
  escaped; ``^`` is literal unless first.
* Escapes, in strings and classes: ``\\n \\r \\t \\\\ \\" \\' \\[ \\] \\- \\/ \\? \\a \\b \\f \\v \\0``,
  ``\\xHH``, ``\\uHHHH``, ``\\UHHHHHHHH`` (exactly that many hex digits); in classes also
  ``\\^ \\. \\* \\+ \\( \\) \\{ \\} \\| \\$``.  ``\\xHH`` is the code point U+00HH — a character,
  not a raw byte — as in both llama.cpp and XGrammar (``"\\xe9"`` matches ``é``, the two bytes
  ``C3 A9``).  Surrogate code points are refused in strings (they are not characters).
* XGrammar's lookahead assertion ``rule ::= body (= expr)`` is parsed and dropped: XGrammar uses it
  as a hint for mask precomputation and it holds wherever the rule is used in a well-formed
  grammar, so the language does not change.
* ``#`` starts a comment up to the end of the line (outside strings and classes).

Text is parsed with a Lark LALR grammar (contextual lexer); every syntax problem becomes a
:class:`pda.errors.GrammarSyntaxError` with the line and column of the problem.  Undefined rules
and empty languages are left to normalisation (:mod:`pda.normalize`), which reports them at the
positions recorded here in :class:`pda.ir.Ref` and ``GrammarIR.positions``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NoReturn

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from pda.errors import GrammarSyntaxError, UndefinedRuleError
from pda.ir import (
    EPSILON,
    MAX_CODE_POINT,
    Expr,
    GrammarIR,
    Ref,
    alt,
    any_char,
    chars,
    lit,
    repeat,
    seq,
)

__all__ = ["parse_ebnf"]

_NAME = r"[A-Za-z0-9_-](?:[A-Za-z0-9_.-]*[A-Za-z0-9_-])?"

_LARK_GRAMMAR = r"""
start: rule*
rule: RULE_NAME ASSIGN alternatives lookahead?
lookahead: LOOKAHEAD alternatives RPAR
alternatives: sequence (PIPE sequence)*
sequence: item*
item: atom quantifier*
atom: STRING | CLASS | NAME | DOT | LPAR alternatives RPAR
quantifier: STAR | PLUS | QMARK | LBRACE INT RBRACE | LBRACE INT COMMA INT? RBRACE

RULE_NAME.2: /%(name)s(?=[ \t]*::=)/
NAME: /%(name)s/
ASSIGN: "::="
STRING: /"(?:[^"\\\r\n]|\\[^\r\n])*"/
CLASS: /\[(?:[^\]\\\r\n]|\\[^\r\n])*\]/
DOT: "."
LOOKAHEAD: "(="
LPAR: "("
RPAR: ")"
PIPE: "|"
STAR: "*"
PLUS: "+"
QMARK: "?"
LBRACE: "{"
RBRACE: "}"
COMMA: ","
INT: /[0-9]+/
COMMENT: /#[^\r\n]*/
WS: /[ \t\r\n\ufeff]+/
%%ignore WS
%%ignore COMMENT
""" % {"name": _NAME}

# How each terminal is named in error messages.
_DESCRIBE = {
    "RULE_NAME": "a rule definition (name ::= ...)",
    "NAME": "a rule name",
    "ASSIGN": "'::='",
    "STRING": "a string literal",
    "CLASS": "a character class",
    "DOT": "'.'",
    "LOOKAHEAD": "'(='",
    "LPAR": "'('",
    "RPAR": "')'",
    "PIPE": "'|'",
    "STAR": "'*'",
    "PLUS": "'+'",
    "QMARK": "'?'",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "COMMA": "','",
    "INT": "a number",
    "$END": "the end of the grammar",
}
_QUANTIFIERS = {"STAR", "PLUS", "QMARK", "LBRACE"}
_ELEMENT_STARTS = {"STRING", "CLASS", "NAME", "DOT", "LPAR"}

# Escapes valid in string literals and in character classes (value = the character meant).
_SIMPLE_ESCAPES = {
    "n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "'": "'", "[": "[", "]": "]", "-": "-",
    "/": "/", "?": "?", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "0": "\0",
}
# Extra escapes valid only inside character classes (regex punctuation, as XGrammar allows).
_CLASS_ESCAPES = {c: c for c in "^.*+(){}|$"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


@lru_cache(maxsize=1)
def _parser() -> Lark:
    """The Lark LALR parser for GBNF text (built once, on first use)."""
    return Lark(_LARK_GRAMMAR, parser="lalr", lexer="contextual", keep_all_tokens=True,
                maybe_placeholders=False)


def parse_ebnf(text: str, *, start: str = "root", filename: str | None = None) -> GrammarIR:
    """Parse GBNF / XGrammar EBNF ``text`` into a :class:`GrammarIR` whose start rule is ``start``.

    Raises :class:`GrammarSyntaxError` (with line and column) for text that does not parse, a
    rule defined twice or a malformed literal, class or repetition, and
    :class:`UndefinedRuleError` when no rule named ``start`` is defined.
    """
    if not isinstance(text, str):
        raise TypeError(f"grammar text must be str, not {type(text).__name__}")
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        _raise_syntax_error(exc, text, filename)
    return _Builder(text, filename).build(tree, start)


# ----------------------------------------------------------------------------- tree -> IR


class _Builder:
    """Turns the Lark parse tree into IR rules, checking what the LALR grammar cannot."""

    def __init__(self, text: str, filename: str | None) -> None:
        self.text = text
        self.filename = filename

    def fail(self, message: str, line: int, column: int) -> NoReturn:
        raise GrammarSyntaxError(message, filename=self.filename, line=line, column=column, source=self.text)

    def build(self, tree: Tree, start: str) -> GrammarIR:
        rules: dict[str, Expr] = {}
        positions: dict[str, tuple[int, int]] = {}
        for rule in tree.children:
            name_tok, assign_tok, body = rule.children[0], rule.children[1], rule.children[2]
            name = str(name_tok)
            self.check_line_start(name_tok)
            if name in positions:
                line, col = positions[name]
                self.fail(f'rule "{name}" is defined twice (first at line {line}, column {col})',
                          name_tok.line, name_tok.column)
            positions[name] = (name_tok.line, name_tok.column)
            if len(body.children) == 1 and not body.children[0].children:
                self.fail(f'rule "{name}" has an empty body (write "" for the empty string)',
                          assign_tok.end_line, assign_tok.end_column)
            if len(rule.children) > 3:
                self.check_lookahead(rule.children[3])
            rules[name] = self.alternatives(body)
        if start not in rules:
            hint = " (the grammar defines no rules)" if not rules else ""
            raise UndefinedRuleError(f'root rule "{start}" is not defined{hint}', filename=self.filename,
                                     rule=start)
        return GrammarIR(rules=rules, start=start, positions=positions, filename=self.filename,
                         source=self.text)

    def check_line_start(self, tok: Token) -> None:
        """A rule name must be the first thing on its line (as XGrammar and llama.cpp require)."""
        pos = tok.start_pos
        line_start = self.text.rfind("\n", 0, pos) + 1
        if self.text[line_start:pos].strip(" \t\r\ufeff"):
            self.fail(f'rule definition "{tok}" must start on a new line', tok.line, tok.column)

    def check_lookahead(self, la: Tree) -> None:
        """Validate a lookahead assertion's contents; the assertion itself is dropped."""
        body = la.children[1]
        if len(body.children) == 1 and not body.children[0].children:
            tok = la.children[0]
            self.fail("empty lookahead assertion '(= )'", tok.line, tok.column)
        self.alternatives(body)

    def alternatives(self, tree: Tree) -> Expr:
        return alt(*(self.sequence(c) for c in tree.children if isinstance(c, Tree)))

    def sequence(self, tree: Tree) -> Expr:
        return seq(*(self.item(c) for c in tree.children))

    def item(self, tree: Tree) -> Expr:
        expr = self.atom(tree.children[0])
        for q in tree.children[1:]:
            lo, hi = self.bounds(q)
            expr = repeat(expr, lo, hi)
        return expr

    def bounds(self, q: Tree) -> tuple[int, int | None]:
        toks = q.children
        kind = toks[0].type
        if kind == "STAR":
            return 0, None
        if kind == "PLUS":
            return 1, None
        if kind == "QMARK":
            return 0, 1
        lo = int(toks[1])
        if len(toks) == 3:  # {m}
            return lo, lo
        if len(toks) == 4:  # {m,}
            return lo, None
        hi = int(toks[3])
        if hi < lo:
            self.fail(f"repetition bounds {{{lo},{hi}}}: the minimum is larger than the maximum",
                      toks[0].line, toks[0].column)
        return lo, hi

    def atom(self, tree: Tree) -> Expr:
        first = tree.children[0]
        kind = first.type
        if kind == "LPAR":
            return self.alternatives(tree.children[1])
        if kind == "NAME":
            return Ref(str(first), pos=(first.line, first.column))
        if kind == "DOT":
            return any_char()
        if kind == "STRING":
            return self.string(first)
        return self.char_class(first)

    # ------------------------------------------------------------------ literals

    def string(self, tok: Token) -> Expr:
        body = str(tok)[1:-1]
        out: list[str] = []
        i = 0
        while i < len(body):
            cp, i2 = self.char_at(tok, body, i, in_class=False)
            if 0xD800 <= cp <= 0xDFFF:
                self.fail(f"bad escape sequence '{body[i:i2]}': surrogate code points are not characters",
                          tok.line, tok.column + 1 + i)
            out.append(chr(cp))
            i = i2
        return lit("".join(out)) if out else EPSILON

    def char_class(self, tok: Token) -> Expr:
        body = str(tok)[1:-1]
        negate = body.startswith("^")
        i = 1 if negate else 0
        if not body:
            self.fail("empty character class '[]' (use [^] for any character)", tok.line, tok.column)
        ranges: list[tuple[int, int]] = []
        while i < len(body):
            lo, j = self.char_at(tok, body, i, in_class=True)
            if j < len(body) - 1 and body[j] == "-":  # a range, unless '-' is the last character
                hi, k = self.char_at(tok, body, j + 1, in_class=True)
                if hi < lo:
                    self.fail(f"character range out of order '{body[i:k]}'", tok.line, tok.column + 1 + i)
                ranges.append((lo, hi))
                i = k
            else:
                ranges.append((lo, lo))
                i = j
        return chars(ranges, negate=negate)

    def char_at(self, tok: Token, body: str, i: int, *, in_class: bool) -> tuple[int, int]:
        """Decode the (possibly escaped) character at ``body[i]``; returns (code point, next index)."""
        c = body[i]
        if c != "\\":
            return ord(c), i + 1
        col = tok.column + 1 + i  # +1 for the opening quote or bracket
        e = body[i + 1]  # the lexer guarantees a character after every backslash
        if e in _HEX_ESCAPES:
            n = _HEX_ESCAPES[e]
            digits = body[i + 2 : i + 2 + n]
            if len(digits) != n or not all(d in "0123456789abcdefABCDEF" for d in digits):
                shown = body[i : i + 2 + len(digits)]
                self.fail(f"bad escape sequence '{shown}': '\\{e}' needs exactly {n} hex digits",
                          tok.line, col)
            cp = int(digits, 16)
            if cp > MAX_CODE_POINT:
                self.fail(f"bad escape sequence '{body[i:i + 2 + n]}': beyond U+10FFFF", tok.line, col)
            return cp, i + 2 + n
        if e in _SIMPLE_ESCAPES:
            return ord(_SIMPLE_ESCAPES[e]), i + 2
        if in_class and e in _CLASS_ESCAPES:
            return ord(e), i + 2
        self.fail(f"bad escape sequence '\\{e}'", tok.line, col)


# ----------------------------------------------------------------------------- errors


def _raise_syntax_error(exc: UnexpectedInput, text: str, filename: str | None) -> NoReturn:
    """Translate a Lark parse error into a GrammarSyntaxError with our wording and position."""
    line, column = exc.line, exc.column
    message: str
    if isinstance(exc, UnexpectedCharacters):
        ch = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else ""
        if ch == '"':
            message = "unclosed string literal"
        elif ch == "[":
            message = "unterminated character class"
        elif ch == ":" and text.startswith("::=", exc.pos_in_stream):
            message = "'::=' without a rule name before it"
        elif ch == "=" and text[:exc.pos_in_stream].endswith("("):
            message = "a lookahead assertion '(= ...)' may only end a rule body"
            column -= 1  # point at the '(' of '(='
        else:
            message = f"unexpected character {ch!r}"
    elif isinstance(exc, UnexpectedToken):
        message, line, column = _describe_unexpected_token(exc, text)
    elif isinstance(exc, UnexpectedEOF):  # not raised by the LALR parser; kept for safety
        message = "unexpected end of the grammar"
    else:
        raise exc
    raise GrammarSyntaxError(message, filename=filename, line=line, column=column, source=text) from None


def _open_token(exc: UnexpectedToken, types: set[str]) -> Token | None:
    """The innermost still-open token of one of ``types`` on the parser's stack, if any."""
    ip = getattr(exc, "interactive_parser", None)
    if ip is None:
        return None
    for value in reversed(ip.parser_state.value_stack):
        if isinstance(value, Token) and value.type in types:
            return value
    return None


def _describe_unexpected_token(exc: UnexpectedToken, text: str) -> tuple[str, int, int]:
    """Message and (line, column) for a token the parser did not expect."""
    tok = exc.token
    kind = tok.type
    expected = set(exc.expected) | set(getattr(exc, "accepts", None) or ())
    line, column = tok.line, tok.column
    at_end = kind in ("$END", "RULE_NAME")
    if kind == "$END":
        line, column = _end_position(text)
    if at_end or kind == "ASSIGN":
        brace = _open_token(exc, {"LBRACE"}) if expected & {"INT", "COMMA", "RBRACE"} else None
        if brace is not None:
            return "unclosed repetition '{'", brace.line, brace.column
        paren = _open_token(exc, {"LPAR", "LOOKAHEAD"}) if "RPAR" in expected else None
        if paren is not None:
            return f"unbalanced parenthesis: '{paren}' is never closed", paren.line, paren.column
    if "RPAR" in expected and _open_token(exc, {"LPAR", "LOOKAHEAD"}) is None:
        expected.discard("RPAR")  # LALR state merging lists ')' even where no '(' is open
    if expected <= {"RULE_NAME", "$END"}:
        if _ends_with_lookahead(exc):
            return "a lookahead assertion '(= ...)' must be the last thing in a rule", line, column
        if kind == "NAME":
            line, column = _after(text, tok)
            return f"expected '::=' after rule name \"{tok}\"", line, column
        return f"expected a rule definition (name ::= ...), found {_what(tok)}", line, column
    if kind == "RPAR":
        return "unbalanced parenthesis: ')' has no matching '('", line, column
    if kind in _QUANTIFIERS and expected & _ELEMENT_STARTS and not expected & {"STAR"}:
        return f"quantifier '{tok}' has nothing to repeat", line, column
    if expected & {"INT"} and not expected & _ELEMENT_STARTS:
        return f"expected a number in repetition bounds, found {_what(tok)}", line, column
    if kind == "ASSIGN":
        return "'::=' must follow a rule name at the start of a line", line, column
    if kind == "LOOKAHEAD":
        return "a lookahead assertion '(= ...)' may only end a rule body", line, column
    wanted = sorted(_DESCRIBE.get(t, t) for t in expected if t != "RULE_NAME")
    if len(wanted) > 5:
        return f"unexpected {_what(tok)}", line, column
    return f"unexpected {_what(tok)}; expected {' or '.join(wanted)}", line, column


def _ends_with_lookahead(exc: UnexpectedToken) -> bool:
    """Whether the parser has just closed a rule's lookahead assertion (so only a new rule may follow)."""
    ip = getattr(exc, "interactive_parser", None)
    stack = ip.parser_state.value_stack if ip is not None else []
    return any(isinstance(v, Token) and v.type == "LOOKAHEAD" for v in stack) or any(
        isinstance(v, Tree) and v.data == "lookahead" for v in stack
    )


def _what(tok: Token) -> str:
    if tok.type == "$END":
        return "end of the grammar"
    if tok.type in ("NAME", "RULE_NAME"):
        return f'rule name "{tok}"'
    return f"'{tok}'" if tok.type not in ("STRING", "CLASS") else f"{_DESCRIBE[tok.type]} {tok}"


def _after(text: str, tok: Token) -> tuple[int, int]:
    """Where '::=' should be after a rule name: the next character on its line, or the line end."""
    pos = tok.end_pos
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    if pos >= len(text) or text[pos] in "\r\n":
        pos = tok.end_pos
    return tok.line, tok.column + (pos - tok.start_pos)


def _end_position(text: str) -> tuple[int, int]:
    """(line, column) just after the last non-blank character of ``text``."""
    stripped = text.rstrip()
    line = stripped.count("\n") + 1
    return line, len(stripped) - (stripped.rfind("\n") + 1) + 1
