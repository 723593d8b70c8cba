"""What pda needs to know about a tokenizer: the raw bytes of every token, and a sorted token trie.

A :class:`TokenizerInfo` holds, for every token id below ``vocab_size``, the exact bytes the token
stands for in the generated text (``b""`` for special and unused ids), the special token ids (which
never match grammar text), the stop token ids, and a :attr:`~TokenizerInfo.fingerprint` that keys
compiled grammars.  Three vocabulary spellings are decoded (:class:`VocabType`):

* ``RAW`` — tokens are their bytes (tiktoken ranks, plain byte lists);
* ``BYTE_FALLBACK`` — SentencePiece: ``▁`` stands for a space and ``<0xNN>`` for the one raw byte
  ``NN``; every other piece is UTF-8 text;
* ``BYTE_LEVEL`` — the GPT-2 byte-to-unicode alphabet (``Ġ`` = space, ``Ċ`` = newline), used by
  Llama 3, Qwen, DeepSeek and most BPE tokenizers trained with ``tokenizers``.

Added tokens that are not special (chat markers such as DeepSeek's ``<｜User｜>``) are literal text:
their bytes are their content encoded as UTF-8, as the tokenizer itself produces them.

The normal tokens (not special, not empty), sorted by their bytes, form :attr:`TokenizerInfo.trie`
(:mod:`pda.token_trie`).
"""

from __future__ import annotations

import enum
import re
import warnings
from functools import cached_property
from typing import Any, Iterable, Sequence

import numpy as np
import xxhash

from pda.errors import TokenizerError
from pda.cache.compile_cache import CompileCache
from pda.token_trie import TokenTrie, build_token_trie

__all__ = ["VocabType", "TokenizerInfo", "byte_level_alphabet"]


class VocabType(enum.IntEnum):
    """How the tokenizer spells its tokens (values equal xgrammar's ``VocabType``)."""

    RAW = 0
    BYTE_FALLBACK = 1
    BYTE_LEVEL = 2


def byte_level_alphabet() -> list[str]:
    """The GPT-2 byte-to-unicode map: the character that spells byte ``b`` is entry ``b``."""
    kept = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    kept_set = set(kept)
    chars = {b: chr(b) for b in kept}
    shifted = 0
    for b in range(256):
        if b not in kept_set:
            chars[b] = chr(256 + shifted)
            shifted += 1
    return [chars[b] for b in range(256)]


_ALPHABET = byte_level_alphabet()
CLASS_CACHE_MAX_BYTES = 512 << 20  # token classes shared across grammars, per tokenizer
# str.translate table: alphabet character -> the latin-1 character of its byte; characters of
# 0..255 that are not in the alphabet go to a code point latin-1 cannot encode, so that the fast
# path fails for them and the per-character fallback decides.
_BYTE_LEVEL_TABLE: dict[int, int] = {c: 0x110000 - 1 for c in range(256)}
_BYTE_LEVEL_TABLE.update({ord(ch): b for b, ch in enumerate(_ALPHABET)})
_BYTE_LEVEL_CHARS = {ch: b for b, ch in enumerate(_ALPHABET)}
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
# Names of end tokens, tried in this order when a tokenizer does not say which token ends a text.
_STOP_NAMES = ("<|eot_id|>", "<|im_end|>", "<|endoftext|>", "<｜end▁of▁sentence｜>", "</s>", "<|end|>", "<eos>")


def _decode_byte_level(text: str) -> bytes:
    """Bytes of a token spelt in the GPT-2 alphabet; characters outside it are taken as UTF-8."""
    try:
        return text.translate(_BYTE_LEVEL_TABLE).encode("latin-1")
    except UnicodeEncodeError:
        out = bytearray()
        for ch in text:
            b = _BYTE_LEVEL_CHARS.get(ch)
            out += ch.encode("utf-8") if b is None else bytes((b,))
        return bytes(out)


def _decode_byte_fallback(text: str) -> bytes:
    """Bytes of a SentencePiece piece: ``<0xNN>`` is one raw byte, ``▁`` is a space."""
    m = _BYTE_PIECE.fullmatch(text)
    if m is not None:
        return bytes((int(m.group(1), 16),))
    return text.replace("\u2581", " ").encode("utf-8")


