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
    status, out, _ = run_cli(["demo"], capsys)
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
