"""The ``pda`` command line: validate documents against a grammar, list and demo bundled grammars.

    pda validate --grammar json.gbnf doc.json other.json     # dialect from the extension
    pda validate --builtin sql_select query.sql
    pda validate --regex '[0-9]+(\\.[0-9]+)?' -               # '-' (or no file) reads stdin
    pda validate --schema person.schema.json alice.json bob.json --whitespace compact
    pda list
    pda demo                                                  # generation with a random model, then the samples
    pda generate --model DIR --schema person.json --stats     # see pda.cli_generate
    pda cache info | clear [--dir PATH]                      # the on-disk cache ($PDA_CACHE_DIR)

``validate`` prints ``OK <file>`` for each valid input and, for an invalid one, the file, line,
column, the offending line with a caret and the bytes that could have come there; against a JSON
Schema also the JSON pointer of the value that went wrong (``at /items/3/name``; blanks after the
JSON value, such as a final newline, are not checked there, as RFC 8259 allows them).  Exit status:
0 when every input is valid, 1 when one is not, 2 when the grammar or schema (or an input file)
cannot be read or compiled.  Standard library only, besides :mod:`pda` itself.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Sequence, TextIO

from pda import grammars
from pda.cli_generate import add_generate_parser, run_generate
from pda.errors import GrammarError, LimitExceededError, SchemaError, ValidationError

if TYPE_CHECKING:
    from pda.grammar import Grammar

__all__ = ["main", "build_parser", "load_grammar", "EXIT_OK", "EXIT_INVALID", "EXIT_ERROR"]

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_ERROR = 2

FORMATS = ("ebnf", "lark", "regex")
"""The dialects ``--grammar`` reads (by its suffix, :func:`pda.grammars.dialect_of`); ``--format`` overrides it."""

STDIN = "-"

SCHEMA_OPTIONS = ("whitespace", "indent", "max_whitespace", "strict", "lenient", "property_order")
"""The ``pda validate`` options that only apply to ``--schema`` (argparse destinations)."""


class CliError(Exception):
    """A problem the command reports on stderr before exiting with status 2."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``pda`` command and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="pda", description="Grammar-constrained decoding engine: grammar tools."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    validate = sub.add_parser(
        "validate",
        help="check documents against a grammar",
        description="Check that each input is a complete sentence of the grammar.",
    )
    source = validate.add_mutually_exclusive_group(required=True)
    source.add_argument("--grammar", "-g", metavar="FILE", help="grammar file (.gbnf, .ebnf, .lark, .regex)")
    source.add_argument("--builtin", "-b", metavar="NAME", help="a bundled grammar (see `pda list`)")
    source.add_argument("--regex", "-r", metavar="PATTERN", help="a regular expression the whole input must match")
    source.add_argument("--schema", metavar="FILE", help="a JSON Schema (JSON file) the inputs must be valid against")
    validate.add_argument(
        "--format", "-f", choices=FORMATS, help="dialect of --grammar (default: from its suffix)"
    )
    validate.add_argument("--start", "-s", metavar="RULE", help="start rule (default: root for EBNF, start for Lark)")
    validate.add_argument("inputs", nargs="*", metavar="FILE", help="documents to check; '-' or none reads stdin")
    schema = validate.add_argument_group("JSON Schema options (with --schema)")
    layout = schema.add_mutually_exclusive_group()
    layout.add_argument("--whitespace", choices=["flexible", "compact"],
                        help="flexible (default): blanks where JSON allows them; compact: none")
    layout.add_argument("--indent", type=int, metavar="N", help="exactly the layout of json.dumps(indent=N)")
    schema.add_argument("--max-whitespace", type=int, metavar="N",
                        help="most blank characters in a row with flexible whitespace (default 16)")
    schema.add_argument("--strict", action="store_true", default=None,
                        help="forbid properties and items the schema does not declare")
    schema.add_argument("--lenient", action="store_true", default=None,
                        help="ignore (with a warning) keywords pda cannot enforce instead of refusing the schema")
    schema.add_argument("--property-order", choices=["schema", "any"],
                        help="schema (default): declared properties in schema order; any: in any order")

    sub.add_parser("list", help="list the bundled grammars", description="List the bundled grammars.")
    demo = sub.add_parser(
        "demo",
        help="constrained generation with a random model, then validate every bundled sample",
        description="Generate JSON and SQL with a random Llama over DeepSeek's tokenizer (built and cached in "
                    ".cache/ on first run), then validate every bundled sample against its bundled grammar.",
    )
    demo.add_argument("--samples-only", action="store_true", help="only validate the bundled samples")
    add_generate_parser(sub)
    from pda.cli_cache import add_cache_parser

    add_cache_parser(sub)
    return parser