def _decode_token(token: bytes | str | None, vocab_type: VocabType, index: int) -> bytes:
    """Raw bytes of one encoded token of ``vocab_type`` (``None`` and ``""`` give ``b""``)."""
    if token is None:
        return b""
    if vocab_type is VocabType.RAW:
        if isinstance(token, (bytes, bytearray)):
            return bytes(token)
        if isinstance(token, str):
            return token.encode("utf-8")
    else:
        if isinstance(token, (bytes, bytearray)):
            try:
                token = bytes(token).decode("utf-8")
            except UnicodeDecodeError as e:
                raise TokenizerError(
                    f"token {index} is not UTF-8 ({bytes(token)!r}); a {vocab_type.name} vocabulary "
                    "spells tokens as text: pass vocab_type=VocabType.RAW for raw byte tokens"
                ) from e
        if isinstance(token, str):
            if vocab_type is VocabType.BYTE_LEVEL:
                return _decode_byte_level(token)
            return _decode_byte_fallback(token)
    raise TokenizerError(f"token {index} is a {type(token).__name__}; expected bytes or str")


def _as_vocab_type(value: VocabType | int | str) -> VocabType:
    """``value`` (a VocabType, its int value or its name) as a VocabType; TokenizerError otherwise."""
    try:
        if isinstance(value, str):
            return VocabType[value.upper()]
        return VocabType(value)
    except (KeyError, ValueError) as e:
        names = ", ".join(t.name for t in VocabType)
        raise TokenizerError(f"unknown vocab_type {value!r}; expected a VocabType ({names})") from e


def _id_list(value: int | Iterable[int] | None, what: str) -> list[int]:
    """``value`` as a list of ints (an int is a one-element list); TokenizerError when it is not."""
    if value is None:
        return []
    items = [value] if isinstance(value, (int, np.integer)) else list(value)
    out = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TokenizerError(f"{what} must be token ids (ints), got {v!r}")
        out.append(int(v))
    return list(dict.fromkeys(out))


def _check_ids(ids: list[int], vocab_size: int, what: str) -> None:
    """Raise TokenizerError when an id lies outside ``[0, vocab_size)``."""
    bad = [i for i in ids if not 0 <= i < vocab_size]
    if bad:
        raise TokenizerError(
            f"{what} {bad[:5]} out of range for vocab_size={vocab_size} (ids must be in [0, {vocab_size}))"
        )


