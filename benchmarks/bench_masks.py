"""Token-mask benchmark: pda beside xgrammar and llguidance, in one process, on DeepSeek's tokenizer.

For each grammar every engine compiles the grammar (compile time: the first, *cold* compile, then
the mean of ``--compile-reps`` compiles with a fresh compiler and no cache), then steps through the
same token sequences (documents tokenized with ``add_special_tokens=False``, then the stop token).
At every step each engine fills its token bitmask (timed) and accepts the token (timed apart).

Grammars, and what each engine gets (the table of the README repeats this):

* ``json-builtin`` — pda ``compile_builtin_json()`` (the bundled ``json.gbnf``: any JSON value,
  whitespace around it); xgrammar ``compile_builtin_json_grammar()`` (its own grammar: an object or
  an array, nothing around it); llguidance the Lark grammar ``start: %json {}`` (JSON Schema ``{}``,
  any value, flexible whitespace).  The three grammars differ at the first and last step only; the
  documents are the random ones and the object/array samples, with no surrounding whitespace.
* ``json.gbnf``, ``c_like.gbnf``, ``sql_select.gbnf``, ``csv.gbnf``, ``xml.gbnf`` — the bundled
  GBNF text for pda (``compile_grammar``) and xgrammar (``compile_grammar``); for llguidance
  ``llguidance.gbnf_to_lark`` of the same text, after joining continuation lines that start with
  ``|`` (its converter cannot read them).  Documents: the random JSON documents and every valid JSON
  sample for ``json.gbnf``; the bundled valid samples for the others.
* ``arithmetic.gbnf``, ``c.gbnf``, ``english.gbnf``, ``japanese.gbnf``, ``list.gbnf`` — llama.cpp's
  example grammars from ``../shared/corpora/gbnf``, given to each engine as above; documents: the
  samples of ``gbnf_samples.py`` (hand-written, plus ``--docs`` seeded ones for arithmetic and list),
  each checked with ``pda.Grammar.from_ebnf(text).accepts``.  An engine that refuses a grammar is
  left out of that grammar's rows (noted), never the whole run.

For pda every grammar also reports its mask cache (``CompiledGrammar.mask_cache_stats()`` after
all its documents): hit rate, entries and bytes, and the states whose token classes came from the
tokenizer's shared class cache.

pda's and xgrammar's masks are compared at every step where the two engines run the same grammar.
Special token ids are left out of the comparison, because pda never allows them (they have no text)
while xgrammar treats their text as ordinary text; the stop token is compared on its own.  Every
mismatch is counted and printed (never hidden).  A token an engine refuses, and a next token missing
from an engine's own mask, are reported too.  Usage::

    python benchmarks/bench_masks.py [--docs N] [--seed S] [--compile-reps K] [--out DIR] [--only G,G] [--profile]

Prints a table and writes ``DIR/masks.json`` and ``DIR/masks.png`` (default ``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from common import environment, load_deepseek_tokenizer, random_json_documents, summarize
from gbnf_samples import gbnf_cases

import pda
from pda import grammars

ROOT = Path(__file__).resolve().parent
ENGINES = ("pda", "xgrammar", "llguidance")
MAX_REPORTED = 10  # mismatches / rejections printed per grammar (all are counted and saved)
# llguidance's any-JSON grammar; by default it refuses \u escapes of printable characters.
LLG_JSON = 'start: %json {"x-guidance": {"json_allow_general_unicode_escapes": true}}'


# --------------------------------------------------------------------------------------- grammars


@dataclass
class Case:
    """One grammar as each engine receives it, and the documents to step through."""

    name: str
    gbnf: str | None  # the GBNF text, or None for each engine's built-in JSON grammar
    documents: list[tuple[str, str]]  # (label, text)
    same_grammar: bool  # pda and xgrammar run the very same grammar, so their masks must agree
    given: dict[str, str] = field(default_factory=dict)  # engine -> the grammar it got, in words


def llguidance_lark(gbnf: str) -> str:
    """The Lark text llguidance gets for a GBNF grammar: ``gbnf_to_lark`` after joining the
    continuation lines that begin with ``|`` onto the line before (its converter rejects them)."""
    from llguidance.gbnf_to_lark import gbnf_to_lark

    return gbnf_to_lark(re.sub(r"\n[ \t]+\|", " |", gbnf))


def build_cases(num_docs: int, seed: int) -> list[Case]:
    """The grammars and their documents: the bundled ones, then llama.cpp's examples."""
    random_docs = [(f"random-{i}", d) for i, d in enumerate(random_json_documents(num_docs, seed))]
    json_valid = [(p.name, p.read_text(encoding="utf-8")) for p in grammars.samples("json")[0]]
    # xgrammar's built-in grammar wants an object or an array with nothing around it.
    containers = [(label, t.strip()) for label, t in json_valid if t.strip()[:1] in ("{", "[")]
    cases = [Case("json-builtin", None, random_docs + containers, False, {
        "pda": "compile_builtin_json() = bundled json.gbnf (any value, ws around)",
        "xgrammar": "compile_builtin_json_grammar() (object|array root, no ws around)",
        "llguidance": f"lark '{LLG_JSON}' (any value, flexible ws, no \\/ escape)"})]
    for name, docs in (("json", random_docs + json_valid), ("c_like", None), ("sql_select", None),
                       ("csv", None), ("xml", None)):
        path = grammars.path(name)
        if docs is None:
            docs = [(p.name, p.read_text(encoding="utf-8")) for p in grammars.samples(name)[0]]
        cases.append(Case(path.name, path.read_text(encoding="utf-8"), docs, True, {
            "pda": f"compile_grammar({path.name})", "xgrammar": f"compile_grammar({path.name})",
            "llguidance": f"gbnf_to_lark({path.name}, continuation lines joined)"}))
    for name, text, docs in gbnf_cases(num_docs, seed):
        cases.append(Case(f"{name}.gbnf", text, docs, True, {
            "pda": f"compile_grammar({name}.gbnf)", "xgrammar": f"compile_grammar({name}.gbnf)",
            "llguidance": f"gbnf_to_lark({name}.gbnf, continuation lines joined)"}))
    return cases


