"""JSON Schema conformance at the token level, MaskBench's protocol, pda beside xgrammar and llguidance.

For each schema: compile it; for each test instance, serialise it with
``json.dumps(data, ensure_ascii=False)``, tokenize it with DeepSeek's 129,280-token tokenizer, and
step it through the engine's matcher token by token (fill the mask, check the token is allowed,
accept it); at the end the stop token must be allowed.  A schema *passes* when it compiles, every
valid instance is accepted and every invalid one is rejected, all within ``--timeout`` seconds per
engine (a compile past it is a compile error; instances not reached count as rejected).

    python benchmarks/schema_conformance.py [PATH] [--sample 150] [--seed 0] [--engines pda,xgrammar,llguidance]
        [--timeout 30] [--out benchmarks/results/schema_conformance.json] [--gc-freeze] [--interleave]

PATH defaults to ``../shared/corpora``; ``PATH/jsonschemabench/*.jsonl`` is read.  xgrammar runs
with ``strict_mode=False, any_whitespace=True``; llguidance with flexible whitespace.  Every engine
steps through the very same schemas and token sequences (tokenized once, in this process), after
one untimed warm-up schema per engine (kernel loading and lazy setup stay out of the figures).
The engines run one after the other, every schema on one engine and then on the next, as MaskBench
does; ``--interleave`` runs each schema on every engine in turn instead (the order rotating schema
by schema), so that the machine's drift over the minutes of a run falls on all engines alike.

After the per-subset table it prints one summary per engine over the whole sample: the mask time
per fill pooled over every fill of every schema (mean, p50, p99, and the slowest single fill with
its schema); TTFM, the time from the schema to the first filled mask (compile + matcher + first
fill) per schema, p50/p95/max; passing schemas; false-accept instances and schemas.  For pda also
the mask cache (``CompiledGrammar.mask_cache_stats()`` after each schema's instances): hit rate over
the sample, bytes summed and max over schemas, and the states whose token classes came from the
tokenizer's shared class cache.  Then the ratios pda/llguidance and pda/xgrammar of mean, p99 and
TTFM p50.  The summary and the per-schema records go to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import signal
import statistics
import sys
import time
import warnings
from array import array
from pathlib import Path
from typing import Any, Callable, MutableSequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import corpora_dir, environment, load_deepseek_tokenizer  # noqa: E402

DEFAULT_CORPORA = corpora_dir()
RESULTS = Path(__file__).resolve().parent / "results"
# Run once through each engine before the timed sample (numba kernels, lazy tokenizer tables).
WARMUP_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"},
                                                  "tags": {"type": "array", "items": {"type": "string"}}}}
WARMUP_DOC = {"name": "warm up", "n": 3, "tags": ["a", "b"]}


def _bit(row: np.ndarray, t: int) -> bool:
    return bool((int(row[t >> 5]) >> (t & 31)) & 1)


class Engine:
    name = ""
    first_fill_done = 0.0  # perf_counter() when run() finished its first mask


    def compile(self, schema: dict) -> Any:  # raises on refusal
        raise NotImplementedError

    def run(self, compiled: Any, tokens: list[int], times: MutableSequence[float]) -> bool:
        """True when every token is allowed and accepted and the stop token is allowed at the end;
        each fill's seconds are appended to ``times``."""
        m = self.matcher(compiled)
        for i, t in enumerate(tokens):
            t0 = time.perf_counter()
            row = self.mask(m)
            t1 = time.perf_counter()
            times.append(t1 - t0)
            if i == 0:
                self.first_fill_done = t1
            if not _bit(row, t) or not self.accept(m, t):
                return False
        return _bit(self.mask(m), self.stop)

    def matcher(self, compiled: Any) -> Any:
        raise NotImplementedError

    def mask(self, m: Any) -> np.ndarray:
        raise NotImplementedError

    def accept(self, m: Any, t: int) -> bool:
        raise NotImplementedError