class TokenizerInfo:
    """The raw bytes, special tokens and stop tokens of a vocabulary; immutable once built.

    ``encoded_vocab[i]`` is token ``i`` spelt as the tokenizer spells it (see :class:`VocabType`);
    ``""``/``None`` marks an unused id.  ``vocab_size`` is the model's vocabulary size — the width of
    the token mask — and defaults to ``len(encoded_vocab)``; ids beyond the encoded vocabulary are
    never allowed; a smaller ``vocab_size`` drops the ids beyond it.  ``special_token_ids`` never match
    grammar text; stop tokens are special too.  ``add_prefix_space`` records that the tokenizer
    prepends a space when it encodes a text (SentencePiece); it does not change any token's bytes.
    """

    def __init__(
        self,
        encoded_vocab: Sequence[bytes | str],
        vocab_type: VocabType | int | str = VocabType.RAW,
        *,
        vocab_size: int | None = None,
        stop_token_ids: int | Iterable[int] | None = None,
        special_token_ids: Iterable[int] | None = None,
        add_prefix_space: bool = False,
    ) -> None:
        vocab_type = _as_vocab_type(vocab_type)
        decoded = [_decode_token(t, vocab_type, i) for i, t in enumerate(encoded_vocab)]
        self._setup(decoded, vocab_type, vocab_size, _id_list(special_token_ids, "special_token_ids"),
                    _id_list(stop_token_ids, "stop_token_ids"), add_prefix_space)

    def _setup(
        self,
        token_bytes: list[bytes],
        vocab_type: VocabType,
        vocab_size: int | None,
        specials: list[int],
        stops: list[int],
        add_prefix_space: bool,
    ) -> None:
        """Fill the fields from decoded token bytes (shared by every constructor)."""
        if vocab_size is None:
            vocab_size = len(token_bytes)
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) or vocab_size <= 0:
            raise TokenizerError(f"vocab_size must be a positive int, got {vocab_size!r}")
        vocab_size = int(vocab_size)
        if vocab_size < len(token_bytes):
            token_bytes = token_bytes[:vocab_size]
        else:
            token_bytes = token_bytes + [b""] * (vocab_size - len(token_bytes))
        _check_ids(specials, vocab_size, "special_token_ids")
        _check_ids(stops, vocab_size, "stop_token_ids")
        special_set = set(specials) | set(stops)
        for i in special_set:
            token_bytes[i] = b""
        self._token_bytes = token_bytes
        self._vocab_type = vocab_type
        self._vocab_size = vocab_size
        self._special = tuple(sorted(special_set))
        self._stops = tuple(stops)
        self._add_prefix_space = bool(add_prefix_space)

    # ----------------------------------------------------------------------------- constructors

    @classmethod
    def from_vocab_bytes(
        cls,
        tokens: Sequence[bytes],
        *,
        stop_token_ids: int | Iterable[int] | None = None,
        special_token_ids: Iterable[int] | None = None,
        vocab_size: int | None = None,
    ) -> TokenizerInfo:
        """A tokenizer from a plain list of token bytes (``tokens[i]`` is token ``i``; ``b""`` unused)."""
        return cls(tokens, VocabType.RAW, vocab_size=vocab_size, stop_token_ids=stop_token_ids,
                   special_token_ids=special_token_ids)

    @classmethod
    def from_huggingface(
        cls,
        tokenizer: Any,
        *,
        vocab_size: int | None = None,
        stop_token_ids: int | Iterable[int] | None = None,
        vocab_type: VocabType | int | str | None = None,
    ) -> TokenizerInfo:
        """Read a Hugging Face tokenizer (fast or slow/SentencePiece).

        The vocabulary type is detected from the backend's decoder and pre-tokenizer (fast
        tokenizers), ``sp_model`` (SentencePiece tokenizers) or, failing those, the vocabulary itself;
        ``vocab_type`` overrides it.  Special tokens are ``all_special_ids`` plus the added tokens
        marked special (and SentencePiece control/unknown pieces).  Stop tokens are
        ``stop_token_ids`` when given (an int or a list, e.g. a ``generation_config.eos_token_id``),
        else ``eos_token_id``.  ``vocab_size`` is the model's embedding size when it differs from
        ``len(tokenizer)``.
        """
        return cls._from_hf(tokenizer, vocab_size, stop_token_ids, vocab_type)

    @classmethod
    def _from_hf(
        cls,
        tokenizer: Any,
        vocab_size: int | None,
        stop_token_ids: int | Iterable[int] | None,
        vocab_type: VocabType | int | str | None,
    ) -> TokenizerInfo:
        """Implementation of :meth:`from_huggingface`."""
        get_vocab = getattr(tokenizer, "get_vocab", None)
        if get_vocab is None:
            raise TokenizerError(
                f"cannot read a {type(tokenizer).__name__}: expected a Hugging Face tokenizer with "
                "get_vocab(); for a plain list of token bytes use TokenizerInfo.from_vocab_bytes"
            )
        vocab: dict[Any, int] = dict(get_vocab())
        if not vocab:
            raise TokenizerError(f"the {type(tokenizer).__name__} has an empty vocabulary")
        try:
            n_tok = max(len(tokenizer), max(vocab.values()) + 1)
        except TypeError:
            n_tok = max(vocab.values()) + 1
        added: dict[int, Any] = dict(getattr(tokenizer, "added_tokens_decoder", None) or {})
        sp_model = _sp_model_of(tokenizer)

        specials = set(_id_list(getattr(tokenizer, "all_special_ids", None) or [], "all_special_ids"))
        specials |= {int(i) for i, tok in added.items() if getattr(tok, "special", False)}
        if sp_model is not None:
            for i in range(sp_model.get_piece_size()):
                if sp_model.is_control(i) or sp_model.is_unknown(i) or sp_model.is_unused(i):
                    specials.add(i)

        if vocab_type is None:
            vocab_type = _detect_vocab_type(tokenizer, vocab, sp_model)
        vocab_type = _as_vocab_type(vocab_type)

        encoded: list[Any] = [None] * n_tok
        for tok, i in vocab.items():
            if 0 <= i < n_tok:
                encoded[i] = tok
        token_bytes = [_decode_token(t, vocab_type, i) for i, t in enumerate(encoded)]
        for i, tok in added.items():
            if 0 <= i < n_tok and i not in specials:
                token_bytes[i] = str(getattr(tok, "content", tok)).encode("utf-8")

        explicit = stop_token_ids is not None
        stops = _id_list(stop_token_ids, "stop_token_ids")
        if not explicit:
            stops = _default_stops(tokenizer, vocab, sp_model)
        size = n_tok if vocab_size is None else vocab_size
        if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size <= 0:
            raise TokenizerError(f"vocab_size must be a positive int, got {vocab_size!r}")
        if not explicit:
            stops = [s for s in stops if 0 <= s < size]
        specials_list = sorted(s for s in specials if 0 <= s < size)
        info = cls.__new__(cls)
        info._setup(token_bytes, vocab_type, int(size), specials_list, stops,
                    _detect_add_prefix_space(tokenizer, vocab_type))
        return info

    # ------------------------------------------------------------------------------ properties

    @property
    def vocab_size(self) -> int:
        """The model's vocabulary size: the width of a token mask."""
        return self._vocab_size

    @property
    def vocab_type(self) -> VocabType:
        """How the source tokenizer spelt its tokens."""
        return self._vocab_type

    @property
    def add_prefix_space(self) -> bool:
        """Whether the tokenizer prepends a space to a text it encodes (SentencePiece)."""
        return self._add_prefix_space

    @property
    def token_bytes(self) -> list[bytes]:
        """Raw bytes of every token id (``b""`` for special and unused ids).  Shared: do not modify."""
        return self._token_bytes

    @property
    def special_token_ids(self) -> tuple[int, ...]:
        """Sorted ids of the special tokens (stop tokens included); they never match grammar text."""
        return self._special

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        """Ids of the tokens that end generation."""
        return self._stops

    def decode(self, token_ids: Iterable[int]) -> bytes:
        """The bytes a sequence of token ids stands for (special tokens give nothing)."""
        out = []
        for t in token_ids:
            if not 0 <= t < self._vocab_size:
                raise TokenizerError(f"token id {t} out of range for vocab_size={self._vocab_size}")
            out.append(self._token_bytes[t])
        return b"".join(out)

    @cached_property
    def fingerprint(self) -> str:
        """Stable hex digest (xxh3-128) of everything a compiled grammar depends on."""
        h = xxhash.xxh3_128()
        h.update(f"pda-tokenizer-v1|{self._vocab_type.name}|{self._vocab_size}|".encode())
        h.update(np.fromiter(map(len, self._token_bytes), dtype="<i4", count=self._vocab_size).tobytes())
        h.update(b"".join(self._token_bytes))
        h.update(np.asarray(self._special, dtype="<i4").tobytes())
        h.update(b"|")
        h.update(np.asarray(self._stops, dtype="<i4").tobytes())
        return h.hexdigest()

    @cached_property
    def class_cache(self) -> CompileCache[Any]:
        """Token classes of grammar regions keyed by their fingerprint, shared by every grammar
        compiled for this tokenizer (see :mod:`pda.precompute`); thread-safe, bounded in bytes."""
        return CompileCache(CLASS_CACHE_MAX_BYTES)

    @cached_property
    def trie(self) -> TokenTrie:
        """The normal tokens (not special, not empty) sorted by bytes; built once, on first use."""
        return build_token_trie(self._token_bytes)

    def __repr__(self) -> str:
        return (
            f"TokenizerInfo(vocab_size={self._vocab_size}, vocab_type={self._vocab_type.name}, "
            f"special={len(self._special)}, stop_token_ids={list(self._stops)})"
        )


