"""The byte walker: configurations of the pushdown automaton, the closure, the byte walk.

Text-level matching (:class:`ByteMatcher`, :func:`validate_bytes`) and the token-level matcher
(:mod:`pda.matcher`) both step through the automaton with a :class:`Walker`.

A *configuration* is a mapping top state -> set of parent nodes (GSS nodes in a
:class:`~pda.stack.StackArena`, or ``BOTTOM``), kept only for tops that can read a byte, plus
whether the text so far is a complete sentence.  A parent set is a sorted tuple of ints, and a top
a ``(state, parents)`` tuple: tuples of ints, which the garbage collector stops tracking (147 live
matchers of JSON Schemas held 54,000 tracked tops and parent sets as frozensets).  Tops that
share a state are merged, so a configuration never holds more tops than the automaton has
states, however ambiguous the grammar.

The closure after a byte has two phases.  Pops first: a top at an end state returns to each of its
parents.  Then pushes, in the automaton's ``push_rank`` order: a call edge ``s -r-> t`` puts the
start of ``r`` on top of a new node ``(t, parents of s)``.  Because every rule but the root consumes
at least one byte before it can return, pushes never cause pops at the same position, and because
left recursion is gone, the pushes form a DAG: each top's parent set is final before it is used.
"""

from __future__ import annotations

import heapq
import itertools
import weakref
from array import array
from functools import partial
from typing import Any, Callable, TypeVar

import numpy as np

from .automaton import Automaton, call_edges
from .errors import ValidationError
from .kernels import RUN_FAILED, RUN_NEEDS_STACK, run_simple
from .stack import BOTTOM, StackArena

__all__ = ["Config", "Walker", "ByteMatcher", "validate_bytes", "as_bytes"]


_SERIALS = itertools.count()
_V = TypeVar("_V")


class Config:
    """Tops that can read a byte (state -> parents) and whether the text is a complete sentence.

    Immutable and hashable (the hash is computed once), so steps can be memoised.  ``serial`` is a
    number no other configuration object of the process has: a memo of one object per value (a
    matcher's, :class:`~pda.stack_space.StackSpace`) keys steps by it, with plain ints."""

    __slots__ = ("tops", "accepting", "_hash", "serial")

    def __init__(self, tops: tuple[tuple[int, tuple[int, ...]], ...], accepting: bool) -> None:
        self.tops = tops
        self.accepting = accepting
        self._hash = hash((tops, accepting))
        self.serial = next(_SERIALS)  # (itertools.count: atomic under the GIL)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (self is other or isinstance(other, Config) and self._hash == other._hash
                and self.tops == other.tops and self.accepting == other.accepting)

    def __repr__(self) -> str:
        return f"Config(tops={self.tops!r}, accepting={self.accepting})"

    @property
    def alive(self) -> bool:
        """True when the text so far can still be extended or is complete."""
        return bool(self.tops) or self.accepting


_DEAD = Config((), False)
_MEMO_LIMIT = 200_000


_TABLES: "weakref.WeakKeyDictionary[Automaton, tuple[Any, ...]]" = weakref.WeakKeyDictionary()


class _PerState(dict):  # type: ignore[type-arg]
    """state -> ``make(state)``, made on first lookup: a list of per-state values that costs nothing
    for the states a walk never reaches (the first mask of a large automaton reads a handful)."""

    def __init__(self, make: Callable[[int], Any]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, s: int) -> Any:
        got = self[s] = self._make(s)
        return got


def _tables(aut: Automaton) -> tuple[Any, ...]:
    """The automaton in sequences fast to index from Python, built once per automaton; the call
    edges per state as they are first read, and the transitions as one two-dimensional
    ``memoryview`` of the automaton's table (``rows[s, c]``: as fast as a row per state, and one
    object, where a row per state read was 3,200 objects for a large schema's documents).

    The values are ``bytes``, ``array`` and ``memoryview`` objects and tuples of ints, not lists: a
    full collection visits every element of a list, and these tables live as long as their grammar
    (147 compiled schemas with a matcher each: 4.4 million list elements, and a full collection of
    112-149 ms against 71-73 ms).  The tables hold the automaton's arrays, never the automaton: a
    value of the weak-keyed ``_TABLES`` that held its key would keep every compiled grammar alive
    for good."""
    got = _TABLES.get(aut)
    if got is None:
        got = _TABLES[aut] = (
            aut.byte_class.tolist(), aut.is_end.astype(np.uint8).tobytes(), aut.has_bytes.astype(np.uint8).tobytes(),
            _ints(aut.push_rank), _PerState(partial(call_edges, aut.call_ptr, aut.call_rule, aut.call_return)),
            _ints(aut.rule_start), np.ascontiguousarray(aut.trans).data,
        )
    return got


def _ints(values: np.ndarray) -> array[int]:
    """``values`` (a 1-d integer array) as an ``array`` of int64: indexed like a list, untracked."""
    return array("q", values.astype(np.int64).tobytes())


