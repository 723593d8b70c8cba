"""Loading the numba kernels of mask fills (and of a JSON Schema's compile) before the first fill:
:func:`warm_up_kernels`.

Every kernel is compiled ahead into numba's on-disk cache, but a process loads each one (its
machine code, and the dispatcher's types) the first time it is called: 1-5 ms a kernel.  The token
walk on a bare frame and on a real stack, the group splits and listings, the plain runs over
blocks, the lookahead and frame keys are first called in the first mask fills, so the first masks
of a process paid 30-50 ms for them -- inside a decode step, where a serving engine's whole batch
waits (the built-in JSON grammar's first document on DeepSeek's vocabulary: mean fill 20.6 us
with the loads in its fills, 11.1 without).

:func:`warm_up_kernels` calls them all once, on a small grammar and a vocabulary of its own (the
kernels' types depend on the arrays' dtypes, not on the vocabulary), so a server calls it at start
up, beside loading its model; the vLLM integration and :func:`pda.generate` do.  It runs once per
process (later calls return at once) and leaves no state behind but the loaded kernels.
"""

from __future__ import annotations

import threading
import time
import warnings
from itertools import product

import numba

__all__ = ["warm_up_kernels"]

# JSON with two counted repeats long enough to be written as blocks (pda.normalize): a document
# visits unbounded strings (plain split), numbers and punctuation (listing walks), positions near
# a block's end (keyed groups, plain runs over the stack; frame classes where thousands of tokens of
# control bytes cross it) and closing brackets on nested stacks (real-stack walks).
_GRAMMAR = r'''
root    ::= ws value ws
value   ::= object | array | string | number | note | memo | "true" | "false" | "null"
object  ::= "{" ws ( member ( "," ws member )* )? "}"
member  ::= string ws ":" ws value ws
array   ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string  ::= "\"" char* "\""
char    ::= [^"\\\x00-\x1F] | "\\" ["\\/bfnrt]
note    ::= "'" [^"\\\x00-\x1F]{0,20000} "'"
memo    ::= "(" [\x01-\x10]{0,20000} ")"
number  ::= "-"? [0-9]+ ( "." [0-9]+ )?
ws      ::= [ \t\n]*
'''
# a JSON Schema whose compile runs the frontend's kernels: a pattern and a format are code-point
# automata (pda.codepoint_fsm, minimised by pda.dfa_kernels.minimize_partial), and the union of
# the two unanchored patterns is one automaton of their differences (a process's first such compile
# loaded them: 0.22 s, against 0.05 s for the next schema of the same shape)
_SCHEMA = {"type": "object", "properties": {
    "id": {"type": "string", "pattern": "^[a-z]+-[0-9]{2,4}$"}, "at": {"type": "string", "format": "date-time"},
    "tag": {"type": "string", "oneOf": [{"pattern": "ab"}, {"pattern": "cd"}]},
    "n": {"type": "array", "items": {"type": "integer", "minimum": 3, "maximum": 999}, "maxItems": 4}},
    "required": ["id"], "additionalProperties": False}
_CONTROL = "".join(map(chr, range(1, 17)))
_DOCUMENT = ('{"a": [1, {"b": "xyz", "c": [[2, 3.5], {}]}, "hello world"], "d": \'' + "abcdefghijklmnop " * 10
             + '\', "e": [{"f": [[[true]]]}], "g": "' + "plain text " * 4 + 'end", "h": (' + _CONTROL * 10 + ")}")
# a byte-level vocabulary with JSON's pieces, and enough words of three control bytes (4,096) that
# a block's end leaves thousands of tokens uncertain (frame classes)
_PIECES = ['", "', '": ', '"}', '"]', "}]", "]]", "}}", "},", "],", "[[", "{}", ', "', '{"', '["', "12", "3.5",
           "true", "null", "hello", " world", "plain", " text", "end", "xyz", "\\n", "\\\"", "a" * 20, "abc d"]

_done = False
_lock = threading.Lock()


def warm_up_kernels() -> float:
    """Load every kernel a mask fill calls, once per process; the seconds it took (0.0 when already
    done, or under ``NUMBA_DISABLE_JIT``, where nothing is compiled).  A warm-up that fails (a bug
    of pda's, not of the caller's) warns and leaves the kernels to load on first use: a server
    still starts."""
    global _done
    if _done or numba.config.DISABLE_JIT:
        return 0.0
    with _lock:
        if _done:
            return 0.0
        t0 = time.perf_counter()
        try:
            _run()
        except Exception as exc:  # noqa: BLE001 - an optimisation must not stop a start-up
            warnings.warn(f"pda.warm_up_kernels failed ({exc!r}); the kernels load on first use instead",
                          RuntimeWarning, stacklevel=2)
        _done = True
        return time.perf_counter() - t0


def _run() -> None:
    from .compiler import GrammarCompiler
    from .matcher import GrammarMatcher
    from .tokenizer import TokenizerInfo

    words = ["".join(w) for w in product(_CONTROL, repeat=3)]
    tokens = [bytes([b]) for b in range(256)] + [t.encode() for t in _PIECES + words]
    tok = TokenizerInfo.from_vocab_bytes(tokens + [b""], stop_token_ids=len(tokens))
    compiler = GrammarCompiler(tok, cache=False)
    GrammarMatcher(compiler.compile_json_schema(_SCHEMA)).next_token_mask()
    compiled = compiler.compile_grammar(_GRAMMAR)
    ids = _greedy_ids(tok, _DOCUMENT.encode())
    matcher = GrammarMatcher(compiled)
    for t in ids:
        matcher.next_token_mask()
        if not matcher.accept_token(t):
            raise AssertionError(f"kernel warm-up: token {t} refused")  # the document is in the grammar
    matcher.next_token_mask()


def _greedy_ids(tok, data: bytes) -> list[int]:  # type: ignore[no-untyped-def]
    """``data`` as the longest tokens of ``tok`` from left to right."""
    by_bytes = {b: i for i, b in enumerate(tok.token_bytes) if b}
    longest = max(map(len, by_bytes))
    ids, i = [], 0
    while i < len(data):
        n = min(longest, len(data) - i)
        while data[i:i + n] not in by_bytes:
            n -= 1
        ids.append(by_bytes[data[i:i + n]])
        i += n
    return ids
