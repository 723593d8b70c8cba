"""One state's token classes (:class:`StateClasses`): its accepted tokens as ids or as a bitmask row,
whichever is smaller, and its uncertain tokens as sorted-trie indices; how a mask is written from
them; and the plain-tuple form the tokenizer's class cache keeps them in.  Computed by
:mod:`pda.precompute`, read by the matcher at every fill."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .kernels import bits_at, set_bits

__all__ = ["StateClasses", "cache_fields", "cache_fields_nbytes", "union", "IDS_AS_ROW"]

# StateClasses.write_into sets at most this many accepted ids into a row; more are set once into a
# row the classes keep, and copied (a copy of 16 KB took 0.6 us, setting 256 ids 2.6, 1024 ids 4).
IDS_AS_ROW = 256


@dataclass
class StateClasses:
    """One state's classes.  The accepted tokens are kept as bits exactly when there are more of
    them than the row has words (the smaller of the two); the uncertain ones as ascending indices
    of the whole sorted trie."""

    accepted_ids: np.ndarray | None  # int32 token ids, or None when stored as bits
    accepted_bits: np.ndarray | None  # int32[words], or None when stored as ids
    uncertain: np.ndarray  # int32 sorted-trie indices
    # the accepted ids as a row, made by write_into when there are many (copied faster than set)
    _ids_row: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def num_accepted(self) -> int:
        if self.accepted_ids is not None:
            return int(self.accepted_ids.shape[0])
        return int(np.bitwise_count(self.accepted_bits.view(np.uint32)).sum())  # type: ignore[union-attr]

    @property
    def nbytes(self) -> int:
        a = self.accepted_ids if self.accepted_ids is not None else self.accepted_bits
        kept = self._ids_row.nbytes if self._ids_row is not None else 0
        return int(a.nbytes + self.uncertain.nbytes + kept)  # type: ignore[union-attr]

    def accepted_mask(self, ids: np.ndarray, words: int) -> np.ndarray:
        """bool per token id of ``ids`` (a trie's ``order``, say): is that token accepted?  Reads
        only those ids: for the 2,171 tokens a state inside a string walks, not the whole
        vocabulary (an unpacked 129k row gathered twice took 0.4-0.5 ms a call)."""
        row = self.accepted_bits
        if row is None:
            row = np.zeros(words, dtype=np.int32)
            if self.accepted_ids is not None and self.accepted_ids.shape[0]:
                set_bits(row, self.accepted_ids)
        return bits_at(row, ids)  # type: ignore[no-any-return]

    def write_into(self, row: np.ndarray) -> None:
        """Overwrite ``row`` with the accepted tokens' bits: a copy of the row kept, or the ids set
        (more than :data:`IDS_AS_ROW` of them are set once into a row kept for the next time)."""
        src = self.accepted_bits
        ids = self.accepted_ids
        if src is None and ids is not None and ids.shape[0] > IDS_AS_ROW:
            src = self._ids_row
            if src is None:  # two threads may both make it: the same row
                src = np.zeros(row.shape[0], dtype=np.int32)
                set_bits(src, ids)
                self._ids_row = src
        if src is not None:
            np.copyto(row, src)
            return
        row[:] = 0
        if ids is not None and ids.shape[0]:
            set_bits(row, ids)

    def or_accepted_into(self, row: np.ndarray) -> None:
        if self.accepted_bits is not None:
            np.bitwise_or(row, self.accepted_bits, out=row)
        elif self.accepted_ids is not None and self.accepted_ids.shape[0]:
            set_bits(row, self.accepted_ids)


def cache_fields(c: StateClasses) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray]:
    """``c``'s fields as a plain tuple, the form the tokenizer's class cache keeps: a tuple of arrays
    is not tracked by the garbage collector (a dataclass is), so thousands of cached classes add
    nothing to a collection's walk of the heap."""
    return c.accepted_ids, c.accepted_bits, c.uncertain


def cache_fields_nbytes(fields: tuple[np.ndarray | None, np.ndarray | None, np.ndarray]) -> int:
    return StateClasses(*fields).nbytes


def union(parts: list[StateClasses], words: int) -> StateClasses:
    """The classes of the tokens of all the (disjoint) groups ``parts``."""
    if len(parts) == 1:
        return parts[0]
    unc = np.sort(np.concatenate([p.uncertain for p in parts]))
    # stored as bits exactly when there are more accepted tokens than words (StateClasses)
    if any(p.accepted_ids is None for p in parts) or sum(p.accepted_ids.shape[0] for p in parts) > words:  # type: ignore[union-attr]
        row = np.zeros(words, dtype=np.int32)
        for p in parts:
            p.or_accepted_into(row)
        return StateClasses(None, row, unc)
    # each part is stored as ids (it has at most as many as the whole)
    return StateClasses(np.sort(np.concatenate([p.accepted_ids for p in parts])), None, unc)  # type: ignore[misc]
