"""The node classes of the grammar IR (:mod:`pda.ir`), and the figures each composite node keeps of
its subtree, computed once at construction from its children's (see :class:`_Composite`), with the
questions they answer in constant time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Container

__all__ = [
    "Expr", "Bytes", "CharClass", "ByteClass", "Seq", "Alt", "Repeat", "Ref", "EPSILON", "NOTHING", "has_scalar",
    "ref_names", "ref_counts", "node_count", "size_exceeds", "calls_any", "literal_bytes", "longest_repeat",
    "plainly_nullable", "has_nullable_repeat", "has_scalar_free_class",
]


class Expr:
    """Base class of IR nodes (frozen dataclasses, hashable, compared by value)."""

    __slots__ = ()


_NO_REFS: dict[str, int] = {}  # the calls of a node that calls no rule (shared: never mutated)
# Flags of a node (see _Composite): it derives the empty string (calling no rule that does); it
# holds a repeat whose body derives the empty string; it holds a CharClass with no scalar value.
_NULLABLE, _NULL_REPEAT, _NO_SCALAR = 1, 2, 4


class _Leaf:
    """The figures of a leaf (see :class:`_Composite`) where they are the same for every leaf of its
    class (class attributes, not fields); :func:`_summarize` reads the rest off the leaf itself (a
    literal's bytes, a call's name, a class's ranges).  A :class:`Ref`'s ``_refs`` is empty: ask
    :func:`ref_counts`."""

    __slots__ = ()
    _size = 1
    _refs = _NO_REFS
    _bytes = 0
    _flags = 0
    _longest = 0


@dataclass(frozen=True, slots=True)
class Bytes(_Leaf, Expr):
    data: bytes


@dataclass(frozen=True, slots=True)
class CharClass(_Leaf, Expr):
    ranges: tuple[tuple[int, int], ...]  # sorted, merged, inclusive code point ranges


@dataclass(frozen=True, slots=True)
class ByteClass(_Leaf, Expr):
    ranges: tuple[tuple[int, int], ...]  # sorted, merged, inclusive byte ranges within 0..255


def has_scalar(ranges: tuple[tuple[int, int], ...]) -> bool:
    """Whether code point ``ranges`` hold a Unicode scalar value (a code point not a surrogate)."""
    return any(not (0xD800 <= lo and hi <= 0xDFFF) for lo, hi in ranges)


@dataclass(frozen=True, slots=True, eq=False)
class _Composite(Expr):
    """Seq, Alt and Repeat compute their hash and a few figures of their subtree once, at
    construction.

    Trees are hashed over and over (de-duplication in :func:`alt`, memo tables keyed by subtrees),
    and a recomputed hash would walk the whole subtree each time.  Likewise the whole-grammar passes
    ask every rule body for its size, the rules it calls and whether a rewrite has anything to do in
    it, and rule bodies share subtrees heavily: from the children's figures these cost a constant per
    node, once, instead of a walk of the body per question.  Read as a tree (a shared subtree once
    per use): ``_size`` its nodes (:func:`node_count`), ``_refs`` rule name -> calls (:func:`ref_counts`;
    a dict that is never mutated, often a child's), ``_bytes`` the bytes of its literals
    (:func:`literal_bytes`), ``_longest`` the largest bound of a repeat in it (:func:`longest_repeat`)
    and ``_flags`` (:func:`nullable` with no nullable rule, :func:`has_nullable_repeat`,
    :func:`has_scalar_free_class`).
    """

    _hash: int = field(init=False, repr=False, compare=False)
    _size: int = field(init=False, repr=False, compare=False)
    _refs: dict[str, int] = field(init=False, repr=False, compare=False)
    _bytes: int = field(init=False, repr=False, compare=False)
    _flags: int = field(init=False, repr=False, compare=False)
    _longest: int = field(init=False, repr=False, compare=False)

    def _key(self) -> tuple:  # type: ignore[type-arg]
        raise NotImplementedError

    def __post_init__(self) -> None:  # the hash of (type, *_key()), spelled out: nodes are made by the thousand
        if self.__class__ is Repeat:
            object.__setattr__(self, "_hash", hash((Repeat, self.expr, self.min, self.max)))  # type: ignore[attr-defined]
            _summarize(self, (self.expr,), self.min if self.max is None else self.max)  # type: ignore[attr-defined]
        else:
            object.__setattr__(self, "_hash", hash((self.__class__, self.items)))  # type: ignore[attr-defined]
            _summarize(self, self.items)  # type: ignore[attr-defined]

    def _cached_hash(self) -> int:
        return self._hash  # type: ignore[attr-defined,no-any-return]

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), self._key())  # str hashes differ between processes: never pickle _hash


def _summarize(node: Expr, kids: tuple[Expr, ...], bound: int = -1) -> None:
    """Set ``node``'s figures (see :class:`_Composite`) from its children's; ``bound``: a repeat's
    largest bound (-1: not a repeat)."""
    size = 1
    nbytes = 0
    flags = 0
    longest = 0
    refs = _NO_REFS
    owned = False  # whether ``refs`` is this node's own dict (else a child's or _NO_REFS)
    all_null, any_null = True, False
    for k in kids:
        c = k.__class__
        if c is Bytes:
            size += 1
            data = k.data  # type: ignore[attr-defined]
            nbytes += len(data)
            null = not data
        elif c is Ref:
            size += 1
            null = False
            if not owned:
                refs, owned = dict(refs), True
            refs[k.name] = refs.get(k.name, 0) + 1  # type: ignore[attr-defined]
        elif c is CharClass or c is ByteClass:
            size += 1
            null = False
            if c is CharClass:
                r = k.ranges  # type: ignore[attr-defined]
                if not (r and (r[0][0] < 0xD800 or r[0][1] > 0xDFFF)) and not has_scalar(r):  # the first range decides mostly
                    flags |= _NO_SCALAR
        else:
            size += k._size  # type: ignore[attr-defined]
            nbytes += k._bytes  # type: ignore[attr-defined]
            f = k._flags  # type: ignore[attr-defined]
            flags |= f
            null = f & _NULLABLE
            if k._longest > longest:  # type: ignore[attr-defined]
                longest = k._longest  # type: ignore[attr-defined]
            r = k._refs  # type: ignore[attr-defined]
            if r:
                if not refs:
                    refs = r
                else:
                    if not owned:
                        refs, owned = dict(refs), True
                    for n, m in r.items():
                        refs[n] = refs.get(n, 0) + m
        if null:
            any_null = True
        else:
            all_null = False
    flags &= ~_NULLABLE
    if bound >= 0:  # a repeat
        if any_null:
            flags |= _NULL_REPEAT | _NULLABLE
        elif node.min == 0:  # type: ignore[attr-defined]
            flags |= _NULLABLE
        longest = max(longest, bound)
    elif all_null if node.__class__ is Seq else any_null:
        flags |= _NULLABLE
    object.__setattr__(node, "_size", size)
    object.__setattr__(node, "_refs", refs)
    object.__setattr__(node, "_bytes", nbytes)
    object.__setattr__(node, "_flags", flags)
    object.__setattr__(node, "_longest", longest)


@dataclass(frozen=True, slots=True)
class Seq(_Composite):
    items: tuple[Expr, ...]

    def _key(self) -> tuple:  # type: ignore[type-arg]
        return (self.items,)


@dataclass(frozen=True, slots=True)
class Alt(_Composite):
    items: tuple[Expr, ...]

    def _key(self) -> tuple:  # type: ignore[type-arg]
        return (self.items,)


@dataclass(frozen=True, slots=True)
class Repeat(_Composite):
    expr: Expr
    min: int
    max: int | None  # None: unbounded

    def _key(self) -> tuple:  # type: ignore[type-arg]
        return (self.expr, self.min, self.max)


for _cls in (Seq, Alt, Repeat):
    _cls.__hash__ = _Composite._cached_hash  # type: ignore[method-assign,assignment]  # dataclass() put its own there


@dataclass(frozen=True, slots=True)
class Ref(_Leaf, Expr):
    name: str
    # Where the reference was written (line, column), for error messages; not part of equality.
    pos: tuple[int, int] | None = field(default=None, compare=False, hash=False)


EPSILON: Expr = Bytes(b"")
NOTHING: Expr = Alt(())


def ref_counts(expr: Expr) -> dict[str, int]:
    """How often each rule is called in ``expr`` read as a tree (as :func:`pda.ir.refs_of` counts them);
    a constant time: composite nodes count their calls at construction."""
    return dict(_calls(expr))


def node_count(e: Expr) -> int:
    """The IR nodes of ``e`` read as a tree (a shared subtree counts once per use); a constant time:
    composite nodes count them at construction."""
    return e._size  # type: ignore[attr-defined,no-any-return]


def size_exceeds(e: Expr, limit: int) -> bool:
    """Whether ``e`` has more than ``limit`` nodes (read as a tree, as :func:`node_count`)."""
    return e._size > limit  # type: ignore[attr-defined,no-any-return]


def calls_any(e: Expr, names: Container[str]) -> bool:
    """Whether ``e`` calls a rule among ``names``."""
    return any(n in names for n in _calls(e))


def literal_bytes(e: Expr) -> int:
    """The bytes of the literals of ``e`` read as a tree (a shared subtree counts once per use)."""
    return len(e.data) if isinstance(e, Bytes) else e._bytes  # type: ignore[attr-defined,no-any-return]


def longest_repeat(e: Expr) -> int:
    """The largest bound of a repeat in ``e`` (its ``max``, or its ``min`` when unbounded); 0: none."""
    return e._longest  # type: ignore[attr-defined,no-any-return]


def plainly_nullable(e: Expr) -> bool:
    """Whether ``e`` derives the empty string, no rule doing so (:func:`pda.ir.nullable` with no
    nullable rule)."""
    return not e.data if isinstance(e, Bytes) else bool(e._flags & _NULLABLE)  # type: ignore[attr-defined]


def has_nullable_repeat(e: Expr) -> bool:
    """Whether ``e`` holds a repeat whose body derives the empty string (calling no rule)."""
    return bool(e._flags & _NULL_REPEAT)  # type: ignore[attr-defined]


def has_scalar_free_class(e: Expr) -> bool:
    """Whether ``e`` is or holds a :class:`CharClass` with no Unicode scalar value (only surrogates)."""
    if isinstance(e, CharClass):
        return not has_scalar(e.ranges)
    return bool(e._flags & _NO_SCALAR)  # type: ignore[attr-defined]


def ref_names(expr: Expr) -> set[str]:
    """The names of the rules ``expr`` calls."""
    return set(_calls(expr))


def _calls(expr: Expr) -> dict[str, int]:
    """The calls of ``expr`` read as a tree (rule name -> count): not to be mutated."""
    return {expr.name: 1} if isinstance(expr, Ref) else expr._refs  # type: ignore[attr-defined,no-any-return]
