"""The regex frontend: IR shape, errors, and differential tests against Python's ``re``
(and against node's ``RegExp`` for the ECMAScript dialect, when node is installed)."""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pda import Grammar
from pda.errors import RegexError, UnsupportedRegexError
from pda.frontends._regex_unicode import _all_chars
from pda.frontends.regex import literal_to_ir, regex_to_ir
from pda.ir import EPSILON, NOTHING, Bytes, CharClass, GrammarIR, Repeat, Seq, alt, chars, lit, opt, plus, seq, star

ANY = CharClass(((0, 0x10FFFF),))


@functools.lru_cache(maxsize=None)
def compiled(pattern: str, flags: str = "", dialect: str = "python", search: bool = False) -> Grammar:
    expr = regex_to_ir(pattern, flags=flags, dialect=dialect, search=search)  # type: ignore[arg-type]
    return Grammar.from_ir(GrammarIR(rules={"root": expr}, start="root"))


# ----------------------------------------------------------------------------- IR shape

IR_CASES = [
    ("abc", lit("abc")),
    ("", EPSILON),
    ("a|b|", alt(lit("a"), lit("b"), EPSILON)),
    ("ab*c", seq(lit("a"), star(lit("b")), lit("c"))),
    ("(?:ab)+?", plus(lit("ab"))),
    ("[a-cx]", chars([(0x61, 0x63), (0x78, 0x78)])),
    ("[^\\n]", chars([(10, 10)], negate=True)),
    (".", chars([(10, 10)], negate=True)),
    ("(?s).", ANY),
    ("x{2,3}y{,2}z{4}", seq(Repeat(lit("x"), 2, 3), Repeat(lit("y"), 0, 2), Repeat(lit("z"), 4, 4))),
    ("a{0}b", lit("b")),
    ("(?i)k", chars([(0x4B, 0x4B), (0x6B, 0x6B), (0x212A, 0x212A)])),
    ("\\x41\\u0042\\U00000043\\N{EM DASH}", lit("ABC\u2014")),
    ("[]a]", chars([(0x5D, 0x5D), (0x61, 0x61)])),
    ("a{", lit("a{")),
    ("^ab$", lit("ab")),
    ("(?x) a b  # comment\n c", lit("abc")),
    ("\\ud800", CharClass(((0xD800, 0xD800),))),
    ("[^\\s\\S]", NOTHING),
]


@pytest.mark.parametrize("pattern, expected", IR_CASES)
def test_ir_shape(pattern: str, expected: object) -> None:
    assert regex_to_ir(pattern) == expected


def test_search_mode_ir() -> None:
    assert regex_to_ir("abc", search=True) == seq(star(ANY), lit("abc"), star(ANY))
    assert regex_to_ir("^abc$", dialect="ecmascript", search=True) == lit("abc")
    assert regex_to_ir("^a|b", dialect="ecmascript", search=True) == seq(
        alt(lit("a"), seq(star(ANY), lit("b"))), star(ANY))
    assert regex_to_ir("a$", search=True) == seq(star(ANY), lit("a"), opt(lit("\n")))  # Python's $


def test_one_class_is_one_charclass() -> None:
    expr = regex_to_ir("[a-z0-9_\\-]+")
    assert isinstance(expr, Repeat) and isinstance(expr.expr, CharClass)


def test_literal_to_ir() -> None:
    assert literal_to_ir("if") == lit("if")
    assert literal_to_ir("") == EPSILON
    assert literal_to_ir("if", ignore_case=True) == seq(
        chars([(0x49, 0x49), (0x69, 0x69), (0x130, 0x131)]), chars([(0x46, 0x46), (0x66, 0x66)]))
    assert literal_to_ir("1+", ignore_case=True) == lit("1+")
    assert isinstance(literal_to_ir("a\ud800"), Seq)  # a lone surrogate never matches, but parses


# ----------------------------------------------------------------------------- errors

