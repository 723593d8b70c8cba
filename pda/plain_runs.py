"""How many plain string characters a state surely consumes: a shortcut for counted strings.

A JSON string of bounded length (``maxLength: 1024``) is a chain of states, one per character, with
no loop; inside it a token walk cannot take the looping-thread shortcut and walks every byte of
every token (20-150 ns a token over 129k tokens: 3-30 ms per first visit of a state).  Yet whether a
token made only of *plain* characters is consumed there depends only on how many characters it
has and how many the chain still takes.

A plain character is a complete UTF-8 character other than the quote, the backslash,
U+0000..U+001F and the line and paragraph separators U+2028 and U+2029: one that stands for itself
inside a JSON string, and that a JSON Schema pattern's ``.`` matches too (ECMA-262's ``.`` matches
no line terminator).  Without the two separators, the states of a string whose pattern has ``.*``
(``[^\n\r\u2028\u2029]`` in the automaton) have runs like those of any string: with them, those
states had none, and each first visit walked the whole vocabulary (Github_hard/o89194: 8-12 ms a
state).  Tokens holding U+2028 or U+2029 are walked.

* :func:`plain_char_counts` gives, per token of a trie, its number of characters when all of them
  are plain, else -1 (built once per tokenizer).
* :func:`plain_runs` gives, per automaton state ``s``, a number ``run[s]`` such that *every*
  sequence of at most ``run[s]`` plain characters is consumed from a frame holding ``s`` without
  leaving that frame.  It is the largest solution of::

      run[s] = max(base[s], 1 + min(run[t] for t in after_one[s]))   if every plain character
                                                                     has a byte path from s
      run[s] = base[s]                                               otherwise
      base[s] = max(run[rule_start[r]] for each rule r that s calls, default 0)

  where ``after_one[s]`` are the states one plain character leads to along byte moves (the DFA
  is deterministic, so each character leads to one of them).  By induction on the length, a
  sequence of ``n <= run[s]`` characters is consumed: either a called rule's start consumes it
  inside the pushed frame, or its first character leads to a ``t`` with ``run[t] >= n - 1``.
  Values are capped at :data:`RUN_CAP` (a loop such as ``[^"\\\\]*`` has no bound).

So :meth:`pda.precompute.TokenClasses._walk` accepts a token with ``0 <= chars <= run[s]`` without
walking it (:func:`pda.group_kernels.split_group`); the others are walked as before, and the
classes are the same.

Where no plain sequence one longer than ``run[s]`` is consumed in the frame (:func:`beyond_run`),
``run[s]`` is exact, and a longer plain token is decided without a walk too:

* when no end state is reachable on the way either (a counted string's position, a few characters
  from its limit, in any rule), it is *rejected*: such a position's first visit walked 46k-82k
  plain tokens of its group only to reject them (Github_easy/o28203: 2-8 ms a state);
* in the block of a long string (a rule that escapes, :mod:`pda.precompute`), where ``to_end[s]``
  is known, it reaches the block's end and cannot stay in it: it is *uncertain*.

On a real stack a counted string goes on past its frame: a block of characters called as a rule
(long ``maxLength``, :mod:`pda.normalize`) ends, and its caller calls the next block.
:func:`plain_to_end` gives ``to_end[s]``: ``k`` when every sequence of ``k`` plain characters leads
from ``s`` to an end state along byte moves (0 at an end state; -1 when there is no such ``k``),
and :func:`stack_run` adds up the runs over the frames below (see there).  The matcher accepts the
uncertain tokens within that run without walking them, and its cache keys read those frames.

:func:`stack_most` is its upper twin: the most plain characters a top may consume over its stack
(the longest paths of plain characters in each frame, and to its ends, added up over the frames
popped into).  In the last block of a long string, where the string must then close, 90k of a top's
92k uncertain tokens are plain ones longer than the few characters left: the matcher rejects them
without a walk (:meth:`pda.precompute.TokenClasses.within_most`; that fill of a JSON Schema took
13 ms, a walk of 45 ns a token, and 5 ms after).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .token_trie import TokenTrie

__all__ = ["plain_char_counts", "plain_prefix_counts", "plain_moves", "plain_runs", "plain_to_end", "plain_shapes", "beyond_run",
           "BEYOND_MAYBE", "BEYOND_LEAVES", "BEYOND_NOWHERE",
           "stack_run", "stack_most", "mark_within", "shape_ranges", "plain_width", "RUN_CAP"]

# "At least this many": a token with more characters is walked.  The cap also bounds the solver's
# sweeps (Bellman-Ford over paths of at most that many characters).
RUN_CAP = 255

# The byte ranges of each shape of plain UTF-8 character (one range per byte).
_SHAPES: tuple[tuple[tuple[int, int], ...], ...] = (
    ((0x20, 0x21),), ((0x23, 0x5B),), ((0x5D, 0x7F),),
    ((0xC2, 0xDF), (0x80, 0xBF)),
    ((0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)),
    ((0xE1, 0xE1), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xE2, 0xE2), (0x80, 0x80), (0x80, 0xA7)),  # U+2000..U+2027
    ((0xE2, 0xE2), (0x80, 0x80), (0xAA, 0xBF)),  # U+202A..U+203F: U+2028 and U+2029 are not plain
    ((0xE2, 0xE2), (0x81, 0xBF), (0x80, 0xBF)),
    ((0xE3, 0xEC), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)),
    ((0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)),
)
_MAX_AFTER = 32  # more distinct states after one character than this: counted as no run


def plain_char_counts(trie: TokenTrie) -> np.ndarray:
    """int16 per token of ``trie``: its number of characters when it is made only of plain
    characters (complete UTF-8), else -1."""
    return _plain_counts(trie.data, trie.offsets, *shape_ranges(), False)


def plain_prefix_counts(trie: TokenTrie) -> np.ndarray:
    """int16 per token of ``trie``: how many plain characters a run must surely consume for the
    token to be consumed, or -1.  That is :func:`plain_char_counts` for a token of whole
    characters; a token of plain characters and then the first bytes of one more (byte-level
    vocabularies split multi-byte characters) counts that one too, since a prefix of a sequence
    that is consumed is consumed.  Such tokens are -1 in :func:`plain_char_counts`."""
    return _plain_counts(trie.data, trie.offsets, *shape_ranges(), True)


def shape_ranges() -> tuple[np.ndarray, np.ndarray]:
    """:data:`_SHAPES` as arrays: lo[k, p], hi[k, p] bound byte ``p`` of shape ``k`` (hi -1: no byte ``p``)."""
    lo = np.zeros((len(_SHAPES), 4), np.int32)
    hi = np.full((len(_SHAPES), 4), -1, np.int32)
    for k, shape in enumerate(_SHAPES):
        for p, (a, b) in enumerate(shape):
            lo[k, p], hi[k, p] = a, b
    return lo, hi


@njit(cache=True, nogil=True, inline="always")
def plain_width(data, a, b, lo, hi, partial):  # pragma: no cover - numba
    """The bytes of the plain character at ``data[a]`` (of the token ``data[a:b]``), or 0 when none
    starts there; with ``partial``, a character that the token cuts short counts too.  ``lo, hi``:
    :func:`shape_ranges`."""
    for k in range(lo.shape[0]):  # several shapes may share a first byte (0xE2)
        if lo[k, 0] <= data[a] <= hi[k, 0]:
            w = 1
            while w < 4 and hi[k, w] >= 0:
                w += 1
            end = min(a + w, b)  # partial: the token may end inside its last character
            good = partial or a + w <= b
            for p in range(1, end - a):
                if good and not (lo[k, p] <= data[a + p] <= hi[k, p]):
                    good = False
            if good:
                return end - a
    return 0


@njit(cache=True, nogil=True)
def _plain_counts(data, offsets, lo, hi, partial):  # pragma: no cover - numba
    n = offsets.shape[0] - 1
    out = np.full(n, -1, np.int16)
    for i in range(n):
        a, b = offsets[i], offsets[i + 1]
        chars = 0
        while a < b:
            width = plain_width(data, a, b, lo, hi, partial)
            if width == 0:
                chars = -1
                break
            chars += 1
            a += width
        if chars > 0:
            out[i] = min(chars, 32767)
    return out


def plain_to_end(trans: np.ndarray, byte_class: np.ndarray, is_end: np.ndarray, cap: int = RUN_CAP, *,
                 moves: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """int16 per state: ``to_end`` of the module docstring (-1: none).  ``moves``:
    :func:`plain_moves` of the automaton, when the caller has them already."""
    ptr, after, ok = plain_moves(trans, byte_class) if moves is None else moves
    return _solve_to_end(ptr, after, ok, is_end, cap).astype(np.int16)


def plain_moves(trans: np.ndarray, byte_class: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ptr, after, ok): the states one plain character leads to from each state, in CSR form, and
    whether every plain character has a byte path there (what :func:`plain_runs` and
    :func:`plain_to_end` both start from)."""
    no_calls = np.zeros(trans.shape[0] + 1, np.int32)  # _after_one does not look at calls
    return _after_one(trans, no_calls, *plain_shapes(byte_class))  # type: ignore[no-any-return]


