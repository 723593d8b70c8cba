"""The Lark frontend: acceptance tables, IR shape, agreement with Lark's Earley parser, errors."""

from __future__ import annotations

import functools
import itertools
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pda
from pda.errors import GrammarSyntaxError, RegexError, UndefinedRuleError, UnsupportedRegexError
from pda.frontends.lark_format import IGNORE_RULE, parse_lark
from pda.ir import Ref, Repeat, lit, seq

lark = pytest.importorskip("lark")

# ----------------------------------------------------------------------------- grammars

ARITH = r"""
?start: sum
?sum: sum "+" product -> add
    | sum "-" product -> sub
    | product
?product: product "*" atom | product "/" atom | atom
?atom: NUMBER | "-" atom | "(" sum ")"
%import common.NUMBER
%import common.WS_INLINE
%ignore WS_INLINE
"""

# Lark's own JSON example grammar (examples/json_parser.py).
JSON = r"""
?start: value
?value: object
      | array
      | string
      | SIGNED_NUMBER      -> number
      | "true"             -> true
      | "false"            -> false
      | "null"             -> null
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : string ":" value
string : ESCAPED_STRING
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
"""

TEMPLATES = r"""
start: _sep{item, ","} ";" pair{NAME, INT}
_sep{x, sep}: x (sep x)*
pair{k, v}: "(" k ":" v ")"
item: "ab"i ~ 1..2 | /x+y?/ | "[" _sep{item, "|"} "]"
NAME: /[a-z]+/
%import common.INT
"""

WORDS = r"""
start: (NAME | NUMBER)+
NAME: /[a-z]+/
NUMBER: /[0-9]+/
"""

COMMENTS = r"""
start: "a"+
%import common.WS
%import common.C_COMMENT
%ignore WS
%ignore C_COMMENT
"""

STRINGS = r"""
start: "[" [ESCAPED_STRING ("," ESCAPED_STRING)*] "]"
%import common.ESCAPED_STRING
%import common.WS
%ignore WS
"""

