"""GrammarCompiler: grammars compiled against one tokenizer, with precomputed token classes."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Literal

import xxhash

from pda.cache.compile_cache import DEFAULT_MAX_BYTES, CompileCache

from .automaton import DEFAULT_MAX_STATES
from .limits import DEFAULT_MAX_COMPILE_SECONDS
from .grammar import Grammar
from .precompute import TokenClasses, max_token_length, precompute_classes
from .stack import DEFAULT_MAX_STACK_DEPTH
from .tokenizer import TokenizerInfo

__all__ = ["GrammarCompiler", "CompiledGrammar"]

_PROGRESS_AFTER_S = 2.0
DEFAULT_MASK_CACHE_BYTES = 64 << 20  # per compiled grammar: about 4,000 rows of a 129k vocabulary


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
        self.mask_cache_max_bytes = mask_cache_max_bytes
        self._mask_caches: dict[str, Any] = {}
        self._mask_lock = threading.Lock()

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
        rate, and how many states' token classes came from the tokenizer's shared cache."""
        total: dict[str, Any] = {"hits": 0, "misses": 0, "evictions": 0, "entries": 0, "bytes": 0}
        for cache in list(self._mask_caches.values()):
            st = cache.stats()
            for k in total:
                total[k] += st[k]
        asked = total["hits"] + total["misses"]
        total["hit_rate"] = total["hits"] / asked if asked else 0.0
        total["shared_class_hits"] = self.classes.shared_hits
        total["classified_states"] = len(self.classes.by_state)
        return total

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
    first mask in a new state pays up to a few milliseconds), or ``"auto"``: at compile time, the
    states nearest the start, breadth first, for at most ``eager_seconds`` and ``eager_max_states``
    states; the rest lazily (large JSON Schemas visit few of their thousands of states).
    ``max_states``, ``max_stack_depth`` and ``max_compile_seconds`` are the limits of every
    :class:`~pda.Grammar` it builds; ``mask_cache_max_bytes`` bounds each compiled grammar's
    mask cache (:meth:`CompiledGrammar.mask_cache`).
    """

    def __init__(self, tokenizer_info: TokenizerInfo, *, cache: bool = True, max_states: int = DEFAULT_MAX_STATES,
                 max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH, cache_max_bytes: int | None = DEFAULT_MAX_BYTES,
                 precompute: Literal["auto", "eager", "lazy"] = "auto", eager_max_states: int = 256,
                 eager_seconds: float = 0.1,
                 max_compile_seconds: float | None = DEFAULT_MAX_COMPILE_SECONDS,
                 mask_cache_max_bytes: int = DEFAULT_MASK_CACHE_BYTES) -> None:
        if not isinstance(tokenizer_info, TokenizerInfo):
            raise TypeError(f"tokenizer_info must be a pda.TokenizerInfo, got {type(tokenizer_info).__name__}")
        self.tokenizer_info = tokenizer_info
        self._options = {"max_states": max_states, "max_stack_depth": max_stack_depth,
                         "max_compile_seconds": max_compile_seconds}
        self._cache: CompileCache[CompiledGrammar] | None = CompileCache(cache_max_bytes) if cache else None
        if precompute not in ("auto", "eager", "lazy"):
            raise ValueError(f"precompute must be 'auto', 'eager' or 'lazy', got {precompute!r}")
        self._precompute = precompute
        self._eager_max_states = eager_max_states
        self._eager_seconds = eager_seconds
        self._mask_cache_max_bytes = mask_cache_max_bytes

    # ------------------------------------------------------------------ public

    def compile_grammar(self, grammar: str | Grammar, *, start: str = "root") -> CompiledGrammar:
        """A GBNF/EBNF grammar text (or an already built :class:`~pda.Grammar`)."""
        if isinstance(grammar, Grammar):
            key = "grammar:" + grammar.to_ebnf(normalized=True)
            return self._get(key, lambda: grammar)
        return self._get(f"ebnf:{start}:{grammar}", lambda: Grammar.from_ebnf(grammar, start=start, **self._options))

    def compile_lark(self, text: str, *, start: str = "start") -> CompiledGrammar:
        return self._get(f"lark:{start}:{text}", lambda: Grammar.from_lark(text, start=start, **self._options))

    def compile_regex(self, pattern: str) -> CompiledGrammar:
        return self._get(f"regex:{pattern}", lambda: Grammar.from_regex(pattern, **self._options))

    def compile_builtin_json(self) -> CompiledGrammar:
        """Any JSON value (the bundled ``json.gbnf``)."""
        from pda.grammars import path

        text = path("json").read_text(encoding="utf-8")
        return self.compile_grammar(text)

    def compile_json_schema(self, schema: Any, **options: Any) -> CompiledGrammar:
        """A JSON Schema (string, dict, or pydantic model); options as :func:`pda.Grammar.from_json_schema`."""
        import json

        text = schema if isinstance(schema, str) else json.dumps(
            schema.model_json_schema() if hasattr(schema, "model_json_schema") else schema, sort_keys=True)
        key = f"schema:{text}:{sorted(options.items())!r}"
        return self._get(key, lambda: Grammar.from_json_schema(schema, **options, **self._options))

    def clear_cache(self) -> None:
        if self._cache is not None:
            self._cache.clear()

    # ------------------------------------------------------------------ internals

    def _get(self, text_key: str, build: Callable[[], Grammar]) -> CompiledGrammar:
        key = xxhash.xxh3_128_hexdigest(f"{text_key}\x00{sorted(self._options.items())!r}\x00"
                                        f"{self.tokenizer_info.fingerprint}".encode())
        if self._cache is None:
            return self._compile(build)
        return self._cache.get(key, lambda: self._compile(build), lambda c: c.memory_bytes)

    def _compile(self, build: Callable[[], Grammar]) -> CompiledGrammar:
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
        if self._precompute == "auto":
            classes.warm(grammar.automaton, seconds=self._eager_seconds, max_states=self._eager_max_states)
        if shown[0]:
            sys.stderr.write("\n")
        return CompiledGrammar(grammar, self.tokenizer_info, classes, time.perf_counter() - t0,
                               mask_cache_max_bytes=self._mask_cache_max_bytes)
