"""One exception tree for everything pda raises at its users.

Every error derives from :class:`PdaError`; errors about bad input also derive from the builtin a
caller would expect (``ValueError``), so ``except ValueError`` keeps working.  Errors about a place
in a text (a grammar file, a regex, a document being validated) carry ``line`` and ``column``
(1-based) or an ``offset`` and draw a caret under the source line.
"""

from __future__ import annotations

__all__ = [
    "PdaError",
    "GrammarError",
    "GrammarSyntaxError",
    "UndefinedRuleError",
    "EmptyLanguageError",
    "RegexError",
    "UnsupportedRegexError",
    "SchemaError",
    "UnsupportedSchemaError",
    "ValidationError",
    "LimitExceededError",
    "FsmTooLarge",
    "SchemaTooDeep",
    "TokenizerError",
    "BitmaskError",
    "SerializationError",
    "ConstraintError",
]


def caret_context(source: str | None, line: int | None, column: int | None) -> str:
    """The source line holding (line, column), and a caret under the column; '' when unknown."""
    if source is None or line is None or column is None:
        return ""
    lines = source.splitlines()
    if not 1 <= line <= len(lines):
        return ""
    text = lines[line - 1].expandtabs(1)
    return f"\n    {text}\n    {' ' * max(column - 1, 0)}^"


def line_col(source: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a 0-based character offset into ``source``."""
    line = source.count("\n", 0, offset) + 1
    column = offset - (source.rfind("\n", 0, offset) + 1) + 1
    return line, column


class PdaError(Exception):
    """Root of every exception pda raises on purpose."""


class GrammarError(PdaError, ValueError):
    """A grammar that cannot be compiled.  Carries the place when one is known.

    Attributes: ``message`` (the bare reason), ``filename``, ``line``, ``column`` (1-based, or None),
    ``rule`` (the rule concerned, or None).
    """

    kind = "Grammar error"

    def __init__(
        self,
        message: str,
        *,
        filename: str | None = None,
        line: int | None = None,
        column: int | None = None,
        source: str | None = None,
        rule: str | None = None,
    ) -> None:
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column
        self.rule = rule
        where = ""
        if line is not None:
            where = f" at {filename + ':' if filename else ''}line {line}, column {column}"
        elif filename:
            where = f" in {filename}"
        super().__init__(f"{self.kind}{where}: {message}{caret_context(source, line, column)}")


class GrammarSyntaxError(GrammarError):
    """The grammar text does not parse (unclosed string, bad escape, bad range, ...)."""

    kind = "Grammar syntax error"


class UndefinedRuleError(GrammarError):
    """A rule refers to a rule that is not defined."""

    kind = "Undefined rule"


class EmptyLanguageError(GrammarError):
    """A rule (or the whole grammar) derives no finite string, e.g. ``a ::= a``."""

    kind = "Empty language"


class RegexError(GrammarError):
    """A regular expression that does not parse.  ``offset`` is the 0-based position in ``pattern``."""

    kind = "Regex error"

    def __init__(self, message: str, *, pattern: str, offset: int, **kw: object) -> None:
        self.pattern = pattern
        self.offset = offset
        kw.pop("source", None)
        super().__init__(
            f"{message} (offset {offset})\n    {pattern}\n    {' ' * offset}^", **kw  # type: ignore[arg-type]
        )
        self.message = message


class UnsupportedRegexError(RegexError):
    """A regex feature a byte automaton cannot express (back-references, lookarounds)."""

    kind = "Unsupported regex feature"


class SchemaError(PdaError, ValueError):
    """A JSON Schema that is not valid.  ``pointer`` is the JSON pointer of the offending part."""

    kind = "Invalid JSON Schema"

    def __init__(self, message: str, *, pointer: str = "") -> None:
        self.message = message
        self.pointer = pointer
        super().__init__(f"{self.kind} at '{pointer or '#'}': {message}")


class UnsupportedSchemaError(SchemaError):
    """A valid schema keyword that pda cannot enforce exactly (pass ``lenient=True`` to ignore)."""

    kind = "Unsupported JSON Schema keyword"


class ValidationError(PdaError, ValueError):
    """A text that is not a sentence (or prefix) of the grammar.

    ``offset`` is the byte offset of the first byte that cannot be matched (== len(data) when the
    text ends too early); ``line``/``column`` are 1-based and count characters; ``expected`` is the
    sorted tuple of byte values that could come at ``offset`` (empty when nothing could).
    ``pointer`` is the JSON pointer of the value being written at ``offset`` when the grammar came
    from a JSON Schema (see :mod:`pda.json_pointer`), else None; the message does not show it.
    """

    pointer: str | None = None

    def __init__(self, data: bytes, offset: int, expected: tuple[int, ...], *, incomplete: bool) -> None:
        self.data = data
        self.offset = offset
        self.expected = expected
        self.incomplete = incomplete
        text = data[:offset].decode("utf-8", errors="replace")
        self.line = text.count("\n") + 1
        self.column = len(text) - (text.rfind("\n") + 1) + 1
        reason = "text ends before the grammar is complete" if incomplete else "unexpected input"
        full = data.decode("utf-8", errors="replace")
        super().__init__(
            f"{reason} at line {self.line}, column {self.column} (byte {offset}); "
            f"expected {describe_bytes(expected)}{caret_context(full, self.line, self.column)}"
        )


def describe_bytes(values: tuple[int, ...] | list[int]) -> str:
    """Human-readable summary of a set of byte values: ``'a'-'z', '"', 0x80-0xBF``."""
    if not values:
        return "nothing (the text is complete here)"
    runs: list[tuple[int, int]] = []
    for v in sorted(values):
        if runs and runs[-1][1] == v - 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))

    def one(b: int) -> str:
        return repr(chr(b)) if 0x20 <= b < 0x7F else f"0x{b:02X}"

    parts = [one(a) if a == b else f"{one(a)}-{one(b)}" for a, b in runs]
    if len(parts) > 12:
        parts = parts[:12] + [f"... ({len(values)} bytes in all)"]
    return ", ".join(parts)


class LimitExceededError(PdaError, RuntimeError):
    """A configured limit (automaton states, stack depth, live stacks, compile time, cache bytes) was hit."""

    def __init__(self, limit: str, value: object, hint: str = "") -> None:
        self.limit = limit
        self.value = value
        super().__init__(f"limit {limit}={value} exceeded{'; ' + hint if hint else ''}")


class FsmTooLarge(LimitExceededError):
    """A code-point automaton (:mod:`pda.codepoint_fsm`) grew past its state limit.  The JSON
    Schema frontend catches it where it only probes, and otherwise reports the keyword."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__("automaton_states", limit, f"{what} too large")


class SchemaTooDeep(LimitExceededError):
    """A JSON Schema check went deeper than its limit (``$ref`` chains inlined into one check, or
    nested values).  The frontend catches it where it only probes ("not proven")."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__("schema_check_depth", limit, what)


class TokenizerError(PdaError, ValueError):
    """A tokenizer pda cannot read, or a token id outside the vocabulary."""


class BitmaskError(PdaError, ValueError):
    """A token bitmask or logits tensor of the wrong dtype, shape or device."""


class SerializationError(PdaError, ValueError):
    """Bytes that :meth:`pda.CompiledGrammar.from_bytes` cannot load: not a compiled grammar, another
    format version, corrupted or truncated (checksum), or compiled for another tokenizer."""


class ConstraintError(PdaError, ValueError):
    """A request's constraint that names no grammar, several, or an unknown or ill-typed option
    (for example vLLM's ``SamplingParams.extra_args["pda"]``)."""
