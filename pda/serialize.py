"""The on-disk format of a :class:`~pda.compiler.CompiledGrammar` (``compiled`` below): a header, JSON, raw numpy arrays.

Layout (all integers little-endian)::

    magic    8 bytes   b"PDACG\\x00\\r\\n"
    version  u32       FORMAT_VERSION
    reserved u32       0
    size     u64       length of everything after the 40-byte header (JSON + arrays)
    checksum 16 bytes  xxh3-128 of everything after the header
    meta     JSON      {"tokenizer": fingerprint, "arrays": [[name, dtype, shape, offset], ...], ...}
    arrays   raw bytes, each at a 16-byte aligned offset from the end of the JSON

No pickle anywhere: arrays are read back with ``np.frombuffer`` from their declared dtype (only the
plain numeric dtypes of :data:`_DTYPES`) and shape.  :func:`from_bytes` raises
:class:`~pda.errors.SerializationError` for bytes that are not a pda grammar, another format
version, a bad checksum (flipped or missing bytes) or another tokenizer.

:func:`grammar_arrays` is the one place that lists what a compiled grammar is made of (automaton
arrays, grammar metadata, the token classes computed so far); :func:`from_bytes` rebuilds from
exactly that.  Change both together and bump :data:`FORMAT_VERSION`.
"""

from __future__ import annotations

import json
import struct
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import xxhash

from .automaton import Automaton
from .errors import SerializationError
from .precompute import TokenClasses
from .state_classes import StateClasses

if TYPE_CHECKING:
    from .tokenizer import TokenizerInfo

__all__ = ["FORMAT_VERSION", "MAGIC", "Restored", "to_bytes", "from_bytes", "grammar_arrays", "read_header", "add_classes",
           "classes_of"]

MAGIC = b"PDACG\x00\r\n"
FORMAT_VERSION = 1
_HEADER = struct.Struct("<8sIIQ16s")  # magic, version, reserved, size, checksum
_ALIGN = 16
_DTYPES = {"<i4", "<i8", "|u1", "|b1", "<u4"}
_AUTOMATON_FIELDS = ("byte_class", "trans", "call_ptr", "call_rule", "call_return", "rule_start", "is_end",
                     "state_rule", "has_bytes", "simple", "push_rank")
_OTHER_FIELDS = ("text_ebnf", "text_ebnf_normalized", "cls_state", "cls_bits_row", "cls_ids_ptr", "cls_ids", "cls_bits",
                 "cls_unc_ptr", "cls_unc")


