"""Malformed GBNF grammars: each must fail with the right exception, message and place.

The table below is the reference list of grammar mistakes and how pda words them (the idea of
lark's ``GRAMMAR_ERRORS``).  Syntax errors come from :mod:`pda.frontends.ebnf`; undefined rules and
empty languages from normalisation in :meth:`pda.Grammar.from_ebnf`.
"""

from __future__ import annotations

import re

import pytest

import pda
from pda.errors import EmptyLanguageError, GrammarSyntaxError, UndefinedRuleError

S, U, E = GrammarSyntaxError, UndefinedRuleError, EmptyLanguageError

# (id, grammar text, exception class, regex for the bare message, (line, column) or (None, None))
GRAMMAR_ERRORS: list[tuple[str, str, type[Exception], str, tuple[int | None, int | None]]] = [
    # strings and escapes
    ("unclosed-string", 'root ::= "abc', S, r"^unclosed string literal$", (1, 10)),
    ("string-broken-by-newline", 'root ::= "ab\ncd"', S, r"^unclosed string literal$", (1, 10)),
    ("bad-escape-in-string", r'root ::= "a\q"', S, r"^bad escape sequence '\\q'$", (1, 12)),
    ("bad-escape-in-class", r"root ::= [a\d]", S, r"^bad escape sequence '\\d'$", (1, 12)),
    ("short-hex-escape", r'root ::= "\x4"', S, r"^bad escape sequence '\\x4': '\\x' needs exactly 2 hex digits$", (1, 11)),
    ("non-hex-unicode-escape", r'root ::= "ab\u12G4"', S, r"'\\u' needs exactly 4 hex digits", (1, 13)),
    ("code-point-too-large", r"root ::= [\U00110000]", S, r"'\\U00110000': beyond U\+10FFFF", (1, 11)),
    ("surrogate-in-string", r'root ::= "\uD800"', S, r"surrogate code points are not characters", (1, 11)),
    # character classes
    ("unterminated-class", "root ::= [a-z", S, r"^unterminated character class$", (1, 10)),
    ("class-broken-by-newline", "root ::= [a\nb]", S, r"^unterminated character class$", (1, 10)),
    ("range-out-of-order", "root ::= [0-9z-a]", S, r"^character range out of order 'z-a'$", (1, 14)),
    ("escaped-range-out-of-order", r"root ::= [\x7F-\x00]", S, r"^character range out of order '\\x7F-\\x00'$", (1, 11)),
    ("empty-class", "root ::= []", S, r"^empty character class '\[\]'", (1, 10)),
    # parentheses
    ("unclosed-paren", 'root ::= ( "a" | "b"', S, r"^unbalanced parenthesis: '\(' is never closed$", (1, 10)),
    ("unclosed-paren-before-next-rule", 'root ::= ( "a"\nx ::= "b"', S, r"'\(' is never closed", (1, 10)),
    ("unclosed-outer-paren", 'root ::= ( "a" ( "b" )', S, r"'\(' is never closed", (1, 10)),
    ("unclosed-inner-paren", 'root ::= ( "a" ( "b" ) ( "c"\n', S, r"'\(' is never closed", (1, 24)),
    ("stray-close-paren", 'root ::= "a" )', S, r"^unbalanced parenthesis: '\)' has no matching '\('$", (1, 14)),
    ("unclosed-lookahead", 'root ::= "a" (= "b"', S, r"'\(=' is never closed", (1, 14)),
    # rule structure
    ("missing-assign", 'root "a"', S, r"^expected '::=' after rule name \"root\"$", (1, 6)),
    ("colon-equals", 'root := "a"', S, r"^expected '::=' after rule name \"root\"$", (1, 6)),
    ("name-alone", 'x\nroot ::= "a"', S, r"^expected '::=' after rule name \"x\"$", (1, 2)),
    ("assign-without-name", '::= "a"', S, r"^expected a rule definition \(name ::= \.\.\.\), found '::='$", (1, 1)),
    ("assign-mid-rule", 'root ::= "a" ::= "b"', S, r"^'::=' must follow a rule name", (1, 14)),
    ("duplicate-rule", 'root ::= "a"\nx ::= "b"\nroot ::= "c"', S,
     r'^rule "root" is defined twice \(first at line 1, column 1\)$', (3, 1)),
    ("empty-body", 'root ::=\nx ::= "a"', S, r'^rule "root" has an empty body \(write "" for the empty string\)$', (1, 9)),
    ("two-rules-on-one-line", 'root ::= "a" x ::= "b"', S, r'^rule definition "x" must start on a new line$', (1, 14)),
    ("stray-pipe-before-rules", '| "a"\nroot ::= "b"', S, r"^expected a rule definition .*found '\|'$", (1, 1)),
    ("stray-character", 'root ::= "a" ; "b"', S, r"^unexpected character ';'$", (1, 14)),
    ("stray-close-bracket", 'root ::= ( "a" ]', S, r"^unexpected character '\]'$", (1, 16)),
    ("lookahead-not-last", 'root ::= "a" (= "b") "c"', S, r"^a lookahead assertion '\(= \.\.\.\)' must be the last", (1, 22)),
    ("empty-lookahead", 'root ::= "a" (= )', S, r"^empty lookahead assertion", (1, 14)),
    # quantifiers and repetition bounds
    ("star-nothing-to-repeat", 'root ::= * "a"', S, r"^quantifier '\*' has nothing to repeat$", (1, 10)),
    ("plus-after-pipe", 'root ::= "a" | +"b"', S, r"^quantifier '\+' has nothing to repeat$", (1, 16)),
    ("question-after-paren", 'root ::= (?"a")', S, r"^quantifier '\?' has nothing to repeat$", (1, 11)),
    ("brace-after-assign", "root ::= {2}", S, r"^quantifier '\{' has nothing to repeat$", (1, 10)),
    ("repetition-min-above-max", 'root ::= "a"{3,1}', S, r"^repetition bounds \{3,1\}: the minimum is larger than the maximum$", (1, 13)),
    ("repetition-without-min", 'root ::= "a"{,3}', S, r"^expected a number in repetition bounds, found ','$", (1, 14)),
    ("repetition-with-name", 'root ::= "a"{n}', S, r'^expected a number in repetition bounds, found rule name "n"$', (1, 14)),
    ("unclosed-repetition", 'root ::= "a"{2,', S, r"^unclosed repetition '\{'$", (1, 13)),
    # positions across lines, comments and tabs
    ("error-after-comments", '# comment\n\nroot ::= "a" | [b-a] # another', S, r"out of order 'b-a'", (3, 17)),
    ("error-after-tab", 'root ::=\t"\\q"', S, r"bad escape sequence '\\q'", (1, 11)),
    ("error-after-crlf", 'root ::= x\r\nx ::= "\\q"\r\n', S, r"bad escape sequence '\\q'", (2, 8)),
    # reference and language errors (normalisation)
    ("undefined-rule", 'root ::= "a" missing-rule', U, r'^rule "missing-rule" is not defined \(used in rule "root"\)$', (1, 14)),
    ("undefined-rule-in-group", 'root ::= x\nx ::= ( "a" |\n    y )', U, r'^rule "y" is not defined \(used in rule "x"\)$', (3, 5)),
    ("undefined-start", 'expr ::= "a"', U, r'^root rule "root" is not defined$', (None, None)),
    ("empty-grammar", "# nothing here\n", U, r'^root rule "root" is not defined \(the grammar defines no rules\)$', (None, None)),
    ("rule-derives-only-itself", "root ::= root", E, r'^rule "root" derives no finite string', (1, 1)),
    ("rule-never-terminates", 'root ::= "a" root', E, r'^rule "root" derives no finite string', (1, 1)),
    ("unproductive-side-rule", 'root ::= "x" | a\na ::= a', E, r'^rule "a" derives no finite string', (2, 1)),
    ("empty-language-class", r"root ::= [^\x00-\U0010FFFF]", E, r'^start rule "root" matches no string$', (1, 1)),
    ("empty-language-surrogates", r"root ::= [\uD800-\uDFFF]", E, r'^start rule "root" matches no string$', (1, 1)),
    ("blame-the-self-loop", "root ::= a\na ::= a", E, r'^rule "a" derives no finite string', (2, 1)),
]


