"""The vocabulary split into groups by the bytes tokens are made of and by their length.

A token made only of the bytes of a set ``X`` and at most ``k`` bytes long is walked only along
byte moves labelled in ``X``, at most ``k`` deep: its class from a state depends only on the part of
the automaton those moves reach (:mod:`pda.lookahead`).  Splitting the vocabulary so lets most
tokens be classified under a key of a small region: inside a JSON string of bounded length, the
word-like tokens (letters, digits, ``_``, space, non-ASCII) never meet the closing quote, so every
position far from the length limit, of every such string of every schema, has the same region for
them; in a C-like grammar they see the identifier automaton and what a space leads to.

:data:`GROUPS` lists the groups in order; a token belongs to the first whose bytes and length it
fits.  Each group is a trie of its own (:func:`pda.token_trie.select_tokens`), built once per
tokenizer.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .kernels import set_bits
from .plain_runs import plain_char_counts, plain_prefix_counts
from .plain_stops import stop_bytes
from .token_trie import TokenTrie, select_tokens
from .tokenizer import TokenizerInfo

__all__ = ["GroupSpec", "TokenGroup", "GROUPS", "token_groups", "byte_set", "WORD_BYTES", "STRING_SAFE_BYTES",
           "ALL_BYTES", "plain_chars", "plain_prefixes", "plain_stops", "PlainSplit", "plain_split"]


def byte_set(values: set[int]) -> np.ndarray:
    out = np.zeros(256, dtype=np.bool_)
    out[sorted(values)] = True
    return out


# letters, digits, "_", space and every byte of a multi-byte UTF-8 character
WORD_BYTES = byte_set({*range(0x30, 0x3A), *range(0x41, 0x5B), *range(0x61, 0x7B), 0x5F, 0x20, *range(0x80, 0x100)})
# every byte but the quote and the backslash (the bytes that end or escape inside a JSON string)
STRING_SAFE_BYTES = byte_set(set(range(256)) - {0x22, 0x5C})
ALL_BYTES = byte_set(set(range(256)))


class GroupSpec(NamedTuple):
    name: str  # names the byte set in keys (two specs with one name must have one byte set)
    allowed: np.ndarray  # bool[256]: the bytes the group's tokens are made of
    longer_than: int  # the group's tokens are longer than this many bytes ...
    at_most: int | None  # ... and at most this many (None: any length)
    cap: int  # a bounded region of more states than this gets no key


GROUPS: tuple[GroupSpec, ...] = (
    GroupSpec("word", WORD_BYTES, 0, 8, 2048),
    GroupSpec("word", WORD_BYTES, 8, 16, 2048),
    GroupSpec("word", WORD_BYTES, 16, None, 2048),
    GroupSpec("safe", STRING_SAFE_BYTES, 0, 16, 2048),
    GroupSpec("safe", STRING_SAFE_BYTES, 16, None, 512),
    GroupSpec("all", ALL_BYTES, 0, None, 64),
)


class TokenGroup(NamedTuple):
    """The tokens of one group, as a trie of their own."""

    spec: GroupSpec
    k: int  # the longest token of the group, in bytes: the lookahead bound of its key
    trie: TokenTrie
    to_main: np.ndarray  # int32: the index in the whole sorted trie of each token of ``trie``
    cand: np.ndarray  # int32: 0..n-1 (all of ``trie``)
    # the tokens' plain_chars, plain_prefixes and plain_stops, in ``trie``'s order (made here once
    # per tokenizer: picked out per grammar, they cost 2.3 ms of its first fills)
    chars: np.ndarray
    prefixes: np.ndarray
    stops: np.ndarray


def _group(tok: TokenizerInfo, spec: GroupSpec, k: int, trie: TokenTrie, sel: np.ndarray) -> TokenGroup:
    """The group of the tokens ``sel`` (indices into ``tok``'s sorted trie), whose own trie is ``trie``."""
    sel = sel.astype(np.int32)
    return TokenGroup(spec, k, trie, sel, np.arange(sel.shape[0], dtype=np.int32), plain_chars(tok)[sel],
                      plain_prefixes(tok)[sel], plain_stops(tok)[sel])


def token_groups(tok: TokenizerInfo, groups: tuple[GroupSpec, ...]) -> tuple[TokenGroup, ...]:
    """The tokens of ``tok`` split into ``groups`` (each token in the first it fits; the tokens that
    fit none make a last group without keys).  Built once per tokenizer and kept in its class
    cache; empty groups are left out."""
    trie = tok.trie

    def build() -> tuple[TokenGroup, ...]:
        lengths = np.diff(trie.offsets)
        left = np.ones(lengths.shape[0], dtype=np.bool_)
        out = []
        for g in groups:
            words = np.packbits(g.allowed, bitorder="little").view(np.uint64)  # 4 words, like bytesets
            fits = np.all((trie.bytesets & ~words) == 0, axis=1) & (lengths > g.longer_than)
            if g.at_most is not None:
                fits &= lengths <= g.at_most
            sel = np.flatnonzero(fits & left)
            left[sel] = False
            if sel.shape[0]:
                k = int(lengths[sel].max())
                sub = trie if sel.shape[0] == lengths.shape[0] else select_tokens(trie, sel)
                out.append(_group(tok, g, k, sub, sel))
        if left.any():  # the groups do not cover every token: the rest is walked without keys
            sel = np.flatnonzero(left)
            rest = GroupSpec("rest", ALL_BYTES, 0, None, 0)
            sub = trie if sel.shape[0] == lengths.shape[0] else select_tokens(trie, sel)
            out.append(_group(tok, rest, int(lengths[sel].max()), sub, sel))
        return tuple(out)

    key = "pda-token-groups|" + "|".join(f"{g.name}:{g.allowed.tobytes().hex()}:{g.longer_than}:{g.at_most}:{g.cap}"
                                         for g in groups)  # every field: each group keeps its spec
    return tok.class_cache.get(key, build,  # type: ignore[no-any-return]
                               lambda gs: sum(g.trie.data.nbytes + 46 * g.cand.shape[0] for g in gs))


def plain_chars(tok: TokenizerInfo) -> np.ndarray:
    """:func:`pda.plain_runs.plain_char_counts` of every token of ``tok`` (sorted-trie order): its
    number of characters when all are plain, else -1.  Built once per tokenizer."""
    return tok.class_cache.get("pda-plain-chars", lambda: plain_char_counts(tok.trie),  # type: ignore[no-any-return]
                               lambda v: v.nbytes)


def plain_prefixes(tok: TokenizerInfo) -> np.ndarray:
    """:func:`pda.plain_runs.plain_prefix_counts` of every token of ``tok`` (sorted-trie order): how
    many plain characters a run must surely consume for the token to be consumed (a token ending
    inside a plain character counts that one), else -1.  Built once per tokenizer."""
    return tok.class_cache.get("pda-plain-prefixes", lambda: plain_prefix_counts(tok.trie),  # type: ignore[no-any-return]
                               lambda v: v.nbytes)


def plain_stops(tok: TokenizerInfo) -> np.ndarray:
    """:func:`pda.plain_stops.stop_bytes` of every token of ``tok`` (sorted-trie order): the first
    byte of its first character that is not plain, else -1.  Built once per tokenizer."""
    return tok.class_cache.get("pda-plain-stops", lambda: stop_bytes(tok.trie),  # type: ignore[no-any-return]
                               lambda v: v.nbytes)


class PlainSplit(NamedTuple):
    """The vocabulary split by :func:`plain_chars` at ``chars`` characters (:func:`plain_split`)."""

    chars: int
    plain_row: np.ndarray  # int32[words]: the ids of the tokens a run of ``chars`` plain characters consumes
    rest: TokenGroup  # every other token: a byte that is not plain, a character's trailing bytes first, or longer


def plain_split(tok: TokenizerInfo, chars: int) -> PlainSplit:
    """The tokens that a run of ``chars`` plain characters consumes (a bitmask row of their ids:
    :func:`pda.plain_runs.plain_prefix_counts` at most ``chars``), and the others as a group of
    their own (no key: ``cap`` 0).  A state that surely consumes ``chars`` plain characters in its
    frame (:func:`pda.plain_runs.plain_runs`) accepts every token of the row, so only the group is
    walked from it: inside a JSON string, 2,171 of DeepSeek's 128,050 sorted tokens at 16
    characters (quotes, backslashes, control characters, a character's trailing bytes first).
    Built once per tokenizer and kept in its class cache."""

    def build() -> PlainSplit:
        trie = tok.trie
        counts = plain_prefixes(tok)  # a token ending inside a character is consumed as a prefix
        short = (counts >= 0) & (counts <= chars)
        row = np.zeros((tok.vocab_size + 31) // 32, dtype=np.int32)
        set_bits(row, trie.order[short])
        sel = np.flatnonzero(~short).astype(np.int32)
        spec = GroupSpec(f"beyond-{chars}-plain", ALL_BYTES, 0, None, 0)
        lengths = np.diff(trie.offsets)
        k = int(lengths[sel].max()) if sel.shape[0] else 0
        rest = _group(tok, spec, k, select_tokens(trie, sel), sel)
        return PlainSplit(chars, row, rest)

    return tok.class_cache.get(f"pda-plain-split|{chars}", build,  # type: ignore[no-any-return]
                               lambda p: p.plain_row.nbytes + p.rest.trie.data.nbytes + 46 * p.rest.cand.shape[0])