# (grammar, start, passing, failing)
CASES: list[tuple[str, str, list[str], list[str]]] = [
    # rules and terminals; no %ignore, so no blanks anywhere
    ('start: greeting NAME\ngreeting: "hello" | "hi"\nNAME: /[a-z]+/',
     "start", ["hellobob", "hihi", "hix"], ["hello", "hello bob", "HELLObob", "bob"]),
    # terminals made of terminals, ranges and EBNF operators inside terminals
    ('start: IDENT\nIDENT: LETTER (LETTER | DIGIT | "_")*\nLETTER: "a".."z" | "A".."Z"\nDIGIT: "0".."9"',
     "start", ["a", "Ab_9", "z__"], ["", "9a", "a-b", "_a"]),
    # string terminals with the i flag
    ('start: "select"i " " NAME\nNAME: /[a-z]+/', "start", ["select x", "SELECT x", "SeLeCt abc"],
     ["select X", "selec x", "selectx"]),
    ('start: KW+\nKW: "ab"i', "start", ["ab", "AbaBAB"], ["", "a", "abc"]),
    # regex terminals with flags
    ("start: /ab+c/i", "start", ["abc", "ABBBc", "aBc"], ["ac", "abcc", "abd"]),
    ("start: /a.b/s", "start", ["a\nb", "axb"], ["ab", "a\n\nb"]),
    ("start: /a.b/", "start", ["axb", "a-b"], ["a\nb"]),
    ("start: /a b # spaces and this comment do not count\n/x", "start", ["ab"], ["a b", "a"]),
    (r"start: /\d{2,3}/ /[^\s]+/", "start", ["12x", "123x", "1234y"], ["1x", "12 x", "1"]),
    # ?rule, _rule, !rule, aliases: tree shape only
    ('?start: a | _b\n!a: "x" "y" -> alias\n_b: "z"+', "start", ["xy", "z", "zzz"], ["x", "xz", ""]),
    # [x], x?, x ~ n, x ~ n..m in rules
    ('start: "a" ["b"] "c"? "d" ~ 2 "e" ~ 1..3', "start", ["adde", "abcddeee", "acdde"],
     ["ade", "addeeee", "abbdde", "adddde"]),
    # parenthesised alternatives and repetition of groups
    ('start: ("a" | "b" "c")* "d"', "start", ["d", "ad", "bcad", "abcabcd"], ["", "bd", "abc"]),
    # %import common and %ignore
    ("start: CNAME+\n%import common.CNAME\n%import common.WS\n%ignore WS", "start",
     ["x", "  foo bar_1 _baz  ", "a\tb\nc", "ab"], ["", "   ", "1abc", "a-b"]),
    ('start: NUMBER ("," NUMBER)*\n%import common.NUMBER\n%import common.WS\n%ignore WS', "start",
     ["1", "1.5, 2e10 ,.5", " 3 ", "1e+3,4."], ["1,", ",1", "1 2", "e3", "1.2.3"]),
    (STRINGS, "start", ['[]', '["a", "b\\"c"]', '[ "" , "\\\\" ]', '["a\\nb"]'],
     ['["a"b"]', '["\\"]', '["a\nb"]', '["a",]', '"a"']),
    # several %ignore terminals, comments
    ('start: "a"+\n%import common.WS\n%import common.C_COMMENT\n%ignore WS\n%ignore C_COMMENT', "start",
     ["a a", "a/* x */a", "/**/a/* * / */ a /***/", "a/*a\n*/"], ["a /* x */ */ a", "a /* x", "/* a */"]),
    ('start: "a" "b"\n%ignore " "\n%ignore "#"', "start", ["ab", " a # b  #", "#ab"], ["a-b", "a", "a bb"]),
    # templates
    (TEMPLATES, "start", ["ab;(k:1)", "AB,abAb,xxy;(k:12)", "[ab|x],ab,[[x]];(abc:0)"],
     ["ab", "ab,;(k:1)", "abababab;(k:1)", "ab;(K:1)", "[];(k:1)"]),
    # left recursion (kept as written; the core eliminates it)
    (ARITH, "start", ["1", "1+2*3", "(1 + 2) * -3 / 4.5", " 2 - - 3 "], ["", "1+", "(1", "1 2", "*1"]),
    ("start: list\nlist: list \",\" ITEM | ITEM\nITEM: \"x\"", "start", ["x", "x,x,x"], ["", ",x", "x,"]),
    # Lark's json example
    (JSON, "start", ['{"a": [1, -2.5e3, true, false, null, "s"]}', "[]", " {} ", '"x"', "[[], {}]"],
     ["{", "[1,]", "{'a': 1}", "tru", '{"a" 1}', "[1 2]"]),
    # the lazy idioms inside one terminal read as re.match reads them
    ('start: TAG+\nTAG: "<" /.+?/ ">"', "start", ["<a>", "<>>", "<ab><c>"], ["<a>b>", "<>", "<a"]),
    # multi-name import, %extend, %override
    ('start: INT (WS INT)* A B\nA: "a"\nB: "b"\n%import common (WS, INT)\n%extend A: "x"\n%override B: "y"', "start",
     ["1ay", "1 2xy", "3\n4ay"], ["1ab", "1 2", " 1ay", "1a"]),
    # a different start rule
    ('start: a\na: "x" b\nb: "y"', "b", ["y"], ["xy", "x"]),
]


@functools.lru_cache(maxsize=None)
def compiled(text: str, start: str = "start") -> pda.Grammar:
    return pda.Grammar.from_lark(text, start=start)


@pytest.mark.parametrize(("grammar", "start", "passing", "failing"), CASES)
def test_accepts(grammar: str, start: str, passing: list[str], failing: list[str]) -> None:
    g = compiled(grammar, start)
    for text in passing:
        assert g.accepts(text), text
    for text in failing:
        assert not g.accepts(text), text


# ----------------------------------------------------------------------------- IR shape


def test_ir_rules_terminals_and_positions() -> None:
    ir = parse_lark('start: a NAME*\na: "x"\nNAME: /[a-z]/\n', filename="g.lark")
    assert ir.start == "start"
    assert ir.rules["start"] == seq(Ref("a"), Repeat(Ref("NAME"), 0, None))
    assert ir.rules["a"] == lit("x")
    assert ir.positions == {"start": (1, 1), "a": (2, 1), "NAME": (3, 1)}
    assert ir.filename == "g.lark" and ir.source is not None and IGNORE_RULE not in ir.rules