# --------------------------------------------------------------------------- Hugging Face helpers


def _sp_model_of(tokenizer: Any) -> Any | None:
    """The SentencePieceProcessor behind a slow tokenizer, or None."""
    for holder in (tokenizer, getattr(tokenizer, "tokenizer", None)):
        sp = getattr(holder, "sp_model", None)
        if sp is not None and hasattr(sp, "is_control") and hasattr(sp, "get_piece_size"):
            return sp
    return None


def _component_json(backend: Any, name: str) -> str:
    """JSON text of one part (decoder, pre_tokenizer, normalizer) of a ``tokenizers.Tokenizer``."""
    part = getattr(backend, name, None)
    if part is None:
        return ""
    try:
        state = part.__getstate__()
    except (AttributeError, TypeError, ValueError):
        return type(part).__name__
    return state.decode("utf-8", "replace") if isinstance(state, (bytes, bytearray)) else str(state)


def _vocab_evidence(vocab: dict[Any, int]) -> VocabType | None:
    """The vocabulary type the tokens themselves prove, or None when they prove nothing."""
    if any(isinstance(k, (bytes, bytearray)) for k in vocab):
        return VocabType.RAW
    if sum(f"<0x{b:02X}>" in vocab for b in range(256)) >= 128:
        return VocabType.BYTE_FALLBACK
    if sum(ch in vocab for ch in _ALPHABET) >= 128 and "\u0120" in vocab:  # "Ġ" is a space
        return VocabType.BYTE_LEVEL
    return None


