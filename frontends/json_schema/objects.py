"""JSON objects: members in the schema's order or in any order, undeclared names, counts.

:func:`emit_object` writes the members an object of a merged schema may have: declared
properties in the order the schema lists them (optional ones may be left out), then the
undeclared ones where allowed, whose names are the strings no declared name and no
``patternProperties`` regex takes (one region of names per set of matching patterns); required
names no ``properties`` declares, and with ``property_order="any"`` every member, "float": they
may come in any order (:func:`_object_with_floating`).
"""

from __future__ import annotations


from pda import codepoint_fsm as fsm
from pda.ir import (
    EPSILON, NOTHING, Alt, Bytes, Expr, Ref, Repeat, Seq, alt, recursive_rules, ref_names, repeat, seq, size_exceeds, star,
)

from .context import Context
from .merge import Merged
from .patterns import lang_dfa, pattern_expr
from .patterns import names_dfa as names_of
from .strings import dfa_to_json, quoted, spelled_except, string_literal
from .values import member_locs

__all__ = ["emit_object", "weight"]


def emit_object(c: Context, m: Merged, depth: int) -> Expr:
    lo, hi = m.min_props, m.max_props
    if hi is not None and hi < lo:
        return NOTHING
    if hi == 0:
        return NOTHING if m.required else c.layout.pieces(depth, "{}")[3]
    open_, sep, close, empty = c.layout.pieces(depth, "{}")
    colon = c.layout.colon()
    names_dfa = None
    if m.names:
        names_dfa = names_of(c, m.names)
    declared: list[str] = []
    for a in m.obj:
        for k in a.props:
            if k not in declared:
                declared.append(k)
    for k in m.required:
        if k not in declared:
            declared.append(k)
    # Required names that no `properties` declares "float": they may come anywhere among the
    # undeclared members (in the order `required` lists them), when no count limits apply.
    in_props = {k for a in m.obj for k in a.props}
    floating = [k for k in m.required if k not in in_props] if lo == 0 and hi is None else []
    members: list[tuple[Expr, bool]] = []  # (member text, required)
    float_texts: list[Expr] = []
    for k in declared:
        req = k in m.required
        ok = names_dfa is None or fsm.matches(names_dfa, k)
        value = c.compile(c.value_locs(m, k), depth + 1) if ok else NOTHING
        if value == NOTHING:
            if req:
                return NOTHING
            continue
        text = c.share(seq(string_literal(k), colon, value), "prop")
        if k in floating:
            float_texts.append(text)
        else:
            members.append((text, req))
    extra = _extra_members(c, m, declared, names_dfa, colon, depth)
    if hi is not None and sum(1 for _, r in members if r) > hi:
        return NOTHING
    cap = max(1, lo, hi + 1 if hi is not None else 0)
    if c.property_order == "any" and (lo or hi is not None):
        counted = _any_order_counted(c, members, extra, lo, hi, depth, m.min_props_ptr)
        if counted is not None:
            return counted
        # too many orders to write out: the schema's order (below), which is stricter
    if c.property_order == "any" and lo == 0 and hi is None:
        # Any order: required members once each (in their relative order when their orders
        # would be too many), the others anywhere and possibly repeated (a repeated key keeps
        # its last value, which is valid anyway).
        loose = alt(*(t for t, r in members if not r), extra)
        fixed = [t for t, r in members if r] + float_texts
        if fixed:
            return _object_with_floating(c, [], fixed, c.share(loose, "any"), depth)
        if loose == NOTHING:
            return empty
        return alt(empty, seq(open_, loose, star(seq(sep, loose)), close))
    if float_texts:
        return _object_with_floating(c, members, float_texts, extra, depth)

    def extras(n: int) -> tuple[bool, Expr]:
        """Undeclared members after n members: (may be none, the non-empty part)."""
        kmin = max(0, lo - n)
        kmax = None if hi is None else hi - n
        if kmax is not None and kmax < 0:
            return False, NOTHING
        if extra == NOTHING or kmax == 0:
            return kmin == 0, NOTHING
        if kmin >= 2:
            # {"x": 1, "x": 2} would count twice, but a JSON parser keeps one member; distinct
            # names cannot be counted by a grammar
            c.unsupported("minProperties that needs two or more undeclared property names is not supported "
                          "(a repeated name would count twice)", m.min_props_ptr)
        if n == 0:
            return kmin == 0, seq(extra, repeat(seq(sep, extra), max(kmin - 1, 0), None if kmax is None else kmax - 1))
        return kmin == 0, repeat(seq(sep, extra), max(kmin, 1), kmax)

    # rest[i][n]: members i.. when n (capped) members came before, each led by a separator, as
    # (may be empty, the non-empty part).  Built from the end; only non-empty parts become rules
    # (so the core never strips the empty string out of a rule body), and only big ones (the
    # core inlines rules of up to 200 nodes, so smaller ones would be copied back anyway).
    rest: list[dict[int, tuple[bool, Expr]]] = [{} for _ in range(len(members) + 1)]
    rest[len(members)] = {n: extras(n) for n in range(1, cap + 1)}

    def tail(i: int, n: int) -> Expr:
        nullable, ne = rest[i][min(n, cap)]
        return alt(EPSILON, ne) if nullable else ne

    for i in range(len(members) - 1, -1, -1):
        text, req = members[i]
        for n in range(1, cap + 1):
            nullable, parts = False, []
            if not req:
                nullable, skip = rest[i + 1][n]
                parts.append(skip)
            if hi is None or n < hi:
                parts.append(seq(sep, text, tail(i + 1, n + 1)))
            e = alt(*parts)
            if e not in (NOTHING, EPSILON) and size_exceeds(e, 200):
                e = Ref(c.add_rule(c.fresh("obj"), e))
            rest[i][n] = (nullable, e)
    # The first member has no separator: one flat alternative per choice of the first member.
    firsts = []
    for j, (text, req) in enumerate(members):
        if hi is None or hi >= 1:
            firsts.append(seq(text, tail(j + 1, 1)))
        if req:
            break
    else:
        firsts.append(extras(0)[1])
    nullable = all(not r for _, r in members) and extras(0)[0]
    nonempty = seq(open_, alt(*firsts), close)
    return alt(empty, nonempty) if nullable else nonempty