# ---------------------------------------------------------------------------------------- engines


class Engine:
    """One engine's tokenizer, compiler and matcher calls, behind the same five methods."""

    name = ""

    def compile(self, case: Case) -> Any:
        """Compile ``case`` with a fresh compiler and no cache."""
        raise NotImplementedError

    def matcher(self, compiled: Any) -> Any:
        raise NotImplementedError

    def fill(self, matcher: Any) -> None:
        """Write the next-token mask into row 0 of this engine's bitmask."""
        raise NotImplementedError

    def accept(self, matcher: Any, token: int) -> bool:
        raise NotImplementedError

    def row(self) -> np.ndarray:
        """Row 0 of the bitmask as int32 numpy (a view: copy it to keep it)."""
        return self.bitmask[0].numpy()


class PdaEngine(Engine):
    name = "pda"

    def __init__(self, hf: Any) -> None:
        self.tok = pda.TokenizerInfo.from_huggingface(hf)
        _ = self.tok.trie  # the sorted token trie belongs to tokenizer setup, not to a compile
        pda.warm_up_kernels()  # so does loading the fill kernels, once per process (as a server does at start-up)
        self.bitmask = pda.allocate_token_bitmask(1, self.tok.vocab_size)

    def compile(self, case: Case) -> Any:
        compiler = pda.GrammarCompiler(self.tok, cache=False)
        return compiler.compile_builtin_json() if case.gbnf is None else compiler.compile_grammar(case.gbnf)

    def matcher(self, compiled: Any) -> Any:
        return pda.GrammarMatcher(compiled)

    def fill(self, matcher: Any) -> None:
        matcher.fill_next_token_bitmask(self.bitmask, 0)

    def accept(self, matcher: Any, token: int) -> bool:
        return bool(matcher.accept_token(token))


