"""Long counted repeats as calls: normalisation's last step (:mod:`pda.normalize`, step 7).

A counted repeat ``x{lo,hi}`` is ``hi`` copies of ``x`` in a DFA: ``maxLength: 1024`` is 1,024
copies of a JSON string character, ``maxItems: 64`` 64 copies of an array item.  A repeat's size
is that of its copies written out, a repeat inside ``x`` counting as its own copies
(:func:`unrolled_size`): an array of at most 64 strings of at most 256 characters is 64 x 256
characters, not 64 x one string.  When the copies would pass :data:`REPEAT_SPLIT_SIZE` nodes:

* a **large item** (``x`` of :data:`REPEAT_ITEM_RULE_SIZE` nodes or more: an array item that holds
  a counted string) is called once per item instead of written out: ``x{0,n}`` becomes
  ``X{0,n}`` with the rule ``X = x``, n call states and one copy of ``x`` instead of n copies.
  When ``x`` is a sequence (``"," ws item``), its large members become rules and the separators
  stay inline; every other place that writes the same member (the array's first item, outside the
  repeat) calls the same rule.  Before this, six of 2,994 JSONSchemaBench schemas passed
  ``max_states`` on such arrays;
* a **small item** (a string's character) is written over blocks of ``K ≈ √n`` items that are
  rules of their own (``B = x{K}``): ``x{0,n}`` becomes ``B{0,q-1} x{0,K-1} | B{q} x{0,r}`` for
  ``n = qK + r``, with both tails rules too.  That is O(√n) states instead of O(n) without a call
  per character, and blocks are shared by every repeat of the same ``x``.

Both are rules named ``$rep0``, ``$rep1``, ... (:data:`REPEAT_PREFIX`).  Their token classes are
walked without the context of their callers (:mod:`pda.precompute`, escaping rules), so one rule
is classified once for all of its call sites.  The language never changes: a rule called where
its body was written derives the same strings.
"""

from __future__ import annotations

from typing import Callable, Iterator

from .ir import EPSILON, Alt, Bytes, Expr, Ref, Repeat, Seq, alt, literal_bytes, longest_repeat, node_count, nullable, opt, \
    ref_names, repeat, seq, star

__all__ = ["split_long_repeats", "unrolled_size", "REPEAT_PREFIX", "REPEAT_SPLIT_SIZE", "REPEAT_ITEM_RULE_SIZE"]

REPEAT_PREFIX = "$rep"  # names of the item and block rules of long counted repeats: $rep0, $rep1, ...
# A counted repeat whose copies written out would have more IR nodes than this is split ...
REPEAT_SPLIT_SIZE = 16384
# ... into a call of a rule per item when one item, written out, has at least this many nodes.
REPEAT_ITEM_RULE_SIZE = 256


def split_long_repeats(rules: dict[str, Expr]) -> dict[str, Expr]:
    """``rules`` with their long counted repeats as calls of item and block rules (see the module
    docstring); the new rules are added after the others."""
    blocks: dict[tuple[Expr, int, int], str] = {}  # (x, lo, hi) -> name of the rule x{lo,hi}
    out = dict(rules)

    def block(x: Expr, lo: int, hi: int) -> Expr:
        key = (x, lo, hi)
        name = blocks.get(key)
        if name is None:
            name = blocks[key] = f"{REPEAT_PREFIX}{len(blocks)}"
            out[name] = repeat(x, lo, hi)  # lo >= 1: a rule never derives the empty string
        return Ref(name)

    def exact(x: Expr, n: int, size: int) -> Expr:
        if n * size <= REPEAT_SPLIT_SIZE:
            return repeat(x, n, n)
        k = _block_size(n)
        q, r = divmod(n, k)
        return seq(repeat(block(x, k, k), q, q), repeat(x, r, r))

    def upto(x: Expr, n: int, size: int) -> Expr:
        k = _block_size(n)
        if n * size <= REPEAT_SPLIT_SIZE or n <= k:
            return repeat(x, 0, n)
        q, r = divmod(n, k)
        b = block(x, k, k)
        full = seq(repeat(b, q, q), opt(block(x, 1, r)) if r else EPSILON)
        return alt(seq(repeat(b, 0, q - 1), opt(block(x, 1, k - 1))), full)

    items: dict[Expr, Ref] = {}  # body -> the call of its item rule
    item_names: set[str] = set()

    def item_calls(x: Expr) -> Expr:
        """``x`` (a repeat's body) with its large parts as calls of item rules: the items of a
        sequence that are large (separators stay inline), else ``x`` whole."""
        parts = x.items if isinstance(x, Seq) else (x,)
        big = {p for p in parts if isinstance(p, (Seq, Alt, Repeat)) and not nullable(p, set(), null_memo)
               and unrolled_size(p, unrolled_memo) >= REPEAT_ITEM_RULE_SIZE} or {x}
        if x in big:
            parts = (x,)
        for p in big:
            if p not in items:
                items[p] = block(p, 1, 1)
                item_names.add(items[p].name)
        return seq(*(items[p] if p in big else p for p in parts))

    null_memo: dict[int, bool] = {}
    unrolled_memo: dict[Expr, int] = {}
    done: dict[int, Expr] = {}  # by identity: every tree visited stays alive in ``rules`` or here

    def visit(e: Expr) -> Expr:
        longest = longest_repeat(e)
        if not longest or longest * (node_count(e) + literal_bytes(e)) <= REPEAT_SPLIT_SIZE \
                and unrolled_size(e, unrolled_memo) <= REPEAT_SPLIT_SIZE:
            return e  # no repeat below is long enough to split (see _visit).  unrolled_size alone
            # decides that; the constant-time test first keeps it off the big bodies, which are
            # descended anyway (on 2,000 properties, 13 ms instead of 54 for this pass)
        got = done.get(id(e))
        if got is None:
            got = done[id(e)] = _visit(e)
        return got

    def _visit(e: Expr) -> Expr:
        if isinstance(e, (Seq, Alt)):
            items = [visit(i) for i in e.items]
            if all(a is b for a, b in zip(items, e.items)):
                return e  # unchanged (see _rebuild)
            return seq(*items) if isinstance(e, Seq) else alt(*items)
        if isinstance(e, Repeat):
            x = visit(e.expr)
            longest = e.max if e.max is not None else e.min + 1
            size = unrolled_size(x, unrolled_memo)
            if longest * size <= REPEAT_SPLIT_SIZE or longest < 2 or nullable(x, set(), null_memo):
                return e if x is e.expr else repeat(x, e.min, e.max)
            if size >= REPEAT_ITEM_RULE_SIZE:
                x = item_calls(x)
                size = unrolled_size(x, unrolled_memo)
                if longest * size <= REPEAT_SPLIT_SIZE:
                    return repeat(x, e.min, e.max)
            if not ref_names(x) <= item_names:
                return e if x is e.expr else repeat(x, e.min, e.max)  # a body that calls a grammar rule is never split
            rest = star(x) if e.max is None else upto(x, e.max - e.min, size)
            return seq(exact(x, e.min, size), rest)
        return e

    for name in rules:
        out[name] = visit(rules[name])
    visit = _visit = None  # type: ignore[assignment]  # recursive closures are cycles: break them, so what they hold is freed now
    if items:  # the other copies of an item, as the first item of an array is, call its rule too
        out = {name: _calls_of(body, items, top=name in item_names) for name, body in out.items()}
    return out


