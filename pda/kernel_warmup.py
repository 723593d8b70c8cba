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

With ``device`` (a CUDA device), it also runs a batch fill into a bitmask on that device, twice
(misses stored into the device pool, then hits gathered from it), with one matcher's stop tokens set,
and masks logits there: once per device, the first launches of the pool's copies, gathers and
scatters and of the masking kernel, which otherwise fall in a process's first batch step on that
device (``benchmarks/bench_batch.py --device cuda``: a p99 of 31-37 ms over the cold steps at one
matcher, where the CPU's is 0.1 ms).
"""

from __future__ import annotations

import threading
import time
import warnings
from itertools import product
from typing import TYPE_CHECKING, Callable

import numba

if TYPE_CHECKING:
    import torch

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
_devices_done: set[str] = set()  # the CUDA devices warmed up ("cuda:0", ...)
_lock = threading.Lock()


def warm_up_kernels(device: str | torch.device | None = None) -> float:
    """Load every kernel a mask fill calls, once per process, and with a CUDA ``device`` (``"cuda"``,
    ``"cuda:1"``, a :class:`torch.device`) run the launches of a batch fill and of masking logits
    on it, once per device.  Returns the seconds it took (0.0 when all of it was done already; the
    kernels are skipped under ``NUMBA_DISABLE_JIT``, where nothing is compiled).  A CPU ``device``
    needs nothing more, nor does another device type.  A warm-up that fails (a bug of pda's, not of
    the caller's) warns and leaves the work to the first fills: a server still starts.  Raises
    :class:`~pda.errors.BitmaskError` for a device torch does not know or cannot reach."""
    global _done
    gpu = _cuda_device(device) if device is not None else None
    if (_done or numba.config.DISABLE_JIT) and (gpu is None or gpu in _devices_done):
        return 0.0
    with _lock:
        t0 = time.perf_counter()
        if not _done and not numba.config.DISABLE_JIT:
            _attempt(_run, "the kernels load on first use instead")
            _done = True
        if gpu is not None and gpu not in _devices_done:
            _attempt(lambda: _run_on(gpu), f"the first batch fill on {gpu} launches them instead")
            _devices_done.add(gpu)
        return time.perf_counter() - t0


def _attempt(step: Callable[[], None], otherwise: str) -> None:
    """Run a warm-up step; a failure warns (saying what happens ``otherwise``) instead of raising."""
    try:
        step()
    except Exception as exc:  # noqa: BLE001 - an optimisation must not stop a start-up
        warnings.warn(f"pda.warm_up_kernels failed ({exc!r}); {otherwise}", RuntimeWarning, stacklevel=3)


def _cuda_device(device: str | torch.device) -> str | None:
    """``device`` as torch names a CUDA device with its index (``"cuda:0"``); None for another."""
    import torch

    from .errors import BitmaskError

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise BitmaskError(f"warm_up_kernels: {device!r} is not a torch device ({exc})") from None
    if dev.type != "cuda":  # the CPU's copies need no launch; other devices: nothing pda knows to warm
        return None
    if not torch.cuda.is_available():
        raise BitmaskError(f"warm_up_kernels: device {str(dev)!r} asked for, but torch sees no CUDA device")
    index = torch.cuda.current_device() if dev.index is None else dev.index
    if not 0 <= index < torch.cuda.device_count():
        raise BitmaskError(f"warm_up_kernels: device {str(dev)!r}, but torch sees {torch.cuda.device_count()} CUDA devices")
    return f"cuda:{index}"


def _compiler():  # type: ignore[no-untyped-def]
    """A compiler for the warm-up's own byte-level vocabulary with words."""
    from .compiler import GrammarCompiler
    from .tokenizer import TokenizerInfo

    words = ["".join(w) for w in product(_CONTROL, repeat=3)]
    tokens = [bytes([b]) for b in range(256)] + [t.encode() for t in _PIECES + words]
    tok = TokenizerInfo.from_vocab_bytes(tokens + [b""], stop_token_ids=len(tokens))
    return GrammarCompiler(tok, cache=False)


def _run_on(device: str) -> None:
    """Two batch fills of two matchers into a bitmask on ``device`` (one matcher's text complete:
    its stop tokens set), then the mask applied to logits there in the usual dtypes (each its own
    kernel); waits for the device."""
    import torch

    from .batch import BatchGrammarMatcher
    from .bitmask import allocate_token_bitmask, apply_token_bitmask_inplace
    from .matcher import GrammarMatcher

    compiler = _compiler()
    compiled = compiler.compile_grammar(_GRAMMAR)
    matchers = [GrammarMatcher(compiled), GrammarMatcher(compiled)]
    if not matchers[1].accept_string('{"a": [1, 2]}'):
        raise AssertionError("device warm-up: the document was refused")  # it is in the grammar
    vocab = compiler.tokenizer_info.vocab_size
    bitmask = allocate_token_bitmask(2, vocab, device=device)
    batch = BatchGrammarMatcher(max_threads=1)
    for _ in range(2):
        batch.batch_fill_next_token_bitmask(matchers, bitmask)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        apply_token_bitmask_inplace(torch.zeros((2, vocab), dtype=dtype, device=device), bitmask)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _run() -> None:
    from .matcher import GrammarMatcher

    compiler = _compiler()
    tok = compiler.tokenizer_info
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
