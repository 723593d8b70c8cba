"""Serialisation round trip: a deserialised grammar gives the same masks, in a fresh process.

For every bundled grammar (its valid samples) and ``--schemas N`` JSON Schemas from
JSONSchemaBench (their valid test instances, ``json.dumps(data, ensure_ascii=False)``), this
process compiles the grammar with DeepSeek's 129,280-token tokenizer, writes
``CompiledGrammar.to_bytes()`` to a folder, and records the digest of every token mask along each
document (MaskBench's protocol: fill the mask, accept the token; at the end the mask once more).
Then a fresh Python process loads each file with ``CompiledGrammar.from_bytes`` and walks the same
tokens; every mask and every accept must be identical.

    python benchmarks/serialize_roundtrip.py [--schemas 100] [--seed 0] [--no-bundled] [--corpora PATH]

Exit status 0 when everything matched, 1 on any difference.  Schemas pda refuses to compile are
counted and skipped.  ``--check FOLDER`` is the fresh process's half.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import xxhash

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import load_deepseek_tokenizer  # noqa: E402
from schema_conformance import DEFAULT_CORPORA, load_items  # noqa: E402

MAX_DOCS = 4  # valid documents per grammar
MAX_TOKENS = 400  # tokens per document


def walk(pda: Any, compiled: Any, tokens: list[int]) -> list[str]:
    """Digest of each mask along ``tokens``, and whether each token was accepted."""
    m = pda.GrammarMatcher(compiled)
    bm = pda.allocate_token_bitmask(1, compiled.tokenizer_info.vocab_size)
    out = []
    for t in tokens:
        m.fill_next_token_bitmask(bm, 0)
        out.append(xxhash.xxh3_64_hexdigest(bm.numpy().tobytes()))
        if not m.accept_token(t):
            out.append("refused")
            return out
    m.fill_next_token_bitmask(bm, 0)
    out.append(xxhash.xxh3_64_hexdigest(bm.numpy().tobytes()))
    return out


def cases(args: argparse.Namespace) -> list[tuple[str, str, Any, list[str]]]:
    """(name, kind, source, valid documents) for each grammar to check."""
    from pda import grammars

    out: list[tuple[str, str, Any, list[str]]] = []
    if args.bundled:
        for f in grammars.files():
            valid, _ = grammars.samples(f.name)
            out.append((f.name, f.suffix, f.read_text(encoding="utf-8"),
                        [p.read_text(encoding="utf-8") for p in valid[:MAX_DOCS]]))
    root = Path(args.corpora)
    if args.schemas and (root / "jsonschemabench").is_dir():
        for it in load_items(root, args.schemas, args.seed):
            docs = [json.dumps(t["data"], ensure_ascii=False) for t in it["tests"] if t["valid"]][:MAX_DOCS]
            out.append((it["id"], "schema", it["schema"], docs))
    return out


def save(args: argparse.Namespace, folder: Path) -> dict[str, int]:
    import pda

    hf = load_deepseek_tokenizer()
    tok = pda.TokenizerInfo.from_huggingface(hf)
    compiler = pda.GrammarCompiler(tok, cache=False)
    counts = {"grammars": 0, "refused": 0, "documents": 0, "masks": 0, "bytes": 0}
    manifest = []
    for name, kind, source, docs in cases(args):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if kind == "schema":
                    compiled = compiler.compile_json_schema(source)
                elif kind == ".lark":
                    compiled = compiler.compile_lark(source)
                else:
                    compiled = compiler.compile_grammar(source)
        except pda.PdaError:
            counts["refused"] += 1
            continue
        walks = []
        for doc in docs:
            tokens = hf.encode(doc, add_special_tokens=False)[:MAX_TOKENS]
            walks.append((tokens, walk(pda, compiled, tokens)))
            counts["masks"] += len(walks[-1][1])
        data = compiled.to_bytes()  # after the walks: lazily computed classes are in it too
        file = folder / f"{len(manifest)}.pdacg"
        file.write_bytes(data)
        manifest.append({"name": name, "file": file.name, "walks": walks})
        counts["grammars"] += 1
        counts["documents"] += len(docs)
        counts["bytes"] += len(data)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return counts


def check(folder: Path) -> int:
    """The fresh process: load every file, walk, compare; the number of differing grammars."""
    import pda

    tok = pda.TokenizerInfo.from_huggingface(load_deepseek_tokenizer())
    bad = 0
    for entry in json.loads((folder / "manifest.json").read_text()):
        compiled = pda.CompiledGrammar.from_bytes((folder / entry["file"]).read_bytes(), tok)
        for tokens, digests in entry["walks"]:
            got = walk(pda, compiled, tokens)
            if got != digests:
                k = next(i for i, (a, b) in enumerate(zip(got + [None], digests + [None])) if a != b)
                print(f"MISMATCH {entry['name']}: step {k} of {len(tokens)}")
                bad += 1
                break
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--schemas", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-bundled", dest="bundled", action="store_false")
    ap.add_argument("--corpora", default=str(DEFAULT_CORPORA))
    ap.add_argument("--check", metavar="FOLDER", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.check:
        return 1 if check(Path(args.check)) else 0
    with tempfile.TemporaryDirectory(prefix="pda-roundtrip-") as tmp:
        t0 = time.perf_counter()
        counts = save(args, Path(tmp))
        t1 = time.perf_counter()
        proc = subprocess.run([sys.executable, __file__, "--check", tmp], capture_output=True, text=True)
        print(proc.stdout, end="")
        print(proc.stderr, end="", file=sys.stderr)
        print(f"{counts['grammars']} grammars ({counts['refused']} refused), {counts['documents']} documents, "
              f"{counts['masks']} masks, {counts['bytes'] / 1e6:.1f} MB serialised; "
              f"save {t1 - t0:.1f}s, fresh-process check {time.perf_counter() - t1:.1f}s: "
              f"{'all identical' if proc.returncode == 0 else 'DIFFERENCES'}")
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
