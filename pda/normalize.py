"""Grammar normalisation: from a frontend's :class:`~pda.ir.GrammarIR` to rules the automaton can use.

The steps, in order:

1. **Resolve** references: an undefined rule is an :class:`~pda.errors.UndefinedRuleError` at the
   place of the reference; rules the start rule never reaches are dropped with a warning.
2. **Productivity**: a reachable rule that derives no finite string (``a ::= a``, ``a ::= "x" a``)
   is an :class:`~pda.errors.EmptyLanguageError` naming it.  (A rule whose body *is* the empty
   language, as a JSON Schema ``false`` produces, is simply the empty language.)
3. **Empty-string removal**: every rule is redefined to its language minus the empty string, and
   every reference to a rule that could derive the empty string becomes an optional reference.
   Afterwards no rule is nullable, so a call always consumes input before it returns.
4. **Left recursion** (direct, indirect and hidden behind nullable prefixes) is eliminated inside
   each left-recursive group of rules by Paull's substitution, generalised to regular right-hand
   sides: write a body as ``A·R ∪ N`` (strings led by a call of ``A`` and the rest) and replace it
   by ``N·R*``, the least solution of the same equation.
5. **Inlining**: rules that are not recursive are inlined into their callers, so regular parts
   collapse into the callers' automata; recursive rules stay as pushdown calls.  The pairs
   ``(rule, callee)`` of ``keep_calls`` are exceptions: ``callee`` stays a call in the body of
   ``rule``.  :func:`pda.automaton.automaton_of` gives them for a rule whose subset construction
   blows up, naming the rules written out in it (:attr:`NormalGrammar.inlined`).
6. **Shared pieces** (off by default, :data:`pda.share.SHARE_MIN_STATES`): a piece of a rule body that occurs more than once over all rules (after
   inlining) and would make :data:`SHARE_MIN_STATES` or more automaton states becomes a rule of
   its own, called from every place it occurred (``$shared0``, ...).  Frontends write the same
   lexical pieces again and again (every string value of a JSON Schema is a copy of one string
   automaton; a Lark grammar's terminals are written out at every use); as calls, each piece is
   one set of states, classified once over the vocabulary and shared by every context, and the
   automaton grows with the distinct pieces rather than with their uses.  A nullable piece ``p``
   becomes the rule ``p`` minus the empty string, called optionally.  Single-byte runs
   (``[ \t\n]{0,16}``) are left inline: a call per whitespace run costs more than it shares.
7. **Long counted repeats** (``x{0,1024}``, as ``maxLength: 1024`` gives, or an array of at most
   64 items that hold bounded strings) would unroll into that many copies of ``x`` in a DFA; past
   a size they become calls of rules of their own (:mod:`pda.counted_repeats`).

The result is a :class:`NormalGrammar`: rule bodies in which every :class:`~pda.ir.Ref` names a
kept rule, the root first.  Its root may derive the empty string; no other rule does.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from .errors import EmptyLanguageError, UndefinedRuleError
from .limits import check_deadline
from .ir import (
    EPSILON, NOTHING, Alt, ByteClass, CharClass, Expr, GrammarIR, Ref, Repeat, Seq, alt, calls_any, derives,
    distinct_nodes, has_nullable_repeat, has_scalar, has_scalar_free_class, node_count, nonempty,
    nullable, opt, ref_counts, ref_names, repeat, seq, star,
)
from .graphs import strongly_connected
from .counted_repeats import REPEAT_PREFIX, split_long_repeats
from .share import SHARED_PREFIX, share_repeated

__all__ = ["NormalGrammar", "normalize", "ROOT", "SHARED_PREFIX", "REPEAT_PREFIX"]

ROOT = "$root"
# Inline a non-recursive rule into its callers when it is called once, or when its body is small.
_INLINE_MAX_NODES = 200


@dataclass
class NormalGrammar:
    rules: dict[str, Expr]  # ROOT first; every Ref names a key
    source: GrammarIR
    # for each rule, the (rule, callee) pairs that would take a part written out in it out of it as
    # a call (see _parts), heaviest callee first
    inlined: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    # the (rule, callee) pairs normalize() was told to keep as calls
    keep_calls: frozenset[tuple[str, str]] = frozenset()


def normalize(ir: GrammarIR, *, keep_calls: frozenset[tuple[str, str]] = frozenset()) -> NormalGrammar:
    """Run every normalisation step; raises the errors described in the module docstring.

    For each pair ``(rule, callee)`` of ``keep_calls``, the body of ``rule`` calls ``callee``
    rather than having it inlined (step 5)."""
    rules = _resolve(ir)
    rules = _check_productive(rules, ir)
    check_deadline()
    rules = _remove_empty(rules, ir.start)
    check_deadline()
    rules = _eliminate_left_recursion(rules)
    check_deadline()
    rules, inlined = _inline(rules, keep_calls)
    check_deadline()
    rules = share_repeated(rules)
    check_deadline()
    rules = split_long_repeats(rules)
    return NormalGrammar(rules, ir, inlined, keep_calls)


# ----------------------------------------------------------------------------- 1. resolve


def _resolve(ir: GrammarIR) -> dict[str, Expr]:
    def where(name: str) -> dict:
        line, col = ir.positions.get(name, (None, None))
        return dict(filename=ir.filename, line=line, column=col, source=ir.source, rule=name)

    if ir.start not in ir.rules:
        raise UndefinedRuleError(f'start rule "{ir.start}" is not defined', filename=ir.filename, rule=ir.start)
    for name, body in ir.rules.items():
        if ref_names(body) <= ir.rules.keys():
            continue
        for ref in distinct_nodes(body):  # the first undefined call, for its position
            if isinstance(ref, Ref) and ref.name not in ir.rules:
                line, col = ref.pos if ref.pos else ir.positions.get(name, (None, None))
                raise UndefinedRuleError(
                    f'rule "{ref.name}" is not defined (used in rule "{name}")',
                    filename=ir.filename, line=line, column=col, source=ir.source, rule=ref.name,
                )
    reached = {ir.start}
    todo = [ir.start]
    while todo:
        for name in ref_names(ir.rules[todo.pop()]):
            if name not in reached:
                reached.add(name)
                todo.append(name)
    for name in ir.rules:
        if name not in reached and not name.startswith(("_", "$")):
            w = where(name)
            at = f" (line {w['line']})" if w["line"] else ""
            warnings.warn(f'rule "{name}"{at} is never used', stacklevel=4)
    rules = {ROOT: Ref(ir.start)}
    rules.update({n: b for n, b in ir.rules.items() if n in reached})
    return rules


# ----------------------------------------------------------------------------- 2. productivity


def _productive_expr(e: Expr, prod: set[str], memo: dict[int, bool] | None = None) -> bool:
    """Whether ``e`` derives some finite string, the rules ``prod`` being those that do (``memo``:
    by node identity, for one ``prod``)."""

    def leaf(x: Expr) -> bool:
        if isinstance(x, Ref):
            return x.name in prod
        return _has_scalar(x) if isinstance(x, (CharClass, ByteClass)) else True

    return derives(e, leaf, memo)


def _has_scalar(e: CharClass | ByteClass) -> bool:
    if isinstance(e, ByteClass):
        return bool(e.ranges)
    return has_scalar(e.ranges)


def _check_productive(rules: dict[str, Expr], ir: GrammarIR) -> dict[str, Expr]:
    prod: set[str] = set()
    changed = True
    while changed:
        changed = False
        memo: dict[int, bool] = {}  # valid while prod stays the same
        for name, body in rules.items():
            if name not in prod and _productive_expr(body, prod, memo):
                prod.add(name)
                changed = True
                memo = {}
    barren = [n for n, b in rules.items() if n not in prod and n != ROOT and not _has_nothing_by_construction(b)]
    # blame a rule that needs itself again (a cycle among the barren rules), not one that merely calls it
    culprits = [n for n in barren if _reaches_itself(n, rules, set(barren))] or barren
    for name in culprits[:1]:
        line, col = ir.positions.get(name, (None, None))
        raise EmptyLanguageError(
            f'rule "{name}" derives no finite string (every alternative needs "{name}" or another such rule again)',
            filename=ir.filename, line=line, column=col, source=ir.source, rule=name,
        )
    if ir.start not in prod:
        line, col = ir.positions.get(ir.start, (None, None))
        raise EmptyLanguageError(
            f'start rule "{ir.start}" matches no string', filename=ir.filename, line=line, column=col,
            source=ir.source, rule=ir.start,
        )
    def leaf(e: Expr) -> Expr:  # dead calls and classes with no scalar value are the empty language
        return (e if e.name in prod else NOTHING) if isinstance(e, Ref) else _simplify_leaf(e)

    done: dict[int, Expr] = {}
    dead = rules.keys() - prod
    return {n: _rebuild(b, leaf, done, dead) for n, b in rules.items() if n in prod}


def _reaches_itself(name: str, rules: dict[str, Expr], within: set[str]) -> bool:
    seen: set[str] = set()
    todo = [name]
    while todo:
        for r in ref_names(rules[todo.pop()]):
            if r == name:
                return True
            if r in within and r not in seen:
                seen.add(r)
                todo.append(r)
    return False


def _has_nothing_by_construction(body: Expr) -> bool:
    return not _productive_expr(body, ref_names(body), {})


def _rebuild(e: Expr, leaf, memo: dict[int, Expr], calls: set[str] | None = None) -> Expr:  # type: ignore[no-untyped-def]
    """``e`` rebuilt through the smart constructors with ``leaf`` applied to every leaf; a subtree
    shared by several parents (frontends share them a lot) is rebuilt once (``memo``, by id; one
    memo may serve several trees rebuilt with the same ``leaf`` while they stay alive).

    A node whose children all come back unchanged is kept as it is: the IR is built by the smart
    constructors only, so building it again would give an equal node.  ``calls``, when given, says
    that ``leaf`` keeps every leaf but the calls of those rules and the classes with no scalar value
    (:func:`_simplify_leaf`): a subtree that has neither is kept without a visit."""
    if calls is not None and not calls_any(e, calls) and not has_scalar_free_class(e):
        return e
    got = memo.get(id(e))
    if got is None:
        if isinstance(e, (Seq, Alt)):
            items = [_rebuild(i, leaf, memo, calls) for i in e.items]
            if all(a is b for a, b in zip(items, e.items)):
                got = e
            else:
                got = seq(*items) if isinstance(e, Seq) else alt(*items)
        elif isinstance(e, Repeat):
            inner = _rebuild(e.expr, leaf, memo, calls)
            got = e if inner is e.expr else repeat(inner, e.min, e.max)
        else:
            got = leaf(e)
        memo[e] = got
    return got


def _map_refs(e: Expr, fn) -> Expr:  # type: ignore[no-untyped-def]
    return _rebuild(e, lambda x: fn(x) if isinstance(x, Ref) else x, {})


def _simplify_leaf(e: Expr) -> Expr:
    return NOTHING if isinstance(e, CharClass) and not _has_scalar(e) else e


def _simplify(e: Expr) -> Expr:
    """Rebuild through the smart constructors (drops NOTHING branches, merges literals)."""
    return _rebuild(e, _simplify_leaf, {})


# ----------------------------------------------------------------------------- 3. empty strings


def _denull_repeats(e: Expr, memo: dict[int, Expr], null_memo: dict[int, bool]) -> Expr:
    """Rewrite ``a{m,n}`` with nullable ``a`` as ``(a minus empty){0,n}``: same language, less ambiguity.

    ``memo`` (rewritten nodes) and ``null_memo`` (nullable nodes) are by identity: share them only
    between trees that stay alive meanwhile."""
    if not has_nullable_repeat(e):
        return e  # nothing to rewrite below
    got = memo.get(id(e))
    if got is not None:
        return got
    if isinstance(e, (Seq, Alt)):
        items = [_denull_repeats(i, memo, null_memo) for i in e.items]
        if all(a is b for a, b in zip(items, e.items)):
            got = e  # unchanged (see _rebuild)
        else:
            got = seq(*items) if isinstance(e, Seq) else alt(*items)
    elif isinstance(e, Repeat):
        inner = _denull_repeats(e.expr, memo, null_memo)
        if nullable(inner, set(), null_memo):
            got = repeat(nonempty(inner), 0, e.max)
        else:
            got = e if inner is e.expr else repeat(inner, e.min, e.max)
    else:
        got = e
    memo[id(e)] = got
    return got


def _remove_empty(rules: dict[str, Expr], start: str) -> dict[str, Expr]:
    null: set[str] = set()
    changed = True
    while changed:
        changed = False
        memo: dict[int, bool] = {}  # valid while null stays the same
        for name, body in rules.items():
            if name not in null and nullable(body, null, memo):
                null.add(name)
                changed = True
                memo = {}

    def leaf(e: Expr) -> Expr:  # calls of nullable rules become optional
        return (opt(e) if e.name in null else e) if isinstance(e, Ref) else _simplify_leaf(e)

    out: dict[str, Expr] = {}
    rebuilt: dict[int, Expr] = {}
    denulled: dict[int, Expr] = {}
    null_memo: dict[int, bool] = {}
    for name, body in rules.items():
        body = _denull_repeats(_rebuild(body, leaf, rebuilt, null), denulled, null_memo)
        out[name] = body if name == ROOT else nonempty(body)
    # A rule whose only string was the empty string is now the empty language: drop its calls.
    dead = {n for n, b in out.items() if b == NOTHING and n != ROOT}
    while dead:
        out = {n: _simplify(_map_refs(b, lambda r: NOTHING if r.name in dead else r)) for n, b in out.items() if n not in dead}
        dead = {n for n, b in out.items() if b == NOTHING and n != ROOT}
    return out


# ----------------------------------------------------------------------------- 4. left recursion


def _left_corners(e: Expr) -> set[str]:
    """Rules that can be called before any byte is consumed (rules are non-nullable here)."""
    if isinstance(e, Ref):
        return {e.name}
    if isinstance(e, Seq):
        out: set[str] = set()
        for i in e.items:
            out |= _left_corners(i)
            if not nullable(i, set()):
                break
        return out
    if isinstance(e, Alt):
        return set().union(*(_left_corners(i) for i in e.items)) if e.items else set()
    if isinstance(e, Repeat):
        return _left_corners(e.expr) if e.max != 0 else set()
    return set()


def _split(e: Expr, x: str) -> tuple[Expr, Expr]:
    """(R, N) with L(e) = x·R ∪ N where no string of N is led by a call of ``x``."""
    if x not in _left_corners(e):
        return NOTHING, e
    if isinstance(e, Ref):
        return EPSILON, NOTHING
    if isinstance(e, Alt):
        parts = [_split(i, x) for i in e.items]
        return alt(*(r for r, _ in parts)), alt(*(n for _, n in parts))
    if isinstance(e, Seq):
        head, rest = e.items[0], seq(*e.items[1:])
        r1, n1 = _split(head, x)
        if not nullable(head, set()):
            return seq(r1, rest), seq(n1, rest)
        r2, n2 = _split(rest, x)
        return alt(seq(r1, rest), r2), alt(seq(nonempty(n1), rest), n2)
    if isinstance(e, Repeat):
        tail = repeat(e.expr, max(e.min - 1, 0), None if e.max is None else e.max - 1)
        r1, n1 = _split(seq(e.expr, tail), x)
        return (r1, n1) if e.min >= 1 else (r1, alt(EPSILON, n1))
    raise TypeError(f"not an IR node: {e!r}")


def _eliminate_left_recursion(rules: dict[str, Expr]) -> dict[str, Expr]:
    rules = dict(rules)
    graph = {n: _left_corners(b) for n, b in rules.items()}
    order = list(rules)
    for comp in strongly_connected(graph):
        if len(comp) == 1 and comp[0] not in graph[comp[0]]:
            continue
        group = sorted(comp, key=order.index)
        for i, ai in enumerate(group):
            for aj in group[:i]:
                r, n = _split(rules[ai], aj)
                if r != NOTHING:
                    rules[ai] = alt(seq(rules[aj], r), n)
            r, n = _split(rules[ai], ai)
            if r != NOTHING:
                rules[ai] = seq(n, star(r))
    return rules


# ----------------------------------------------------------------------------- 5. inlining


def _weight(e: Expr, weight: dict[str, int], inline: set[str]) -> int:
    """The IR nodes of ``e`` once the rules it calls that are inlined are written out: its nodes,
    each call of an inlined rule counting as that rule's weight instead of 1.

    Callees are decided before their callers (a rule of the caller's own group is never inlined)."""
    return node_count(e) + sum(k * (weight.get(n, 1) - 1) for n, k in ref_counts(e).items() if n in inline)


def _inline(rules: dict[str, Expr], keep_calls: frozenset[tuple[str, str]],
            ) -> tuple[dict[str, Expr], dict[str, tuple[tuple[str, str], ...]]]:
    """The kept rules with the others written out in them, and for each kept rule the calls that
    could be kept in it instead (see :attr:`NormalGrammar.inlined`).  A pair ``(rule, callee)`` of
    ``keep_calls`` keeps the calls of ``callee`` in the body of ``rule`` as calls."""
    counts = {n: ref_counts(b) for n, b in rules.items()}
    graph = {n: set(c) for n, c in counts.items()}
    recursive: set[str] = set()
    for comp in strongly_connected(graph):
        if len(comp) > 1 or comp[0] in graph[comp[0]]:
            recursive.update(comp)
    uses: dict[str, int] = {n: 0 for n in rules}
    for c in counts.values():
        for r, k in c.items():
            uses[r] += k
    # decide callees first, by the size a rule has once what it calls is inlined too (a rule that
    # calls a small rule twice, which calls one twice, ... must not double at every level)
    inline: set[str] = set()
    weight: dict[str, int] = {}
    for comp in strongly_connected(graph):  # callees come before their callers
        for n in comp:
            weight[n] = _weight(rules[n], weight, inline)
            if n != ROOT and n not in recursive and (uses[n] <= 1 or weight[n] <= _INLINE_MAX_NODES):
                inline.add(n)
    keep: dict[str, set[str]] = {}
    for caller, callee in keep_calls:
        keep.setdefault(caller, set()).add(callee)
    done: dict[str, Expr] = {}
    rebuilt: dict[int, Expr] = {}

    def leaf(e: Expr) -> Expr:
        return (expand(e.name) if e.name in inline else e) if isinstance(e, Ref) else _simplify_leaf(e)

    def expand(name: str) -> Expr:
        if name not in done:
            check_deadline()
            if name in keep:  # its own leaf and memo: some of its calls stay calls
                kept_here = keep[name]
                done[name] = _rebuild(rules[name], lambda e: e if isinstance(e, Ref) and e.name in kept_here else leaf(e),
                                      {}, inline)
            else:
                done[name] = _rebuild(rules[name], leaf, rebuilt, inline)
        return done[name]

    called_here = set().union(*keep.values())  # inlined elsewhere, perhaps, but a call in some rule
    kept = [n for n in rules if n not in inline or n in called_here]
    out = {n: expand(n) for n in kept}
    expand = None  # type: ignore[assignment]  # recursive closures are cycles: break them, so what they hold is freed now
    used = {ROOT}
    todo = [ROOT]
    while todo:
        for r in ref_names(out[todo.pop()]):
            if r not in used:
                used.add(r)
                todo.append(r)
    inlined = {n: _parts(n, rules, inline, keep, weight) for n in used}
    return {n: b for n, b in out.items() if n in used}, inlined


def _parts(name: str, rules: dict[str, Expr], inline: set[str], keep: dict[str, set[str]],
           weight: dict[str, int]) -> tuple[tuple[str, str], ...]:
    """The pairs ``(rule, callee)`` whose keeping as a call would take a part out of the body of
    ``name``, heaviest callee first: the rules written out directly in it, or, when that body is
    only a call of a rule written out (``$root ::= start``), those of that rule."""
    body = rules[name]
    while isinstance(body, Ref) and body.name in inline:
        name = body.name
        body = rules[name]
    callees = [r for r in ref_names(body) if r in inline and r not in keep.get(name, ())]
    return tuple((name, r) for r in sorted(callees, key=lambda r: (-weight[r], r)))