ERRORS = [
    ("(ab", RegexError, "missing \\), unterminated subpattern", 0),
    ("ab)", RegexError, "unbalanced parenthesis", 2),
    ("[abc", RegexError, "unterminated character set", 0),
    ("[a-", RegexError, "unterminated character set", 0),
    ("a\\", RegexError, "bad escape \\(end of pattern\\)", 1),
    ("\\q", RegexError, "bad escape \\\\q", 0),
    ("[z-a]", RegexError, "bad character range z-a", 1),
    ("[\\d-z]", RegexError, "bad character range \\\\d-z", 1),
    ("*a", RegexError, "nothing to repeat", 0),
    ("a|*", RegexError, "nothing to repeat", 2),
    ("^*", RegexError, "nothing to repeat", 1),
    ("a**", RegexError, "multiple repeat", 2),
    ("a{1}{2}", RegexError, "multiple repeat", 4),
    ("a{3,2}", RegexError, "min repeat greater than max repeat", 2),
    ("\\x4", RegexError, "incomplete escape \\\\x4", 0),
    ("\\u12", RegexError, "incomplete escape \\\\u12", 0),
    ("\\U0011FFFF", RegexError, "bad escape \\\\U0011FFFF", 0),
    ("\\400", RegexError, "octal escape value \\\\400 outside of range 0-0o377", 0),
    ("(?P<1a>x)", RegexError, "bad character in group name '1a'", 4),
    ("(?P<a>x)(?P<a>y)", RegexError, "redefinition of group name 'a'", 12),
    ("a(?i)", RegexError, "global flags not at the start of the expression", 1),
    ("(?z)", RegexError, "unknown extension \\?z", 1),
    ("(?i", RegexError, "missing -, : or \\)", 3),
    ("\\N{NOPE}", RegexError, "undefined character name 'NOPE'", 0),
    ("(?#abc", RegexError, "missing \\), unterminated comment", 0),
    ("\\1", UnsupportedRegexError, "back-references are not supported", 0),
    ("(a)\\1", UnsupportedRegexError, "back-references are not supported", 3),
    ("(?P<a>x)(?P=a)", UnsupportedRegexError, "back-references are not supported", 8),
    ("x(?=a)", UnsupportedRegexError, "lookahead assertions are not supported", 1),
    ("(?!a)", UnsupportedRegexError, "lookahead assertions are not supported", 0),
    ("(?<=a)", UnsupportedRegexError, "lookbehind assertions are not supported", 0),
    ("(?<!a)", UnsupportedRegexError, "lookbehind assertions are not supported", 0),
    ("a\\b", UnsupportedRegexError, "word boundaries \\(\\\\b\\) are not supported", 1),
    ("\\Ba", UnsupportedRegexError, "word boundaries \\(\\\\B\\) are not supported", 0),
    ("(?>a)", UnsupportedRegexError, "atomic groups are not supported", 0),
    ("a*+", UnsupportedRegexError, "possessive quantifiers are not supported", 1),
    ("(a)(?(1)b|c)", UnsupportedRegexError, "conditional groups are not supported", 3),
    ("a^", UnsupportedRegexError, "anchor '\\^' is only supported at the start", 1),
    ("a|b^c", UnsupportedRegexError, "anchor '\\^' is only supported at the start", 3),
    ("(^a)*", UnsupportedRegexError, "anchor '\\^' is only supported at the start", 1),
    ("$a", UnsupportedRegexError, "anchor '\\$' is only supported at the end", 0),
    ("a$b", UnsupportedRegexError, "anchor '\\$' is only supported at the end", 1),
    ("\\Aa\\Zb", UnsupportedRegexError, "anchor '.*Z' is only supported at the end", 3),
]


@pytest.mark.parametrize("pattern, kind, message, offset", ERRORS)
def test_errors(pattern: str, kind: type[RegexError], message: str, offset: int) -> None:
    with pytest.raises(kind, match=message) as info:
        regex_to_ir(pattern)
    assert type(info.value) is kind
    assert info.value.offset == offset
    assert info.value.pattern == pattern
    assert f"(offset {offset})" in str(info.value)


@pytest.mark.parametrize("pattern", [e[0] for e in ERRORS if e[1] is RegexError])
def test_syntax_errors_are_errors_for_re_too(pattern: str) -> None:
    with pytest.raises(re.error):
        re.compile(pattern)


ECMA_ERRORS = [
    ("\\k<a>", "", UnsupportedRegexError, "back-references", 0),
    ("(?<a>x)\\k<a>", "", UnsupportedRegexError, "back-references", 7),
    ("[\\d-z]", "u", RegexError, "bad character range", 1),
    ("\\q", "u", RegexError, "bad escape \\\\q", 0),
    ("\\u{110000}", "", RegexError, "bad escape", 0),
    ("\\p{Script=Latin}", "u", UnsupportedRegexError, "Unicode property 'Script=Latin'", 0),
    ("a*+", "", RegexError, "nothing to repeat", 2),
    ("(?P<a>x)", "", RegexError, "unknown extension \\?P", 1),
    ("a]", "u", RegexError, "lone ']'", 1),
    ("\\-", "u", RegexError, "bad escape \\\\-", 0),
]


