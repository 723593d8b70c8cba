"""JSON Schema conformance at the token level, MaskBench's protocol, pda beside xgrammar and llguidance.

For each schema: compile it; for each test instance, serialise it with
``json.dumps(data, ensure_ascii=False)``, tokenize it with DeepSeek's 129,280-token tokenizer, and
step it through the engine's matcher token by token (fill the mask, check the token is allowed,
accept it); at the end the stop token must be allowed.  A schema *passes* when it compiles, every
valid instance is accepted and every invalid one is rejected.

    python benchmarks/schema_conformance.py [PATH] [--sample 150] [--seed 0] [--engines pda,xgrammar,llguidance]

PATH defaults to ``../shared/corpora``; ``PATH/jsonschemabench/*.jsonl`` is read.  xgrammar runs
with ``strict_mode=False, any_whitespace=True``; llguidance with flexible whitespace.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import load_deepseek_tokenizer  # noqa: E402

DEFAULT_CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"


def _bit(row: np.ndarray, t: int) -> bool:
    return bool((int(row[t >> 5]) >> (t & 31)) & 1)


class Engine:
    name = ""

    def compile(self, schema: dict) -> Any:  # raises on refusal
        raise NotImplementedError

    def run(self, compiled: Any, tokens: list[int], times: list[float]) -> bool:
        """True when every token is allowed and accepted and the stop token is allowed at the end."""
        m = self.matcher(compiled)
        for t in tokens:
            t0 = time.perf_counter()
            row = self.mask(m)
            times.append(time.perf_counter() - t0)
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


def corpus_arguments(ap: argparse.ArgumentParser) -> None:
    """The corpus path, sample, seed and engines options (shared with ``ttfm.py``)."""
    ap.add_argument("path", nargs="?", default=str(DEFAULT_CORPORA))
    ap.add_argument("--sample", type=int, default=150, help="schemas (with tests) drawn at random; 0 = all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", default="pda,xgrammar,llguidance")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus_arguments(ap)
    ap.add_argument("--out", default=None, help="write the per-schema results as JSON here")
    ap.add_argument("--verbose", action="store_true", help="print every failing schema")
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
    results: dict[str, list[dict]] = {e.name: [] for e in engines}
    for e in engines:
        for it in items:
            sub = it["id"].split("/")[0]
            rec: dict[str, Any] = {"id": it["id"], "subset": sub}
            t0 = time.perf_counter()
            try:
                compiled = e.compile(it["schema"])
            except Exception as exc:  # noqa: BLE001 - any refusal of any engine is a compile error here
                rec.update(compiled=False, error=f"{type(exc).__name__}: {str(exc)[:200]}")
                results[e.name].append(rec)
                continue
            rec["compile_s"] = time.perf_counter() - t0
            times: list[float] = []
            fr = fa = 0
            for tokens, valid in encoded[it["id"]]:
                try:
                    ok = e.run(compiled, tokens, times)
                except Exception as exc:  # noqa: BLE001 - a crash while stepping counts as a rejection
                    ok = False
                    rec.setdefault("step_errors", []).append(f"{type(exc).__name__}: {str(exc)[:200]}")
                fr += valid and not ok
                fa += (not valid) and ok
            rec.update(compiled=True, false_rejects=fr, false_accepts=fa, passed=fr == 0 and fa == 0,
                       mask_mean_us=1e6 * statistics.fmean(times) if times else None,
                       mask_p99_us=1e6 * pct(times, 99) if times else None, mask_times=len(times))
            results[e.name].append(rec)
            if args.verbose and not rec["passed"]:
                print(f"  {e.name} {it['id']}: false rejects {fr}, false accepts {fa}")
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
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
