"""Validation throughput of ``pda.Grammar.accepts`` beside xgrammar, in one process.

Workloads (both are sentences of the grammar, so each engine reads every byte):

* ``json``: a seeded, generated JSON document of about 1 MB (nesting, non-ASCII text, escapes,
  numbers of every shape) against the bundled ``json.gbnf``;
* ``c_like``: the bundled C-like samples concatenated and repeated to about 200 KB against
  ``c_like.gbnf``.

xgrammar runs the same GBNF text: compiled once with a 256-token byte-level ``TokenizerInfo``
(compile time is not counted), then ``GrammarMatcher.accept_string`` + ``is_terminated`` per run.
Each figure is the best of ``--repeat`` runs.  Usage::

    python benchmarks/bench_validate.py [--json-bytes N] [--c-bytes N] [--repeat K] [--out FILE]

Prints a table and writes the numbers as JSON (default ``benchmarks/results/validate.json``).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time
from pathlib import Path
from typing import Any, Callable

from pda import Grammar, grammars

ROOT = Path(__file__).resolve().parent
WORDS = ["alpha", "beta", "grammar", "token", "state", "stack", "naïve", "café", "Straße", "日本語", "ελληνικά", "emoji 🎉"]
ESCAPES = ['"', "\\", "/", "\n", "\t", "\r", "\b", "\f", "\x01", "\x1f"]


def _random_string(rng: random.Random) -> str:
    """A short string mixing ASCII, non-ASCII words and characters that JSON must escape."""
    parts = []
    for _ in range(rng.randint(0, 6)):
        roll = rng.random()
        if roll < 0.6:
            parts.append(rng.choice(WORDS))
        elif roll < 0.85:
            parts.append(rng.choice(ESCAPES))
        else:
            parts.append(chr(rng.randint(0xA0, 0x2FFF)))
    return " ".join(parts)


def _random_number(rng: random.Random) -> float | int:
    """An integer or a float of varied magnitude and sign (rendered with exponents sometimes)."""
    roll = rng.random()
    if roll < 0.4:
        return rng.randint(-10**9, 10**9)
    if roll < 0.8:
        return round(rng.uniform(-1000, 1000), rng.randint(0, 6))
    return rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30)


def _random_value(rng: random.Random, depth: int) -> Any:
    """A random JSON value; containers get rarer with depth."""
    roll = rng.random()
    if depth < 8 and roll < 0.35:
        return {_random_string(rng) + str(i): _random_value(rng, depth + 1) for i in range(rng.randint(0, 6))}
    if depth < 8 and roll < 0.55:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 6))]
    if roll < 0.75:
        return _random_string(rng)
    if roll < 0.92:
        return _random_number(rng)
    return rng.choice([True, False, None])


def make_json_document(size: int, seed: int = 0) -> bytes:
    """A JSON document of at least ``size`` bytes from a seeded generator (deterministic).

    A top-level array of random values, rendered alternately compact, indented, with and without
    ``ensure_ascii`` (so the text has both raw UTF-8 and ``\\uXXXX`` escapes).
    """
    rng = random.Random(seed)
    chunks: list[str] = []
    total = 0
    while total < size:
        value = _random_value(rng, 0)
        text = json.dumps(value, ensure_ascii=rng.random() < 0.3, indent=rng.choice([None, 1, 2]))
        chunks.append(text)
        total += len(text.encode("utf-8")) + 2
    return ("[\n" + ",\n".join(chunks) + "\n]\n").encode("utf-8")


def make_c_document(size: int) -> bytes:
    """The bundled valid C-like samples concatenated and repeated to at least ``size`` bytes."""
    valid, _ = grammars.samples("c_like")
    unit = b"\n".join(p.read_bytes() for p in valid) + b"\n"
    return unit * max(1, -(-size // len(unit)))


def best_seconds(run: Callable[[], bool], repeat: int) -> tuple[float, bool]:
    """The fastest of ``repeat`` timed calls of ``run`` and the result of the last one."""
    best = float("inf")
    result = False
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    return best, result


def xgrammar_runner(grammar_text: str) -> Callable[[bytes], bool] | None:
    """A function that checks a document with xgrammar, or None when xgrammar is not installed."""
    try:
        import xgrammar as xgr
    except ImportError:
        return None
    vocab = [bytes([b]) for b in range(256)]
    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo(vocab), cache_enabled=False)
    compiled = compiler.compile_grammar(grammar_text)

    def accepts(data: bytes) -> bool:
        matcher = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        return bool(matcher.accept_string(data)) and bool(matcher.is_terminated())

    return accepts


def run(workloads: dict[str, tuple[str, bytes]], repeat: int) -> list[dict[str, Any]]:
    """Time every workload (grammar name, document) with pda and xgrammar; one row per workload."""
    rows = []
    for label, (name, data) in workloads.items():
        path = grammars.path(name)
        text = path.read_text(encoding="utf-8")
        grammar = Grammar.from_file(path)
        grammar.accepts(data[:1000])  # warm-up: compiles numba kernels outside the timing
        pda_s, pda_ok = best_seconds(lambda: grammar.accepts(data), repeat)
        row: dict[str, Any] = {"workload": label, "grammar": path.name, "bytes": len(data),
                               "pda_s": pda_s, "pda_ok": pda_ok, "pda_mb_s": len(data) / pda_s / 1e6}
        xgr_accepts = xgrammar_runner(text)
        if xgr_accepts is not None:
            xgr_s, xgr_ok = best_seconds(lambda: xgr_accepts(data), repeat)
            row.update(xgrammar_s=xgr_s, xgrammar_ok=xgr_ok, xgrammar_mb_s=len(data) / xgr_s / 1e6)
        rows.append(row)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    """Print the rows as a fixed-width table with the pda/xgrammar throughput ratio."""
    print(f"{'workload':<10} {'grammar':<14} {'bytes':>10} {'pda MB/s':>10} {'xgrammar MB/s':>14} {'pda/xgr':>8}")
    for r in rows:
        xgr = r.get("xgrammar_mb_s")
        ratio = f"{r['pda_mb_s'] / xgr:8.2f}" if xgr else f"{'n/a':>8}"
        xgr_text = f"{xgr:14.3f}" if xgr else f"{'n/a':>14}"
        print(f"{r['workload']:<10} {r['grammar']:<14} {r['bytes']:>10} {r['pda_mb_s']:>10.3f} {xgr_text} {ratio}")
        for engine in ("pda", "xgrammar"):
            if r.get(f"{engine}_ok") is False:
                print(f"  warning: {engine} rejected the {r['workload']} document")


def main() -> None:
    """Parse arguments, build the documents, time both engines, print and save the results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json-bytes", type=int, default=1_000_000)
    parser.add_argument("--c-bytes", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "validate.json")
    args = parser.parse_args()
    workloads = {
        "json": ("json", make_json_document(args.json_bytes, args.seed)),
        "c_like": ("c_like", make_c_document(args.c_bytes)),
    }
    rows = run(workloads, args.repeat)
    print_table(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"python": platform.python_version(), "machine": platform.machine(), "repeat": args.repeat}
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n", encoding="utf-8")
    print(f"results written to {args.out}")


if __name__ == "__main__":
    main()