class XgrammarEngine(Engine):
    name = "xgrammar"

    def __init__(self, hf: Any, vocab_size: int, threads: int) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        self.threads = threads
        self.tok = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=vocab_size)
        self.bitmask = xgr.allocate_token_bitmask(1, vocab_size)

    def compile(self, case: Case) -> Any:
        compiler = self.xgr.GrammarCompiler(self.tok, max_threads=self.threads, cache_enabled=False)
        return compiler.compile_builtin_json_grammar() if case.gbnf is None else compiler.compile_grammar(case.gbnf)

    def matcher(self, compiled: Any) -> Any:
        return self.xgr.GrammarMatcher(compiled)

    def fill(self, matcher: Any) -> None:
        matcher.fill_next_token_bitmask(self.bitmask, 0)

    def accept(self, matcher: Any, token: int) -> bool:
        return bool(matcher.accept_token(token))


class LlguidanceEngine(Engine):
    """llguidance: "compiling" builds an ``LLMatcher`` (the token trie lives in the tokenizer, and
    lexer states are built lazily during the first masks), so its compile time is not comparable."""

    name = "llguidance"

    def __init__(self, hf: Any, vocab_size: int) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.torch

        self.llg = llguidance
        self.tok = llguidance.hf.from_tokenizer(hf, n_vocab=vocab_size)
        self.bitmask = llguidance.torch.allocate_token_bitmask(1, vocab_size)
        self._fill = llguidance.torch.fill_next_token_bitmask

    def grammar(self, case: Case) -> str:
        lark = LLG_JSON if case.gbnf is None else llguidance_lark(case.gbnf)
        return self.llg.LLMatcher.grammar_from_lark(lark)

    def compile(self, case: Case) -> Any:
        grammar = self.grammar(case)
        m = self.llg.LLMatcher(self.tok, grammar, log_level=0)
        if m.is_error():
            raise RuntimeError(f"llguidance refused {case.name}: {m.get_error()}")
        return grammar, m

    def matcher(self, compiled: Any) -> Any:
        return self.llg.LLMatcher(self.tok, compiled[0], log_level=0)

    def fill(self, matcher: Any) -> None:
        self._fill(matcher, self.bitmask, 0)

    def accept(self, matcher: Any, token: int) -> bool:
        return bool(matcher.consume_token(token))


def make_engines(hf: Any, xgr_threads: int) -> tuple[dict[str, Engine], dict[str, float], list[str]]:
    """Every engine that is installed, its tokenizer setup time, and notes on the missing ones."""
    engines: dict[str, Engine] = {}
    setup: dict[str, float] = {}
    notes: list[str] = []
    t0 = time.perf_counter()
    engines["pda"] = PdaEngine(hf)
    setup["pda"] = time.perf_counter() - t0
    vocab = engines["pda"].tok.vocab_size  # type: ignore[attr-defined]
    makers: dict[str, Callable[[], Engine]] = {
        "xgrammar": lambda: XgrammarEngine(hf, vocab, xgr_threads),
        "llguidance": lambda: LlguidanceEngine(hf, vocab),
    }
    for name, make in makers.items():
        t0 = time.perf_counter()
        try:
            engines[name] = make()
        except ImportError as exc:
            notes.append(f"{name} is not installed ({exc}); its columns are empty")
            continue
        setup[name] = time.perf_counter() - t0
    return engines, setup, notes


# ------------------------------------------------------------------------------------------ runs


def time_compiles(engine: Engine, case: Case, reps: int, budget_s: float) -> tuple[Any, dict[str, Any]]:
    """The first (cold) compile, then up to ``reps`` more (at least one; no new one once ``budget_s``
    seconds were spent on them); returns the last compiled grammar and the figures."""
    t0 = time.perf_counter()
    compiled = engine.compile(case)
    cold = time.perf_counter() - t0
    warm: list[float] = []
    while len(warm) < reps and (not warm or sum(warm) < budget_s):
        t0 = time.perf_counter()
        compiled = engine.compile(case)
        warm.append(time.perf_counter() - t0)
    return compiled, {"cold_ms": cold * 1e3, "mean_ms": float(np.mean(warm)) * 1e3,
                      "min_ms": float(np.min(warm)) * 1e3, "reps": len(warm)}


