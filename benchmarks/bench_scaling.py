"""Automata that scale: compile time and automaton size of the three large grammars of the "masks at
lookup cost" issue, within the default ``max_states``.

* an ``enum`` of 50,000 distinct strings (seeded: 4-14 characters of ``a-z`` and ``_``);
* an object of 2,000 required properties (string, integer, number and boolean in turn), no others;
* a Lark grammar file given with ``--lark PATH`` (a Go grammar like SynCode's; none is bundled).

Each is compiled with ``Grammar.from_json_schema`` / ``Grammar.from_lark`` (frontend, normalisation
and automaton; no tokenizer work) in this process, best of ``--reps``:

    python benchmarks/bench_scaling.py [--reps 1] [--lark go.lark]
"""

from __future__ import annotations

import argparse
import random
import string
import time
from pathlib import Path
from typing import Any, Callable

from pda.errors import LimitExceededError
from pda.grammar import Grammar

TARGETS = {"enum of 50,000 strings": 5.0, "2,000 required properties": 3.0, "Lark grammar": 10.0}  # seconds


def enum_schema(count: int = 50_000, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < count:
        words.add("".join(rng.choice(string.ascii_lowercase + "_") for _ in range(rng.randint(4, 14))))
    return {"enum": sorted(words)}


def object_schema(count: int = 2_000) -> dict[str, Any]:
    types = ["string", "integer", "number", "boolean"]
    props = {f"property_{i:04d}": {"type": types[i % 4]} for i in range(count)}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def timed(build: Callable[[], Grammar], reps: int) -> tuple[float, str]:
    best = float("inf")
    what = ""
    for _ in range(reps):
        t0 = time.perf_counter()
        try:
            g = build()
            what = f"{g.automaton.num_states:,} states"
        except LimitExceededError as e:
            what = f"refused: {e}"
        best = min(best, time.perf_counter() - t0)
    return best, what


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--lark", type=Path, help="a Lark grammar file to compile too")
    args = ap.parse_args()
    Grammar.from_json_schema({"type": "integer"})  # load the kernels before timing
    enum, props = enum_schema(), object_schema()  # made before timing (drawing the 50,000 words takes 0.4 s)
    cases: list[tuple[str, Callable[[], Grammar]]] = [
        ("enum of 50,000 strings", lambda: Grammar.from_json_schema(enum, max_compile_seconds=None)),
        ("2,000 required properties", lambda: Grammar.from_json_schema(props, max_compile_seconds=None)),
    ]
    if args.lark is not None:
        text = args.lark.read_text()
        cases.append(("Lark grammar", lambda: Grammar.from_lark(text, filename=str(args.lark), max_compile_seconds=None)))
    print(f"{'grammar':28} {'seconds':>8} {'target':>7}  automaton")
    for name, build in cases:
        seconds, what = timed(build, args.reps)
        print(f"{name:28} {seconds:8.2f} {TARGETS[name]:7.1f}  {what}")


if __name__ == "__main__":
    main()