@pytest.mark.parametrize("pattern, flags, kind, message, offset", ECMA_ERRORS)
def test_ecmascript_errors(pattern: str, flags: str, kind: type[RegexError], message: str, offset: int) -> None:
    with pytest.raises(kind, match=message) as info:
        regex_to_ir(pattern, flags=flags, dialect="ecmascript")
    assert info.value.offset == offset


def test_bad_arguments() -> None:
    with pytest.raises(RegexError, match="unknown flag 'q'"):
        regex_to_ir("a", flags="q")
    with pytest.raises(ValueError, match="unknown regex dialect"):
        regex_to_ir("a", dialect="perl")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- against re.fullmatch

FULLMATCH = [
    ("abc", ["abc", "", "ab", "abcc", "ABC"]),
    ("a|b|", ["", "a", "b", "ab"]),
    ("[a-c]+\\d*", ["a", "cab12", "1", "ab٣", "d"]),
    ("(ab|cd)*e?", ["", "e", "abcde", "abe", "ace"]),
    ("x{2,3}y{,2}", ["xx", "xxxyy", "x", "xxxx", "xxyyy"]),
    ("a.b", ["axb", "a\nb", "ab", "a\u00e9b"]),
    ("(?s)a.b", ["a\nb", "axb"]),
    ("[^ab]+", ["c", "cab", "\n", "\u4e2d"]),
    ("\\w+\\s\\W", ["ab_1 !", "é \u3000.", "a a"]),
    ("(?i)hello", ["HeLLo", "hello", "hell"]),
    ("(?i)[^a-c]x", ["dx", "AX", "Dx"]),
    ("(?i)s", ["s", "S", "\u017f", "x"]),
    ("(?i)\u00df", ["\u00df", "\u1e9e", "ss"]),
    ("(?i)\u1e9e", ["\u00df", "\u1e9e"]),
    ("(?i)[k-l]", ["k", "K", "\u212a", "L", "m"]),
    ("(?i:a)b", ["Ab", "aB"]),
    ("(?i)a(?-i:b)c", ["AbC", "ABc"]),
    ("(?:a|)+b", ["b", "aab"]),
    ("[\\d-]+", ["1-2", "--", "a"]),
    ("[a-]|[-b]|[a-b-c]", ["a", "-", "c", "d"]),
    ("[]a]+|[^]a]", ["]a", "b", "]b"]),
    ("\\\\\\.\\*[.*+?]", ["\\.*?", "\\.*x"]),
    ("\\0\\01\\012[\\1\\12]\\101", ["\x00\x01\n\x01A", "\x00\x01\n\nA", "\x00"]),
    ("a+?b*?c??d{1,2}?", ["a", "abbcdd", "ad", "aaccd"]),
    ("^a$|^b", ["a", "b", "ab"]),
    ("(?m)^a$", ["a", "a\n"]),
    ("\\Aab\\Z", ["ab", "ab\n"]),
    ("(?a)\\w+", ["ab_1", "\u00e9"]),
    ("(?i)\u03a3", ["\u03c3", "\u03c2", "\u03a3", "s"]),
    ("(?i)[\\Wa]", ["A", "a", "!", "\u212a", "b"]),
    ("[\\t\\n\\r ]*", ["", " \t\r\n", "x"]),
    ("a{,2}", ["", "a", "aa", "aaa"]),
    ("a{,}", ["", "aaaa", "b"]),
    ("a{}", ["a{}", "a"]),
    ("(?x) a [ ] \\  b # comment", ["a b", "a  b", "ab"]),
    ("(?P<year>\\d{4})-(?<m>\\d\\d)?", ["2024-", "2024-01", "24-01"]),
    ("\U0001f600+|\\U0001F601", ["\U0001f600\U0001f600", "\U0001f601", "\U0001f602"]),
    ("(?#comment)a", ["a", ""]),
]