class Pda(Engine):
    name = "pda"

    def __init__(self, hf: Any) -> None:
        import pda

        self.pda = pda
        self.tok = pda.TokenizerInfo.from_huggingface(hf)
        pda.warm_up_kernels()  # loading the fill kernels, once per process (as a server does at start-up)
        self.stop = self.tok.stop_token_ids[0]
        self.compiler = pda.GrammarCompiler(self.tok, cache=False)
        self.bitmask = pda.allocate_token_bitmask(1, self.tok.vocab_size)

    def compile(self, schema: dict) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return self.compiler.compile_json_schema(schema)

    def matcher(self, compiled: Any) -> Any:
        return self.pda.GrammarMatcher(compiled)

    def mask(self, m: Any) -> np.ndarray:
        m.fill_next_token_bitmask(self.bitmask, 0)
        return self.bitmask[0].numpy()

    def accept(self, m: Any, t: int) -> bool:
        return bool(m.accept_token(t))


class Xgrammar(Engine):
    name = "xgrammar"

    def __init__(self, hf: Any, vocab_size: int, stop: int) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        self.stop = stop
        tok = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=vocab_size, stop_token_ids=[stop])
        self.compiler = xgr.GrammarCompiler(tok, max_threads=1, cache_enabled=False)
        self.bitmask = xgr.allocate_token_bitmask(1, vocab_size)

    def compile(self, schema: dict) -> Any:
        return self.compiler.compile_json_schema(json.dumps(schema), strict_mode=False, any_whitespace=True)

    def matcher(self, compiled: Any) -> Any:
        return self.xgr.GrammarMatcher(compiled)

    def mask(self, m: Any) -> np.ndarray:
        m.fill_next_token_bitmask(self.bitmask, 0)
        return self.bitmask[0].numpy()

    def accept(self, m: Any, t: int) -> bool:
        return bool(m.accept_token(t))


class Llguidance(Engine):
    name = "llguidance"

    def __init__(self, hf: Any, vocab_size: int, stop: int) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.torch

        self.llg = llguidance
        self.stop = stop
        self.tok = llguidance.hf.from_tokenizer(hf, n_vocab=vocab_size, eos_token=stop)
        self.bitmask = llguidance.torch.allocate_token_bitmask(1, vocab_size)
        self._fill = llguidance.torch.fill_next_token_bitmask

    def compile(self, schema: dict) -> Any:
        grammar = self.llg.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": True})
        m = self.llg.LLMatcher(self.tok, grammar, log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return grammar

    def matcher(self, compiled: Any) -> Any:
        return self.llg.LLMatcher(self.tok, compiled, log_level=0)

    def mask(self, m: Any) -> np.ndarray:
        self._fill(m, self.bitmask, 0)
        return self.bitmask[0].numpy()

    def accept(self, m: Any, t: int) -> bool:
        return bool(m.consume_token(t))


def load_items(root: Path, sample: int | None, seed: int) -> list[dict]:
    items = []
    for f in sorted((root / "jsonschemabench").glob("*.jsonl")):
        for line in f.read_text(encoding="utf-8").split("\n"):
            if not line.strip():
                continue
            item = json.loads(line)
            if item.get("tests"):
                items.append(item)
    if sample is not None and sample < len(items):
        items = random.Random(seed).sample(items, sample)
        items.sort(key=lambda it: it["id"])
    return items


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(xs, q)) if xs else float("nan")