MAX_ORDERS_WEIGHT = 50000
MAX_ORDERS_MEMBERS = 8


def weight(e: Expr, memo: dict[int, tuple[Expr, int]] | None = None, rules: dict[str, Expr] | None = None,
           _open: frozenset[str] = frozenset()) -> int:
    """A rough count of the automaton states ``e`` needs, read as a tree: a counted repetition
    costs its body times its count (``{0,1000}`` of a string character is a thousand of them);
    a call of one of ``rules`` costs that rule's body (the core inlines the rules it can)."""
    memo = {} if memo is None else memo
    if isinstance(e, Bytes):
        return len(e.data)
    if isinstance(e, Ref):
        if rules is None or e.name not in rules or e.name in _open or _recursive(e.name, rules):
            return 1  # stays a call
        got = memo.get(id(rules[e.name]))
        return got[1] if got is not None else weight(rules[e.name], memo, rules, _open | {e.name})
    if not isinstance(e, (Seq, Alt, Repeat)):
        return 1
    got = memo.get(id(e))
    if got is not None:
        return got[1]
    if isinstance(e, Repeat):
        w = weight(e.expr, memo, rules, _open) * max(e.min if e.max is None else e.max, 1)
    else:
        w = sum(weight(i, memo, rules, _open) for i in e.items)
    memo[id(e)] = (e, w)
    return w


class _Calls(dict[str, set[str]]):
    """The rules each rule calls, read from ``rules`` on first lookup."""

    def __init__(self, rules: dict[str, Expr]) -> None:
        super().__init__()
        self.rules = rules

    def __missing__(self, name: str) -> set[str]:
        if name not in self.rules:
            raise KeyError(name)
        got = self[name] = ref_names(self.rules[name])
        return got


def _recursive(name: str, rules: dict[str, Expr]) -> bool:
    """Whether rule ``name`` can reach itself (the core keeps such rules as calls)."""
    return name in recursive_rules(_Calls(rules), [name])


