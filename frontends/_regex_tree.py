"""The regex frontend's parse tree, its anchor checks and its search-mode rewriting.

The parser (:mod:`pda.frontends.regex`) builds a tiny tree — :class:`Cat`, :class:`Or`,
:class:`Rep`, :class:`Anchor`, with IR nodes as leaves — so that anchors can be checked (only at
the start or end of every path) and, in search mode, turned into the prefixes and suffixes they
allow, before :func:`to_ir` builds the IR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from pda.errors import UnsupportedRegexError
from pda.ir import EPSILON, MAX_CODE_POINT, Bytes, CharClass, Expr, alt, chars, opt, repeat, seq, star

__all__ = ["Cat", "Or", "Rep", "Anchor", "Node", "check_anchors", "open_start", "open_end", "to_ir"]

Ranges = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Cat:
    """A sequence."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    """Alternatives."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Rep:
    """``item{lo,hi}`` (``hi=None``: unbounded)."""

    item: Node
    lo: int
    hi: int | None


@dataclass(frozen=True)
class Anchor:
    """``^``/``\\A`` (start=True) or ``$``/``\\Z``/``\\z``; ``mode`` is the prefix/suffix it allows:
    0 nothing, 1 an optional final newline (Python ``$``), 2 up to a line break (multiline)."""

    start: bool
    mode: int
    offset: int
    text: str


Node = Union[Expr, Cat, Or, Rep, Anchor]


def check_anchors(node: Node, at_start: bool, at_end: bool, pattern: str) -> None:
    """Refuse anchors that are not at the start (``^``) or the end (``$``) of every path."""
    if isinstance(node, Anchor):
        if not (at_start if node.start else at_end):
            where = "start" if node.start else "end"
            raise UnsupportedRegexError(
                f"anchor {node.text!r} is only supported at the {where} of the pattern "
                f"(or of a top-level alternative)", pattern=pattern, offset=node.offset)
    elif isinstance(node, Or):
        for item in node.items:
            check_anchors(item, at_start, at_end, pattern)
    elif isinstance(node, Rep):
        check_anchors(node.item, False, False, pattern)
    elif isinstance(node, Cat):
        items = node.items
        first = next((i for i, x in enumerate(items) if not (isinstance(x, Anchor) and x.start)), len(items))
        last = next((i for i in range(len(items) - 1, -1, -1)
                     if not (isinstance(items[i], Anchor) and not items[i].start)), -1)  # type: ignore[union-attr]
        for i, item in enumerate(items):
            check_anchors(item, at_start and i <= first, at_end and i >= last, pattern)


def _has_anchor(node: Node, start: bool) -> bool:
    """Whether ``node`` holds a start (or an end) anchor outside repetitions."""
    if isinstance(node, Anchor):
        return node.start == start
    if isinstance(node, (Cat, Or)):
        return any(_has_anchor(x, start) for x in node.items)
    return False


def _any_star() -> Expr:
    """Any string."""
    return star(CharClass(((0, MAX_CODE_POINT),)))


def _edge(mode: int, start: bool, line_breaks: Ranges) -> Node:
    """The prefix (``start``) or suffix a path may have: 3 anything, 2 up to a line break,
    1 an optional final newline, 0 nothing."""
    if mode == 3:
        return _any_star()
    if mode == 2:
        brk = chars(line_breaks)
        return opt(seq(_any_star(), brk) if start else seq(brk, _any_star()))
    if mode == 1:
        return opt(Bytes(b"\n"))
    return EPSILON


def open_start(node: Node, mode: int, line_breaks: Ranges) -> Node:
    """``node`` preceded by the prefixes its start anchors allow (search mode)."""
    if not _has_anchor(node, True):
        return Cat((_edge(mode, True, line_breaks), node))
    if isinstance(node, Anchor):
        return _edge(min(mode, node.mode), True, line_breaks)
    if isinstance(node, Or):
        free = [x for x in node.items if not _has_anchor(x, True)]
        bound = [open_start(x, mode, line_breaks) for x in node.items if _has_anchor(x, True)]
        return Or(tuple(bound) + ((open_start(Or(tuple(free)), mode, line_breaks),) if free else ()))
    if isinstance(node, Cat):
        head, rest = node.items[0], node.items[1:]
        if isinstance(head, Anchor):
            return open_start(Cat(rest), min(mode, head.mode), line_breaks)
        return Cat((open_start(head, mode, line_breaks),) + rest)
    raise TypeError(f"unexpected node {node!r}")  # Rep never holds anchors here


def open_end(node: Node, mode: int, line_breaks: Ranges) -> Node:
    """``node`` followed by the suffixes its end anchors allow (search mode)."""
    if not _has_anchor(node, False):
        return Cat((node, _edge(mode, False, line_breaks)))
    if isinstance(node, Anchor):
        return _edge(min(mode, node.mode), False, line_breaks)
    if isinstance(node, Or):
        free = [x for x in node.items if not _has_anchor(x, False)]
        bound = [open_end(x, mode, line_breaks) for x in node.items if _has_anchor(x, False)]
        return Or(tuple(bound) + ((open_end(Or(tuple(free)), mode, line_breaks),) if free else ()))
    if isinstance(node, Cat):
        rest, tail = node.items[:-1], node.items[-1]
        if isinstance(tail, Anchor):
            return open_end(Cat(rest), min(mode, tail.mode), line_breaks)
        return Cat(rest + (open_end(tail, mode, line_breaks),))
    raise TypeError(f"unexpected node {node!r}")


def to_ir(node: Node) -> Expr:
    """The IR of a parse tree; anchors left in it (full-match mode) match the empty string."""
    if isinstance(node, Anchor):
        return EPSILON
    if isinstance(node, Cat):
        return seq(*(to_ir(x) for x in node.items))
    if isinstance(node, Or):
        return alt(*(to_ir(x) for x in node.items))
    if isinstance(node, Rep):
        return repeat(to_ir(node.item), node.lo, node.hi)
    return node
