"""Bundled grammars that users can name, each with valid and invalid sample documents.

A grammar is named by its file stem (``"json"``, ``"sql_select"``); where two files share a stem
(``json.gbnf`` and ``json.lark``) the stem names the GBNF one and the full file name
(``"json.lark"``) names the other.  Samples belong to the language, so both JSON grammars share
``samples/json/``.  This module only finds files; it does not import :mod:`pda`::

    from pda import Grammar, grammars
    g = Grammar.from_file(grammars.path("json"))
    valid, invalid = grammars.samples("json")
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DIRECTORY", "SUFFIXES", "DIALECTS", "dialect_of", "source_text", "files", "names", "path", "samples"]

DIRECTORY = Path(__file__).resolve().parent
"""The folder holding the bundled grammar files and ``samples/``."""

SUFFIXES = (".gbnf", ".ebnf", ".lark")
"""Grammar file suffixes, in the order of preference when a stem has more than one file."""

DIALECTS = {".gbnf": "ebnf", ".ebnf": "ebnf", ".lark": "lark", ".regex": "regex", ".json": "json_schema"}
"""The dialect of a grammar file by its suffix (any case): what :meth:`pda.Grammar.from_file` and
the command line read."""


def dialect_of(file: str | Path) -> str | None:
    """The dialect of grammar file ``file`` from its suffix (None when the suffix tells none)."""
    return DIALECTS.get(Path(file).suffix.lower())


def source_text(text: str, dialect: str) -> str:
    """The grammar in a file's ``text``: a regular expression loses the file's final line breaks
    (``\n`` or ``\r\n``); other dialects are read as they are."""
    return text.rstrip("\r\n") if dialect == "regex" else text


def files() -> list[Path]:
    """Every bundled grammar file, sorted by name."""
    return sorted(p for p in DIRECTORY.iterdir() if p.suffix in SUFFIXES and p.is_file())


def names() -> list[str]:
    """The names of the bundled grammars: one per file stem, sorted."""
    return sorted({p.stem for p in files()})


def path(name: str) -> Path:
    """The file of the bundled grammar ``name`` (a stem like ``"json"`` or a file name like ``"json.lark"``).

    Raises ``KeyError`` naming the known grammars when there is no such grammar.
    """
    candidates = {p.name: p for p in files()}
    if name in candidates:
        return candidates[name]
    for suffix in SUFFIXES:
        if name + suffix in candidates:
            return candidates[name + suffix]
    raise KeyError(f"no bundled grammar {name!r}; known: {', '.join(names())}")


def samples(name: str) -> tuple[list[Path], list[Path]]:
    """The sample documents of grammar ``name``: (valid, invalid), each sorted by file name.

    ``name`` is a stem or a grammar file name; both JSON grammars share the ``json`` samples.
    Raises ``KeyError`` when the grammar does not exist.
    """
    stem = path(name).stem
    folder = DIRECTORY / "samples" / stem

    def listing(kind: str) -> list[Path]:
        sub = folder / kind
        return sorted(p for p in sub.iterdir() if p.is_file()) if sub.is_dir() else []

    return listing("valid"), listing("invalid")