def _orders_weight(members: list[Expr], xs: Expr, rules: dict[str, Expr]) -> int:
    """:func:`weight` of the automaton that lets ``members`` come in any order: one state per set
    of members still due, each with an edge per member of the set."""
    if len(members) > MAX_ORDERS_MEMBERS:
        return MAX_ORDERS_WEIGHT + 1
    memo: dict[int, tuple[Expr, int]] = {}
    ws, wx = [weight(m, memo, rules) for m in members], weight(xs, memo, rules)
    k = len(members)
    return 2 ** k * wx + 2 ** (k - 1) * sum(1 + w for w in ws) + sum(ws)


def _object_with_floating(c: Context, members: list[tuple[Expr, bool]], floating: list[Expr], extra: Expr,
                          depth: int) -> Expr:
    """Declared members in order, then undeclared ones among which each floating (required,
    undeclared) member appears once: in any order when the orders, written out, stay small
    (:data:`MAX_ORDERS_WEIGHT`), else in the order given.  Only used without
    minProperties/maxProperties."""
    open_, sep, close, _ = c.layout.pieces(depth, "{}")
    xs = star(seq(sep, extra)) if extra != NOTHING else EPSILON
    if _orders_weight(floating, xs, c.rules) <= MAX_ORDERS_WEIGHT:
        # Any order of the floating members: one rule per set of members still due (shared by
        # every order that reaches it, so the size grows as 2^k, not as k!).
        memo: dict[frozenset[int], Expr] = {}

        def after(left: frozenset[int]) -> Expr:  # after at least one member, `left` still due
            if left not in memo:
                body = seq(xs, alt(*(seq(sep, floating[f], after(left - {f})) for f in sorted(left)))) \
                    if left else xs
                memo[left] = Ref(c.add_rule(c.fresh("due"), body)) if len(left) >= 2 else body
            return memo[left]

        everything = frozenset(range(len(floating)))
        led = after(everything)
        no_member_before = alt(*(seq(floating[f], after(everything - {f})) for f in sorted(everything)),
                               seq(extra, led) if extra != NOTHING else NOTHING)
    else:  # in the order given
        led = seq(*(seq(xs, sep, f) for f in floating), xs)
        after_first = seq(*(seq(xs, sep, f) for f in floating[1:]), xs)
        no_member_before = alt(seq(floating[0], after_first),
                               seq(extra, xs, sep, floating[0], after_first) if extra != NOTHING else NOTHING)
    tails: list[Expr] = [led] * (len(members) + 1)  # tails[i]: members i.., each led by a separator
    for i in range(len(members) - 1, -1, -1):
        text, req = members[i]
        taken = seq(sep, text, tails[i + 1])
        tails[i] = c.share(taken if req else alt(tails[i + 1], taken), "obj")
    firsts = []
    for j, (text, req) in enumerate(members):
        firsts.append(seq(text, tails[j + 1]))
        if req:
            break
    else:
        firsts.append(no_member_before)
    return seq(open_, alt(*firsts), close)


