"""Masks inside long string values: a ``{"type": "string", "maxLength": N}`` property filled with
1,000 characters, pda beside llguidance (and xgrammar with ``--engines``), DeepSeek's tokens.

A ``maxLength`` past a few hundred is written as blocks of about √N characters (``pda.normalize``);
near each block's end nearly every token leaves the block, which is the slowest case of the mask
(``pda.precompute``, frame classes).  Each length gets a fresh tokenizer, so the shared class
cache starts empty, as for the first such schema a server meets; a warm-up schema loads the kernels
first.  Per engine and length: fills, mean, p50, p99 and slowest fill (µs), fills over 5 ms, and
the ratios pda/llguidance.  JSON in ``benchmarks/results/long_strings.json``.

    .venv/bin/python benchmarks/bench_long_strings.py [--lengths 1024,4096,32767] [--chars 1000]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from common import environment, load_deepseek_tokenizer, summarize
from schema_conformance import Engine, Llguidance, Pda, Xgrammar

RESULTS = Path(__file__).resolve().parent / "results"
TEXT = "The quick brown fox jumps over the lazy dog, and then it runs away into the forest. Ünïcödé, 中文. "


def fill_times(engine: Engine, schema: dict, tokens: list[int]) -> list[float]:
    """Seconds of each fill along ``tokens`` (every token must be allowed and accepted)."""
    m = engine.matcher(engine.compile(schema))
    times = []
    for t in tokens:
        t0 = time.perf_counter()
        row = engine.mask(m)
        times.append(time.perf_counter() - t0)
        if not (int(row[t >> 5]) >> (t & 31)) & 1 or not engine.accept(m, t):
            raise SystemExit(f"{engine.name} refused token {t} of a valid document")
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="1024,4096,32767", help="maxLength values")
    ap.add_argument("--chars", type=int, default=1000, help="characters of the string value")
    ap.add_argument("--engines", default="pda,llguidance")
    ap.add_argument("--out", default=str(RESULTS / "long_strings.json"))
    args = ap.parse_args()
    hf = load_deepseek_tokenizer()
    first = Pda(hf)
    vocab, stop = first.tok.vocab_size, first.stop
    text = (TEXT * (args.chars // len(TEXT) + 1))[:args.chars]
    results: dict[str, dict[str, dict[str, float]]] = {}
    for n in [int(x) for x in args.lengths.split(",")]:
        schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": n}}, "required": ["a"]}
        if len(text) > n:
            raise SystemExit(f"--chars {args.chars} is longer than maxLength {n}")
        tokens = hf.encode(json.dumps({"a": text}, ensure_ascii=False), add_special_tokens=False)
        row: dict[str, dict[str, float]] = {}
        for name in args.engines.split(","):
            makers = {"pda": lambda: Pda(hf),  # a fresh tokenizer: an empty class cache
                      "llguidance": lambda: Llguidance(hf, vocab, stop), "xgrammar": lambda: Xgrammar(hf, vocab, stop)}
            engine = makers[name]()
            fill_times(engine, {"type": "object", "properties": {"w": {"type": "string", "maxLength": 300}}},
                       hf.encode('{"w": "warm up"}', add_special_tokens=False))
            secs = fill_times(engine, schema, tokens)
            row[name] = {**summarize(secs), "fills": len(secs), "over_5ms": int((np.array(secs) > 0.005).sum())}
            s = row[name]
            print(f"maxLength {n:6d} {name:10s} fills {len(secs):4d}  mean {s['mean_us']:8.0f}  p50 {s['p50_us']:7.0f}  "
                  f"p99 {s['p99_us']:8.0f}  slowest {s['max_us']:8.0f} us  over 5 ms {s['over_5ms']}")
        if "pda" in row and "llguidance" in row:
            a, b = row["pda"], row["llguidance"]
            print(f"maxLength {n:6d} pda/llguidance: mean {a['mean_us'] / b['mean_us']:.1f}x, "
                  f"p99 {a['p99_us'] / b['p99_us']:.1f}x")
        results[str(n)] = row
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": {**environment(["pda", "llguidance", "xgrammar"]), "chars": args.chars},
                               "results": results}, indent=1), encoding="utf-8")
    print(f"results written to {out}")


if __name__ == "__main__":
    main()
