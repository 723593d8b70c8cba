"""First-visit classification cost: :func:`pda.token_walk.walk_tokens` from every byte-reading state.

For each bundled grammar named, every state that reads a byte is walked over DeepSeek's whole
129,280-token vocabulary from a bare frame with context expansion (what ``TokenClasses`` does on a
state's first visit, before token groups), ``--reps`` times; the best time per state is kept.
Prints the total, mean and median per state and the slowest states, and writes them as JSON.

    .venv/bin/python benchmarks/bench_classify.py --grammars c_like,sql_select,json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import pda
from common import load_deepseek_tokenizer
from pda.token_walk import walk_tokens
from pda.walk_workspace import make_workspace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grammars", default="c_like,sql_select,json", help="bundled grammar names ('json': compile_builtin_json)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default="bench_classify.json")
    args = ap.parse_args()
    if args.reps < 1:
        raise SystemExit("--reps must be at least 1")
    tok = pda.TokenizerInfo.from_huggingface(load_deepseek_tokenizer())
    root = Path(__file__).resolve().parent.parent / "grammars"
    results = {}
    for name in args.grammars.split(","):
        compiler = pda.GrammarCompiler(tok, cache=False, precompute="lazy")
        text = None if name == "json" else (root / f"{name}.gbnf").read_text(encoding="utf-8")
        classes = (compiler.compile_builtin_json() if text is None else compiler.compile_grammar(text)).classes
        whole, kernel = classes._whole, classes.kernel
        ws, out, empty = make_workspace(classes._maxlen), np.empty(whole.cand.shape[0], np.int8), np.zeros(0, np.int32)
        walk_tokens(kernel, whole.trie, whole.cand, classes.states[0], empty, True, out, ws)  # jit or cache load
        ms = []
        for s in classes.states:
            best = float("inf")
            for _ in range(args.reps):
                t = time.perf_counter()
                walk_tokens(kernel, whole.trie, whole.cand, s, empty, True, out, ws)
                best = min(best, time.perf_counter() - t)
            ms.append(best * 1e3)
        a = np.array(ms)
        slow = np.argsort(-a)[:8]
        results[name] = {"states": len(ms), "total_ms": a.sum(), "mean_ms": a.mean(), "median_ms": float(np.median(a)),
                         "slowest": {int(classes.states[i]): a[i] for i in slow}}
        print(f"{name}: {len(ms)} states, total {a.sum():.1f} ms, mean {a.mean():.3f} ms, median {np.median(a):.3f} ms; "
              "slowest: " + ", ".join(f"{classes.states[i]} {a[i]:.1f} ms" for i in slow))
    Path(args.out).write_text(json.dumps(results, indent=1, default=float), encoding="utf-8")
    print(f"results written to {args.out}")


if __name__ == "__main__":
    main()
