"""GrammarCompiler: grammars compiled against one tokenizer, with precomputed token classes."""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Literal

import xxhash

from pda.cache.compile_cache import DEFAULT_MAX_BYTES, CompileCache
from pda.cache.disk_cache import DEFAULT_DISK_MAX_BYTES, DiskCache

from .automaton import DEFAULT_MAX_STATES
from .limits import DEFAULT_MAX_COMPILE_SECONDS
from .grammar import Grammar
from .errors import SerializationError
from .split_tops import SplitTops
from .mask_keys import MaskKeys
from .stack_space import StackSpace
from .walk_results import WalkResults
from .precompute import STOP_WARMING, TokenClasses, max_token_length, precompute_classes, prepare_tokenizer
from . import background, serialize
from .stack import DEFAULT_MAX_STACK_DEPTH
from .tokenizer import TokenizerInfo

__all__ = ["GrammarCompiler", "CompiledGrammar", "CACHE_DIR_ENV"]

_PROGRESS_AFTER_S = 2.0
CACHE_DIR_ENV = "PDA_CACHE_DIR"
"""Environment variable: the on-disk cache directory of a :class:`GrammarCompiler` given no ``cache_dir``."""
DEFAULT_MASK_CACHE_BYTES = 64 << 20  # per compiled grammar: about 4,000 rows of a 129k vocabulary
# precompute="auto": a grammar with at most this many byte-reading states is classified whole at
# compile time, as xgrammar does for every grammar: a few milliseconds (the built-in JSON grammar's
# 58 states, 6 ms), and its first masks then never classify a state (they were its slowest: the
# p99 of 2,666 masks over 4 random JSON documents went from 173-233 to 128-145 us).  A JSON Schema
# has hundreds to thousands of states, most never visited, and stays lazy.
SMALL_GRAMMAR_STATES = 64