class _Timeout(BaseException):  # not an Exception: the engines' broad handlers must not swallow it
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def run_schema(e: Engine, it: dict, encoded: list[tuple[list[int], bool]], timeout: float) -> tuple[dict, array]:
    """Compile one schema and step every instance through it, within ``timeout`` seconds (0: none).

    A compile past the limit is a compile error (``Timeout``); instances past it are not run and
    count as rejected (``timed_out`` is set).  Returns the record and every fill time, as an
    ``array('d')``: a list holds one float object per fill, and every full collection of the
    process reads them all (315 schemas into seed 0's sample, with 85,000 fills kept, a full
    collection took 9.5-11.6 ms with lists and 1.5-5.8 ms with arrays; one such collection landed
    in a fill of JsonSchemaStore/jx-requirements as the run's slowest, 17.5-20.4 ms)."""
    rec: dict[str, Any] = {"id": it["id"], "subset": it["id"].split("/")[0]}
    times = array("d")
    fr = fa = 0
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    t0 = time.perf_counter()
    try:
        try:
            compiled = e.compile(it["schema"])
        except _Timeout:
            rec.update(compiled=False, error=f"Timeout: compile over {timeout:g} s")
            return rec, times
        except Exception as exc:  # noqa: BLE001 - any refusal of any engine is a compile error here
            rec.update(compiled=False, error=f"{type(exc).__name__}: {str(exc)[:200]}")
            return rec, times
        rec["compile_s"] = time.perf_counter() - t0
        first_done: list[float] = []  # when the first instance's first fill finished
        k = 0
        try:
            for k, (tokens, valid) in enumerate(encoded):
                try:
                    ok = e.run(compiled, tokens, times)
                except Exception as exc:  # noqa: BLE001 - a crash while stepping counts as a rejection
                    ok = False
                    rec.setdefault("step_errors", []).append(f"{type(exc).__name__}: {str(exc)[:200]}")
                finally:
                    if k == 0 and times:
                        first_done.append(e.first_fill_done)
                fr += valid and not ok
                fa += (not valid) and ok
            k = len(encoded)
        except _Timeout:
            rec["timed_out"] = True
            fr += sum(valid for _, valid in encoded[k:])  # not run: the valid ones count as rejected
        if times:
            rec["ttfm_s"] = first_done[0] - t0  # compile + matcher + first fill
        rec.update(compiled=True, false_rejects=fr, false_accepts=fa, passed=fr == 0 and fa == 0,
                   mask_mean_us=1e6 * statistics.fmean(times) if times else None,
                   mask_p99_us=1e6 * pct(times, 99) if times else None,
                   mask_max_us=1e6 * max(times) if times else None, mask_times=len(times))
        if hasattr(compiled, "mask_cache_stats"):
            rec["mask_cache"] = compiled.mask_cache_stats()
        return rec, times
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def summarize_engine(recs: list[dict], fills: list[tuple[str, array]]) -> dict[str, Any]:
    """One engine's figures over the whole sample (times in microseconds, TTFM in milliseconds);
    ``fills``: each schema's id and fill times."""
    ok = [r for r in recs if r["compiled"]]
    times = [t for _, ts in fills for t in ts]
    slow = max(((t, sid) for sid, ts in fills for t in ts), default=(float("nan"), None))
    ttfm = [r["ttfm_s"] for r in ok if "ttfm_s" in r]
    out: dict[str, Any] = {
        "schemas": len(recs), "compiled": len(ok), "passed": sum(r["passed"] for r in ok),
        "false_rejects": sum(r["false_rejects"] for r in ok), "false_accepts": sum(r["false_accepts"] for r in ok),
        "false_accept_schemas": [r["id"] for r in ok if r["false_accepts"]],
        "timed_out": [r["id"] for r in recs if r.get("timed_out") or str(r.get("error", "")).startswith("Timeout")],
        "fills": len(times), "mask_mean_us": 1e6 * statistics.fmean(times) if times else float("nan"),
        "mask_p50_us": 1e6 * pct(times, 50), "mask_p99_us": 1e6 * pct(times, 99),
        "slowest_fill_us": 1e6 * slow[0], "slowest_fill_schema": slow[1],
        "ttfm_p50_ms": 1e3 * pct(ttfm, 50), "ttfm_p95_ms": 1e3 * pct(ttfm, 95),
        "ttfm_max_ms": 1e3 * max(ttfm) if ttfm else float("nan"),
        "ttfm_max_schema": max(ok, key=lambda r: r.get("ttfm_s", -1.0))["id"] if ttfm else None,
        "compile_p50_ms": 1e3 * pct([r["compile_s"] for r in ok], 50),
    }
    stats = [r["mask_cache"] for r in ok if "mask_cache" in r]
    if stats:
        hits, misses = sum(s["hits"] for s in stats), sum(s["misses"] for s in stats)
        out["mask_cache"] = {
            "hits": hits, "misses": misses, "hit_rate": hits / (hits + misses) if hits + misses else 0.0,
            "evictions": sum(s["evictions"] for s in stats), "entries": sum(s["entries"] for s in stats),
            "bytes_sum": sum(s["bytes"] for s in stats), "bytes_max": max(s["bytes"] for s in stats),
            "bytes_max_schema": max((r for r in ok if "mask_cache" in r), key=lambda r: r["mask_cache"]["bytes"])["id"],
            "shared_class_hits": sum(s["shared_class_hits"] for s in stats),
            "classified_states": sum(s["classified_states"] for s in stats)}
    return out