def test_ir_ignore_precedes_every_terminal_and_ends_start() -> None:
    ir = parse_lark('start: "a" b\nb: "b"\n%ignore " "')
    ign = Ref(IGNORE_RULE)
    assert ir.rules["start"] == seq(ign, lit("a"), Ref("b"), ign)
    assert ir.rules["b"] == seq(ign, lit("b"))
    assert ir.rules[IGNORE_RULE] == Repeat(Ref("__IGNORE_0"), 0, None)


def test_ir_start_called_recursively_gets_a_wrapper() -> None:
    ir = parse_lark('start: "(" start ")" | "x"\n%ignore " "')
    assert ir.start == "__start"
    assert ir.rules["__start"] == seq(Ref("start"), Ref(IGNORE_RULE))
    g = pda.Grammar.from_ir(ir)
    assert g.accepts(" ( (x ) ) ") and not g.accepts("(x")


def test_ir_template_instances_are_rules() -> None:
    ir = parse_lark('start: _sep{A, ","} _sep{"b", ";"}\n_sep{x, s}: x (s x)*\nA: "a"')
    assert set(ir.rules) == {"start", '_sep{A, ","}', '_sep{"b", ";"}', "A"}
    assert ir.positions['_sep{A, ","}'] == (2, 1)


# ----------------------------------------------------------------------------- Lark's Earley as oracle


@functools.lru_cache(maxsize=None)
def earley(text: str) -> lark.Lark:
    # a forest, not a tree: only acceptance matters, and trees of ambiguous parses can be exponential
    return lark.Lark(text, parser="earley", lexer="dynamic_complete", ambiguity="forest")


def lark_accepts(grammar: str, text: str) -> bool:
    try:
        earley(grammar).parse(text)
    except lark.exceptions.UnexpectedInput:
        return False
    return True


ORACLE = {
    "arith": (ARITH, "0123456789.+-*/() ", ["1+2*3", "(1 + 2) * -3 / 4.5", "-(2.5e3-1)*7"]),
    "json": (JSON, '{}[]:,"a1-.e \\', ['{"a": [1, -2.5e3, true, null, "s\\"q"]}', '[[], {"": ""}]']),
    "templates": (TEMPLATES, "abAB,;:()[]|xyk1", ["ab;(k:1)", "AB,abAb,xxy;(k:12)", "[ab|x],ab;(z:0)"]),
    "comments": (COMMENTS, "a /*\n", ["a a", "a/* x */a", "/**/a/* * / */ a /***/"]),
    "words": (WORDS, "ab12 ", ["ab12c", "a1b2", "abc"]),
    "strings": (STRINGS, '[]"a,\\ \n', ['["a", "b\\"c"]', '[ "" , "\\\\" ]']),
}


@st.composite
def mutated(draw: st.DrawFn, seeds: list[str], alphabet: str) -> str:
    """A valid sample with one to three single-character insertions, deletions or replacements."""
    text = draw(st.sampled_from(seeds))
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from("idr"))
        ch = draw(st.sampled_from(alphabet))
        if op == "i":
            text = text[:i] + ch + text[i:]
        elif op == "d":
            text = text[:i] + text[i + 1:]
        else:
            text = text[:i] + ch + text[i + 1:]
    return text


@pytest.mark.parametrize("name", sorted(ORACLE))
def test_agrees_with_lark_earley(name: str) -> None:
    grammar, alphabet, seeds = ORACLE[name]
    g = compiled(grammar)
    for seed in seeds:
        assert g.accepts(seed) and lark_accepts(grammar, seed), seed

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
    @given(st.one_of(st.text(st.sampled_from(alphabet), max_size=12), mutated(seeds, alphabet)))
    def check(text: str) -> None:
        assert g.accepts(text) == lark_accepts(grammar, text), text

    check()


LAZY = [
    (r'T: "\"" /.*?/ /(?<!\\)(\\\\)*?/ "\""', r'".*?(?<!\\)(\\\\)*?"', '"\\a\n'),
    ('T: "/*" /(.|\\n)*?/ "*/"', r"/\*(.|\n)*?\*/", "/*a\n"),
    ('T: "<" /.+?/ "aba"', "<.+?aba", "<ab"),
    ('T: "<" /[ab]*?/ "aa"', "<[ab]*?aa", "<ab"),
    # the same idiom within one regex (SynCode's Go grammar: /".*?"/, /`.*?`/)
    ('T: /".*?"/', '".*?"', '"a\n'),
    ('T: /`.*?`/i', "`.*?`", "`a\n"),
    ('T: /<[ab]+?aa/', "<[ab]+?aa", "<ab"),
    ('T: /\\/\\*(.|\\n)*?\\*\\//', r"/\*(.|\n)*?\*/", "/*a\n"),
    ('T: /ab*?a/', "ab*?a", "ab"),  # the atom is one letter: read as greedy, which is the same here
]