class CompiledGrammar:
    """A grammar, a tokenizer, and the token classes of every automaton state.  Share it between
    any number of :class:`~pda.matcher.GrammarMatcher` objects and threads: what it learns as they
    run (token classes computed on first use, the mask cache, the signature depths) is guarded
    for concurrent use and never changes a mask."""

    def __init__(self, grammar: Grammar, tokenizer_info: TokenizerInfo, classes: TokenClasses, seconds: float,
                 *, mask_cache_max_bytes: int = DEFAULT_MASK_CACHE_BYTES) -> None:
        self.grammar = grammar
        self.tokenizer_info = tokenizer_info
        self.classes = classes
        self.compile_seconds = seconds
        self.trie = tokenizer_info.trie
        self.kernel = classes.kernel
        self.words = classes.words
        self.max_token_length = max_token_length(self.trie)
        self.signature_depth: dict[int, int] = {}  # state -> deepest stack frame a mask check read
        self.split_tops = SplitTops(classes, self.trie, self.max_token_length)  # (pda.split_tops)
        self.mask_keys = MaskKeys()  # mask keys as ints, for the mask cache and key memos (pda.mask_keys)
        self.top_survivors = WalkResults()  # a top's surviving ids by state and frames read (pda.walk_results)
        self.mask_cache_max_bytes = mask_cache_max_bytes
        self._mask_caches: dict[str, Any] = {}
        self._mask_lock = threading.Lock()
        self._space: StackSpace | None = None  # (stack_space)

    def stack_space(self) -> StackSpace:
        """The :class:`~pda.stack_space.StackSpace` a matcher made or reset now joins: the one its
        other matchers share, or a new one once that one's arena is full."""
        space = self._space
        if space is None or space.full:
            with self._mask_lock:  # (also guards the mask caches' creation: both are rare)
                space = self._space
                if space is None or space.full:
                    space = self._space = StackSpace(self.grammar.automaton, self.grammar.max_stack_depth)
        return space

    def mask_cache(self, device: str = "cpu") -> Any:
        """The :class:`~pda.cache.mask_cache.MaskCache` of final masks on ``device``, shared by every
        matcher of this grammar (made on first use; imports torch)."""
        got = self._mask_caches.get(device)
        if got is None:
            from pda.cache.mask_cache import MaskCache

            with self._mask_lock:
                got = self._mask_caches.get(device)
                if got is None:
                    got = self._mask_caches[device] = MaskCache(
                        self.words, max_bytes=self.mask_cache_max_bytes, device=device)
        return got

    def mask_cache_stats(self) -> dict[str, Any]:
        """Hits, misses, entries and bytes of the mask caches (summed over devices), with the hit
        rate, how many states' token classes came from the tokenizer's shared cache, and how many
        tops' uncertain tokens were decided by a walk kept from another configuration
        (``top_survivor_hits``, :mod:`pda.walk_results`)."""
        total: dict[str, Any] = {"hits": 0, "misses": 0, "evictions": 0, "entries": 0, "bytes": 0}
        for cache in list(self._mask_caches.values()):
            st = cache.stats()
            for k in total:
                total[k] += st[k]
        asked = total["hits"] + total["misses"]
        total["hit_rate"] = total["hits"] / asked if asked else 0.0
        total["shared_class_hits"] = self.classes.shared_hits
        total["classified_states"] = len(self.classes.by_state)
        total["top_survivor_hits"] = self.top_survivors.hits
        return total

    _disk_key: str | None = None  # the key of its disk cache entry, when it has one
    _disk_saved = 0  # how many states' token classes that entry holds (as far as this process knows)

    def to_bytes(self) -> bytes:
        """The grammar, its automaton and the token classes computed so far, in pda's versioned,
        checksummed format (JSON and raw numpy arrays; see :mod:`pda.serialize`)."""
        return serialize.to_bytes(self)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, tokenizer_info: TokenizerInfo) -> CompiledGrammar:
        """A grammar :meth:`to_bytes` wrote, for the same tokenizer.  Raises
        :class:`~pda.errors.SerializationError` for another tokenizer (fingerprint), another format
        version, or corrupted or truncated bytes.  Its masks equal the original's."""
        if not isinstance(tokenizer_info, TokenizerInfo):
            raise TypeError(f"tokenizer_info must be a pda.TokenizerInfo, got {type(tokenizer_info).__name__}")
        parts = serialize.from_bytes(data, tokenizer_info)
        grammar = Grammar._restored(parts.automaton, **parts.grammar)
        return cls(grammar, tokenizer_info, parts.classes, parts.compile_seconds)

    @property
    def num_states(self) -> int:
        return self.grammar.automaton.num_states

    @property
    def memory_bytes(self) -> int:
        """Bytes held by the automaton arrays and the token classes."""
        return self.grammar.automaton.nbytes + self.classes.nbytes

    def class_sizes(self) -> dict[str, int]:
        """Totals over all states: accepted, uncertain and rejected (state, token) pairs."""
        n = self.trie.order.shape[0]
        acc = sum(c.num_accepted for c in self.classes.by_state.values())
        unc = sum(int(c.uncertain.shape[0]) for c in self.classes.by_state.values())
        done = len(self.classes.by_state)
        return {"states": len(self.classes.states), "computed": done, "accepted": acc, "uncertain": unc,
                "rejected": n * done - acc - unc}

    def __repr__(self) -> str:
        return (f"<pda.CompiledGrammar states={self.num_states} memory={self.memory_bytes / 1e6:.1f} MB "
                f"compile={self.compile_seconds:.2f}s {self.class_sizes()}>")