def _compile(text: str, dialect: str, *, start: str | None, filename: str | None) -> Grammar:
    """Compile ``text`` written in ``dialect`` ('ebnf', 'lark' or 'regex') into a Grammar."""
    from pda import Grammar

    if dialect == "ebnf":
        return Grammar.from_ebnf(text, start=start or "root", filename=filename)
    if dialect == "lark":
        return Grammar.from_lark(text, start=start or "start", filename=filename)
    if start is not None:
        raise CliError("--start does not apply to a regular expression")
    return Grammar.from_regex(text)


def load_schema(path: str, **options: object) -> Grammar:
    """Compile the JSON Schema in file ``path`` with :meth:`pda.Grammar.from_json_schema` ``options``.

    Raises :class:`CliError` for a file that cannot be read or is not UTF-8, and for a schema that
    does not compile: then the message is the :class:`pda.errors.SchemaError`'s, which names the
    schema's JSON pointer, or the line and column where the file stops being JSON.  Warnings
    (``lenient=True``) are printed to stderr as ``pda: warning: ...``.
    """
    from pda import Grammar

    try:
        text = Path(path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read schema {path}: {exc}") from None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            grammar = Grammar.from_json_schema(text, **options)
    except SchemaError as exc:
        raise CliError(f"{path}: {exc}") from exc
    for warning in caught:
        print(f"pda: warning: {path}: {warning.message}", file=sys.stderr)
    return grammar


def schema_options(args: argparse.Namespace) -> dict[str, object]:
    """The :meth:`pda.Grammar.from_json_schema` options given on the command line."""
    given = {name: getattr(args, name) for name in SCHEMA_OPTIONS if getattr(args, name) is not None}
    if given and args.schema is None:
        flag = "--" + next(iter(given)).replace("_", "-")
        raise CliError(f"{flag} applies only to --schema")
    if "indent" in given:
        given["whitespace"] = given.pop("indent")
    return given


def load_grammar(
    *,
    grammar_file: str | None = None,
    builtin: str | None = None,
    regex: str | None = None,
    fmt: str | None = None,
    start: str | None = None,
) -> Grammar:
    """Compile the grammar named by exactly one of ``grammar_file``, ``builtin`` or ``regex``.

    Raises :class:`CliError` for an unreadable file, an unknown bundled name or suffix, and
    :class:`pda.errors.GrammarError` for a grammar that does not compile.
    """
    if regex is not None:
        return _compile(regex, "regex", start=start, filename=None)
    if builtin is not None:
        try:
            path = grammars.path(builtin)
        except KeyError as exc:
            raise CliError(exc.args[0]) from None
    elif grammar_file is not None:
        path = Path(grammar_file)
    else:
        raise CliError("give one of --grammar, --builtin or --regex")
    dialect = fmt or grammars.dialect_of(path)
    if dialect not in FORMATS:
        hint = " (a JSON Schema goes after --schema)" if path.suffix.lower() == ".json" else ""
        raise CliError(f"cannot tell the dialect of {path} from its suffix; pass --format ebnf|lark|regex{hint}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read grammar {path}: {exc}") from None
    return _compile(grammars.source_text(text, dialect), dialect, start=start, filename=str(path))


def _read_input(name: str) -> bytes:
    """The bytes of input ``name``: a file, or stdin for '-'."""
    if name == STDIN:
        return sys.stdin.buffer.read()
    try:
        return Path(name).read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {name}: {exc}") from None


def describe_failure(name: str, error: ValidationError) -> str:
    """One report of an invalid input: ``FAIL file:line:column: [at POINTER: ]reason; expected ...``
    and the caret.  The JSON pointer is there when the grammar came from a JSON Schema."""
    where = ""
    if error.pointer is not None:
        where = f"at {error.pointer or 'the root'}: "
    return f"FAIL {name}:{error.line}:{error.column}: {where}{error}"


def check(grammar: Grammar, data: bytes) -> ValidationError | None:
    """The ValidationError ``grammar`` raises on ``data``, or None when ``data`` is a sentence."""
    try:
        grammar.validate(data)
    except ValidationError as exc:
        return exc
    return None


def _validate(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``pda validate``: report each input, return the exit status."""
    options = schema_options(args)
    if args.schema is not None:
        if args.format is not None or args.start is not None:
            raise CliError("--format and --start do not apply to --schema")
        grammar = load_schema(args.schema, **options)
    else:
        grammar = load_grammar(
            grammar_file=args.grammar, builtin=args.builtin, regex=args.regex, fmt=args.format, start=args.start
        )
    status = EXIT_OK
    for name in args.inputs or [STDIN]:
        data = _read_input(name)
        if args.schema is not None:  # RFC 8259 allows blanks after the value; files often end in a newline
            data = data.rstrip(b" \t\r\n")
        error = check(grammar, data)
        shown = "<stdin>" if name == STDIN else name
        if error is None:
            print(f"OK {shown}", file=out)
        else:
            print(describe_failure(shown, error), file=out)
            status = EXIT_INVALID
    return status


def _list(out: TextIO) -> int:
    """Run ``pda list``: one line per bundled grammar file with its sample counts."""
    for path in grammars.files():
        valid, invalid = grammars.samples(path.name)
        print(f"{path.name:<18} {len(valid)} valid, {len(invalid)} invalid samples", file=out)
    return EXIT_OK


def _shown_path(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it, else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _demo(out: TextIO) -> int:
    """Run ``pda demo``: every bundled sample against its grammar; show one rejection in full."""
    status = EXIT_OK
    showcase: tuple[str, Path, ValidationError] | None = None
    print(f"{'grammar':<18} {'valid samples':<22} invalid samples", file=out)
    for path in grammars.files():
        try:
            grammar = load_grammar(grammar_file=str(path))
        except GrammarError as exc:
            print(f"{path.name:<18} does not compile: {exc}", file=out)
            status = EXIT_INVALID
            continue
        valid, invalid = grammars.samples(path.name)
        wrong_valid = [p for p in valid if check(grammar, p.read_bytes()) is not None]
        rejections = [(p, check(grammar, p.read_bytes())) for p in invalid]
        wrong_invalid = [p for p, err in rejections if err is None]
        ok_valid = f"{len(valid) - len(wrong_valid)}/{len(valid)} accepted"
        print(f"{path.name:<18} {ok_valid:<22} {len(invalid) - len(wrong_invalid)}/{len(invalid)} rejected", file=out)
        for p, err in rejections:
            if err is not None:
                print(f"{'':<18}   {p.name}: line {err.line}, column {err.column}", file=out)
                if showcase is None or p.name == "missing_semicolon.c":
                    showcase = (path.name, p, err)
        for p in wrong_valid:
            print(f"{'':<18}   UNEXPECTED: valid sample {p.name} was rejected", file=out)
        for p in wrong_invalid:
            print(f"{'':<18}   UNEXPECTED: invalid sample {p.name} was accepted", file=out)
        if wrong_valid or wrong_invalid:
            status = EXIT_INVALID
    if showcase is not None:
        name, sample, err = showcase
        print(f"\nOne rejection in full, as `pda validate --builtin {name} {_shown_path(sample)}` prints it:", file=out)
        print(describe_failure(_shown_path(sample), err), file=out)
    print("\nall samples behaved as expected" if status == EXIT_OK else "\nsome samples did not behave as expected", file=out)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pda`` command; returns the exit status (0 ok, 1 invalid input, 2 error)."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "validate":
            return _validate(args, sys.stdout)
        if args.command == "list":
            return _list(sys.stdout)
        if args.command == "cache":
            from pda.cli_cache import run_cache

            return run_cache(args, sys.stdout)
        if args.command == "generate":
            return run_generate(args, sys.stdout, sys.stderr)
        if not args.samples_only:
            from pda.demo import run_generation_demo

            generated = run_generation_demo(sys.stdout)
            print("\n== bundled samples", flush=True)
            return max(_demo(sys.stdout), EXIT_OK if generated else EXIT_INVALID)
        return _demo(sys.stdout)
    except (GrammarError, CliError, LimitExceededError) as exc:
        print(f"pda: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