def comparable_bits(vocab_size: int, excluded: tuple[int, ...]) -> np.ndarray:
    """A bitmask row with every token id below ``vocab_size`` set except ``excluded``."""
    words = (vocab_size + 31) // 32
    allowed = np.zeros(words * 32, dtype=np.uint64)
    allowed[:vocab_size] = 1
    allowed[list(excluded)] = 0
    packed = (allowed.reshape(words, 32) << np.arange(32, dtype=np.uint64)).sum(axis=1)
    return packed.astype(np.uint32).view(np.int32)


def bits_of(row: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Whether each token id in ``ids`` is allowed by the bitmask ``row``."""
    return ((row[ids >> 5] >> (ids & 31)) & 1).astype(bool)


def mask_diff(a: np.ndarray, b: np.ndarray, keep: np.ndarray) -> tuple[list[int], list[int]]:
    """Token ids allowed only by ``a`` and only by ``b``, among the bits set in ``keep``."""
    out = []
    for x in ((a & ~b) & keep, (b & ~a) & keep):
        words = np.flatnonzero(x)
        ids = [int(w) * 32 + bit for w in words.tolist() for bit in range(32) if (int(x[w]) >> bit) & 1]
        out.append(ids)
    return out[0], out[1]


def step_documents(engines: dict[str, Engine], compiled: dict[str, Any], case: Case, token_docs: list[tuple[str, list[int]]],
                   stop: int, keep: np.ndarray, decode: Callable[[list[int]], bytes]) -> dict[str, Any]:
    """Run every engine over every document: fill (timed), compare, accept (timed)."""
    fill_s: dict[str, list[float]] = {e: [] for e in engines}
    first_s: dict[str, list[float]] = {e: [] for e in engines}
    by_step: dict[str, dict[tuple[str, int], float]] = {e: {} for e in engines}  # (document, step) -> fill s
    accept_s: dict[str, list[float]] = {e: [] for e in engines}
    rejections: list[dict[str, Any]] = []
    mismatches: list[dict[str, Any]] = []
    compared = 0
    clock = time.perf_counter
    for label, ids in token_docs:
        matchers = {e: eng.matcher(compiled[e]) for e, eng in engines.items()}
        alive = dict.fromkeys(engines, True)
        seq = ids + [stop]
        for step, token in enumerate(seq):
            rows = {}
            for e, eng in engines.items():
                if not alive[e]:
                    continue
                m = matchers[e]
                t0 = clock()
                eng.fill(m)
                dt = clock() - t0
                (first_s if step == 0 else fill_s)[e].append(dt)
                if step:
                    by_step[e][(label, step)] = dt
                rows[e] = eng.row().copy()
            if "pda" in rows and "xgrammar" in rows:
                compared += 1
                only_pda, only_xgr = mask_diff(rows["pda"], rows["xgrammar"], keep)
                stop_pda, stop_xgr = bool(bits_of(rows["pda"], np.array([stop]))[0]), bool(bits_of(rows["xgrammar"], np.array([stop]))[0])
                if only_pda or only_xgr or stop_pda != stop_xgr:
                    mismatches.append({"doc": label, "step": step, "prefix_tail": decode(seq[:step])[-40:].decode("utf-8", "replace"),
                                       "only_pda": only_pda[:20], "only_xgrammar": only_xgr[:20],
                                       "n_only_pda": len(only_pda), "n_only_xgrammar": len(only_xgr),
                                       "only_pda_text": [decode([t]).decode("utf-8", "replace") for t in only_pda[:8]],
                                       "only_xgrammar_text": [decode([t]).decode("utf-8", "replace") for t in only_xgr[:8]],
                                       "stop_pda": stop_pda, "stop_xgrammar": stop_xgr})
            for e, eng in engines.items():
                if not alive[e]:
                    continue
                in_mask = bool(bits_of(rows[e], np.array([token]))[0])
                t0 = clock()
                ok = eng.accept(matchers[e], token)
                accept_s[e].append(clock() - t0)
                if not ok or not in_mask:
                    rejections.append({"engine": e, "doc": label, "step": step, "token": token,
                                       "token_text": decode([token]).decode("utf-8", "replace"),
                                       "prefix_tail": decode(seq[:step])[-40:].decode("utf-8", "replace"),
                                       "accepted": ok, "in_own_mask": in_mask})
                if not ok:
                    alive[e] = False
    return {"fill": fill_s, "first": first_s, "by_step": by_step, "accept": accept_s, "rejections": rejections,
            "mismatches": mismatches, "compared_steps": compared}


def is_suspect(mismatch: dict[str, Any], same_grammar: bool) -> bool:
    """Whether a mask mismatch points to a bug.  With the same grammar every one does.  For the
    built-in JSON grammars, pda's language (any value, whitespace around it) contains xgrammar's
    (an object or an array, nothing around it), so pda may allow more; only a token (or the stop
    token) that xgrammar allows and pda does not is suspect."""
    if same_grammar:
        return True
    return bool(mismatch["n_only_xgrammar"]) or (mismatch["stop_xgrammar"] and not mismatch["stop_pda"])


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Set up, compile, step; the whole result as one JSON-ready dict."""
    t0 = time.perf_counter()
    hf = load_deepseek_tokenizer()
    print(f"DeepSeek tokenizer: {len(hf)} tokens, loaded in {time.perf_counter() - t0:.1f}s", flush=True)
    engines, setup, notes = make_engines(hf, args.xgrammar_threads)
    for note in notes:
        print("note:", note)
    tok = engines["pda"].tok  # type: ignore[attr-defined]
    if args.gc_freeze:  # as vLLM's processes do once they are set up (schema_conformance.py's option)
        gc.collect()
        gc.freeze()
    stop = tok.stop_token_ids[0]
    # Special tokens are left out of the comparison: pda never allows them; xgrammar reads their text.
    keep = comparable_bits(tok.vocab_size, tok.special_token_ids)
    decode = tok.decode

    results: dict[str, Any] = {"setup_s": setup, "cases": {}, "notes": notes}
    only = {n.strip().removesuffix(".gbnf") for n in args.only.split(",") if n.strip()} if args.only else None
    for case in build_cases(args.docs, args.seed):
        if only is not None and case.name.removesuffix(".gbnf") not in only:
            continue
        token_docs = [(label, hf.encode(text, add_special_tokens=False)) for label, text in case.documents]
        for label, ids in token_docs:
            text = dict(case.documents)[label]
            if decode(ids) != text.encode("utf-8"):
                print(f"warning: {case.name}/{label}: the tokens do not spell the document")
        compiled, compile_figures, refused = {}, {}, {}
        for e, eng in engines.items():
            try:
                compiled[e], compile_figures[e] = time_compiles(eng, case, args.compile_reps, args.compile_budget)
            except Exception as exc:  # noqa: BLE001 - an engine that refuses a grammar sits out that grammar
                refused[e] = f"{type(exc).__name__}: {str(exc)[:300]}"
                print(f"  note: {e} refused {case.name}: {refused[e]}", flush=True)
        running = {e: eng for e, eng in engines.items() if e in compiled}
        warm = [(label, ids[:24]) for label, ids in token_docs[:1]]  # first calls of each matcher path
        step_documents(running, compiled, case, warm, stop, keep, decode)
        got = step_documents(running, compiled, case, token_docs, stop, keep, decode)
        row: dict[str, Any] = {"grammar_given": {e: case.given[e] for e in engines}, "same_grammar": case.same_grammar,
                               "documents": len(token_docs), "tokens": sum(len(i) + 1 for _, i in token_docs),
                               "compared_steps": got["compared_steps"], "mismatches": got["mismatches"],
                               "rejections": got["rejections"], "refused": refused, "engines": {}}
        for e in running:
            row["engines"][e] = {"compile": compile_figures[e], "mask": summarize(got["fill"][e]),
                                 "first_mask": summarize(got["first"][e]), "accept": summarize(got["accept"][e])}
        if "pda" in running and "llguidance" in running:
            # An engine that refuses a token stops there: its figures cover only the steps before.
            # The same steps of both engines (first masks excluded, as above) compare like with like.
            both = [k for k in got["by_step"]["llguidance"] if k in got["by_step"]["pda"]]
            row["same_steps_llguidance"] = {e: summarize([got["by_step"][e][k] for k in both])
                                            for e in ("pda", "llguidance")}
        row["suspect_mismatches"] = sum(1 for mm in got["mismatches"] if is_suspect(mm, case.same_grammar))
        if "pda" in compiled and hasattr(compiled["pda"], "num_states"):
            row["pda_states"] = compiled["pda"].num_states
        if "pda" in compiled and hasattr(compiled["pda"], "mask_cache_stats"):
            row["pda_mask_cache"] = compiled["pda"].mask_cache_stats()
        results["cases"][case.name] = row
        print(f"  {case.name}: {row['tokens']} steps, {len(got['mismatches'])} mismatching masks, "
              f"{len(got['rejections'])} rejections", flush=True)
    return results


# -------------------------------------------------------------------------------------- reporting


def ratio(a: float, b: float | None) -> str:
    return f"{a / b:6.2f}x" if b and b == b and a == a else f"{'-':>7}"


def print_report(results: dict[str, Any]) -> None:
    """The table (per grammar and engine), then mismatches and rejections, never hidden."""
    meta = results["meta"]
    print(f"\npda at {meta['git']}, xgrammar {meta['versions']['xgrammar']}, llguidance {meta['versions']['llguidance']}; "
          f"{meta['cpu']}, {meta['cpu_count']} CPUs")
    print("setup (tokenizer; pda: and its kernel warm-up) s: " + ", ".join(f"{e} {s:.2f}" for e, s in results["setup_s"].items()))
    head = (f"{'grammar':<17}{'engine':<11}{'steps':>6}{'cold ms':>9}{'compile ms':>11}{'vs xgr':>8}{'mask us mean':>13}"
            f"{'p50':>9}{'p99':>10}{'max':>10}{'vs xgr':>8}{'first us':>10}{'accept us':>10}")
    print(head)
    print("-" * len(head))
    for name, row in results["cases"].items():
        x = row["engines"].get("xgrammar")
        for e, f in row["engines"].items():
            c, m = f["compile"], f["mask"]
            steps = m["n"] + f["first_mask"]["n"]
            print(f"{name:<17}{e:<11}{steps:>6}{c['cold_ms']:>9.1f}{c['mean_ms']:>11.1f}"
                  f"{ratio(c['mean_ms'], x['compile']['mean_ms'] if x else None):>8}{m['mean_us']:>13.1f}"
                  f"{m['p50_us']:>9.1f}{m['p99_us']:>10.1f}{m['max_us']:>10.1f}"
                  f"{ratio(m['mean_us'], x['mask']['mean_us'] if x else None):>8}"
                  f"{f['first_mask']['mean_us']:>10.1f}{f['accept']['mean_us']:>10.1f}")
    print("(compile ms: mean of the repetitions after the cold first compile; mask us: per token, the first "
          "mask of each document excluded and shown as 'first us')")
    print(f"\n{'grammar':<17}{'pda/llg mean':>13}{'pda/llg p99':>12}{'pda/xgr mean':>13}{'pda/xgr p99':>12}"
          f"{'cache hit':>10}{'entries':>8}{'cache KiB':>10}{'shared cls':>11}{'classified':>11}"
          f"{'same steps':>11}{'mean':>8}{'p99':>8}")
    for name, row in results["cases"].items():
        eng = row["engines"]
        p, llg, x = eng.get("pda"), eng.get("llguidance"), eng.get("xgrammar")
        mc = row.get("pda_mask_cache")
        cache = (f"{mc['hit_rate']:>10.3f}{mc['entries']:>8}{mc['bytes'] / 1024:>10.1f}{mc['shared_class_hits']:>11}"
                 f"{mc['classified_states']:>11}" if mc else "")
        same = row.get("same_steps_llguidance")
        paired = (f"{same['pda']['n']:>11}{ratio(same['pda']['mean_us'], same['llguidance']['mean_us']):>8}"
                  f"{ratio(same['pda']['p99_us'], same['llguidance']['p99_us']):>8}" if same and same["pda"]["n"] else "")
        print(f"{name:<17}" + "".join(
            f"{ratio(p['mask'][k], q['mask'][k] if q else None) if p else '-':>{w}}"
            for q, k, w in ((llg, "mean_us", 13), (llg, "p99_us", 12), (x, "mean_us", 13), (x, "p99_us", 12))) + cache
            + paired)
    print("(same steps: pda/llg over only the steps both engines ran -- llguidance stops at a token it refuses)")
    for name, row in results["cases"].items():
        for e, why in row.get("refused", {}).items():
            print(f"note: {e} refused {name}: {why}")
    for name, row in results["cases"].items():
        mism, rej = row["mismatches"], row["rejections"]
        kind = ("same grammar: every one is a bug" if row["same_grammar"] else
                "different grammars; suspect = xgrammar allows a token pda refuses")
        print(f"\n{name}: {len(mism)} of {row['compared_steps']} steps where pda and xgrammar masks differ, "
              f"{row['suspect_mismatches']} suspect ({kind}); "
              f"{len(rej)} refused tokens / tokens missing from an engine's own mask")
        suspects = [mm for mm in mism if is_suspect(mm, row["same_grammar"])]
        expected = [mm for mm in mism if not is_suspect(mm, row["same_grammar"])]
        for mm in suspects[:MAX_REPORTED] + expected[:3]:
            tag = "SUSPECT" if is_suspect(mm, row["same_grammar"]) else "expected"
            print(f"  {tag} mismatch {mm['doc']} step {mm['step']} after {mm['prefix_tail']!r}: "
                  f"only pda {mm['n_only_pda']} {mm['only_pda'][:6]} {mm['only_pda_text'][:4]}; "
                  f"only xgrammar {mm['n_only_xgrammar']} {mm['only_xgrammar'][:6]} {mm['only_xgrammar_text'][:4]}; "
                  f"stop pda={mm['stop_pda']} xgr={mm['stop_xgrammar']}")
        for rj in rej[:MAX_REPORTED]:
            print(f"  {rj['engine']} {'refused' if not rj['accepted'] else 'accepted but masked out'} token "
                  f"{rj['token']} {rj['token_text']!r} at {rj['doc']} step {rj['step']} after {rj['prefix_tail']!r}")
        if len(suspects) > MAX_REPORTED or len(expected) > 3 or len(rej) > MAX_REPORTED:
            print("  ... all of them are in the JSON file")


def plot(results: dict[str, Any], path: Path) -> bool:
    """Bar charts of compile time and per-token mask time (log scale); False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = list(results["cases"])
    engines = [e for e in ENGINES if any(e in r["engines"] for r in results["cases"].values())]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(engines)
    xs = np.arange(len(names))
    for k, e in enumerate(engines):
        rows = [results["cases"][n]["engines"].get(e) for n in names]
        comp = [r["compile"]["mean_ms"] if r else np.nan for r in rows]
        mean = [r["mask"]["mean_us"] if r else np.nan for r in rows]
        p99 = [r["mask"]["p99_us"] if r else np.nan for r in rows]
        axes[0].bar(xs + k * width, comp, width, label=e)
        axes[1].bar(xs + k * width, mean, width, label=f"{e} mean")
        axes[1].scatter(xs + k * width, p99, marker="_", s=120, color="black", zorder=3,
                        label="p99" if k == 0 else None)
    for ax, title in ((axes[0], "compile time (ms, warm mean)"), (axes[1], "mask time per token (µs)")):
        ax.set_yscale("log")
        ax.set_xticks(xs + width * (len(engines) - 1) / 2, names, rotation=15)
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.suptitle(f"DeepSeek tokenizer (129,280 tokens), {results['meta']['cpu']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def profile_pda(args: argparse.Namespace, top: int = 25) -> str:
    """cProfile of pda alone: one compile of each grammar, then the mask + accept loop; the top functions."""
    hf = load_deepseek_tokenizer()
    eng = PdaEngine(hf)
    cases = build_cases(args.docs, args.seed)
    eng.compile(cases[0])  # numba dispatch warm-up outside the profile
    out = io.StringIO()
    out.write("=== pda compile phases (s): automaton = Grammar.from_ebnf, token classes = the rest ===\n")
    for case in cases:
        text = case.gbnf if case.gbnf is not None else grammars.path("json").read_text(encoding="utf-8")
        t0 = time.perf_counter()
        pda.Grammar.from_ebnf(text)
        t1 = time.perf_counter()
        eng.compile(case)
        t2 = time.perf_counter()
        out.write(f"{case.name:<17} automaton {t1 - t0:8.3f}   token classes {t2 - t1 - (t1 - t0):8.3f}   "
                  f"total {t2 - t1:8.3f}\n")
    out.write("(the token classes are computed on worker threads: cProfile, which sees the main thread only, "
              "shows that time as 'acquire' of a lock)\n")
    prof = cProfile.Profile()
    prof.enable()
    compiled = [eng.compile(c) for c in cases]
    prof.disable()
    out.write("=== pda compile (all grammars) ===\n")
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    prof = cProfile.Profile()
    for case, cg in zip(cases, compiled):
        for _, text in case.documents:
            ids = hf.encode(text, add_special_tokens=False)
            m = eng.matcher(cg)
            prof.enable()
            for t in ids:
                eng.fill(m)
                eng.accept(m, t)
            prof.disable()
    out.write("=== pda mask + accept loop (all documents) ===\n")
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top // 2)
    return out.getvalue()


def main() -> None:
    """Parse arguments, run, print, write JSON and PNG (and the profile with ``--profile``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=4, help="random JSON documents (default 4)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile-reps", type=int, default=3, help="compiles timed after the cold one")
    parser.add_argument("--compile-budget", type=float, default=20.0,
                        help="seconds after which no further compile repetition starts (default 20)")
    parser.add_argument("--xgrammar-threads", type=int, default=8, help="xgrammar's compile threads (its default)")
    parser.add_argument("--out", type=Path, default=ROOT / "results")
    parser.add_argument("--only", default=None,
                        help="comma-separated grammars to run, e.g. 'json-builtin,arithmetic,c' (default: all)")
    parser.add_argument("--profile", action="store_true", help="also cProfile pda's compile and mask loop")
    parser.add_argument("--gc-freeze", action="store_true",
                        help="gc.collect() and gc.freeze() once the engines are set up, as vLLM's processes do (a full "
                             "collection of the startup heap otherwise lands in some fill)")
    args = parser.parse_args()
    if args.docs < 0 or args.compile_reps < 1:
        parser.error("--docs must be >= 0 and --compile-reps >= 1")
    results = run(args)
    results["meta"] = {**environment(["pda", "xgrammar", "llguidance", "numba", "torch", "numpy"]),
                       "docs": args.docs, "seed": args.seed, "compile_reps": args.compile_reps,
                       "compile_budget_s": args.compile_budget, "gc_freeze": args.gc_freeze,
                       "xgrammar_threads": args.xgrammar_threads, "argv": sys.argv[1:]}
    print_report(results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "masks.json").write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nresults written to {args.out / 'masks.json'}")
    if plot(results, args.out / "masks.png"):
        print(f"plot written to {args.out / 'masks.png'}")
    else:
        print("note: matplotlib is not installed, no plot (pip install -e '.[bench]')")
    if args.profile:
        text = profile_pda(args)
        print(text)
        (args.out / "masks_profile.txt").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
