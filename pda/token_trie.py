"""The sorted token trie: the normal tokens of a vocabulary sorted by their bytes, as flat arrays.

A numba kernel (:mod:`pda.token_walk`) walks it depth-first as a linear scan: tokens share the
work of their common prefix (``lcp``), and the whole subtree of a prefix whose bytes die is jumped
over (``skip``; for a first or second byte, ``first_starts`` and ``second_starts``).
:func:`build_token_trie` sorts a vocabulary's token bytes (:attr:`pda.TokenizerInfo.trie`);
:func:`select_tokens` takes the trie of a subset of it (the token groups of
:mod:`pda.token_groups`) without sorting again.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
from numba import njit

from pda.errors import TokenizerError
from pda.kernels import token_bytesets

__all__ = ["TokenTrie", "build_token_trie", "select_tokens", "starts_with"]


class TokenTrie(NamedTuple):
    """The normal tokens sorted by bytes, as flat arrays (``n`` tokens, ``total`` bytes in all).

    ``order[i]`` is the id of the i-th token in sorted order; its bytes are
    ``data[offsets[i]:offsets[i + 1]]``; ``lcp[i]`` is the length of the common prefix with token
    ``i - 1`` (0 for ``i == 0``); ``skip[i]`` is the first ``j > i`` whose bytes do not start with
    token ``i``'s bytes (``n`` when there is none); ``bytesets[i]`` is the set of byte values in
    token ``i`` (bit ``b & 63`` of word ``b >> 6``) and ``tailsets[i]`` the same past its first byte
    (`` foo``'s is that of ``foo``); ``first_starts[b]`` is the first ``i`` whose
    first byte is at least ``b`` (``n`` for ``b == 256``), so the tokens that start with byte ``b``
    are ``first_starts[b]:first_starts[b + 1]``; likewise the tokens that start with bytes ``b, c``
    are ``second_starts[b * 257 + c]:second_starts[b * 257 + c + 1]`` (``second_starts[b * 257 +
    256]`` is ``first_starts[b + 1]``).  A depth-first walk::

        i = 0
        while i < n:
            rewind the walk to depth lcp[i]; feed bytes lcp[i]: of token i
            i = i + 1 if they all matched else skip[i]
    """

    order: np.ndarray  # int32[n]
    data: np.ndarray  # uint8[total]
    offsets: np.ndarray  # int32[n + 1]
    lcp: np.ndarray  # int32[n]
    skip: np.ndarray  # int32[n]
    bytesets: np.ndarray  # uint64[n, 4]: the byte values in each token, as a 256-bit set
    tailsets: np.ndarray  # uint64[n, 4]: the byte values in each token past its first byte
    whole_utf8: np.ndarray  # bool[n]: the token is valid UTF-8 that starts and ends at character boundaries
    first_starts: np.ndarray  # int32[257]: where the tokens of each first byte start
    second_starts: np.ndarray  # int32[256 * 257]: where the tokens of each first two bytes start


def build_token_trie(token_bytes: Sequence[bytes]) -> TokenTrie:
    """Sort the non-empty entries of ``token_bytes`` (special ids hold ``b""``) into a :class:`TokenTrie`."""
    ids = [i for i, b in enumerate(token_bytes) if b]
    ids.sort(key=token_bytes.__getitem__)  # stable: equal bytes keep ascending ids
    n = len(ids)
    order = np.asarray(ids, dtype=np.int32)
    lengths = np.fromiter((len(token_bytes[i]) for i in ids), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.frombuffer(b"".join(token_bytes[i] for i in ids), dtype=np.uint8).copy()
    if offsets[-1] >= 2**31:
        raise TokenizerError(f"the vocabulary holds {offsets[-1]} bytes; at most 2**31 - 1 are supported")

    # lcp[i]: compare tokens i-1 and i byte by byte, all pairs at once, dropping pairs that differ.
    lcp = np.zeros(n, dtype=np.int64)
    if n > 1:
        limit = np.minimum(lengths[:-1], lengths[1:])
        active = np.nonzero(limit > 0)[0] + 1
        k = 0
        while active.size:
            same = data[offsets[active - 1] + k] == data[offsets[active] + k]
            active = active[same]
            lcp[active] += 1
            k += 1
            active = active[limit[active - 1] > k]

    pos = _skips(lcp, lengths)
    return TokenTrie(
        order=order,
        data=data,
        offsets=offsets.astype(np.int32),
        lcp=lcp.astype(np.int32),
        skip=pos.astype(np.int32),
        bytesets=token_bytesets(data, offsets, 0),
        tailsets=token_bytesets(data, offsets, 1),
        whole_utf8=np.fromiter((_is_whole_utf8(data[offsets[i]:offsets[i + 1]].tobytes()) for i in range(n)),
                               dtype=np.bool_, count=n),
        first_starts=_first_starts(data, offsets),
        second_starts=_second_starts(data, offsets),
    )


def _first_starts(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``first_starts`` of a sorted trie (:class:`TokenTrie`): where each first byte's tokens start."""
    return np.searchsorted(data[offsets[:-1]], np.arange(257)).astype(np.int32)


def _second_starts(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``second_starts`` of a sorted trie (:class:`TokenTrie`): where the tokens of each first two
    bytes start.  A token's rank ``257 * first byte + (second byte + 1, or 0 for a one-byte token)``
    grows with its index, so each pair's start is a search for its rank."""
    lengths = np.diff(offsets)
    first = data[offsets[:-1]].astype(np.int64)
    second = np.zeros_like(first)
    two = lengths >= 2
    second[two] = data[offsets[:-1][two] + 1].astype(np.int64) + 1
    pairs = np.arange(256)[:, None] * 257 + np.arange(257)[None, :] + 1
    return np.searchsorted(first * 257 + second, pairs.ravel()).astype(np.int32)


def _skips(lcp: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """skip[i]: the first j > i with lcp[j] < len(i) (n when none), from the sorted tokens' ``lcp``
    and ``lengths``.  Binary lifting over a sparse table of range minima of lcp (with -1 at index
    n as a sentinel that stops every jump)."""
    n = lcp.shape[0]
    ext = np.append(lcp, -1)
    tables = [ext]
    step = 1
    while step * 2 <= n + 1:
        prev = tables[-1]
        shifted = prev[np.minimum(np.arange(n + 1) + step, n)]
        tables.append(np.minimum(prev, shifted))
        step *= 2
    pos = np.arange(1, n + 1, dtype=np.int64)
    for level in range(len(tables) - 1, -1, -1):
        jump = tables[level][pos] >= lengths
        pos = np.where(jump, np.minimum(pos + (1 << level), n), pos)
    return pos


def select_tokens(trie: TokenTrie, sel: np.ndarray) -> TokenTrie:
    """The trie of the tokens at the ascending sorted-trie indices ``sel`` of ``trie`` (still sorted:
    index ``j`` of the result is index ``sel[j]`` of ``trie``)."""
    lengths = (trie.offsets[sel + 1] - trie.offsets[sel]).astype(np.int64)
    offsets = np.zeros(sel.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    starts = trie.offsets[sel].astype(np.int64)
    data = trie.data[np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])]
    # the common prefix of two sorted tokens is the least lcp of the tokens between them
    lcp = np.zeros(sel.shape[0], dtype=np.int64)
    if sel.shape[0] > 1:
        lcp[1:] = np.minimum.reduceat(trie.lcp[:sel[-1] + 1], sel[:-1] + 1)
        lcp[1:] = np.minimum(lcp[1:], np.minimum(lengths[:-1], lengths[1:]))
    return TokenTrie(order=trie.order[sel], data=data, offsets=offsets.astype(np.int32), lcp=lcp.astype(np.int32),
                     skip=_skips(lcp, lengths).astype(np.int32), bytesets=trie.bytesets[sel],
                     tailsets=trie.tailsets[sel], whole_utf8=trie.whole_utf8[sel], first_starts=_first_starts(data, offsets),
                     second_starts=_second_starts(data, offsets))


def _is_whole_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@njit(cache=True, nogil=True, inline="always")
def starts_with(data, offsets, i, pa, n):  # type: ignore[no-untyped-def]  # pragma: no cover - numba
    """Sorted token ``i`` starts with the ``n`` bytes at ``data[pa:]``."""
    a = offsets[i]
    if offsets[i + 1] - a < n:
        return False
    for k in range(n):
        if data[a + k] != data[pa + k]:
            return False
    return True
