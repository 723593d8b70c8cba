"""The grammar IR every frontend produces: rules of small immutable expression trees.

A grammar is a start rule name and a mapping rule name -> :class:`Expr`.  The node set is closed:

* :class:`Bytes` — a literal byte string (``Bytes(b"")`` is the empty string, :data:`EPSILON`);
* :class:`CharClass` — a set of Unicode scalar values, as sorted inclusive ranges; lowered to UTF-8
  byte ranges by :mod:`pda.fsm` (surrogates never match);
* :class:`ByteClass` — a set of raw byte values, for grammars over bytes rather than text;
* :class:`Seq`, :class:`Alt` (``Alt(())`` is the empty language, :data:`NOTHING`);
* :class:`Repeat` — ``expr{min,max}``, ``max=None`` for unbounded;
* :class:`Ref` — a call of another rule by name.

Build nodes with the helpers (:func:`seq`, :func:`alt`, :func:`opt`, :func:`star`, :func:`plus`,
:func:`lit`, :func:`chars`) — they flatten and simplify, so equal languages tend to get equal trees.
The node classes are defined in :mod:`pda.ir_nodes` (re-exported here), where each composite node
also keeps figures of its subtree (size, calls, ...) that the whole-grammar passes read in constant
time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Container, Iterable, Iterator, Mapping

from .ir_nodes import (
    EPSILON, NOTHING, Alt, ByteClass, Bytes, CharClass, Expr, Ref, Repeat, Seq, calls_any, has_nullable_repeat, has_scalar,
    has_scalar_free_class, literal_bytes, longest_repeat, node_count, plainly_nullable, ref_counts, ref_names,
    size_exceeds,
)

__all__ = [
    "Expr", "Bytes", "CharClass", "ByteClass", "Seq", "Alt", "Repeat", "Ref", "GrammarIR",
    "EPSILON", "NOTHING", "MAX_CODE_POINT", "seq", "alt", "opt", "star", "plus", "repeat", "lit",
    "chars", "byte_chars", "nullable", "derives", "nonempty", "any_char", "negate_ranges", "normalize_ranges", "walk", "refs_of",
    "distinct_nodes", "ref_names", "ref_counts", "tree_size", "node_count", "size_exceeds", "recursive_rules", "to_ebnf",
    "calls_any", "literal_bytes", "longest_repeat", "plainly_nullable", "has_nullable_repeat", "has_scalar_free_class",
    "has_scalar",
]

MAX_CODE_POINT = 0x10FFFF


@dataclass
class GrammarIR:
    """What a frontend returns: rules, the start rule, and where each rule was defined."""

    rules: dict[str, Expr]
    start: str
    positions: dict[str, tuple[int, int]] = field(default_factory=dict)  # rule -> (line, column)
    filename: str | None = None
    source: str | None = None  # the grammar text, for carets in error messages


# ----------------------------------------------------------------------------- constructors


def normalize_ranges(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sort and merge inclusive ranges; drop empty ones."""
    out: list[list[int]] = []
    for lo, hi in sorted((a, b) for a, b in ranges if a <= b):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