def _any_order_counted(c: Context, members: list[tuple[Expr, bool]], extra: Expr, lo: int, hi: int | None,
                       depth: int, m_ptr: str) -> Expr | None:
    """Members in any order under ``minProperties``/``maxProperties``, exactly: each declared
    member at most once (required ones exactly once), undeclared ones possibly repeated.  Every
    member counts towards ``maxProperties`` (a repeated name only makes the object smaller than
    the count); towards ``minProperties`` count the declared members present and at most one
    undeclared name (two undeclared members may be one name written twice).  One rule per state
    (declared members present, members so far, whether an undeclared one came); None when those
    states, written out, would be too many (:data:`MAX_ORDERS_WEIGHT`)."""
    open_, sep, close, empty = c.layout.pieces(depth, "{}")
    texts = [t for t, _ in members]
    required = frozenset(i for i, (_, r) in enumerate(members) if r)
    has_extra = extra != NOTHING
    xs = star(seq(sep, extra)) if has_extra and hi is None else EPSILON
    states = 1 if hi is None or not has_extra else hi + 1
    if _orders_weight(texts, xs, c.rules) * states * (2 if has_extra else 1) > MAX_ORDERS_WEIGHT:
        return None
    if has_extra and lo - len(members) >= 2:
        c.unsupported("minProperties that needs two or more undeclared property names is not supported "
                      "(a repeated name would count twice)", m_ptr)
    memo: dict[tuple[frozenset[int], int, bool], Expr] = {}

    def ends(used: frozenset[int], seen_extra: bool) -> bool:
        return required <= used and len(used) + seen_extra >= lo

    def step(lead: Expr, used: frozenset[int], n: int, seen_extra: bool, may_end: bool = True) -> Expr:
        """What may follow ``n`` members (``used`` of the declared ones), each next one led by ``lead``."""
        room = hi is None or n < hi
        parts = [EPSILON] if may_end and ends(used, seen_extra) else []
        if room:
            parts += [seq(lead, texts[f], after(used | {f}, n + 1, seen_extra))
                      for f in range(len(texts)) if f not in used]
            if has_extra and not (hi is None and seen_extra):  # (without a bound, xs repeats them)
                parts.append(seq(lead, extra, after(used, n + 1, True)))
        return alt(*parts)

    def after(used: frozenset[int], n: int, seen_extra: bool) -> Expr:
        key = (used, n if hi is not None else 0, seen_extra)
        if key not in memo:
            body = step(sep, used, n, seen_extra)
            if hi is None and seen_extra:
                body = seq(xs, body)
            memo[key] = Ref(c.add_rule(c.fresh("any"), body)) if body not in (NOTHING, EPSILON) else body
        return memo[key]

    nonempty = step(EPSILON, frozenset(), 0, False, may_end=False)
    out = seq(open_, nonempty, close) if nonempty != NOTHING else NOTHING
    return alt(empty, out) if ends(frozenset(), False) else out


MAX_KEY_REGIONS = 64


def _extra_members(c: Context, m: Merged, declared: list[str], names_dfa: fsm.DFA | None,
                   colon: Expr, depth: int) -> Expr:
    """Members whose key is not declared: one alternative per region of keys that share a schema."""
    patterns = [(p, loc, i) for i, a in enumerate(m.obj) for p, loc in a.patterns]
    plain = not patterns and names_dfa is None  # keys: any but the declared ones, built without automata
    base = fsm.EMPTY if plain else fsm.complement(fsm.literal_set_dfa(declared))
    if names_dfa is not None:
        base = fsm.intersect(base, names_dfa)
    # Regions of undeclared keys, each with the set of patterns its keys match (only the
    # non-empty ones: disjoint patterns give one region each, not one per subset).
    regions: list[tuple[fsm.DFA, tuple[bool, ...]]] = [(base, ())]  # (base is unused when plain)
    for p, loc, _ in patterns:
        e = pattern_expr(c, p, loc.ptr)
        d = lang_dfa(c, (e, ("p", p))) if e is not None else None
        split = []
        for keys, bits in regions:
            inside = fsm.intersect(keys, d) if d is not None else fsm.EMPTY
            outside = fsm.difference(keys, d) if d is not None else keys
            split += [(k, bits + (on,)) for k, on in ((inside, True), (outside, False)) if not fsm.is_empty(k)]
        regions = split
        if len(regions) > MAX_KEY_REGIONS:
            c.unsupported(f"patternProperties that split the property names into more than {MAX_KEY_REGIONS} "
                          "regions are not supported", m.obj[0].ptr)
            regions = regions[:MAX_KEY_REGIONS]
    parts = []
    for keys, bits in regions:
        locs = member_locs(m, lambda i: [loc for (_, loc, j), on in zip(patterns, bits) if on and j == i])
        value = c.compile(locs, depth + 1)
        if value == NOTHING:
            continue
        if plain:
            memo_key = ("except",) + tuple(sorted(declared))
            if memo_key not in c.memo:
                c.memo[memo_key] = quoted(spelled_except(declared))
            key = c.memo[memo_key]
        else:
            key = quoted(dfa_to_json(keys, c.add_rule, c.fresh("key")))
        parts.append(seq(key, colon, value))
    return c.share(alt(*parts), "extra") if parts else NOTHING