class GrammarCompiler:
    """Compiles grammars for one tokenizer.  With ``cache=True`` the same grammar, options and
    tokenizer give the same :class:`CompiledGrammar` object; when several threads ask for one key at
    once, it is compiled once and the others wait for it.

    ``precompute`` chooses when each automaton state's token classes are computed: ``"eager"`` (all
    at compile time), ``"lazy"`` (each the first time a matcher needs it; compiles are fast and the
    first mask in a new state pays up to a few milliseconds), or ``"auto"``: a grammar of at most
    :data:`SMALL_GRAMMAR_STATES` byte-reading states (and ``eager_max_states``) whole, at compile
    time; a larger one the start state (what the first mask needs), then the states nearest the
    start, breadth first, for at most ``eager_seconds`` and ``eager_max_states`` states; the rest
    lazily (large JSON Schemas visit few of their thousands of states).  With ``eager_background=True`` (the default) the compile
    classifies only the start state and returns; the background thread (:mod:`pda.background`, one
    per process, compiles' work in turn) classifies the others while the first masks are filled.
    ``eager_background=False`` classifies them all before returning.  :meth:`wait` waits for it.
    ``eager_seconds`` is 0 by default: that thread's Python parts hold the GIL, and the matchers'
    kernels wait for it on return (MaskBench protocol, 150 schemas, one run: 0.1 s of warm-up per
    compile made the mean mask 1.5x and the p99 1.7x what they are without it, and the next
    compiles slower).
    ``max_states``, ``max_stack_depth`` and ``max_compile_seconds`` are the limits of every
    :class:`~pda.Grammar` it builds; ``mask_cache_max_bytes`` bounds each compiled grammar's
    mask cache (:meth:`CompiledGrammar.mask_cache`).

    The grammars it builds from text or a schema let go of their IR and normal form once compiled
    (and written to disk): every full garbage collection walks each object alive, and those trees
    were most of a compiled grammar's (200 compiled schemas in the in-memory cache: 238,000 tracked
    objects and a full collection of 150-220 ms; without them 32,000 and 22-27 ms).
    ``compiled.grammar.ir``, ``.normal`` and ``.to_ebnf()`` build them again when asked for (from a
    snapshot of a schema, taken at the call).  A :class:`~pda.Grammar` passed to
    :meth:`compile_grammar` keeps its own.

    ``cache_dir`` (default: the ``PDA_CACHE_DIR`` environment variable; none when unset or empty)
    keeps compiled grammars on disk too, under the in-memory cache's keys (grammar text, options,
    tokenizer fingerprint), at most ``cache_dir_max_bytes`` (least recently used entries go first;
    ``None``: no bound).  A compile finds its grammar there before building it; a corrupted,
    truncated or foreign entry is dropped and rebuilt.  A new entry is written after the eager
    classification (in the background thread with ``eager_background``).  Token classes computed on
    first use after that are written back to the entry by :meth:`flush`, which also runs at
    interpreter exit.
    """

    def __init__(self, tokenizer_info: TokenizerInfo, *, cache: bool = True, max_states: int = DEFAULT_MAX_STATES,
                 max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH, cache_max_bytes: int | None = DEFAULT_MAX_BYTES,
                 precompute: Literal["auto", "eager", "lazy"] = "auto", eager_max_states: int = 256,
                 eager_seconds: float = 0.0, eager_background: bool = True,
                 max_compile_seconds: float | None = DEFAULT_MAX_COMPILE_SECONDS,
                 cache_dir: str | os.PathLike[str] | None = None,
                 cache_dir_max_bytes: int | None = DEFAULT_DISK_MAX_BYTES,
                 mask_cache_max_bytes: int = DEFAULT_MASK_CACHE_BYTES) -> None:
        if not isinstance(tokenizer_info, TokenizerInfo):
            raise TypeError(f"tokenizer_info must be a pda.TokenizerInfo, got {type(tokenizer_info).__name__}")
        self.tokenizer_info = tokenizer_info
        if cache_dir is None:
            cache_dir = os.environ.get(CACHE_DIR_ENV) or None
        self.disk_cache: DiskCache | None = None
        self._on_disk: dict[str, weakref.ref[CompiledGrammar]] = {}
        self._disk_lock = threading.Lock()
        if cache_dir is not None:
            self.disk_cache = DiskCache(Path(cache_dir).expanduser(), cache_dir_max_bytes)
            atexit.register(_flush_at_exit, weakref.ref(self))
        # per-tokenizer work done once, here, rather than in the first compile
        tokenizer_info.fingerprint  # noqa: B018
        tokenizer_info.trie  # noqa: B018
        prepare_tokenizer(tokenizer_info)
        self._options = {"max_states": max_states, "max_stack_depth": max_stack_depth,
                         "max_compile_seconds": max_compile_seconds}
        self._cache: CompileCache[CompiledGrammar] | None = CompileCache(cache_max_bytes) if cache else None
        if precompute not in ("auto", "eager", "lazy"):
            raise ValueError(f"precompute must be 'auto', 'eager' or 'lazy', got {precompute!r}")
        self._precompute = precompute
        self._eager_max_states = eager_max_states
        self._eager_seconds = eager_seconds
        self._eager_background = eager_background
        self._pending: list[threading.Event] = []  # set when the background work of a compile is done
        self._mask_cache_max_bytes = mask_cache_max_bytes

    # ------------------------------------------------------------------ public

    def compile_grammar(self, grammar: str | Grammar, *, start: str = "root") -> CompiledGrammar:
        """A GBNF/EBNF grammar text (or an already built :class:`~pda.Grammar`)."""
        if isinstance(grammar, Grammar):
            key = "grammar:" + grammar.to_ebnf(normalized=True)
            return self._get(key, lambda: grammar, rebuildable=False)  # the caller's object: keep its trees
        opts = self._options
        return self._get(f"ebnf:{start}:{grammar}", lambda: Grammar.from_ebnf(grammar, start=start, **opts))

    def compile_lark(self, text: str, *, start: str = "start") -> CompiledGrammar:
        opts = self._options
        return self._get(f"lark:{start}:{text}", lambda: Grammar.from_lark(text, start=start, **opts))

    def compile_regex(self, pattern: str) -> CompiledGrammar:
        opts = self._options
        return self._get(f"regex:{pattern}", lambda: Grammar.from_regex(pattern, **opts))

    def compile_builtin_json(self) -> CompiledGrammar:
        """Any JSON value (the bundled ``json.gbnf``)."""
        from pda.grammars import path

        text = path("json").read_text(encoding="utf-8")
        return self.compile_grammar(text)

    def compile_json_schema(self, schema: Any, **options: Any) -> CompiledGrammar:
        """A JSON Schema (string, dict, or pydantic model); options as :func:`pda.Grammar.from_json_schema`."""
        import json

        text = source = schema
        if not isinstance(schema, str):
            obj = schema.model_json_schema() if hasattr(schema, "model_json_schema") else schema
            text = json.dumps(obj, sort_keys=True)
            source = json.dumps(obj)  # a snapshot, in the schema's order: its owner may change it later
        key = f"schema:{text}:{sorted(options.items())!r}"
        opts = {**options, **self._options}
        return self._get(key, lambda: Grammar.from_json_schema(source, **opts))

    def clear_cache(self) -> None:
        """Empty the in-memory cache (the disk cache stays; ``compiler.disk_cache.clear()`` empties it)."""
        if self._cache is not None:
            self._cache.clear()

    def flush(self) -> int:
        """Wait for background work (:meth:`wait`), then write back to the disk cache the token
        classes computed on first use since each grammar was loaded or stored there (merged with
        what the entry holds now); how many entries were written.  Runs at interpreter exit too."""
        self.wait()
        if self.disk_cache is None:
            return 0
        written = 0
        with self._disk_lock:
            items = list(self._on_disk.items())
        for key, ref in items:
            compiled = ref()
            if compiled is None:
                with self._disk_lock:
                    self._on_disk.pop(key, None)
                continue
            if len(compiled.classes.by_state) <= compiled._disk_saved:
                continue
            old = self.disk_cache.get(key)
            if old is not None:
                arrays = serialize.classes_of(old, self.tokenizer_info.fingerprint)
                if arrays is not None and arrays["trans"].shape == compiled.grammar.automaton.trans.shape:
                    serialize.add_classes(compiled.classes, arrays)
            if self._store(key, compiled):
                written += 1
        return written

    # ------------------------------------------------------------------ internals

    def _get(self, text_key: str, build: Callable[[], Grammar], rebuildable: bool = True) -> CompiledGrammar:
        """The compiled grammar of ``text_key``: from memory, from disk, or built by ``build`` (a
        function of the key alone when ``rebuildable``; the grammar then lets go of its trees once
        compiled, and ``build`` makes them again when asked for: :meth:`Grammar._release_trees`)."""
        key = xxhash.xxh3_128_hexdigest(f"{text_key}\x00{sorted(self._options.items())!r}\x00"
                                        f"{self.tokenizer_info.fingerprint}".encode())
        if self._cache is None:
            return self._load_or_compile(key, build, rebuildable)
        return self._cache.get(key, lambda: self._load_or_compile(key, build, rebuildable), lambda c: c.memory_bytes)

    def _load_or_compile(self, key: str, build: Callable[[], Grammar], rebuildable: bool) -> CompiledGrammar:
        disk = self.disk_cache
        if disk is None:
            return self._compile(build, rebuildable=rebuildable)
        t0 = time.perf_counter()
        data = disk.get(key)
        if data is not None:
            try:
                compiled = CompiledGrammar.from_bytes(data, self.tokenizer_info)
            except SerializationError:
                disk.discard(key)  # corrupted, truncated, foreign or old: rebuild it
            else:
                compiled.compile_seconds = time.perf_counter() - t0
                self._track(key, compiled, len(compiled.classes.by_state))
                return compiled
        return self._compile(build, key, rebuildable=rebuildable)

    def _store(self, key: str, compiled: CompiledGrammar) -> bool:
        """Write ``compiled`` to the disk cache; False (and nothing raised) when the disk refuses."""
        assert self.disk_cache is not None
        saved = len(compiled.classes.by_state)
        try:
            self.disk_cache.put(key, compiled.to_bytes())
        except OSError:
            return False
        self._track(key, compiled, saved)
        return True

    def _track(self, key: str, compiled: CompiledGrammar, saved: int) -> None:
        compiled._disk_key = key
        compiled._disk_saved = saved
        with self._disk_lock:
            self._on_disk[key] = weakref.ref(compiled)

    def _compile(self, build: Callable[[], Grammar], key: str | None = None, *, rebuildable: bool = False) -> CompiledGrammar:
        """Build, classify as ``precompute`` says, (with a key and a disk cache) store, and (when
        ``rebuildable``) release the grammar's trees."""
        t0 = time.perf_counter()
        grammar = build()
        shown = [False]

        def progress(done: int, total: int) -> None:
            if time.perf_counter() - t0 > _PROGRESS_AFTER_S and sys.stderr.isatty():
                shown[0] = True
                sys.stderr.write(f"\rpda: token classes {done}/{total} states")
                sys.stderr.flush()

        classes = precompute_classes(grammar.automaton, self.tokenizer_info, progress,
                                     eager=self._precompute == "eager")
        if shown[0]:
            sys.stderr.write("\n")
        compiled = CompiledGrammar(grammar, self.tokenizer_info, classes, 0.0,
                                   mask_cache_max_bytes=self._mask_cache_max_bytes)
        later: list[Callable[[], object]] = []
        aut = grammar.automaton
        if self._precompute == "auto" and len(classes.states) <= min(SMALL_GRAMMAR_STATES, self._eager_max_states):
            classes.compute_all(threads=1)
        elif self._precompute == "auto" and self._eager_background:
            if self._eager_max_states > 0:
                for s in grammar.first_states():  # what the first mask needs; the rest after the compile returns
                    classes.get(s)
                classes.prepare_fills()
            if self._eager_seconds > 0:
                later.append(lambda: classes.warm(aut, seconds=self._eager_seconds,
                                                  max_states=self._eager_max_states))
        elif self._precompute == "auto":
            classes.warm(aut, seconds=self._eager_seconds, max_states=self._eager_max_states)
            classes.prepare_fills()
        compiled.compile_seconds = time.perf_counter() - t0
        if key is not None and self.disk_cache is not None:
            later.append(lambda: self._store(key, compiled))
        in_background = self._precompute == "auto" and self._eager_background and bool(later)
        if rebuildable:  # after the disk write, which prints the trees
            later.append(lambda: grammar._release_trees(build))
        if in_background:
            self._in_background(later)
        else:
            for task in later:
                task()
        return compiled

    def _in_background(self, tasks: list[Callable[[], object]]) -> None:
        done = background.submit(tasks)
        with self._disk_lock:
            self._pending = [e for e in self._pending if not e.is_set()] + [done]

    def wait(self) -> None:
        """Wait for the work that compiles leave running in the background (``precompute="auto"``
        classification past the start state, and disk cache writes)."""
        with self._disk_lock:
            pending, self._pending = self._pending, []
        for done in pending:
            done.wait()


_EXIT_JOIN_SECONDS = 30.0


def _stop_background_at_exit() -> None:
    """Stop the warm-ups between two states and wait (bounded) for the background thread: a
    daemon thread still inside numba while the interpreter tears down aborts the process."""
    STOP_WARMING.set()
    background.stop(_EXIT_JOIN_SECONDS)


atexit.register(_stop_background_at_exit)  # registered first, so it runs after every flush


def _flush_at_exit(ref: weakref.ref[GrammarCompiler]) -> None:
    compiler = ref()
    if compiler is not None:
        try:
            compiler.flush()
        except Exception:  # noqa: BLE001 - interpreter exit: a cache write-back must not turn into a traceback
            pass