def _detect_vocab_type(tokenizer: Any, vocab: dict[Any, int], sp_model: Any | None) -> VocabType:
    """Vocabulary type of a Hugging Face tokenizer: backend description first, then the tokens."""
    evidence = _vocab_evidence(vocab)
    if sp_model is not None:
        return VocabType.BYTE_FALLBACK
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        desc = " ".join(_component_json(backend, n) for n in ("decoder", "pre_tokenizer"))
        model = getattr(backend, "model", None)
        found: VocabType | None = None
        if "ByteLevel" in desc:
            found = VocabType.BYTE_LEVEL
        elif "ByteFallback" in desc or getattr(model, "byte_fallback", False) or "Metaspace" in desc or "\u2581" in desc:
            found = VocabType.BYTE_FALLBACK
        # The serialised backend may be rebuilt and lose its decoder; tokens that prove their
        # spelling win over a description that contradicts them.
        if found is not None and (evidence is None or evidence == found):
            return found
    if evidence is not None:
        return evidence
    if sum("\u2581" in k for k in vocab if isinstance(k, str)) > len(vocab) // 10:
        return VocabType.BYTE_FALLBACK
    return VocabType.RAW


def _detect_add_prefix_space(tokenizer: Any, vocab_type: VocabType) -> bool:
    """Whether encoding ``"a"`` yields a first token that starts with a space."""
    if vocab_type is VocabType.RAW:
        return False
    try:
        ids = tokenizer.encode("a", add_special_tokens=False)
        tokens = tokenizer.convert_ids_to_tokens(ids)
    except (AttributeError, TypeError, ValueError, KeyError):
        return False
    if not tokens or not isinstance(tokens[0], str):
        return False
    return tokens[0].startswith("\u2581" if vocab_type is VocabType.BYTE_FALLBACK else "\u0120")


def _default_stops(tokenizer: Any, vocab: dict[Any, int], sp_model: Any | None) -> list[int]:
    """``eos_token_id`` (an int or a list), else SentencePiece's eos, else a token named like an end."""
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is not None:
        return _id_list(eos, "eos_token_id")
    if sp_model is not None and sp_model.eos_id() >= 0:
        return [int(sp_model.eos_id())]
    for name in _STOP_NAMES:
        if name in vocab:
            return [vocab[name]]
    warnings.warn(
        f"{type(tokenizer).__name__} names no eos token: no stop token is known; pass stop_token_ids=",
        stacklevel=4,
    )
    return []