def print_summary(summary: dict[str, dict[str, Any]]) -> None:
    """The whole-sample table, pda's mask cache, and pda's ratios to the peers."""
    print("whole sample, every fill pooled (us); TTFM = compile + matcher + first fill, per schema (ms)")
    hdr = (f"{'engine':11} {'pass':>5} {'FA inst':>7} {'FA sch':>6} {'mean':>8} {'p50':>8} {'p99':>9} "
           f"{'slowest':>10}  {'TTFM p50':>9} {'p95':>9} {'max':>9}  slowest fill in")
    print(hdr)
    print("-" * len(hdr))
    for name, s in summary.items():
        print(f"{name:11} {s['passed']:>5} {s['false_accepts']:>7} {len(s['false_accept_schemas']):>6} "
              f"{s['mask_mean_us']:>8.1f} {s['mask_p50_us']:>8.1f} {s['mask_p99_us']:>9.1f} {s['slowest_fill_us']:>10.0f}  "
              f"{s['ttfm_p50_ms']:>9.2f} {s['ttfm_p95_ms']:>9.2f} {s['ttfm_max_ms']:>9.1f}  {s['slowest_fill_schema']}")
    for name, s in summary.items():
        if s["false_accept_schemas"]:
            print(f"{name} false accepts in: {', '.join(s['false_accept_schemas'])}")
        if s["timed_out"]:
            print(f"{name} over the time limit in: {', '.join(s['timed_out'])}")
    mc = summary.get("pda", {}).get("mask_cache")
    if mc:
        print(f"pda mask cache: hit rate {mc['hit_rate']:.3f} ({mc['hits']} hits, {mc['misses']} misses, "
              f"{mc['evictions']} evictions); bytes sum {mc['bytes_sum'] / 2**20:.1f} MiB, max {mc['bytes_max'] / 2**20:.2f} "
              f"MiB ({mc['bytes_max_schema']}); states with shared token classes {mc['shared_class_hits']} "
              f"of {mc['classified_states']} classified")
    if "pda" in summary:
        p = summary["pda"]
        for peer in ("llguidance", "xgrammar"):
            if peer in summary:
                q = summary[peer]
                print(f"pda/{peer}: mean {p['mask_mean_us'] / q['mask_mean_us']:.2f}x, "
                      f"p99 {p['mask_p99_us'] / q['mask_p99_us']:.2f}x, TTFM p50 {p['ttfm_p50_ms'] / q['ttfm_p50_ms']:.2f}x")


def corpus_arguments(ap: argparse.ArgumentParser) -> None:
    """The corpus path, sample, seed and engines options (shared with ``ttfm.py``)."""
    ap.add_argument("path", nargs="?", default=str(DEFAULT_CORPORA))
    ap.add_argument("--sample", type=int, default=150, help="schemas (with tests) drawn at random; 0 = all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", default="pda,xgrammar,llguidance")
    ap.add_argument("--gc-freeze", action="store_true",
                    help="once the engines are set up, gc.collect() and gc.freeze() as vLLM's engine core, API server "
                         "and workers do: full collections then skip the startup heap (torch and transformers alone "
                         "make one take 75-165 ms here, a pause in whichever fill it lands)")