def plain_shapes(byte_class: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The plain characters' byte shapes over ``byte_class`` (for :func:`beyond_run`), as CSR over
    positions: ``shape_ptr[k]..shape_ptr[k+1]`` are shape k's positions,
    ``pos_ptr[p]..pos_ptr[p+1]`` the distinct byte classes of position p's range."""
    shape_ptr, pos_ptr, classes = [0], [0], []
    for shape in _SHAPES:
        for lo, hi in shape:
            classes += sorted(set(byte_class[lo:hi + 1].tolist()))
            pos_ptr.append(len(classes))
        shape_ptr.append(len(pos_ptr) - 1)
    return (np.array(shape_ptr, np.int32), np.array(pos_ptr, np.int32), np.array(classes, np.int32))


@njit(cache=True, nogil=True, inline="always")
def _one_char(trans, call_ptr, shape_ptr, pos_ptr, classes, q0, every, calls_fail, found, nf,  # pragma: no cover
              stack_q, stack_p):
    """Add to ``found[:nf]`` the states one plain character leads to from ``q0`` along byte moves;
    the new count, or -1: with ``every``, some plain character has no byte path; with
    ``calls_fail``, a state on the way has calls; or there is no room left."""
    for k in range(shape_ptr.shape[0] - 1):
        last = shape_ptr[k + 1]
        stack_q[0] = q0
        stack_p[0] = shape_ptr[k]
        top = 1
        while top > 0:
            top -= 1
            q, p = stack_q[top], stack_p[top]
            if calls_fail and call_ptr[q + 1] > call_ptr[q]:
                return -1
            if p == last:
                seen = False
                for j in range(nf):
                    if found[j] == q:
                        seen = True
                        break
                if not seen:
                    if nf == found.shape[0]:
                        return -1
                    found[nf] = q
                    nf += 1
                continue
            for c in range(pos_ptr[p], pos_ptr[p + 1]):
                t = trans[q, classes[c]]
                if t < 0:
                    if every:
                        return -1
                    continue
                if top == stack_q.shape[0]:
                    return -1
                dup = False
                for j in range(top):
                    if stack_q[j] == t and stack_p[j] == p + 1:
                        dup = True
                        break
                if not dup:
                    stack_q[top] = t
                    stack_p[top] = p + 1
                    top += 1
    return nf


@njit(cache=True, nogil=True)
def _after_one(trans, call_ptr, shape_ptr, pos_ptr, classes):  # pragma: no cover - numba
    """CSR (ptr[S+1], after[]) of the states one plain character leads to from each state; a state
    where some plain character has no byte path gets no entries and ``ok[s]`` False."""
    S = trans.shape[0]
    ptr = np.zeros(S + 1, np.int64)
    after = np.empty(S * 2 + 16, np.int32)
    ok = np.zeros(S, np.bool_)
    found = np.empty(_MAX_AFTER, np.int32)
    stack_q = np.empty(64, np.int32)
    stack_p = np.empty(64, np.int32)
    n = 0
    for s in range(S):
        nf = _one_char(trans, call_ptr, shape_ptr, pos_ptr, classes, s, True, False, found, 0, stack_q, stack_p)
        if nf >= 0:
            ok[s] = True
            if n + nf > after.shape[0]:
                grown = np.empty(max(after.shape[0] * 2, n + nf), np.int32)
                grown[:n] = after[:n]
                after = grown
            for j in range(nf):
                after[n + j] = found[j]
            n += nf
        ptr[s + 1] = n
    return ptr, after[:n].copy(), ok


@njit(cache=True, nogil=True)
def _solve(ptr, after, ok, base, cap):  # pragma: no cover - numba
    """The largest solution of the equations in the module docstring, from ``run = cap`` down."""
    S = ok.shape[0]
    run = np.empty(S, np.int32)
    for s in range(S):
        run[s] = cap if ok[s] else base[s]
    changed = True
    while changed:
        changed = False
        for s in range(S - 1, -1, -1):  # chains are numbered forward: one sweep settles most
            if not ok[s]:
                continue
            m = cap
            for j in range(ptr[s], ptr[s + 1]):
                v = run[after[j]] + 1
                if v < m:
                    m = v
            if base[s] > m:
                m = base[s]
            if m < run[s]:
                run[s] = m
                changed = True
    return run


@njit(cache=True, nogil=True)
def _solve_to_end(ptr, after, ok, is_end, cap):  # pragma: no cover - numba
    """``to_end`` of the module docstring: 0 at an end state; ``k + 1`` where every plain character
    leads to states whose ``to_end`` is ``k``; -1 otherwise (or past ``cap``)."""
    S = ok.shape[0]
    out = np.full(S, -2, np.int32)  # -2: not known yet
    for s in range(S):
        if is_end[s]:
            out[s] = 0
        elif not ok[s] or ptr[s] == ptr[s + 1]:
            out[s] = -1
    changed = True
    while changed:
        changed = False
        for s in range(S - 1, -1, -1):
            if out[s] != -2:
                continue
            k, bad, unknown = -3, False, False
            for j in range(ptr[s], ptr[s + 1]):
                v = out[after[j]]
                if v == -1 or (v >= 0 and k >= 0 and v != k):
                    bad = True
                    break
                if v == -2:
                    unknown = True
                elif k == -3:
                    k = v
            if bad:
                out[s] = -1
                changed = True
            elif not unknown:
                out[s] = k + 1 if k + 1 <= cap else -1
                changed = True
    for s in range(S):
        if out[s] == -2:  # on a cycle of states that never end
            out[s] = -1
    return out


@njit(cache=True, nogil=True)
def stack_run(run, to_end, s, path, cap):  # type: ignore[no-untyped-def]  # pragma: no cover - numba
    """The plain characters surely consumed from top ``s`` over the linear stack ``path`` (return
    states, bottom first), at most ``cap`` (:data:`RUN_CAP`), and how many frames of it that read::

        R(s, path + [r]) = max(run[s], to_end[s] + R(r, path))   when to_end[s] >= 0
        R(s, path)       = run[s]                                 otherwise

    A sequence no longer than ``to_end[s]`` is a prefix of one that reaches an end state, so it
    is consumed; a longer one reaches an end after ``to_end[s]`` characters, pops into ``r`` and
    goes on from there.  Returns ``(run over the stack, frames read)``; a kernel (also
    :func:`pda.path_survivors.survivors_on_path`'s)."""
    total = 0
    read = 0
    best = np.int64(run[s])
    q = s
    while to_end[q] >= 0 and read < path.shape[0] and total + to_end[q] < cap:
        total += np.int64(to_end[q])
        q = path[path.shape[0] - 1 - read]
        read += 1
        best = max(best, total + np.int64(run[q]))
    return min(best, cap), read


@njit(cache=True, nogil=True)
def _reach(trans, call_ptr, shape_ptr, pos_ptr, classes, is_end, q, limit):  # pragma: no cover - numba
    """The most plain characters a path of byte moves from ``q`` takes inside its frame, up to
    ``limit`` (``limit``: that many or more), and the most after which it may be at an end state
    (``is_end``; -1: never, or ``is_end`` empty).  ``(-1, -1)`` when it cannot tell: a call on the
    way, a frontier of more than :data:`_MAX_AFTER` states."""
    frontier = np.empty(_MAX_AFTER, np.int32)
    nxt = np.empty(_MAX_AFTER, np.int32)
    stack_q = np.empty(64, np.int32)
    stack_p = np.empty(64, np.int32)
    ends = is_end.shape[0] > 0
    frontier[0] = q
    nf = 1
    last_end = 0 if ends and is_end[q] else -1
    depth = 0
    while depth < limit:
        nn = 0
        for i in range(nf):
            nn = _one_char(trans, call_ptr, shape_ptr, pos_ptr, classes, frontier[i], False, True, nxt, nn,
                           stack_q, stack_p)
            if nn < 0:
                return -1, -1
        if nn == 0:
            break
        depth += 1
        for i in range(nn):
            frontier[i] = nxt[i]
            if ends and is_end[nxt[i]]:
                last_end = depth
        nf = nn
    return depth, last_end


@njit(cache=True, nogil=True)
def stack_most(trans, call_ptr, shape_ptr, pos_ptr, classes, is_end, s, path, cap):  # pragma: no cover - numba
    """The most plain characters a top ``s`` may consume over the linear stack ``path`` (return
    states, bottom first), and how many frames of it that read; ``cap`` when it cannot tell (a
    call on the way, a frontier of more than :data:`_MAX_AFTER` states, ``cap`` or more)::

        U(s, path + [r]) = max(M(s), X(s) + U(r, path))   when X(s) >= 0
        U(s, path)       = M(s)                            otherwise, and at the bottom

    where ``M(s)`` is the most characters a path of byte moves from ``s`` takes in its frame and
    ``X(s)`` the most after which it may be at an end state (:func:`_reach`).  A consumed sequence
    stays in the frame, or reaches an end after ``k <= X(s)`` characters and pops into ``r``; below
    the bottom frame the text ends.  The upper twin of :func:`stack_run`: a token of more plain
    characters is rejected there without a walk (the last block of a long counted string, 92k tokens)."""
    total = 0
    best = 0
    read = 0
    q = s
    while True:
        depth, last_end = _reach(trans, call_ptr, shape_ptr, pos_ptr, classes, is_end, q, cap - total)
        if depth < 0 or total + depth >= cap:
            return cap, read
        best = max(best, total + depth)
        if last_end < 0 or read == path.shape[0]:
            return best, read
        total += last_end
        q = path[path.shape[0] - 1 - read]
        read += 1


# beyond_run: what a plain token longer than a state's run meets in its frame
BEYOND_MAYBE = 0  # it may be consumed there (or the search cannot tell): walk it
BEYOND_LEAVES = 1  # it is not consumed there, but may reach an end state on the way
BEYOND_NOWHERE = 2  # it is not consumed there and reaches no end state: rejected on any stack


@njit(cache=True, nogil=True)
def beyond_run(trans, call_ptr, shape_ptr, pos_ptr, classes, is_end, s, n):  # pragma: no cover - numba
    """What a sequence of ``n + 1`` or more plain characters meets from a frame holding ``s``
    (:data:`BEYOND_MAYBE`, :data:`BEYOND_LEAVES` or :data:`BEYOND_NOWHERE`): with ``n`` the state's
    run, anything but MAYBE means ``n`` is also an upper bound, so a longer plain token needs the
    frame below; with NOWHERE there is no way to it either (inside a counted string of a few
    characters left, 46k-82k of a group's 90k tokens, rejected without a walk)."""
    depth, last_end = _reach(trans, call_ptr, shape_ptr, pos_ptr, classes, is_end, s, n + 1)
    if depth < 0 or depth > n:
        return BEYOND_MAYBE
    return BEYOND_LEAVES if last_end >= 0 else BEYOND_NOWHERE


@njit(cache=True, nogil=True)
def mark_within(chars, tokens, run, ok):  # pragma: no cover - numba
    """Set ``ok[j]`` for each token ``tokens[j]`` made of at most ``run`` plain characters
    (``chars``: :func:`plain_char_counts` of the whole trie)."""
    for j in range(tokens.shape[0]):
        c = chars[tokens[j]]
        if c >= 0 and c <= run:
            ok[j] = True


def plain_runs(trans: np.ndarray, byte_class: np.ndarray, call_ptr: np.ndarray, call_rule: np.ndarray,
               rule_start: np.ndarray, cap: int = RUN_CAP, *,
               moves: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """int16 per state: the plain characters it surely consumes in its own frame (module docstring).

    Calls are taken into account round by round (a callee's start value is a base for its callers)
    until nothing changes; each round's values are sound, so stopping early would only lose runs."""
    ptr, after, ok = plain_moves(trans, byte_class) if moves is None else moves
    S = trans.shape[0]
    src = np.repeat(np.arange(S), np.diff(call_ptr))
    base = np.zeros(S, np.int32)
    run = _solve(ptr, after, ok, base, cap)
    for _ in range(8):
        if not src.shape[0]:
            break
        new = np.zeros(S, np.int32)
        np.maximum.at(new, src, run[rule_start[call_rule]])
        if np.array_equal(new, base):
            break
        base = np.maximum(base, new)
        run = _solve(ptr, after, ok, base, cap)
    return run.astype(np.int16)