@pytest.mark.parametrize("pattern, strings", FULLMATCH)
def test_fullmatch_like_re(pattern: str, strings: list[str]) -> None:
    grammar = Grammar.from_regex(pattern)
    for s in strings:
        expected = re.fullmatch(pattern.replace("(?<m>", "(?P<m>"), s) is not None
        assert grammar.accepts(s) == expected, (pattern, s)


def test_fullmatch_table_is_not_trivial() -> None:
    outcomes = {re.fullmatch(p.replace("(?<m>", "(?P<m>"), s) is not None for p, ss in FULLMATCH for s in ss}
    assert outcomes == {True, False}


HYPOTHESIS = [
    ("(ab|a)(bc|c)*d?", "abcd"),
    ("a*b+a{2,3}|ba?", "ab"),
    ("(?:x|yz){1,3}z*", "xyz"),
    ("[^ab]*a[bc]?", "abc\n"),
    ("(?i)[a-c]+[^x]?", "abcABCxX\u212a"),
    ("(a|b|)*c{0,2}", "abc"),
    ("\\d+(\\.\\d*)?", "19.\u0663a"),
    ("(?s)a.*b|.?", "ab\n"),
    ("((ab)*|c)+", "abc"),
    ("[\\w\\-]{2,}@?", "a-_@ ."),
    ("(?i:s)[s-t]", "sStT\u017f"),
    ("x?(y?z?)*x", "xyz"),
]