def freeze_startup_heap(args: argparse.Namespace) -> None:
    """``--gc-freeze``: move everything alive now out of the collector's reach (see the option)."""
    if args.gc_freeze:
        gc.collect()
        gc.freeze()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus_arguments(ap)
    ap.add_argument("--out", default=str(RESULTS / "schema_conformance.json"),
                    help="write the summary and the per-schema results as JSON here")
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="seconds per schema and engine, compile and instances (0: no limit)")
    ap.add_argument("--verbose", action="store_true", help="print every failing schema")
    ap.add_argument("--interleave", action="store_true",
                    help="run each schema on every engine in turn, the order rotating schema by schema, instead "
                         "of every schema on one engine and then on the next (MaskBench's order, the default): the "
                         "machine's drift over minutes then falls on all engines alike")
    args = ap.parse_args(argv)

    items = load_items(Path(args.path), args.sample or None, args.seed)
    hf = load_deepseek_tokenizer()
    pda_engine = Pda(hf)
    vocab, stop = pda_engine.tok.vocab_size, pda_engine.stop
    makers: dict[str, Callable[[], Engine]] = {
        "pda": lambda: pda_engine, "xgrammar": lambda: Xgrammar(hf, vocab, stop),
        "llguidance": lambda: Llguidance(hf, vocab, stop),
    }
    engines = [makers[n]() for n in args.engines.split(",")]
    encoded = {it["id"]: [(hf.encode(json.dumps(t["data"], ensure_ascii=False), add_special_tokens=False), t["valid"])
                          for t in it["tests"]] for it in items}
    freeze_startup_heap(args)
    results: dict[str, list[dict]] = {e.name: [] for e in engines}
    # every fill, as each schema's (id, its fill times as an array): a few objects per schema, not
    # one per fill (see run_schema: the collector reads every object the harness keeps, and its
    # pauses land in the engines' fills)
    fills: dict[str, list[tuple[str, array]]] = {e.name: [] for e in engines}
    warm_tokens = hf.encode(json.dumps(WARMUP_DOC), add_special_tokens=False)

    def warm_up(e: Engine) -> None:  # load kernels / lazy setup outside the figures
        e.run(e.compile(WARMUP_SCHEMA), warm_tokens, [])

    def run_one(e: Engine, it: dict) -> None:
        rec, times = run_schema(e, it, encoded[it["id"]], args.timeout)
        fills[e.name].append((it["id"], times))
        results[e.name].append(rec)
        if args.verbose and not rec.get("passed"):
            print(f"  {e.name} {it['id']}: {rec.get('error') or ''} false rejects {rec.get('false_rejects')}, "
                  f"false accepts {rec.get('false_accepts')}{', timed out' if rec.get('timed_out') else ''}")

    if args.interleave:
        for e in engines:
            warm_up(e)
        for i, it in enumerate(items):
            for j in range(len(engines)):
                run_one(engines[(i + j) % len(engines)], it)
        print("engines: done", file=sys.stderr)
    else:
        for e in engines:
            warm_up(e)
            for it in items:
                run_one(e, it)
            print(f"{e.name}: done", file=sys.stderr)

    subsets = sorted({it["id"].split("/")[0] for it in items}) + ["ALL"]
    print(f"\n{len(items)} schemas (seed {args.seed}) from {args.path}; DeepSeek tokenizer ({vocab} tokens)\n")
    hdr = f"{'subset':16} {'engine':11} {'n':>4} {'pass':>5} {'cerr':>5} {'FR':>4} {'FA':>4} {'FAsch':>5} " \
          f"{'comp p50':>9} {'comp p95':>9} {'mask mean':>10} {'mask p99':>9}"
    print(hdr)
    print("-" * len(hdr))
    for sub in subsets:
        for e in engines:
            rs = [r for r in results[e.name] if sub == "ALL" or r["subset"] == sub]
            ok = [r for r in rs if r["compiled"]]
            comp = [r["compile_s"] for r in ok]
            means = [r["mask_mean_us"] for r in ok if r["mask_mean_us"] is not None]
            p99s = [r["mask_p99_us"] for r in ok if r["mask_p99_us"] is not None]
            print(f"{sub:16} {e.name:11} {len(rs):>4} {sum(r['passed'] for r in ok):>5} {len(rs) - len(ok):>5} "
                  f"{sum(r['false_rejects'] for r in ok):>4} {sum(r['false_accepts'] for r in ok):>4} "
                  f"{sum(r['false_accepts'] > 0 for r in ok):>5} {1e3 * pct(comp, 50):>7.1f}ms {1e3 * pct(comp, 95):>7.1f}ms "
                  f"{statistics.fmean(means) if means else float('nan'):>8.1f}us {max(p99s) if p99s else float('nan'):>7.0f}us")
        if sub == "ALL" or len(engines) > 1:
            print()
    summary = {e.name: summarize_engine(results[e.name], fills[e.name]) for e in engines}
    print_summary(summary)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"schemas": len(items), "seed": args.seed, "sample": args.sample, "path": str(args.path),
            "vocab_size": vocab, "engines": [e.name for e in engines], "interleave": args.interleave,
            "argv": sys.argv[1:],
            **environment(["pda", "xgrammar", "llguidance", "numba", "torch", "numpy"])}
    out.write_text(json.dumps({"meta": meta, "summary": summary, "schemas": results}, indent=1))
    print(f"\nresults written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
