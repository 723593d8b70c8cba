"""The ``pda`` command line: exit codes, the error report with its caret, stdin, list and demo."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pda import grammars
from pda.cli import EXIT_ERROR, EXIT_INVALID, EXIT_OK, main

TWO_LINES = 'root ::= "ab" [0-9]+ "\\n" "cd"\n'


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str], stdin: bytes | None = None,
            monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[int, str, str]:
    """Run ``pda argv`` in-process; (exit status, stdout, stderr)."""
    if stdin is not None and monkeypatch is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture()
def two_lines(tmp_path: Path) -> Path:
    path = tmp_path / "two_lines.gbnf"
    path.write_text(TWO_LINES, encoding="utf-8")
    return path


def write(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_valid_input_prints_ok_and_exits_0(two_lines: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = write(tmp_path, "good.txt", b"ab12\ncd")
    status, out, _ = run_cli(["validate", "--grammar", str(two_lines), doc], capsys)
    assert (status, out) == (EXIT_OK, f"OK {doc}\n")


def test_invalid_input_shows_line_column_caret_and_expected(
    two_lines: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = write(tmp_path, "bad.txt", b"ab12\nce")
    status, out, _ = run_cli(["validate", "-g", str(two_lines), doc], capsys)
    assert status == EXIT_INVALID
    assert out.startswith(f"FAIL {doc}:2:2: unexpected input at line 2, column 2 (byte 6); expected 'd'")
    assert out.endswith("\n    ce\n     ^\n")


def test_text_ending_early_is_reported(two_lines: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = write(tmp_path, "short.txt", b"ab")
    status, out, _ = run_cli(["validate", "-g", str(two_lines), doc], capsys)
    assert status == EXIT_INVALID
    assert "text ends before the grammar is complete at line 1, column 3 (byte 2); expected '0'-'9'" in out


def test_one_bad_input_among_several_exits_1(two_lines: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = write(tmp_path, "a.txt", b"ab1\ncd"), write(tmp_path, "b.txt", b"abx")
    status, out, _ = run_cli(["validate", "-g", str(two_lines), good, bad], capsys)
    assert status == EXIT_INVALID
    assert out.splitlines()[0] == f"OK {good}"
    assert out.splitlines()[1].startswith(f"FAIL {bad}:1:3: ")


@pytest.mark.parametrize(
    "grammar_text, message",
    [
        ('root ::= ( "a"\n', r"pda: Grammar syntax error"),
        ("root ::= missing\n", r"pda: Undefined rule .*missing"),
    ],
)
def test_bad_grammar_exits_2_with_the_grammar_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], grammar_text: str, message: str
) -> None:
    path = tmp_path / "bad.gbnf"
    path.write_text(grammar_text, encoding="utf-8")
    status, out, err = run_cli(["validate", "-g", str(path), write(tmp_path, "x.txt", b"a")], capsys)
    assert (status, out) == (EXIT_ERROR, "")
    assert re.search(message, err)


@pytest.mark.parametrize(
    "argv_tail, message",
    [
        (["--builtin", "cobol"], "pda: no bundled grammar 'cobol'"),
        (["--grammar", "grammar.txt"], "pda: cannot tell the dialect of grammar.txt"),
        (["--grammar", "nowhere.gbnf"], "pda: cannot read grammar nowhere.gbnf"),
        (["--regex", "a", "--start", "x"], "pda: --start does not apply to a regular expression"),
        (["--regex", "a", "no_such_input.txt"], "pda: cannot read no_such_input.txt"),
        (["--regex", "(a"], "pda: Regex error"),
    ],
)
def test_usage_errors_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv_tail: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "grammar.txt").write_text(TWO_LINES, encoding="utf-8")
    status, _, err = run_cli(["validate", *argv_tail], capsys)
    assert status == EXIT_ERROR
    assert err.startswith(message)


def test_format_overrides_the_suffix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    grammar = tmp_path / "grammar.txt"
    grammar.write_text(TWO_LINES, encoding="utf-8")
    doc = write(tmp_path, "doc", b"ab7\ncd")
    assert run_cli(["validate", "-g", str(grammar), "--format", "ebnf", doc], capsys)[0] == EXIT_OK


def test_lark_grammar_with_start_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    grammar = tmp_path / "pairs.lark"
    grammar.write_text('pair: word "=" word\nword: /[a-z]+/\n', encoding="utf-8")
    doc = write(tmp_path, "doc", b"key=value")
    assert run_cli(["validate", "-g", str(grammar), "--start", "pair", doc], capsys)[0] == EXIT_OK
    assert run_cli(["validate", "-g", str(grammar), "--start", "word", doc], capsys)[0] == EXIT_INVALID


@pytest.mark.parametrize("data, status", [(b"123", EXIT_OK), (b"12a", EXIT_INVALID)])
def test_stdin_with_dash_or_no_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], data: bytes, status: int
) -> None:
    for tail in (["-"], []):
        result, out, _ = run_cli(["validate", "--regex", "[0-9]+", *tail], capsys, stdin=data, monkeypatch=monkeypatch)
        assert result == status
        assert out.startswith("OK <stdin>" if status == EXIT_OK else "FAIL <stdin>:1:3: ")


def test_builtin_grammar_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = write(tmp_path, "doc.json", b'{"a": [1, 2, {"b": null}]}')
    assert run_cli(["validate", "--builtin", "json", doc], capsys)[0] == EXIT_OK
    assert run_cli(["validate", "--builtin", "json.lark", doc], capsys)[0] == EXIT_OK


def test_list_names_every_bundled_grammar(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli(["list"], capsys)
    assert status == EXIT_OK
    assert [line.split()[0] for line in out.splitlines()] == [p.name for p in grammars.files()]


def test_demo_checks_every_sample_and_shows_a_caret(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli(["demo", "--samples-only"], capsys)
    assert status == EXIT_OK, out
    assert "all samples behaved as expected" in out
    assert "missing_semicolon.c:3:5: unexpected input at line 3, column 5 (byte 35); expected " in out
    assert "\n        return x;\n        ^\n" in out


def test_python_dash_m_pda_reads_stdin() -> None:
    """The installed entry point, end to end in a subprocess: ``python -m pda validate ... -``."""
    result = subprocess.run(
        [sys.executable, "-m", "pda", "validate", "--regex", "(ab)+", "-"],
        input=b"abab", capture_output=True, timeout=300, check=False,
    )
    assert (result.returncode, result.stdout) == (EXIT_OK, b"OK <stdin>\n"), result.stderr


# ----------------------------------------------------------------------------- --schema

SCHEMA = """{
  "type": "object",
  "properties": {
    "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}}}},
    "a/b~c": {"type": "integer"}
  }
}
"""


@pytest.fixture()
def schema(tmp_path: Path) -> str:
    return write(tmp_path, "schema.json", SCHEMA.encode("utf-8"))


def test_schema_valid_documents(schema: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = [write(tmp_path, "a.json", b'{"items": [{"name": "abc"}]}\n'),  # a final newline is fine
            write(tmp_path, "b.json", b'{"a/b~c": 3, "other": [null]}')]
    status, out, err = run_cli(["validate", "--schema", schema, *docs], capsys)
    assert (status, out, err) == (EXIT_OK, f"OK {docs[0]}\nOK {docs[1]}\n", "")


@pytest.mark.parametrize(
    "data, where",
    [
        (b'{"items": [{}, {}, {},\n  {"name": "dddd"}]}\n',
         ":2:16: at /items/3/name: unexpected input at line 2, column 16"),
        (b'{"a/b~c": 1.5}', ":1:13: at /a~1b~0c: unexpected input"),
        (b'{"items": [{"name": "x"}, 5]}', ":1:27: at /items/1: unexpected input"),
        (b'{"items": [{}, {}', ":1:18: at /items: text ends before the grammar is complete"),
        (b"[]", ":1:1: at the root: unexpected input"),
    ],
)
def test_schema_invalid_document_names_its_json_pointer(
    schema: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, where: str
) -> None:
    doc = write(tmp_path, "doc.json", data)
    status, out, _ = run_cli(["validate", "--schema", schema, doc], capsys)
    assert status == EXIT_INVALID
    assert out.startswith(f"FAIL {doc}{where}"), out
    assert "^" in out.splitlines()[-1]


def test_schema_reads_stdin(schema: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli(["validate", "--schema", schema], capsys, stdin=b'{"items": []}\n',
                             monkeypatch=monkeypatch)
    assert (status, out) == (EXIT_OK, "OK <stdin>\n")
    status, out, _ = run_cli(["validate", "--schema", schema, "-"], capsys, stdin=b'{"a/b~c": "x"}',
                             monkeypatch=monkeypatch)
    assert status == EXIT_INVALID
    assert out.startswith("FAIL <stdin>:1:11: at /a~1b~0c: ")


@pytest.mark.parametrize(
    "schema_bytes, message",
    [
        (b'{"properties": {"a": {"type": "strin"}}}',
         r"schema.json: Invalid JSON Schema at '/properties/a/type': 'strin' is not a JSON Schema type"),
        (b'{"items": {"$ref": "#/$defs/nowhere"}}', r"Invalid JSON Schema at '/items/\$ref': .*points to nothing"),
        (b'{"minimum": 5, "maximum": 1}', r"at '/minimum': minimum 5 is greater than maximum 1"),
        (b'{"properties": {"x": {"pattern": "(a)\\\\1"}}}',
         r"Unsupported JSON Schema keyword at '/properties/x/pattern': .*back-references"),
        (b'{"type": "array", "uniqueItems": true}', r"Unsupported JSON Schema keyword at '/uniqueItems'"),
        (b'{\n  "type": "object",\n  "properties": {"a": }\n}',
         r"not valid JSON: Expecting value \(line 3, column 23\)"),
        (b"", r"not valid JSON: .*\(line 1, column 1\)"),
        (b'{"type": "\xff"}', r"cannot read schema .*schema.json: 'utf-8' codec"),
        (b"false", r"Empty language"),
    ],
)
def test_bad_schema_exits_2_naming_the_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], schema_bytes: bytes, message: str
) -> None:
    schema = write(tmp_path, "schema.json", schema_bytes)
    status, out, err = run_cli(["validate", "--schema", schema, write(tmp_path, "doc.json", b"1")], capsys)
    assert (status, out) == (EXIT_ERROR, "")
    assert err.startswith("pda: ") and re.search(message, err), err


@pytest.mark.parametrize(
    "options, data, status",
    [
        ([], b'{"a/b~c": 1, "zz": 2}', EXIT_OK),
        (["--strict"], b'{"a/b~c": 1, "zz": 2}', EXIT_INVALID),
        ([], b'{"a/b~c": 1, "items": []}', EXIT_INVALID),  # declared properties in schema order
        (["--property-order", "any"], b'{"a/b~c": 1, "items": []}', EXIT_OK),
        (["--whitespace", "compact"], b'{"items": []}', EXIT_INVALID),
        (["--whitespace", "compact"], b'{"items":[]}', EXIT_OK),
        (["--indent", "2"], b'{\n  "items": []\n}', EXIT_OK),
        (["--indent", "2"], b'{"items": []}', EXIT_INVALID),
        (["--max-whitespace", "2"], b'{"items":   []}', EXIT_INVALID),
        (["--max-whitespace", "3"], b'{"items":   []}', EXIT_OK),
    ],
)
def test_schema_options(
    schema: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], data: bytes, status: int
) -> None:
    doc = write(tmp_path, "doc.json", data)
    assert run_cli(["validate", "--schema", schema, *options, doc], capsys)[0] == status


def test_lenient_prints_the_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schema = write(tmp_path, "schema.json", b'{"type": "array", "uniqueItems": true}')
    status, out, err = run_cli(["validate", "--schema", schema, "--lenient", write(tmp_path, "d.json", b"[1, 1]")],
                               capsys)
    assert status == EXIT_OK
    assert err.startswith(f"pda: warning: {schema}: JSON Schema at '/uniqueItems': uniqueItems is not supported")
    assert err.endswith("; ignored (lenient)\n") and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv_tail, message",
    [
        (["--regex", "a", "--strict"], "pda: --strict applies only to --schema"),
        (["--builtin", "json", "--indent", "2"], "pda: --indent applies only to --schema"),
        (["--grammar", "x.gbnf", "--property-order", "any"], "pda: --property-order applies only to --schema"),
        (["--schema", "schema.json", "--start", "x"], "pda: --format and --start do not apply to --schema"),
        (["--schema", "nowhere.json"], "pda: cannot read schema nowhere.json"),
        (["--grammar", "schema.json"], "pda: cannot tell the dialect of schema.json from its suffix; pass --format "
                                       "ebnf|lark|regex (a JSON Schema goes after --schema)"),
    ],
)
def test_schema_usage_errors_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv_tail: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "schema.json").write_text(SCHEMA, encoding="utf-8")
    status, _, err = run_cli(["validate", *argv_tail, "doc.json"], capsys)
    assert status == EXIT_ERROR
    assert err.startswith(message), err


def test_schema_layout_options_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["validate", "--schema", "s.json", "--indent", "2", "--whitespace", "compact"])
    assert info.value.code == EXIT_ERROR
    assert "not allowed with argument" in capsys.readouterr().err