def grammar_arrays(compiled: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(JSON metadata, named arrays): everything :func:`from_bytes` needs to rebuild ``compiled``.

    Token classes: the states computed so far, as ``cls_state``; per state either a sorted id list
    (``cls_ids``, CSR by ``cls_ids_ptr``) or a bitmask row (a row of ``cls_bits``; ``cls_bits_row``
    is -1 for id lists), and its uncertain trie indices (``cls_unc``, CSR by ``cls_unc_ptr``).
    """
    g = compiled.grammar
    aut = g.automaton
    meta: dict[str, Any] = {
        "tokenizer": compiled.tokenizer_info.fingerprint,
        "vocab_size": compiled.tokenizer_info.vocab_size,
        "rule_names": aut.rule_names,
        "start": g.start,
        "json_pointers": bool(g.json_pointers),
        "max_stack_depth": g.max_stack_depth,
        "compile_seconds": compiled.compile_seconds,
    }
    arrays = {name: getattr(aut, name) for name in _AUTOMATON_FIELDS}
    # the grammar's texts as UTF-8 bytes, decoded only when asked for (JSON parsing them costs milliseconds)
    arrays["text_ebnf"] = np.frombuffer(g.to_ebnf().encode(), dtype=np.uint8)
    arrays["text_ebnf_normalized"] = np.frombuffer(g.to_ebnf(normalized=True).encode(), dtype=np.uint8)
    with compiled.classes._lock:
        done = sorted(compiled.classes.by_state.items())
    words = compiled.classes.words
    ids = [c.accepted_ids for _, c in done if c.accepted_ids is not None]
    bits = [c.accepted_bits for _, c in done if c.accepted_bits is not None]
    row = np.full(len(done), -1, dtype=np.int32)
    k = 0
    for i, (_, c) in enumerate(done):
        if c.accepted_bits is not None:
            row[i] = k
            k += 1
    arrays["cls_state"] = np.array([s for s, _ in done], dtype=np.int32)
    arrays["cls_bits_row"] = row
    arrays["cls_ids_ptr"] = _ptr([a.shape[0] if a is not None else 0 for a in (c.accepted_ids for _, c in done)])
    arrays["cls_ids"] = np.concatenate(ids).astype(np.int32) if ids else np.zeros(0, np.int32)
    arrays["cls_bits"] = np.stack(bits).astype(np.int32) if bits else np.zeros((0, words), np.int32)
    arrays["cls_unc_ptr"] = _ptr([c.uncertain.shape[0] for _, c in done])
    arrays["cls_unc"] = np.concatenate([c.uncertain for _, c in done]).astype(np.int32) if done else np.zeros(0, np.int32)
    return meta, arrays


def to_bytes(compiled: Any) -> bytes:
    """The bytes of ``compiled`` in the format described in the module docstring."""
    meta, arrays = grammar_arrays(compiled)
    index = []
    blobs = []
    offset = 0
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        a = a.astype(a.dtype.newbyteorder("<")) if a.dtype.byteorder == ">" else a
        index.append([name, a.dtype.str, list(a.shape), offset])
        blob = a.tobytes()
        pad = -len(blob) % _ALIGN
        blobs.append(blob + b"\x00" * pad)
        offset += len(blob) + pad
    meta["arrays"] = index
    text = json.dumps(meta, separators=(",", ":")).encode()
    text += b" " * (-len(text) % _ALIGN)
    body = struct.pack("<Q", len(text)) + text + b"".join(blobs)
    return _HEADER.pack(MAGIC, FORMAT_VERSION, 0, len(body), xxhash.xxh3_128_digest(body)) + body


def read_header(data: bytes | bytearray | memoryview) -> tuple[dict[str, Any], memoryview]:
    """(metadata, the arrays' bytes) of checked bytes; :class:`SerializationError` when they are not sound."""
    view = memoryview(data)
    if len(view) < _HEADER.size:
        raise SerializationError(f"not a pda compiled grammar: {len(view)} bytes, shorter than the header")
    magic, version, _, size, digest = _HEADER.unpack_from(view)
    if magic != MAGIC:
        raise SerializationError("not a pda compiled grammar (bad magic bytes)")
    if version != FORMAT_VERSION:
        raise SerializationError(f"compiled grammar format version {version}; this pda reads version "
                                 f"{FORMAT_VERSION} (compile the grammar again)")
    body = view[_HEADER.size:]
    if len(body) != size:
        raise SerializationError(f"compiled grammar truncated or padded: {len(body)} bytes after the header, "
                                 f"expected {size}")
    if xxhash.xxh3_128_digest(body) != digest:
        raise SerializationError("compiled grammar checksum mismatch: the bytes are corrupted")
    (n,) = struct.unpack_from("<Q", body)
    try:
        meta = json.loads(bytes(body[8:8 + n]))
    except ValueError as exc:  # checksummed, so only a writer bug lands here
        raise SerializationError(f"compiled grammar metadata is not JSON: {exc}") from None
    return meta, body[8 + n:]


class Restored(NamedTuple):
    """What :func:`from_bytes` reads back; :meth:`pda.CompiledGrammar.from_bytes` assembles it."""

    automaton: Automaton
    grammar: dict[str, Any]  # the keyword arguments of Grammar._restored
    classes: TokenClasses
    compile_seconds: float


def from_bytes(data: bytes | bytearray | memoryview, tokenizer_info: TokenizerInfo) -> Restored:
    """The parts of the compiled grammar that :func:`to_bytes` wrote, for ``tokenizer_info`` (which
    must be the tokenizer it was compiled for: same fingerprint).  The arrays are views into
    ``data`` when it is writable (a ``bytearray``), else into one copy of it."""
    if memoryview(data).readonly:
        data = bytearray(data)  # one copy: the arrays below are views into it
    meta, raw = read_header(data)
    if meta.get("tokenizer") != tokenizer_info.fingerprint:
        raise SerializationError(f"compiled grammar was made for another tokenizer (fingerprint "
                                 f"{str(meta.get('tokenizer'))[:12]}..., this one {tokenizer_info.fingerprint[:12]}...)")
    arrays = _arrays(meta, raw)
    aut = Automaton(list(meta["rule_names"]), **{name: arrays[name] for name in _AUTOMATON_FIELDS})
    fields = {"start": meta["start"], "ebnf": arrays["text_ebnf"].tobytes(),
              "ebnf_normalized": arrays["text_ebnf_normalized"].tobytes(),
              "max_stack_depth": int(meta["max_stack_depth"]), "json_pointers": bool(meta["json_pointers"])}
    classes = TokenClasses(aut, tokenizer_info)
    if classes.words != arrays["cls_bits"].shape[1]:
        raise SerializationError("compiled grammar token classes do not fit this tokenizer's vocabulary")
    add_classes(classes, arrays)
    return Restored(aut, fields, classes, float(meta.get("compile_seconds", 0.0)))


def add_classes(classes: TokenClasses, arrays: dict[str, np.ndarray]) -> int:
    """Put the serialised token classes of ``arrays`` into ``classes`` where it has none yet; how many."""
    st, row, ip, ids, bits, up, unc = (arrays[k] for k in ("cls_state", "cls_bits_row", "cls_ids_ptr", "cls_ids",
                                                           "cls_bits", "cls_unc_ptr", "cls_unc"))
    added = 0
    with classes._lock:
        have = classes.by_state
        for i, s in enumerate(st.tolist()):
            if s in have:
                continue
            r = int(row[i])
            cls = (StateClasses(None, bits[r], unc[up[i]:up[i + 1]]) if r >= 0
                   else StateClasses(ids[ip[i]:ip[i + 1]], None, unc[up[i]:up[i + 1]]))
            have[s] = cls
            added += 1
    return added


def classes_of(data: bytes | bytearray | memoryview, tokenizer_fingerprint: str) -> dict[str, np.ndarray] | None:
    """The arrays of serialised bytes when they are sound and for this tokenizer, else None."""
    try:
        meta, raw = read_header(data)
        if meta.get("tokenizer") != tokenizer_fingerprint:
            return None
        return _arrays(meta, raw)
    except SerializationError:
        return None


def _arrays(meta: dict[str, Any], raw: memoryview) -> dict[str, np.ndarray]:
    out = {}
    try:
        for name, dtype, shape, offset in meta["arrays"]:
            if dtype not in _DTYPES:
                raise SerializationError(f"compiled grammar array {name!r} has dtype {dtype!r}, not a plain number")
            count = int(np.prod(shape, dtype=np.int64))
            dt = np.dtype(dtype)
            if offset < 0 or offset + count * dt.itemsize > len(raw):
                raise SerializationError(f"compiled grammar array {name!r} runs past the end of the data")
            a = np.frombuffer(raw, dtype=dt, count=count, offset=offset).reshape(shape)
            # the numba kernels want aligned, writable arrays (else they compile another specialisation)
            out[name] = a if a.flags.aligned and a.flags.writeable else a.copy()
    except (KeyError, TypeError, ValueError) as exc:
        raise SerializationError(f"compiled grammar metadata is malformed: {exc}") from None
    missing = [n for n in (*_AUTOMATON_FIELDS, *_OTHER_FIELDS) if n not in out]
    if missing:
        raise SerializationError(f"compiled grammar lacks the arrays {', '.join(missing)}")
    return out


def _ptr(counts: list[int]) -> np.ndarray:
    p = np.zeros(len(counts) + 1, dtype=np.int64)
    p[1:] = np.cumsum(counts)
    return p