@pytest.mark.parametrize("pattern, alphabet", HYPOTHESIS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fullmatch_hypothesis(pattern: str, alphabet: str, data: st.DataObject) -> None:
    text = data.draw(st.text(alphabet=alphabet, max_size=8))
    assert compiled(pattern).accepts(text) == (re.fullmatch(pattern, text) is not None)


_ATOMS = ["a", "b", ".", "[ab]", "[^a]", "[a-c]", "\\d", "\\W", "A", "[]a]", "\\x61", "(?i:a)", "K", "\u017f"]


def _patterns() -> st.SearchStrategy[str]:
    """Random patterns built from a few atoms with groups, alternation and quantifiers."""
    quantifiers = st.sampled_from(["*", "+", "?", "{2}", "{1,2}", "{,2}", "*?", "{0,}"])
    return st.recursive(
        st.sampled_from(_ATOMS),
        lambda inner: st.one_of(
            st.tuples(inner, inner).map("".join),
            st.tuples(inner, inner).map(lambda t: f"({t[0]}|{t[1]})"),
            st.tuples(inner, quantifiers).map(lambda t: f"(?:{t[0]}){t[1]}"),
        ),
        max_leaves=6,
    )


@settings(max_examples=40, deadline=None)
@given(pattern=_patterns(), flags=st.sampled_from(["", "(?i)", "(?s)"]),
       texts=st.lists(st.text(alphabet="abcA1.\nK\u017f\u212a", max_size=6), min_size=5, max_size=10))
def test_random_patterns_like_re(pattern: str, flags: str, texts: list[str]) -> None:
    grammar = compiled(flags + pattern)
    for text in texts:
        assert grammar.accepts(text) == (re.fullmatch(flags + pattern, text) is not None), (pattern, text)


SEARCH = [  # Python dialect, search=True, against re.search
    ("abc", ["xxabcyy", "ab", "abc\n"]),
    ("^ab", ["abx", "xab"]),
    ("ab$", ["xab", "ab\n", "ab\n\n", "abx"]),
    ("a|^b", ["xa", "xb", "b"]),
    ("(^a|b)c", ["ac", "xac", "xbc"]),
    ("(?m)^a$", ["x\na\ny", "xa\n", "a"]),
    ("\\Aa|b\\Z", ["ax", "xb", "xb\n"]),
    ("^$", ["", "\n", "x"]),
    ("", ["", "anything"]),
]


@pytest.mark.parametrize("pattern, strings", SEARCH)
def test_search_like_re(pattern: str, strings: list[str]) -> None:
    for s in strings:
        assert compiled(pattern, search=True).accepts(s) == (re.search(pattern, s) is not None), (pattern, s)


# ----------------------------------------------------------------------------- Unicode sets, exactly


def _ranges_of(expr: object) -> tuple[tuple[int, int], ...]:
    if isinstance(expr, Bytes):
        c = ord(expr.data.decode("utf-8"))
        return ((c, c),)
    assert isinstance(expr, CharClass), expr
    return expr.ranges


@pytest.mark.parametrize("pattern", [
    "\\d", "\\w", "\\s", "\\W", ".", "(?a)\\w", "(?i)[a-z]", "(?i)[^a-z]", "(?i)i", "(?i)\u0130",
    "(?i)[\\Wa]", "(?i)[\\u0100-\\u024f\\u1e00-\\u1fff]", "(?i)\u00b5", "(?i)[\\U00010400-\\U0001044f]",
    "(?i)[\u03d0\u03d1\u03d5]", "(?ia)[a-z]",
])
def test_character_sets_equal_re(pattern: str) -> None:
    head = re.match(r"\(\?[a-z]+\)", pattern)
    prefix = head.group(0) if head else ""
    body = pattern[len(prefix):]
    expected = tuple((m.start(), m.end() - 1) for m in re.finditer(f"{prefix}(?:{body})+", _all_chars()))
    assert _ranges_of(regex_to_ir(pattern)) == expected


# ----------------------------------------------------------------------------- ECMAScript

ECMA_SEARCH = [  # (pattern, flags, matching, not matching) under RegExp.test semantics
    ("^\\d{3}-\\d{4}$", "", ["555-1234"], ["555-12345", "x555-1234", "555-1234\n", "\u0663\u0663\u0663-1234"]),
    ("abc", "", ["abc", "xxabcyy", "\nabc\n"], ["ab", "a bc"]),
    ("^[a-z]+$", "", ["hello"], ["Hello", "hello!", ""]),
    ("^a|b$", "", ["ax", "xb"], ["xa", "bx"]),
    ("^(\\([0-9]{3}\\))?[0-9]{3}-[0-9]{4}$", "", ["(888)555-1212", "555-1212"], ["(888)555-1212 ext. 532"]),
    ("^\\S+@\\S+$", "", ["a@b"], ["a @b", "a@b\u00a0"]),
    ("^\\w+$", "", ["abc_1"], ["\u00e9t\u00e9"]),
    ("^.$", "", ["a", "\u00e9"], ["\n", "\r", "\u2028"]),
    ("^.$", "s", ["\n"], ["ab"]),
    ("(?m)^b$", "", ["a\nb\nc", "a\rb"], ["ab"]),
    ("^\\p{Lu}\\p{Ll}+$", "u", ["Hello", "\u00c9t\u00e9"], ["hello", "HELLO"]),
    ("^\\u{1F600}|\\uD83D\\uDE01$", "u", ["\U0001f600x", "x\U0001f601"], ["x\U0001f600"]),
    ("^[^]$", "", ["\n"], ["", "ab"]),
    ("^k$", "i", ["K", "k"], ["\u212a"]),
    ("^k$", "iu", ["K", "k", "\u212a"], ["x"]),
    ("^[\\d-z]+$", "", ["1-z"], ["a"]),
    ("^\\cJ\\0[\\b]$", "", ["\n\x00\x08"], ["cJ"]),
    ("^a{,2}$", "", ["a{,2}"], ["aa"]),
]


@pytest.mark.parametrize("pattern, flags, good, bad", ECMA_SEARCH)
def test_ecmascript_search(pattern: str, flags: str, good: list[str], bad: list[str]) -> None:
    grammar = compiled(pattern, flags, "ecmascript", True)
    for s in good:
        assert grammar.accepts(s), (pattern, s)
    for s in bad:
        assert not grammar.accepts(s), (pattern, s)


def test_empty_class_is_the_empty_language() -> None:
    assert regex_to_ir("^[]$", dialect="ecmascript", search=True) == NOTHING
    assert regex_to_ir("a[^\\s\\S]|b", search=False) == lit("b")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_ecmascript_search_against_node() -> None:
    cases = [(p, f.replace("m", ""), s) for p, f, good, bad in ECMA_SEARCH for s in good + bad
             if "(?m)" not in p]
    script = (
        "const c = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "console.log(JSON.stringify(c.map(([p, f, s]) => new RegExp(p, f).test(s))));"
    )
    out = subprocess.run(["node", "-e", script], input=json.dumps(cases), capture_output=True, text=True,
                         timeout=60, check=True).stdout
    for (pattern, flags, s), expected in zip(cases, json.loads(out)):
        assert compiled(pattern, flags, "ecmascript", True).accepts(s) == expected, (pattern, flags, s)
