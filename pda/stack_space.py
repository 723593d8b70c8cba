"""The stacks of a compiled grammar's matchers: one arena, its walker and memo tables, shared.

Every :class:`~pda.matcher.GrammarMatcher` of a :class:`~pda.compiler.CompiledGrammar` takes the
grammar's current :class:`StackSpace`: a :class:`~pda.stack.StackArena`, the
:class:`~pda.walker.Walker` over it (its step memo), the linear stacks and signatures below its
nodes (:class:`~pda.stack_paths.StackPaths`), the mask keys of the configurations met
(:attr:`StackSpace.keys`), their steps by token (:attr:`StackSpace.steps`), one object per
configuration (:meth:`StackSpace.canonical`) and the context-free rows built
(:meth:`StackSpace.built_before`).  The arena hash-conses nodes, so two matchers at
the same text position of one document shape hold *the same* configuration object: what one
matcher learned about it (its next configuration after a byte or a token, its mask key) the others
read back with one dict lookup.  A batch of matchers of one schema meets the same few
configurations again and again; with an arena per matcher each of them walked and keyed every
configuration itself (4.5 us a row, more than half a warm batch fill of 128 matchers).

**Bounded.**  The arena is append-only; when it has grown past :data:`ARENA_RESET_NODES` nodes,
the grammar starts a new space for the matchers made or reset from then on
(:meth:`~pda.compiler.CompiledGrammar.stack_space`); the matchers still in the old one keep it
until they reset.  The memo tables are bounded by count (:data:`KEY_MEMO_LIMIT`,
:data:`STEP_MEMO_LIMIT` for the steps and the configurations, and the walker's and stack paths' own
limits) and cleared whole when full: every entry can be recomputed.

**Threads.**  Matchers of one space may run on different threads: the arena interns nodes under a
lock, and the memo tables are plain dicts whose entries are written whole (a lost or repeated
entry costs a recomputation, never a wrong value: each is a function of its key).
"""

from __future__ import annotations

from typing import Any

from .automaton import Automaton
from .stack import StackArena
from .stack_paths import StackPaths
from .walker import Config, Walker

__all__ = ["StackSpace", "ARENA_RESET_NODES", "KEY_MEMO_LIMIT", "STEP_MEMO_LIMIT"]

# a grammar starts a new space for matchers made or reset once its arena has this many nodes
ARENA_RESET_NODES = 1 << 16
# configurations whose mask keys a space remembers (cleared whole when full)
KEY_MEMO_LIMIT = 1 << 16
# (configuration, token) steps, and configurations, a space remembers (each table cleared whole when full)
STEP_MEMO_LIMIT = 1 << 17


class StackSpace:
    """An arena with its walker, stack paths, key memo and step memo (see the module docstring)."""

    __slots__ = ("walker", "stacks", "keys", "steps", "configs", "built", "_start")

    def __init__(self, aut: Automaton, max_stack_depth: int) -> None:
        self.walker = Walker(aut, StackArena(max_stack_depth))
        self.stacks = StackPaths(self.walker.arena)
        self.keys: dict[Config, object] = {}  # mask key (None: not cacheable; ~id: context-free) per configuration
        # (configuration, token) -> the next configuration, None: refused; keyed by the int
        # ``cfg.serial * vocab_size + token`` (0 <= token < vocab_size; configurations here are one
        # object per value, and a serial is never reused), not a (Config, int) tuple, which the
        # collector would track as long as the memo holds it (16,000 in 147 live matchers)
        self.steps: dict[int, Config | None] = {}
        self.configs: dict[Config, Config] = {}  # the one object of each configuration a step gave
        self.built: dict[int, bool] = {}  # context-free mask keys whose row a matcher built (built_before)
        self._start: Config | None = None

    @property
    def full(self) -> bool:
        """Whether the arena has grown past :data:`ARENA_RESET_NODES` nodes."""
        return len(self.walker.arena) > ARENA_RESET_NODES

    def remember(self, cfg: Config, key: object) -> object:
        """Remember ``key`` for ``cfg`` and return it."""
        return _store(self.keys, KEY_MEMO_LIMIT, cfg, key)

    def built_before(self, key: int) -> bool:
        """Whether a matcher of the space built the row of the context-free configuration ``key``
        before; remembers that it did now.  The matcher keeps a row in the mask cache the second
        time it builds it: one met once (most of a hand-written grammar's) costs no copy into the cache."""
        if key in self.built:
            return True
        _store(self.built, KEY_MEMO_LIMIT, key, True)
        return False

    @property
    def start(self) -> Config:
        """The start configuration (one object: every matcher made or reset in the space starts there)."""
        got = self._start
        if got is None:
            got = self._start = self.canonical(self.walker.initial())
        return got

    def canonical(self, cfg: Config) -> Config:
        """The one object of the configuration equal to ``cfg`` (``cfg`` itself the first time).
        Different byte paths to one configuration make equal objects; a memo lookup with an object
        other than the stored one compares the two in Python (0.3-0.8 us: a third of the lookups of
        a batch of 128 matchers did, with the start configuration made anew at each reset)."""
        got = self.configs.get(cfg)
        return _store(self.configs, STEP_MEMO_LIMIT, cfg, cfg) if got is None else got

    def remember_step(self, key: int, nxt: Config | None) -> Config | None:
        """Remember that the step of ``key`` (see :attr:`steps`) gives ``nxt`` (None: refused);
        return the configuration's one object (:meth:`canonical`), or None."""
        return _store(self.steps, STEP_MEMO_LIMIT, key, None if nxt is None else self.canonical(nxt))


def _store(table: dict[Any, Any], limit: int, key: Any, value: Any) -> Any:
    """``table[key] = value`` (the table cleared whole first when it holds ``limit`` entries); returns
    ``value``.  Another thread's equal entry may be overwritten: entries are functions of their keys."""
    if len(table) >= limit:
        table.clear()
    table[key] = value
    return value
