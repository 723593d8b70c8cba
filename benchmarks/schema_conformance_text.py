"""JSON Schema conformance at the text level: compile each schema, check each test instance.

Usage::

    python benchmarks/schema_conformance_text.py [PATH] [--limit N] [--only SUBSTR] [--show N]
        [--timeout S] [--json OUT]

``PATH`` (default ``../shared/corpora``, relative to the repository root) holds
``jsonschemabench/*.jsonl`` and ``json-schema-test-suite/draft2020-12/*.json``.  Every schema is
compiled with :func:`pda.frontends.json_schema.json_schema_to_ir`; every test instance is
serialised with ``json.dumps(data, ensure_ascii=False)`` and must be accepted exactly when the
corpus marks it valid.  Per subset (or test-suite file) it prints: schemas, schemas that compile
and pass every test, refused as unsupported, other compile errors, false rejects, and false
accepts (the number that must stay 0).  Text level only: no tokenizer is involved.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
import json
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pda import Grammar  # noqa: E402
from pda.errors import EmptyLanguageError, PdaError, SchemaError, UnsupportedSchemaError  # noqa: E402
from pda.frontends.json_schema import json_schema_to_ir  # noqa: E402

FIELDS = ("schemas", "passing", "unsupported", "errors", "timeouts", "tests", "false_rejects", "false_accepts")


class _Nothing:
    def accepts(self, text: str) -> bool:
        return False


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def cases(path: Path, limit: int | None, only: str | None) -> Iterator[tuple[str, str, Any, list[dict[str, Any]]]]:
    """(subset, id, schema, tests) for every schema of both corpora."""
    for f in sorted((path / "jsonschemabench").glob("*.jsonl")):
        if only and only not in f.stem:
            continue
        with f.open(encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if limit is not None and i >= limit:
                    break
                item = json.loads(line)
                yield f.stem, item["id"], item["schema"], item.get("tests", [])
    for f in sorted((path / "json-schema-test-suite" / "draft2020-12").rglob("*.json")):
        name = "suite/" + str(f.relative_to(path / "json-schema-test-suite" / "draft2020-12").with_suffix(""))
        if only and only not in name:
            continue
        for i, group in enumerate(json.loads(f.read_text(encoding="utf-8"))):
            if limit is not None and i >= limit:
                break
            yield name, f"{name}#{i} {group['description']}", group["schema"], group["tests"]


REASONS: Counter[str] = Counter()


def run(path: Path, limit: int | None, only: str | None, show: int, timeout: int,
        options: dict[str, Any]) -> dict[str, dict[str, int]]:
    stats: dict[str, dict[str, int]] = {}
    shown = 0
    signal.signal(signal.SIGALRM, _alarm)
    for subset, cid, schema, tests in cases(path, limit, only):
        st = stats.setdefault(subset, dict.fromkeys(FIELDS, 0))
        st["schemas"] += 1
        signal.alarm(timeout)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ir = json_schema_to_ir(schema, **options)
                try:
                    g: Any = Grammar.from_ir(ir)
                except EmptyLanguageError:
                    g = _Nothing()  # a schema no value satisfies: the grammar accepts nothing
            bad = 0
            for t in tests:
                text = json.dumps(t["data"], ensure_ascii=False)
                got = g.accepts(text)
                st["tests"] += 1
                if got and not t["valid"]:
                    st["false_accepts"] += 1
                    bad += 1
                    print(f"FALSE ACCEPT {cid}: {text[:300]}  ({t.get('description', '')})", flush=True)
                elif not got and t["valid"]:
                    st["false_rejects"] += 1
                    bad += 1
                    if shown < show:
                        shown += 1
                        print(f"false reject {cid}: {text[:200]}", flush=True)
            st["passing"] += bad == 0
        except _Timeout:
            st["timeouts"] += 1
            print(f"timeout {cid}", flush=True)
        except UnsupportedSchemaError as e:
            st["unsupported"] += 1
            REASONS[re.sub(r"'[^']*'|\{.*\}|\[.*\]|\d+", "_", e.message)[:90]] += 1
            if show < 0:
                print(f"unsupported {cid}: {e}", flush=True)
        except (SchemaError, PdaError, RecursionError, ValueError, KeyError, TypeError, AssertionError) as e:
            st["errors"] += 1
            print(f"error {cid}: {type(e).__name__}: {str(e)[:300]}", flush=True)
        finally:
            signal.alarm(0)
    return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", nargs="?", default=str(ROOT / ".." / "shared" / "corpora"))
    ap.add_argument("--limit", type=int, default=None, help="schemas per subset / groups per file")
    ap.add_argument("--only", default=None, help="only subsets/files whose name contains this")
    ap.add_argument("--show", type=int, default=0, help="print this many false rejects (-1: also unsupported)")
    ap.add_argument("--timeout", type=int, default=30, help="seconds per schema")
    ap.add_argument("--json", default=None, help="write the figures to this file")
    ap.add_argument("--property-order", default="schema", choices=["schema", "any"])
    args = ap.parse_args(argv)
    t0 = time.time()
    stats = run(Path(args.path), args.limit, args.only, args.show, args.timeout,
                {"property_order": args.property_order})
    total = dict.fromkeys(FIELDS, 0)
    print(f"\n{'subset':<40}" + "".join(f"{f:>14}" for f in FIELDS))
    for name, st in stats.items():
        print(f"{name:<40}" + "".join(f"{st[f]:>14}" for f in FIELDS))
        for f in FIELDS:
            total[f] += st[f]
    print(f"{'TOTAL':<40}" + "".join(f"{total[f]:>14}" for f in FIELDS))
    print(f"({time.time() - t0:.1f} s)\n\nunsupported, by reason:")
    for reason, n in REASONS.most_common(20):
        print(f"{n:>6}  {reason}")
    if args.json:
        Path(args.json).write_text(json.dumps({"subsets": stats, "total": total}, indent=1))
    return 1 if total["false_accepts"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