def _one(table: dict[_V, _V], value: _V) -> _V:
    """The one object of ``value``'s value in ``table`` (``value`` itself the first time; atomic:
    ``setdefault``); the table is cleared whole once it holds :data:`_MEMO_LIMIT` values."""
    if len(table) >= _MEMO_LIMIT:
        table.clear()
    return table.setdefault(value, value)


class Walker:
    """Stepping over an automaton with one stack arena (memoised per arena)."""

    def __init__(self, aut: Automaton, arena: StackArena) -> None:
        self.aut = aut
        self.arena = arena
        self._trans = aut.trans
        self._simple = aut.simple
        self._cls, self._is_end, self._has_bytes, self._rank, self._calls, self._starts, self._rows = _tables(aut)
        # (configuration, byte class) -> the next one, keyed by ``cfg.serial << 8 | class``: every
        # configuration the walker makes is the one object of its value (``_configs``), so a key by
        # object is a key by value, and an int the collector does not track (a (Config, class)
        # tuple stays tracked as long as the memo holds it)
        self._memo: dict[int, Config] = {}
        self._configs: dict[Config, Config] = {}
        # (state, parents) -> the configuration of that single top, and of its closure: a text
        # that runs over one top meets the same few configurations again and again, and each new
        # object would be one more for the collector to track as long as the rollback history
        # holds it
        self._single: dict[tuple[int, tuple[int, ...]], Config] = {}
        self._closed: dict[tuple[int, tuple[int, ...]], Config] = {}
        # the one object of each parent set and each top a closure has made: of a large schema's
        # 8,400 live parent sets, 94 were distinct, and of its 8,500 tops 3,300
        self._sets: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._tops: dict[tuple[int, tuple[int, ...]], tuple[int, tuple[int, ...]]] = {}

    def initial(self) -> Config:
        return self.closure({self._starts[0]: {BOTTOM}})

    def closure(self, tops: dict[int, set[int]]) -> Config:
        """Pops, then pushes; returns the configuration (see the module docstring)."""
        arena, is_end = self.arena, self._is_end
        accepting = False
        pending = {s: set(p) for s, p in tops.items()}
        work = list(pending)
        while work:
            s = work.pop()
            new = pending.pop(s, None)
            if not new or not is_end[s]:
                continue
            for p in new:
                if p == BOTTOM:
                    accepting = True
                    continue
                t = arena.state[p]
                cur = tops.get(t)
                if cur is None:
                    cur = tops[t] = set()
                add = [q for q in arena.parents[p] if q not in cur]
                if add:
                    cur.update(add)
                    pending.setdefault(t, set()).update(add)
                    work.append(t)
        calls, rank, starts = self._calls, self._rank, self._starts
        heap = [(rank[s], s) for s in tops if calls[s]]
        if heap:
            heapq.heapify(heap)
            done: set[int] = set()
            while heap:
                _, s = heapq.heappop(heap)
                if s in done:
                    continue
                done.add(s)
                parents = self._one_set(tops[s])
                for r, ret in calls[s]:
                    node = arena.node(ret, parents)
                    st = starts[r]
                    cur = tops.get(st)
                    if cur is None:
                        cur = tops[st] = set()
                    cur.add(node)
                    if calls[st]:
                        heapq.heappush(heap, (rank[st], st))
        has_bytes = self._has_bytes
        return self._one_config(Config(tuple(sorted(self._one_top_value(s, p) for s, p in tops.items() if has_bytes[s])),
                                       accepting))

    def _one_config(self, cfg: Config) -> Config:
        """The one object of ``cfg``'s value among those this walker made."""
        return _one(self._configs, cfg)

    def _one_set(self, parents: set[int]) -> tuple[int, ...]:
        """The one object of the parent set ``parents``, as its sorted tuple."""
        return _one(self._sets, tuple(sorted(parents)))

    def _one_top_value(self, s: int, parents: set[int]) -> tuple[int, tuple[int, ...]]:
        """The one object of the top ``(s, parents)``, its parent set made by :meth:`_one_set`."""
        return _one(self._tops, (s, self._one_set(parents)))

    def step(self, cfg: Config, byte: int) -> Config:
        """The configuration after one more byte (dead when no top can read it).  Memoised per
        (configuration, byte class): texts revisit the same configurations all the time."""
        c = self._cls[byte]
        key = cfg.serial << 8 | c  # (a byte class is below 256)
        got = self._memo.get(key)
        if got is not None:
            return got
        rows = self._rows
        nxt: dict[int, set[int]] = {}
        for s, parents in cfg.tops:
            t = rows[s, c]
            if t >= 0:
                have = nxt.get(t)
                if have is None:
                    nxt[t] = set(parents)
                else:
                    have.update(parents)
        got = self.closure(nxt) if nxt else _DEAD
        if len(self._memo) >= _MEMO_LIMIT:
            self._memo.clear()
        self._memo[key] = got
        return got

    def run(self, cfg: Config, data: np.ndarray, pos: int, end: int) -> tuple[Config, int]:
        """Feed ``data[pos:end]``; returns (config, position reached).  Stops at the first dead byte:
        then the config returned is the last live one and the position is that of the byte."""
        trans, cls, simple = self._trans, self.aut.byte_class, self._simple
        while pos < end:
            if len(cfg.tops) == 1 and not cfg.accepting:
                (s, parents), = cfg.tops
                npos, t, status = run_simple(trans, cls, simple, s, data, pos, end)
                if status == RUN_FAILED:
                    if npos > pos:
                        cfg = self._one_top(t, parents, False)
                    return cfg, npos
                if status == RUN_NEEDS_STACK:
                    cfg = self._one_top(t, parents, True)
                else:
                    cfg = self._one_top(t, parents, False) if npos > pos else cfg
                pos = npos
                continue
            nxt = self.step(cfg, int(data[pos]))
            if not nxt.alive:
                return cfg, pos
            cfg = nxt
            pos += 1
        return cfg, pos

    def _one_top(self, t: int, parents: tuple[int, ...], closed: bool) -> Config:
        """The configuration of the one top ``(t, parents)`` (not accepting), or with ``closed`` its
        :meth:`closure`: one object per value, memoised like :meth:`step`."""
        table = self._closed if closed else self._single
        key = (t, parents)
        got = table.get(key)
        if got is None:
            if len(table) >= _MEMO_LIMIT:
                table.clear()
            got = table[key] = (self.closure({t: set(parents)}) if closed
                                else self._one_config(Config(((t, parents),), False)))
        return got

    def expected(self, cfg: Config) -> tuple[int, ...]:
        """The byte values some top of ``cfg`` can read."""
        rows, cls = self._rows, self._cls
        return tuple(b for b in range(256) if any(rows[s, cls[b]] >= 0 for s, _ in cfg.tops))


