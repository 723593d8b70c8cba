"""Literals and classes as small byte-NFA fragments: code point ranges lowered to UTF-8 byte ranges.

A *fragment* is ``(internal, edges, calls)``: an NFA template between local state 0 (entry) and 1
(exit), with ``internal`` more states numbered 2, 3, ...; ``edges`` are rows (from, lo, hi, to)
over byte ranges, ``calls`` rows (from, rule, to).  Surrogates (U+D800..U+DFFF) never match, so
every path spells valid UTF-8.  Both Thompson constructions (:class:`pda.fsm.ThompsonNFA`, the
Python reference, and the kernel of :mod:`pda.nfa_kernels`) place these fragments.
"""

from __future__ import annotations

from functools import lru_cache

from .ir import ByteClass, Bytes, CharClass

__all__ = ["Fragment", "utf8_sequences", "leaf_fragment"]

Fragment = tuple[int, tuple[tuple[int, int, int, int], ...], tuple[tuple[int, int, int], ...]]

_LENGTH_BOUNDS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, 0x10FFFF))


def _encode(cp: int) -> bytes:
    return chr(cp).encode("utf-8", "surrogatepass")


@lru_cache(maxsize=4096)
def utf8_sequences(lo: int, hi: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Byte-range sequences whose union is the UTF-8 encodings of code points ``lo..hi``.

    Surrogates (U+D800..U+DFFF) are left out.  Each sequence is a list of inclusive byte ranges,
    one per byte of the encoding.
    """
    out: list[list[tuple[int, int]]] = []
    for a, b in ((lo, min(hi, 0xD7FF)), (max(lo, 0xE000), hi)):
        for blo, bhi in _LENGTH_BOUNDS:
            x, y = max(a, blo), min(b, bhi)
            if x <= y:
                _split_same_length(x, y, out)
    return tuple(tuple(seq) for seq in out)


def _split_same_length(a: int, b: int, out: list[list[tuple[int, int]]]) -> None:
    n = len(_encode(a))
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if a & ~m != b & ~m:
            if a & m:
                _split_same_length(a, a | m, out)
                _split_same_length((a | m) + 1, b, out)
                return
            if b & m != m:
                _split_same_length(a, (b & ~m) - 1, out)
                _split_same_length(b & ~m, b, out)
                return
    out.append(list(zip(_encode(a), _encode(b))))


def leaf_fragment(e: Bytes | CharClass | ByteClass) -> Fragment:
    """The fragment of a non-empty literal (a chain of byte edges), a byte class (one edge per
    range) or a code point class (its UTF-8 sequences, sequences that end alike sharing their tail
    states: a suffix trie into the exit).

    Memoised by the leaf's bytes or ranges, not by the node: those keys and the fragments are
    tuples of ints, which the garbage collector stops tracking, so a full table adds nothing to a
    collection's walk of the heap (holding 8,192 nodes made each full collection of a server's
    process some milliseconds longer)."""
    if isinstance(e, Bytes):
        return _literal_fragment(e.data)
    if isinstance(e, ByteClass):
        return 0, tuple((0, lo, hi, 1) for lo, hi in e.ranges), ()
    return _class_fragment(e.ranges)


@lru_cache(maxsize=8192)
def _literal_fragment(data: bytes) -> Fragment:
    n = len(data)
    edges = tuple((0 if i == 0 else i + 1, b, b, 1 if i == n - 1 else i + 2) for i, b in enumerate(data))
    return n - 1, edges, ()


@lru_cache(maxsize=8192)
def _class_fragment(ranges: tuple[tuple[int, int], ...]) -> Fragment:
    out: list[tuple[int, int, int, int]] = []
    tails: dict[tuple[tuple[int, int], ...], int] = {(): 1}

    def tail(rest: tuple[tuple[int, int], ...]) -> int:
        got = tails.get(rest)
        if got is None:
            got = tails[rest] = len(tails) + 1
            out.append((got, rest[0][0], rest[0][1], tail(rest[1:])))
        return got

    for lo, hi in ranges:
        for sequence in utf8_sequences(lo, hi):
            blo, bhi = sequence[0]
            out.append((0, blo, bhi, tail(sequence[1:])))
    tail = None  # type: ignore[assignment]  # recursive closures are cycles: break them, so what they hold is freed now
    return len(tails) - 1, tuple(out), ()
