"""Lazy quantifiers inside Lark terminals, read the way Lark's lexers read them.

Lark matches a terminal with ``re.match``, which stops a lazy repetition ``X*?`` as soon as the
rest of the pattern matches.  A byte automaton has no "as soon as"; instead the two idioms used by
Lark's ``common.lark`` are rewritten into the plain regular language ``re.match`` actually reads:

* ``/X*?/ /(?<!\\\\)(\\\\\\\\)*?/ "q"`` (``_STRING_ESC_INNER`` in ``ESCAPED_STRING``): the body
  up to the first quote ``q`` that is not escaped by a backslash;
* ``/X*?/ "close"`` or ``/X+?/ "close"`` (``C_COMMENT``): a body in which ``close`` does not occur;
* the same within one regex, ``/open X*? close/`` with ``open`` and ``close`` plain text (SynCode's
  Go grammar: ``/".*?"/``, a string ending at its first quote): :func:`lazy_regex`.

``X`` must be one character class (``.``, ``[...]``, ``(.|\\n)``...).  Read as greedy instead,
``/".*?"/`` would also take ``"a"b"`` as one string, which Lark never does, and the choice at every
quote of a line made the subset construction of a Go program's rule 12x its minimal DFA.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

from lark.lexer import Pattern, PatternRE, PatternStr

from pda.ir import EPSILON, NOTHING, Alt, ByteClass, Bytes, CharClass, Expr, alt, chars, lit, normalize_ranges, seq, star

__all__ = ["lazy_idiom", "lazy_regex"]

Ranges = tuple[tuple[int, int], ...]

_ESCAPE_TAIL = r"(?<!\\)(\\\\)*?"  # common.lark's _STRING_ESC_INNER, second half
_LAZY_RE = re.compile(r"^(?P<body>.+?)(?P<op>[*+])\?$", re.S)


def lazy_idiom(
    pats: Sequence[Pattern | None], i: int, translate: Callable[[Pattern], Expr]
) -> tuple[Expr, int] | None:
    """The IR of an idiom starting at ``pats[i]`` and how many patterns it spans, or None.

    ``pats`` are the parts of one terminal sequence (None for parts that are not literals);
    ``translate`` turns one pattern into IR (used for the body ``X``).
    """
    p = pats[i]
    if not isinstance(p, PatternRE) or i + 1 >= len(pats):
        return None
    lazy = _LAZY_RE.match(p.value)
    if not lazy or not _is_atom(lazy.group("body")):
        return None
    nxt, after = pats[i + 1], pats[i + 2] if i + 2 < len(pats) else None
    if (
        isinstance(nxt, PatternRE) and nxt.value == _ESCAPE_TAIL and not nxt.flags and lazy.group("op") == "*"
        and isinstance(after, PatternStr) and len(after.value) == 1 and after.value != "\\" and not after.flags
    ):
        body = _char_set(translate(PatternRE(lazy.group("body"), p.flags)))
        if body is not None:
            return seq(_escaped_body(body, after.value), lit(after.value)), 3
    if isinstance(nxt, PatternStr) and not nxt.flags:
        body = _char_set(translate(PatternRE(lazy.group("body"), p.flags)))
        if body is not None:
            content = _until_first(body, nxt.value)
            if lazy.group("op") == "+":  # one X first: an occurrence of ``close`` there does not stop it
                content = seq(chars(body), content)
            return seq(content, lit(nxt.value)), 2
    return None


def lazy_regex(p: PatternRE, translate: Callable[[Pattern], Expr]) -> Expr | None:
    """The IR of a regex ``open X*? close`` (or ``X+?``) read as ``re.match`` does, or None when
    ``p`` is not one: ``open`` and ``close`` plain text (``close`` not empty, no letters under the
    ``i`` flag), ``X`` one atom matching one character, no ``x`` flag."""
    if "x" in p.flags:
        return None
    text = p.value
    pre, i = _plain_prefix(text)
    j = _atom_end(text, i)
    if j < 0 or text[j:j + 2] not in ("*?", "+?"):
        return None
    post, k = _plain_prefix(text, j + 2)
    if k != len(text) or not post or ("i" in p.flags and any(ch.isalpha() for ch in pre + post)):
        return None
    body = _char_set(translate(PatternRE(text[i:j], p.flags)))
    if body is None:
        return None
    content = _until_first(body, post)
    if text[j] == "+":  # one X first: an occurrence of ``close`` there does not stop it
        content = seq(chars(body), content)
    return seq(lit(pre), content, lit(post))


_META = set("\\[](){}.*+?|^$")


def _plain_prefix(text: str, i: int = 0) -> tuple[str, int]:
    """The literal text that ``text[i:]`` starts with (plain characters and escaped punctuation),
    and where it stops."""
    out = []
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and not text[i + 1].isalnum() and text[i + 1] not in " \t\n":
            out.append(text[i + 1])
            i += 2
        elif c not in _META:
            out.append(c)
            i += 1
        else:
            break
    # a quantifier applies to the last character alone: leave that one to the caller
    if i < len(text) and text[i] in "*+?{" and out:
        i -= 2 if i >= 2 and text[i - 2] == "\\" else 1
        out.pop()
    return "".join(out), i


def _atom_end(text: str, i: int) -> int:
    """Where the atom starting at ``text[i]`` ends (``.``, an escape, a class, a group), or -1."""
    for j in range(i + 1, len(text) + 1):
        if _is_atom(text[i:j]):
            return j
    return -1


def _is_atom(body: str) -> bool:
    """Whether regex text ``body`` is exactly one atom: ``.``, an escape, a ``[...]`` class or a group."""
    if body == "." or (len(body) == 2 and body[0] == "\\"):
        return True
    if body[0] == "[":
        return _class_end(body, 0) == len(body)
    if body[0] != "(":
        return False
    depth = 0
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = _class_end(body, i)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i == len(body) - 1
        i += 1
    return False


def _class_end(body: str, i: int) -> int:
    """The index just after the ``[...]`` class that starts at ``body[i]`` (len(body) + 1 if unclosed)."""
    i += 1
    if body[i:i + 1] == "^":
        i += 1
    if body[i:i + 1] == "]":
        i += 1
    while i < len(body):
        if body[i] == "\\":
            i += 2
        elif body[i] == "]":
            return i + 1
        else:
            i += 1
    return len(body) + 1


def _char_set(expr: Expr) -> tuple[tuple[int, int], ...] | None:
    """The code points of ``expr`` when it matches exactly one character, else None."""
    if isinstance(expr, CharClass):
        return expr.ranges
    if isinstance(expr, Bytes):
        text = expr.data.decode("utf-8", errors="replace")
        return ((ord(text), ord(text)),) if len(text) == 1 and text.encode() == expr.data else None
    if isinstance(expr, ByteClass):
        return expr.ranges if all(b <= 0x7F for _, b in expr.ranges) else None
    if isinstance(expr, Alt) and expr.items:
        parts = [_char_set(e) for e in expr.items]
        if any(p is None for p in parts):
            return None
        return normalize_ranges(r for p in parts for r in p)  # type: ignore[union-attr]
    return None


def _minus(ranges: tuple[tuple[int, int], ...], points: str) -> Expr:
    out = list(ranges)
    for ch in points:
        cp = ord(ch)
        out = [r for lo, hi in out for r in ((lo, min(hi, cp - 1)), (max(lo, cp + 1), hi)) if r[0] <= r[1]]
    return chars(out)


def _contains(ranges: tuple[tuple[int, int], ...], ch: str) -> bool:
    return any(lo <= ord(ch) <= hi for lo, hi in ranges)


def _escaped_body(body: tuple[tuple[int, int], ...], quote: str) -> Expr:
    """What ``X*? (?<!\\\\)(\\\\\\\\)*? q`` reads before its closing quote ``q``.

    ``re.match`` stops at the first ``q`` preceded by an even run of backslashes, so the body is
    ``([X-{\\\\,q}] | \\\\ [X])*``; when ``X`` has no backslash, ``(X-{q})* (\\\\\\\\)*``.
    """
    if not _contains(body, "\\"):
        return seq(star(_minus(body, quote)), star(lit("\\\\")))
    return star(alt(_minus(body, "\\" + quote), seq(lit("\\"), chars(body))))


def _until_first(body: tuple[tuple[int, int], ...], close: str) -> Expr:
    """Strings ``c`` over ``X`` such that ``close`` occurs in ``c + close`` only at its very end.

    That is what ``X*? close`` reads with ``re.match``.  Built from the Knuth-Morris-Pratt
    automaton of ``close`` (state ``k``: the last ``k`` characters read are ``close[:k]``), turned
    into an expression by state elimination; ``close`` is short, so this stays small.
    """
    m = len(close)
    symbols = sorted({ch for ch in close if _contains(body, ch)})
    other = _minus(body, "".join(symbols))

    def step(k: int, ch: str) -> int:
        s = close[:k] + ch
        return next((j for j in range(min(len(s), m), 0, -1) if s.endswith(close[:j])), 0)

    def ends_well(k: int) -> bool:  # appending ``close`` from state k completes it only at the end
        state = k
        for ch in close[:-1]:
            state = step(state, ch)
            if state == m:
                return False
        return True

    start, final = m, m + 1  # a generalised NFA over states 0..m-1 plus a fresh start and final
    edges: dict[tuple[int, int], Expr] = {}

    def add(p: int, q: int, e: Expr) -> None:
        edges[(p, q)] = alt(edges[(p, q)], e) if (p, q) in edges else e

    add(start, 0, EPSILON)
    for k in range(m):
        for ch in symbols:
            j = step(k, ch)
            if j < m:
                add(k, j, lit(ch))
        if other != NOTHING:
            add(k, 0, other)
        if ends_well(k):
            add(k, final, EPSILON)
    for r in range(m):
        loop = star(edges.pop((r, r))) if (r, r) in edges else EPSILON
        ins = [(p, edges.pop((p, q))) for (p, q) in list(edges) if q == r]
        outs = [(q, edges.pop((p, q))) for (p, q) in list(edges) if p == r]
        for p, e_in in ins:
            for q, e_out in outs:
                add(p, q, seq(e_in, loop, e_out))
    return edges.get((start, final), NOTHING)