@pytest.mark.parametrize(("terminal", "regex", "alphabet"), LAZY)
def test_lazy_idioms_read_as_re_match_does(terminal: str, regex: str, alphabet: str) -> None:
    g = pda.Grammar.from_lark(f"start: T\n{terminal}")
    pattern = re.compile(regex)
    for n in range(6):
        for chars in itertools.product(alphabet, repeat=n):
            text = "".join(chars)
            m = pattern.match(text)
            assert g.accepts(text) == (m is not None and m.end() == len(text)), text


def test_relative_import_next_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "words.lark").write_text("WORD: /[a-z]+/\n_SEP: \",\"\nlist: WORD (_SEP WORD)*\n")
    main = tmp_path / "main.lark"
    main.write_text("start: list\n%import .words.list\n")
    g = pda.Grammar.from_file(main)
    assert g.accepts("ab,c") and not g.accepts("ab,")


def test_ambiguous_grammar_stays_fast() -> None:
    g = pda.Grammar.from_lark('start: s\ns: s s | "a"')
    assert g.accepts("a" * 200)
    assert not g.accepts("a" * 199 + "b")


# ----------------------------------------------------------------------------- errors

# (grammar, error class, message pattern, line, column)
ERRORS: list[tuple[str, type[Exception], str, int | None, int | None]] = [
    ('start: A B\nA: "a"\n%declare B', GrammarSyntaxError,
     "%declare'd terminals cannot be matched by a byte-level automaton", 3, 10),
    ('start: (\n', GrammarSyntaxError, "Unclosed parenthesis", 1, 9),
    ('start: "a" @\n', GrammarSyntaxError, "Unexpected input", 1, 12),
    ('start: "a"\nfoo\n', GrammarSyntaxError, "unexpected end of line; expected '.', ':', '{'", 2, 4),
    ('start: "a" | b\nb: c\n', UndefinedRuleError, r"Rule 'c' used but not defined \(in b\)", 2, 4),
    ('start: "a" FOO\n', UndefinedRuleError, "Terminal 'FOO' used but not defined", 1, 12),
    ('start: A\nA: "a" B\n', UndefinedRuleError, "Terminal used but not defined: B", 2, 8),
    ('start: "a"\n%ignore WS\n', UndefinedRuleError, "marked to ignore but were not defined", 2, 9),
    ('a: "x"\n', UndefinedRuleError, "the start rule 'start' is not defined", None, None),
    ('start: "x"\nstart: "y"\n', GrammarSyntaxError, "Rule 'start' defined more than once", 2, 1),
    ('start: "a" ~ 3..2\n', GrammarSyntaxError, r"Bad Range", None, None),
    ("start: /a*/\n", GrammarSyntaxError, "terminal /a\\*/ matches the empty string", 1, 8),
    ('start: "x" /a(?<=b)/\n', UnsupportedRegexError, "lookbehind", 1, 12),
    ('start: "x" /a(/\n', RegexError, r"missing \), unterminated subpattern", 1, 12),
    ('start: A\nA: "b"?\n', GrammarSyntaxError, "terminal A matches the empty string", 2, 1),
    ('start: ""\n', GrammarSyntaxError, "Empty terminals are not allowed", None, None),
    ("%import nonexistent.FOO\nstart: FOO\n", GrammarSyntaxError, "cannot find the grammar to import", 1, 9),
]


@pytest.mark.parametrize(("grammar", "cls", "pattern", "line", "column"), ERRORS)
def test_errors(grammar: str, cls: type[Exception], pattern: str, line: int | None, column: int | None) -> None:
    with pytest.raises(cls, match=pattern) as info:
        parse_lark(grammar)
    assert (info.value.line, info.value.column) == (line, column)  # type: ignore[attr-defined]
    if line is not None:
        assert f"line {line}, column {column}" in str(info.value)


def test_errors_are_value_errors_with_filename() -> None:
    with pytest.raises(ValueError, match=re.escape("g.lark:line 1, column 8")):
        parse_lark("start: nope\n", filename="g.lark")
