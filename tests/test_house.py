"""The house rules the code keeps: the JSON Schema subpackage's layers, module sizes, one place
for each small thing (grammar file dialects, the bitmask's sign bit, the version, the error tree)."""

from __future__ import annotations

import ast
import importlib.metadata
from pathlib import Path

import numpy as np
import pytest

import pda
from pda import grammars
from pda.errors import FsmTooLarge, LimitExceededError, PdaError, SchemaTooDeep

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["document", "strings", "numbers", "formats", "merge", "layout", "context", "patterns", "values",
          "disjoint", "negate", "objects", "emit", "tidy", "compiler"]
PACKAGE = ROOT / "frontends" / "json_schema"


def test_json_schema_layers_import_only_downwards() -> None:
    assert sorted(p.stem for p in PACKAGE.glob("*.py")) == sorted(LAYERS + ["__init__"])
    doc = (PACKAGE / "__init__.py").read_text(encoding="utf-8")
    where = [doc.find(f"``{m}``") for m in LAYERS]
    assert -1 not in where and where == sorted(where)  # the map in the docstring, in this order
    for name in LAYERS:
        tree = ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = [n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))]
                assert not inner, f"{name}.{node.name} imports inside a function"
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                assert node.module in LAYERS, (name, node.module)
                assert LAYERS.index(node.module) < LAYERS.index(name), f"{name} imports {node.module}, a layer above"


def test_no_flat_json_modules_and_no_big_modules() -> None:
    assert not list((ROOT / "frontends").glob("json_*.py"))
    for folder in ("pda", "frontends", "cache", "grammars"):
        for path in (ROOT / folder).rglob("*.py"):
            lines = path.read_text(encoding="utf-8").count("\n")
            assert lines <= 600, f"{path.relative_to(ROOT)} has {lines} lines"


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r\n\r\n", ""])
def test_regex_file_loses_only_its_final_line_breaks(tmp_path: Path, ending: str) -> None:
    path = tmp_path / "x.REGEX"
    path.write_bytes(("ab+" + ending).encode())
    assert grammars.dialect_of(path) == "regex"
    g = pda.Grammar.from_file(path)
    assert g.accepts("abb") and not g.accepts("abb\r")
    from pda.cli import load_grammar

    assert load_grammar(grammar_file=str(path)).accepts("abb")


def test_dialects_by_suffix() -> None:
    assert [grammars.dialect_of(f"g{s}") for s in (".gbnf", ".EBNF", ".lark", ".json", ".txt")] == \
        ["ebnf", "ebnf", "lark", "json_schema", None]


def test_word_bits_sign_bit() -> None:
    from pda.bitmask import WORD_BITS
    from pda.kernels import set_bits

    assert WORD_BITS.dtype == np.int32 and WORD_BITS[31] == -2 ** 31 and WORD_BITS[0] == 1
    for fn in (set_bits, set_bits.py_func):
        words = np.zeros(2, np.int32)
        fn(words, np.array([0, 31, 63], np.int32))
        assert words.view(np.uint32).tolist() == [2 ** 31 + 1, 2 ** 31]


def test_one_version_and_the_error_tree() -> None:
    assert pda.__version__ == importlib.metadata.version("pda")
    assert issubclass(pda.BitmaskError, PdaError) and "BitmaskError" in pda.__all__
    assert issubclass(FsmTooLarge, LimitExceededError) and issubclass(SchemaTooDeep, LimitExceededError)


def _is_kernel(node: ast.FunctionDef) -> bool:
    """Whether a function is compiled by numba (decorated with ``njit``/``jit``, called or not)."""
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("njit", "jit"):
            return True
    return False


def test_no_kernel_parameter_has_a_default() -> None:
    """A Python call that leaves a numba kernel's argument to its default took the dispatcher's
    slow path (typing in Python, ``_compile_for_args``) on every call once the kernel was loaded
    from numba's cache as another kernel's callee: ``stack_run(..., cap=RUN_CAP)`` cost 70-200 us
    a call instead of 1 us, a quarter of ``sql_select``'s fill time.  Every argument is passed."""
    kernels = 0
    for folder in ("pda", "frontends", "cache"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef) and _is_kernel(node):
                    kernels += 1
                    args = node.args
                    assert not args.defaults and not any(args.kw_defaults), \
                        f"{path.relative_to(ROOT)}:{node.lineno} kernel {node.name} has a default argument"
    assert kernels > 50  # the check sees the kernels