def _calls_of(e: Expr, items: dict[Expr, Ref], *, top: bool = False) -> Expr:
    """``e`` with each subtree equal to a key of ``items`` replaced by its call (``e`` itself kept
    when ``top``: the body of that rule); by node identity, the trees staying alive meanwhile."""
    if not top and e in items:
        return items[e]
    done: dict[int, Expr] = {}

    def now(k: Expr) -> Expr | None:  # what ``k`` becomes, None: not rebuilt yet
        if k in items:
            return items[k]
        return done.get(id(k)) if isinstance(k, (Seq, Alt, Repeat)) else k

    if not isinstance(e, (Seq, Alt, Repeat)):
        return e
    for node in _children_first(e, lambda k: now(k) is None):
        kids = _kids(node)
        new = [now(k) for k in kids]
        if all(a is b for a, b in zip(new, kids)):
            done[id(node)] = node
        elif isinstance(node, Repeat):
            done[id(node)] = repeat(new[0], node.min, node.max)  # type: ignore[arg-type]
        else:
            done[id(node)] = (seq if isinstance(node, Seq) else alt)(*new)  # type: ignore[arg-type]
    return done[id(e)]


def unrolled_size(e: Expr, memo: dict[Expr, int]) -> int:
    """The IR nodes and literal bytes of ``e`` with every counted repeat in it written out as its
    copies (``x{lo,hi}``: ``hi`` copies of ``x``; ``x{lo,}``: ``lo + 1``), as :func:`node_count` plus
    :func:`literal_bytes` count a tree without repeats; ``memo`` by node (equal nodes, equal sizes)."""
    got = _known_size(e, memo)
    if got is not None:
        return got
    for node in _children_first(e, lambda k: _known_size(k, memo) is None):
        sizes = [_known_size(k, memo) for k in _kids(node)]
        if isinstance(node, Repeat):
            memo[node] = 1 + (node.max if node.max is not None else node.min + 1) * sizes[0]  # type: ignore[operator]
        else:
            memo[node] = 1 + sum(sizes)  # type: ignore[arg-type]
    return memo[e]


def _children_first(root: Expr, pending: Callable[[Expr], bool]) -> Iterator[Expr]:
    """``root`` and the composite nodes below it that ``pending`` says still need a value, each
    after its children and once (by identity), without recursion: a grammar may nest deeper than
    Python recurses.  ``pending`` is asked when a node's parent is reached, so the caller must give
    each node yielded its value before taking the next."""
    seen: set[int] = set()
    todo: list[tuple[Expr, bool]] = [(root, False)]
    while todo:
        node, ready = todo.pop()
        if ready:
            if id(node) not in seen:  # a shared subtree may be reached twice before its first visit ends
                seen.add(id(node))
                yield node
            continue
        todo.append((node, True))
        todo.extend((k, False) for k in _kids(node) if isinstance(k, (Seq, Alt, Repeat)) and pending(k))


def _kids(e: Expr) -> tuple[Expr, ...]:
    return (e.expr,) if isinstance(e, Repeat) else e.items  # type: ignore[attr-defined,no-any-return]


def _known_size(e: Expr, memo: dict[Expr, int]) -> int | None:
    """:func:`unrolled_size` of ``e`` where it needs no walk (a leaf, a tree without repeats, or
    one in ``memo``), else None."""
    if isinstance(e, Bytes):
        return 1 + len(e.data)
    if not isinstance(e, (Seq, Alt, Repeat)):
        return 1
    if not longest_repeat(e):
        return node_count(e) + literal_bytes(e)
    return memo.get(e)


def _block_size(n: int) -> int:
    k = 1
    while k * k < n:
        k += 1
    return max(k, 2)
