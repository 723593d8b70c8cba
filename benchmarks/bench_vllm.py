"""The same requests through vLLM with pda (``PdaLogitsProcessor``) and with vLLM's own structured-output
backends, ``xgrammar`` and ``guidance``: throughput, time per output token, and outputs that are
invalid or never finish.

vLLM's CPU build and the tiny random Llama of ``tests_vllm/tiny_model.py`` (2 layers, hidden 256,
DeepSeek's 129,280-token vocabulary), so the model is cheap and the figures measure the engine's
constrained-decoding overhead.  Each backend runs in its own process and engine; the requests (and
their seeds) are the same for all.  Workloads:

* ``schema``: JSON Schema requests (three schemas with bounded strings, numbers and arrays), each
  backend with its default whitespace handling (pda: at most 16 blanks in a row; xgrammar and
  guidance: any whitespace unless ``disable_any_whitespace``);
* ``grammar``: GBNF grammars and regexes.

Each workload runs once to warm up (grammar compiles, JIT) and then ``--repeat`` times; the best
run counts.  Columns: output tokens per second over the whole batch (wall clock), mean time per
output token of a request (from vLLM's per-request timestamps), invalid outputs among those that
finished (judged by ``jsonschema``, ``re`` and Lark, not by any backend), and unfinished ones (hit
``max_tokens``: e.g. a whitespace runaway).  Usage (after ``make test-vllm`` built the venv and the model)::

    VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python benchmarks/bench_vllm.py [--requests N] [--repeat K]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests_vllm"))

from cases import GRAMMARS, REGEXES, SCHEMAS, is_valid  # noqa: E402

BACKENDS = ("pda", "xgrammar", "guidance")
MAX_TOKENS = 256


def workload(name: str, n: int) -> list[dict[str, Any]]:
    """``n`` constraint entries (pda's ``extra_args["pda"]`` form) of workload ``name``."""
    if name == "schema":
        pool = [{"json_schema": s} for s in SCHEMAS.values()]
    else:
        pool = [spec for spec, _ in GRAMMARS.values()] + [{"regex": p} for p in REGEXES.values()]
    return [pool[i % len(pool)] for i in range(n)]


def sampling_params(backend: str, entry: dict[str, Any], seed: int) -> Any:
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    if backend == "pda":
        return SamplingParams(max_tokens=MAX_TOKENS, seed=seed, extra_args={"pda": entry})
    if "json_schema" in entry:
        structured = StructuredOutputsParams(json=entry["json_schema"])
    elif "regex" in entry:
        structured = StructuredOutputsParams(regex=entry["regex"])
    else:
        structured = StructuredOutputsParams(grammar=entry["grammar"])
    return SamplingParams(max_tokens=MAX_TOKENS, seed=seed, structured_outputs=structured)


def run_backend(backend: str, n: int, repeat: int, max_num_seqs: int) -> dict[str, Any]:
    """Start an engine for ``backend``, run each workload, and return the figures."""
    from vllm import LLM

    sys.path.insert(0, str(ROOT / "tests_vllm"))
    from tiny_model import ensure_model

    kwargs: dict[str, Any] = {}
    if backend == "pda":
        kwargs["logits_processors"] = ["pda.integrations.vllm:PdaLogitsProcessor"]
    else:
        kwargs["structured_outputs_config"] = {"backend": backend}
    t0 = time.perf_counter()
    llm = LLM(model=str(ensure_model()), max_model_len=1024, max_num_seqs=max_num_seqs, seed=0,
              dtype="bfloat16", disable_log_stats=False, **kwargs)
    startup = time.perf_counter() - t0
    results: dict[str, Any] = {"startup_s": startup}
    for name in ("schema", "grammar"):
        entries = workload(name, n)
        params = [sampling_params(backend, e, seed=i) for i, e in enumerate(entries)]
        prompts = ["Answer:"] * len(entries)
        t0 = time.perf_counter()
        llm.generate(prompts, params, use_tqdm=False)  # warm-up: compiles, JIT
        warm = time.perf_counter() - t0
        best: dict[str, Any] | None = None
        for _ in range(repeat):
            t0 = time.perf_counter()
            outputs = llm.generate(prompts, params, use_tqdm=False)
            wall = time.perf_counter() - t0
            tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
            tpots = []
            invalid = unfinished = 0
            for entry, out in zip(entries, outputs):
                c = out.outputs[0]
                m = out.metrics
                if m is not None and len(c.token_ids) > 1 and m.last_token_ts > m.first_token_ts:
                    tpots.append((m.last_token_ts - m.first_token_ts) / (len(c.token_ids) - 1))
                if c.finish_reason != "stop":
                    unfinished += 1
                elif not is_valid(entry, c.text):
                    invalid += 1
            figures = {"requests": len(entries), "output_tokens": tokens, "wall_s": wall,
                       "tokens_per_s": tokens / wall,
                       "tpot_ms": 1000 * sum(tpots) / len(tpots) if tpots else None,
                       "invalid": invalid, "unfinished": unfinished, "warmup_s": warm,
                       "example": outputs[0].outputs[0].text[:120]}
            if best is None or figures["tokens_per_s"] > best["tokens_per_s"]:
                best = figures
        results[name] = best
    llm.llm_engine.engine_core.shutdown()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=48, help="requests per workload (default 48)")
    parser.add_argument("--repeat", type=int, default=2, help="measured runs per workload; the best counts")
    parser.add_argument("--max-num-seqs", type=int, default=16, help="vLLM's batch size (default 16)")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated, from " + ", ".join(BACKENDS))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "vllm.json")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one backend, print JSON
    args = parser.parse_args()

    if args.one:
        print("RESULT " + json.dumps(run_backend(args.one, args.requests, args.repeat, args.max_num_seqs)))
        return

    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    results: dict[str, Any] = {}
    for backend in args.backends.split(","):
        command = [sys.executable, __file__, "--one", backend, "--requests", str(args.requests),
                   "--repeat", str(args.repeat), "--max-num-seqs", str(args.max_num_seqs)]
        proc = subprocess.run(command, capture_output=True, text=True, env=env)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            print(f"{backend}: failed (exit {proc.returncode})\n{proc.stderr[-3000:]}", file=sys.stderr)
            continue
        results[backend] = json.loads(line[len("RESULT "):])

    print(f"\nvLLM CPU, tiny random Llama, {args.requests} requests per workload, "
          f"max_num_seqs={args.max_num_seqs}, max_tokens={MAX_TOKENS}, best of {args.repeat}")
    header = f"{'workload':9} {'backend':9} {'tokens/s':>9} {'TPOT ms':>8} {'tokens':>7} {'invalid':>8} {'unfinished':>10} {'warm-up s':>9}"
    print(header)
    print("-" * len(header))
    for name in ("schema", "grammar"):
        for backend, r in results.items():
            f = r[name]
            tpot = f"{f['tpot_ms']:.2f}" if f["tpot_ms"] is not None else "-"
            print(f"{name:9} {backend:9} {f['tokens_per_s']:9.1f} {tpot:>8} {f['output_tokens']:7d} "
                  f"{f['invalid']:8d} {f['unfinished']:10d} {f['warmup_s']:9.1f}")
    if "pda" in results and "xgrammar" in results:
        ratio = results["pda"]["schema"]["tokens_per_s"] / results["xgrammar"]["schema"]["tokens_per_s"]
        print(f"\nschema throughput, pda / xgrammar: {ratio:.2f}x (target >= 0.7x)")
        results["schema_ratio_pda_xgrammar"] = ratio
    results["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
