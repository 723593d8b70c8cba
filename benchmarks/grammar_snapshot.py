"""Snapshot what the JSON Schema sample compiles to, to check that a speed-up changed nothing.

For each schema of the seeded JSONSchemaBench sample (as ``ttfm.py`` draws it), a SHA-256 of the
frontend's rules, of the normalised rules (``pda.normalize``; rule order included) and of the
automaton's arrays; a refusal is its error class.  ``--write FILE`` stores the snapshot; ``--check
FILE`` compares against one and lists the schemas whose stage differs (exit status 1 if any).

    python benchmarks/grammar_snapshot.py --write before.json      # on the old code
    python benchmarks/grammar_snapshot.py --check before.json      # on the new code
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from schema_conformance import corpus_arguments, load_items  # noqa: E402


def _digest(parts: list[bytes]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()


def _rules_digest(rules: dict) -> str:  # type: ignore[type-arg]
    # repr of the frozen dataclasses: the whole tree by value (a Ref's source position is left out)
    return _digest([f"{name}={body!r}".encode() for name, body in rules.items()])


def snapshot(schema: object) -> dict[str, str]:
    from pda.automaton import build_automaton
    from pda.frontends.json_schema import json_schema_to_ir
    from pda.normalize import normalize

    out: dict[str, str] = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ir = json_schema_to_ir(schema)
            out["frontend"] = _rules_digest(ir.rules) + ":" + ir.start
            normal = normalize(ir)
            out["normalize"] = _rules_digest(normal.rules)
            a = build_automaton(normal)
            out["automaton"] = _digest([repr(a.rule_names).encode()]
                                       + [f"{x.dtype}{x.shape}".encode() + x.tobytes() for x in a.arrays()])
    except Exception as e:  # noqa: BLE001 - a refusal is part of the snapshot
        out["error"] = type(e).__name__
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    corpus_arguments(ap)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="FILE")
    mode.add_argument("--check", metavar="FILE")
    args = ap.parse_args(argv)
    items = load_items(Path(args.path), args.sample or None, args.seed)
    got = {it["id"]: snapshot(it["schema"]) for it in items}
    if args.write:
        Path(args.write).write_text(json.dumps(got, indent=1))
        print(f"{len(got)} schemas written to {args.write}")
        return 0
    before = json.loads(Path(args.check).read_text())
    differ = {k: [s for s in ("frontend", "normalize", "automaton", "error") if v.get(s) != got.get(k, {}).get(s)]
              for k, v in before.items()}
    differ = {k: v for k, v in differ.items() if v}
    for k, stages in differ.items():
        print(f"{k}: {', '.join(stages)} differ")
    print(f"{len(before)} schemas checked, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