def negate_ranges(ranges: Iterable[tuple[int, int]], top: int = MAX_CODE_POINT) -> tuple[tuple[int, int], ...]:
    """The complement of ``ranges`` within ``0..top``."""
    out = []
    nxt = 0
    for lo, hi in normalize_ranges(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = max(nxt, hi + 1)
    if nxt <= top:
        out.append((nxt, top))
    return tuple(out)


def chars(ranges: Iterable[tuple[int, int]], *, negate: bool = False) -> Expr:
    """A character class over code points; ``negate`` complements within all of Unicode."""
    r = normalize_ranges(ranges)
    if negate:
        r = negate_ranges(r)
    return CharClass(r) if r else NOTHING


def byte_chars(ranges: Iterable[tuple[int, int]], *, negate: bool = False) -> Expr:
    """A class of raw byte values (0..255)."""
    r = normalize_ranges(ranges)
    if negate:
        r = negate_ranges(r, 0xFF)
    return ByteClass(r) if r else NOTHING


def any_char() -> Expr:
    """Any Unicode scalar value (what ``.`` and ``[^]`` mean in GBNF)."""
    return CharClass(((0, MAX_CODE_POINT),))


def lit(text: str | bytes) -> Expr:
    """A literal; ``str`` is encoded as UTF-8."""
    return Bytes(text.encode("utf-8") if isinstance(text, str) else bytes(text))


def seq(*items: Expr) -> Expr:
    """Concatenation, flattened; adjacent literals are merged; any NOTHING makes it NOTHING."""
    flat: list[Expr] = []
    for it in items:
        for p in it.items if it.__class__ is Seq else (it,):  # type: ignore[attr-defined]
            c = p.__class__
            if c is Bytes:
                if not p.data:  # type: ignore[attr-defined]
                    continue
                if flat and flat[-1].__class__ is Bytes:
                    flat[-1] = Bytes(flat[-1].data + p.data)  # type: ignore[attr-defined]
                    continue
            elif c is Alt and not p.items:  # type: ignore[attr-defined]
                return NOTHING
            flat.append(p)
    if not flat:
        return EPSILON
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(*items: Expr) -> Expr:
    """Union, flattened and de-duplicated (first occurrence kept)."""
    flat: list[Expr] = []
    seen: set[Expr] = set()
    for it in items:
        for p in it.items if it.__class__ is Alt else (it,):  # type: ignore[attr-defined]
            if p not in seen:
                seen.add(p)
                flat.append(p)
    return flat[0] if len(flat) == 1 else Alt(tuple(flat))


def repeat(expr: Expr, lo: int, hi: int | None) -> Expr:
    """``expr{lo,hi}`` (``hi=None``: unbounded), simplified for the trivial cases."""
    if lo < 0 or (hi is not None and hi < lo):
        raise ValueError(f"bad repetition bounds {{{lo},{hi}}}")
    c = expr.__class__
    if hi == 0 or (c is Bytes and not expr.data):  # type: ignore[attr-defined]
        return EPSILON
    if c is Alt and not expr.items:  # type: ignore[attr-defined]
        return EPSILON if lo == 0 else NOTHING
    if lo == hi == 1:
        return expr
    return Repeat(expr, lo, hi)


def opt(expr: Expr) -> Expr:
    return repeat(expr, 0, 1)


def star(expr: Expr) -> Expr:
    return repeat(expr, 0, None)


def plus(expr: Expr) -> Expr:
    return repeat(expr, 1, None)


# ----------------------------------------------------------------------------- traversal


def walk(expr: Expr) -> Iterator[Expr]:
    """Every node of ``expr``, pre-order."""
    stack = [expr]
    while stack:
        e = stack.pop()
        yield e
        if isinstance(e, (Seq, Alt)):
            stack.extend(reversed(e.items))
        elif isinstance(e, Repeat):
            stack.append(e.expr)


def refs_of(expr: Expr) -> Iterator[Ref]:
    for e in walk(expr):
        if isinstance(e, Ref):
            yield e


def _kids(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, (Seq, Alt)):
        return e.items
    if isinstance(e, Repeat):
        return (e.expr,)
    return ()


def distinct_nodes(expr: Expr) -> list[Expr]:
    """Every node of ``expr`` once (a subtree shared by several parents, by identity, once), in the
    order :func:`walk` first reaches them.  Frontends share subtrees a lot: the tree read with its
    copies can be far larger than this."""
    seen: set[int] = set()
    out: list[Expr] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        out.append(e)
        stack.extend(reversed(_kids(e)))
    return out


def _parents_first(expr: Expr, skip: Container[int] = ()) -> list[Expr]:
    """The distinct nodes of ``expr`` with every node after all its parents (reverse post-order),
    leaving out the nodes whose identity is in ``skip`` and those only they reach."""
    seen: set[int] = set()
    post: list[Expr] = []
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        e, done = stack.pop()
        if done:
            post.append(e)
            continue
        if id(e) in seen or id(e) in skip:
            continue
        seen.add(id(e))
        stack.append((e, True))
        stack.extend((k, False) for k in _kids(e))
    return post[::-1]


def tree_size(e: Expr, weight: Callable[[Expr], int], memo: dict[int, int] | None = None) -> int:
    """The sum of ``weight(n)`` over the nodes ``n`` of ``e`` read as a tree (a shared subtree counts
    once per use), computed once per distinct node; ``memo`` (by node identity) may be shared by
    calls over trees that stay alive meanwhile."""
    memo = {} if memo is None else memo
    got = memo.get(id(e))
    if got is not None:
        return got
    for n in reversed(_parents_first(e, memo)):  # children before parents
        memo[id(n)] = weight(n) + sum(memo[id(k)] for k in _kids(n))
    return memo[id(e)]


def recursive_rules(graph: Mapping[str, Iterable[str]], names: Iterable[str] | None = None) -> set[str]:
    """The rules among ``names`` (default: all) that can reach themselves, given the rules each
    rule calls (``graph[n]``, e.g. ``{r.name for r in refs_of(rules[n])}``; a mapping that fills
    itself on lookup works too).  A name missing from ``graph`` calls nothing."""

    def calls(n: str) -> Iterable[str]:
        try:
            return graph[n]
        except KeyError:
            return ()

    out: set[str] = set()
    for name in graph if names is None else names:
        seen: set[str] = set()
        todo = list(calls(name))
        while todo:
            r = todo.pop()
            if r == name:
                out.add(name)
                break
            if r not in seen:
                seen.add(r)
                todo.extend(calls(r))
    return out


# ----------------------------------------------------------------------------- printing


def _ebnf_char(cp: int, in_class: bool) -> str:
    special = "]\\^-[" if in_class else '"\\'
    ch = chr(cp)
    if ch in special:
        return "\\" + ch
    if ch == "\n":
        return "\\n"
    if ch == "\r":
        return "\\r"
    if ch == "\t":
        return "\\t"
    if cp < 0x20 or cp == 0x7F or 0xD800 <= cp <= 0xDFFF:
        return f"\\x{cp:02X}" if cp < 0x100 else f"\\u{cp:04X}"
    return ch


def to_ebnf(expr: Expr) -> str:
    """GBNF text for one expression (used to print grammars for debugging)."""
    if isinstance(expr, Bytes):
        try:
            text = expr.data.decode("utf-8")
        except UnicodeDecodeError:
            return "(" + " ".join(f'"\\x{b:02X}"' for b in expr.data) + ")" if expr.data else '""'
        return '"' + "".join(_ebnf_char(ord(c), False) for c in text) + '"'
    if isinstance(expr, (CharClass, ByteClass)):
        if not expr.ranges:
            return "[^\\x00-\\U0010FFFF]"
        body = "".join(
            _ebnf_char(a, True) if a == b else f"{_ebnf_char(a, True)}-{_ebnf_char(b, True)}" for a, b in expr.ranges
        )
        return f"[{body}]"
    if isinstance(expr, Seq):
        return " ".join(_group(e) for e in expr.items)
    if isinstance(expr, Alt):
        return "(" + " | ".join(to_ebnf(e) for e in expr.items) + ")" if expr.items else "[^\\x00-\\U0010FFFF]"
    if isinstance(expr, Repeat):
        inner = _group(expr.expr, True)
        lo, hi = expr.min, expr.max
        if (lo, hi) == (0, 1):
            return inner + "?"
        if (lo, hi) == (0, None):
            return inner + "*"
        if (lo, hi) == (1, None):
            return inner + "+"
        return inner + ("{%d}" % lo if lo == hi else "{%d,%s}" % (lo, "" if hi is None else hi))
    if isinstance(expr, Ref):
        return expr.name
    raise TypeError(f"not an IR node: {expr!r}")


def _group(e: Expr, strict: bool = False) -> str:
    s = to_ebnf(e)
    if isinstance(e, Seq) or (strict and isinstance(e, Repeat)):
        return f"({s})"
    return s


# ----------------------------------------------------------------------------- the empty string


def nullable(e: Expr, null_rules: set[str], memo: dict[int, bool] | None = None) -> bool:
    """Whether ``e`` derives the empty string, the rules ``null_rules`` being those that do.

    ``memo`` (by node identity, for one ``null_rules``) makes it once per distinct node of a DAG."""
    if not null_rules:
        return plainly_nullable(e)

    def leaf(x: Expr) -> bool:
        return not x.data if isinstance(x, Bytes) else isinstance(x, Ref) and x.name in null_rules

    return derives(e, leaf, memo)


def derives(e: Expr, leaf: Callable[[Expr], bool], memo: dict[int, bool] | None = None) -> bool:
    """Whether ``e`` derives some string with a property ``leaf`` decides for each leaf (a literal,
    class or call), where a sequence has it when all its items do, a choice when one does and a
    repeat when it may repeat zero times or its body has it (the empty string; some finite string).
    ``memo`` (by node identity, for one ``leaf``) makes it once per distinct node of a DAG."""
    if memo is not None:
        got = memo.get(id(e))
        if got is not None:
            return got
    if isinstance(e, Seq):
        out = all(derives(i, leaf, memo) for i in e.items)
    elif isinstance(e, Alt):
        out = any(derives(i, leaf, memo) for i in e.items)
    elif isinstance(e, Repeat):
        out = e.min == 0 or derives(e.expr, leaf, memo)
    elif isinstance(e, (Bytes, CharClass, ByteClass, Ref)):
        out = leaf(e)
    else:
        raise TypeError(f"not an IR node: {e!r}")
    if memo is not None:
        memo[id(e)] = out
    return out


def nonempty(e: Expr) -> Expr:
    """An expression for L(e) minus the empty string; every Ref in ``e`` must be non-nullable."""
    if isinstance(e, Bytes):
        return e if e.data else NOTHING
    if isinstance(e, (CharClass, ByteClass, Ref)):
        return e
    if isinstance(e, Alt):
        return alt(*(nonempty(i) for i in e.items))
    if isinstance(e, Seq):
        # the first non-empty part is item i; the items before it matched the empty string
        branches = []
        for i, item in enumerate(e.items):
            if not nullable(item, set()):
                branches.append(seq(*e.items[i:]))
                break
            branches.append(seq(nonempty(item), *e.items[i + 1:]))
        return alt(*branches)
    if isinstance(e, Repeat):
        inner = e.expr
        if nullable(inner, set()):
            # a{m,n} with a nullable is (a minus empty){0,n}; minus the empty string: {1,n}.
            return repeat(nonempty(inner), 1, e.max)
        return repeat(inner, max(e.min, 1), e.max)
    raise TypeError(f"not an IR node: {e!r}")
