"""Mask keys as small integers: what the mask cache is indexed by.

A configuration's mask key (:meth:`~pda.matcher.GrammarMatcher._key`) is a tuple of its tops'
parts: each top's state with the signature of the stack frames its tokens' checks read, or a split
top's state, top frames and deep tokens' outcome (:mod:`pda.split_tops`).  Deep stacks make long
tuples.  A dict lookup of such a key hashes it and, when it finds an equal key that is another
object, compares the two element by element: a warm batch of 128 ``sql_select`` matchers spent
0.9-2.6 us a row in the mask cache's lookups, against 0.06 us for an int.

Each compiled grammar's :class:`MaskKeys` gives every distinct key an int, once, when a
configuration is keyed (the stack space remembers the int per configuration, so a configuration is
keyed once by any matcher of the grammar).  The mask cache, the stack spaces' key memos and a
batch's grouping of misses hold these ints.  Two configurations get the same id exactly when their
key tuples are equal, so a hit is as exact as the tuple's was.

**Bounded.**  The table holds at most :data:`KEY_ID_LIMIT` keys; when full it is cleared whole and
the numbering goes on.  Ids are never reused, so an id held in the cache or a memo keeps meaning
the key it was given for.  A key met again after a clear gets a new id, and its row is computed
once more (the old entry ages out of the cache).

**Threads.**  Ids come from :func:`itertools.count` and enter the table with ``dict.setdefault``;
keys are tuples of ints, bools and tuples, hashed and compared in C, so no other thread runs in
between: two threads that intern one key get one id.
"""

from __future__ import annotations

import itertools
from typing import Hashable

__all__ = ["MaskKeys", "KEY_ID_LIMIT"]

# distinct mask keys a grammar numbers before it clears its table (ids are never reused)
KEY_ID_LIMIT = 1 << 16


class MaskKeys:
    """A compiled grammar's table of mask keys and their ids (see the module docstring)."""

    __slots__ = ("_ids", "_next")

    def __init__(self) -> None:
        self._ids: dict[Hashable, int] = {}
        self._next = itertools.count()

    def id_of(self, key: Hashable) -> int:
        """The id of ``key`` (a tuple of the tops' key parts), given on its first visit."""
        ids = self._ids
        got = ids.get(key)
        if got is None:
            if len(ids) >= KEY_ID_LIMIT:
                ids.clear()
            got = ids.setdefault(key, next(self._next))
        return got

    def __len__(self) -> int:
        return len(self._ids)