def _ids(row: object) -> str:
    return row.values[0] if hasattr(row, "values") else row[0]  # type: ignore[index,attr-defined]


@pytest.mark.parametrize("name, text, exc, match, where", GRAMMAR_ERRORS, ids=[_ids(r) for r in GRAMMAR_ERRORS])
def test_grammar_error(name: str, text: str, exc: type[Exception], match: str,
                       where: tuple[int | None, int | None]) -> None:
    with pytest.raises(exc) as info:
        pda.Grammar.from_ebnf(text, filename="bad.gbnf")
    err = info.value
    assert type(err) is exc
    assert re.search(match, err.message), f"{err.message!r} does not match {match!r}"
    assert (err.line, err.column) == where
    assert err.filename == "bad.gbnf"


def test_table_is_large_enough() -> None:
    assert len(GRAMMAR_ERRORS) >= 30


def test_message_has_kind_place_and_caret() -> None:
    with pytest.raises(GrammarSyntaxError) as info:
        pda.Grammar.from_ebnf('root ::= "a"\nx ::= [z-a]', filename="g.gbnf")
    text = str(info.value)
    assert text.startswith("Grammar syntax error at g.gbnf:line 2, column 8: character range out of order 'z-a'")
    assert text.endswith("\n    x ::= [z-a]\n           ^")


def test_errors_are_value_errors() -> None:
    with pytest.raises(ValueError, match="unclosed string literal"):
        pda.Grammar.from_ebnf('root ::= "a')
