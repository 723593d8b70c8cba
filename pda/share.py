"""Shared pieces: repeated parts of rule bodies turned into rules of their own (normalisation, step 6).

A piece of a rule body that occurs more than once over all rules (after inlining) and would make
:data:`SHARE_MIN_STATES` or more automaton states becomes a rule of its own, called from every
place it occurred (``$shared0``, ...; :data:`SHARED_PREFIX`).  As calls, each piece is one set of
states, classified once over the vocabulary (:mod:`pda.precompute` walks shared rules with
escapes and keys their classes by region, across grammars), and the automaton grows with the
distinct pieces rather than with their uses.
"""

from __future__ import annotations

from .ir import Alt, ByteClass, Bytes, CharClass, Expr, Ref, Repeat, Seq, alt, nonempty, nullable, opt, repeat, seq

__all__ = ["share_repeated", "SHARE_MIN_STATES", "SHARED_PREFIX"]

# A piece occurring more than once whose automaton would have this many states becomes a shared rule;
# None (the default) turns the step off.  Measured on 400 JSONSchemaBench schemas (DeepSeek 129k, one
# run), sharing at 12 made the automata smaller and the slowest fill 2x faster, but the mask mean
# 1.7x and p99 2.1x slower (a shared string rule's first states walk more of the vocabulary than an
# inlined copy's, and its uncertain tokens are checked per caller), and on a C-like grammar,
# whose shared identifier rules are left mid-token by most tokens, 100x slower.  It stays off until
# the walk handles calls as cheaply as inlined states.
SHARE_MIN_STATES: int | None = None
SHARED_PREFIX = "$shared"  # names of the shared rules: $shared0, $shared1, ...


def share_repeated(rules: dict[str, Expr]) -> dict[str, Expr]:
    """Turn pieces that occur more than once into shared rules (see :mod:`pda.normalize`, step 6).

    Pieces are chosen top-down, and neither a chosen piece's body nor the body of a repetition is
    searched for smaller ones: a call there (an escape sequence inside a string) would cost a stack
    push at every round.  A choice that ends up used once is written back inline."""
    if SHARE_MIN_STATES is None:
        return rules
    min_states = SHARE_MIN_STATES
    states: dict[int, int] = {}

    def size(e: Expr) -> int:  # an estimate of the automaton states of e, memoised per node
        k = id(e)
        got = states.get(k)
        if got is None:
            if isinstance(e, Bytes):
                got = len(e.data)
            elif isinstance(e, (Seq, Alt)):
                got = sum(size(i) for i in e.items)
            elif isinstance(e, Repeat):
                got = size(e.expr) * max(e.max if e.max is not None else e.min, 1)
            else:
                got = 1
            states[k] = got
        return got

    def candidate(e: Expr) -> bool:
        if not isinstance(e, (Seq, Alt, Repeat)) or size(e) < min_states:
            return False
        if isinstance(e, Repeat) and (isinstance(e.expr, (CharClass, ByteClass))
                                      or isinstance(e.expr, Bytes) and len(e.expr.data) == 1):
            return False
        return True

    chosen: dict[Expr, str] = {}

    def count_visible() -> dict[Expr, int]:
        counts: dict[Expr, int] = {}
        bodies = list(rules.values()) + list(chosen)
        stack: list[tuple[Expr, bool]] = [(b, True) for b in bodies]
        while stack:
            e, is_body = stack.pop()
            if not is_body and e in chosen:
                counts[e] = counts.get(e, 0) + 1
                continue
            if isinstance(e, (Seq, Alt, Repeat)):
                if not is_body:
                    counts[e] = counts.get(e, 0) + 1
                kids = e.items if isinstance(e, (Seq, Alt)) else (e.expr,)
                stack.extend((k, False) for k in kids)
        return counts

    counts = count_visible()
    stack = [k for b in rules.values()
             for k in (b.items if isinstance(b, (Seq, Alt)) else (b.expr,) if isinstance(b, Repeat) else ())]
    while stack:
        e = stack.pop()
        if e in chosen:
            continue
        if counts.get(e, 0) >= 2 and candidate(e):
            chosen[e] = f"{SHARED_PREFIX}{len(chosen)}"
            continue
        if isinstance(e, (Seq, Alt)):
            stack.extend(e.items)
        elif isinstance(e, Repeat) and e.max is not None and e.max <= 1:
            stack.append(e.expr)  # a call inside a loop would push at every round: not below one
    if not chosen:
        return rules
    counts = count_visible()
    chosen = {e: n for e, n in chosen.items() if counts.get(e, 0) >= 2}

    done: dict[int, Expr] = {}

    def rewrite(e: Expr, is_body: bool = False) -> Expr:
        if not is_body and e in chosen:
            return opt(Ref(chosen[e])) if nullable(e, set()) else Ref(chosen[e])
        got = done.get(id(e))
        if got is None:
            if isinstance(e, Seq):
                got = seq(*(rewrite(i) for i in e.items))
            elif isinstance(e, Alt):
                got = alt(*(rewrite(i) for i in e.items))
            elif isinstance(e, Repeat):
                # a piece inside a loop stays inline there too (a push at every round)
                got = repeat(rewrite(e.expr) if e.max is not None and e.max <= 1 else e.expr, e.min, e.max)
            else:
                got = e
            done[id(e)] = got
        return got

    out = {n: rewrite(b, True) for n, b in rules.items()}
    for e, name in chosen.items():
        out[name] = nonempty(e)  # pieces inside a piece stay inline (see above)
    return out