def as_bytes(text: str | bytes | bytearray | memoryview) -> bytes:
    if isinstance(text, str):
        return text.encode("utf-8")
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    raise TypeError(f"expected str or bytes, got {type(text).__name__}")


class ByteMatcher:
    """An incremental matcher for a byte stream, with rollback.

    ``feed`` changes the state only when every byte is accepted; a refused chunk leaves the matcher
    as it was and returns False.  ``rollback(n)`` forgets the last ``n`` accepted bytes.
    """

    def __init__(self, walker: Walker) -> None:
        self._walker = walker
        self._data = bytearray()
        # checkpoints: (byte position, config); replaying from the last one reaches any position
        self._checkpoints: list[tuple[int, Config]] = [(0, walker.initial())]
        self._cfg = self._checkpoints[0][1]

    @property
    def num_bytes(self) -> int:
        """How many bytes have been accepted."""
        return len(self._data)

    def feed(self, data: str | bytes) -> bool:
        """Accept ``data`` if the text stays a prefix of a sentence (changes state only then)."""
        chunk = as_bytes(data)
        if not chunk:
            return True
        arr = np.frombuffer(chunk, dtype=np.uint8)
        cfg, pos = self._walker.run(self._cfg, arr, 0, len(arr))
        if pos < len(arr):
            return False
        self._data += chunk
        self._cfg = cfg
        self._checkpoints.append((len(self._data), cfg))
        return True

    def can_feed(self, data: str | bytes) -> bool:
        """Whether ``feed(data)`` would succeed (never changes state)."""
        arr = np.frombuffer(as_bytes(data), dtype=np.uint8)
        _, pos = self._walker.run(self._cfg, arr, 0, len(arr))
        return pos == len(arr)

    def is_complete(self) -> bool:
        """True when the bytes accepted so far form a whole sentence of the grammar."""
        return self._cfg.accepting

    def allowed_bytes(self) -> tuple[int, ...]:
        """The byte values that may come next."""
        return self._walker.expected(self._cfg)

    def rollback(self, num_bytes: int) -> None:
        """Forget the last ``num_bytes`` accepted bytes."""
        if not 0 <= num_bytes <= len(self._data):
            raise ValueError(f"cannot roll back {num_bytes} bytes: {len(self._data)} accepted")
        target = len(self._data) - num_bytes
        while self._checkpoints[-1][0] > target:
            self._checkpoints.pop()
        base, cfg = self._checkpoints[-1]
        if base < target:
            arr = np.frombuffer(bytes(self._data[base:target]), dtype=np.uint8)
            cfg, _ = self._walker.run(cfg, arr, 0, len(arr))
            self._checkpoints.append((target, cfg))
        del self._data[target:]
        self._cfg = cfg

    def reset(self) -> None:
        """Back to the empty text."""
        self.rollback(len(self._data))


def validate_bytes(walker: Walker, data: bytes, *, prefix: bool) -> ValidationError | None:
    """None when ``data`` is a sentence (or, with ``prefix``, a viable prefix); else the error."""
    arr = np.frombuffer(data, dtype=np.uint8)
    cfg, pos = walker.run(walker.initial(), arr, 0, len(arr))
    if pos < len(arr):
        return ValidationError(data, pos, walker.expected(cfg), incomplete=False)
    if prefix or cfg.accepting:
        return None
    return ValidationError(data, pos, walker.expected(cfg), incomplete=True)
