"""Jump-forward decoding with retokenisation at the boundary (as SGLang's compressed FSM does it).

Where the grammar forces text (``GrammarMatcher.find_jump_forward_string``), the decoder appends it
without sampling.  Appending the forced text's own tokens after the last sampled token would show
the model a tokenisation it never produces (``{`` then ``"name`` where the tokenizer writes ``{"``
then ``name``), so the last generated token(s) and the forced text are encoded together, the
matcher is rolled back past the old tokens, and the new ones are accepted instead:

* the window of old tokens starts at a UTF-8 character boundary (a partial UTF-8 token is re-encoded
  together with the rest of its character);
* the last new token is held back when the grammar allows a longer token that starts with its
  bytes (forced text that ends mid-token, such as ``{"name": "``, where `` "`` may go on into the
  name): the model then picks it, or a longer token that goes on past the forced text, under the
  grammar's mask at the next step (unless the tokens before it would no longer cover the text
  that was sampled);
* new tokens past the ``max_new_tokens`` budget are dropped.

Uses the matcher only through its public API (rollback, accept_token, find_jump_forward_string).
"""

from __future__ import annotations

import weakref
from bisect import bisect_left
from typing import Any

import numpy as np

from .bitmask import allocate_token_bitmask
from .matcher import GrammarMatcher
from .tokenizer import TokenizerInfo

__all__ = ["JumpForward"]

_SORTED: "weakref.WeakKeyDictionary[TokenizerInfo, tuple[list[bytes], np.ndarray]]" = weakref.WeakKeyDictionary()


def _sorted_tokens(info: TokenizerInfo) -> tuple[list[bytes], np.ndarray]:
    """The tokens' bytes in lexicographic order and their ids (built once per tokenizer): the tokens
    that extend a byte string form one range of it."""
    got = _SORTED.get(info)
    if got is None:
        ids = sorted((i for i, b in enumerate(info.token_bytes) if b), key=info.token_bytes.__getitem__)
        got = _SORTED[info] = ([info.token_bytes[i] for i in ids], np.array(ids, dtype=np.int64))
    return got


def _continuation(byte: int) -> bool:
    return 0x80 <= byte < 0xC0


class JumpForward:
    """Applies forced text to a matcher and the output token list (see the module docstring)."""

    def __init__(self, hf_tokenizer: Any, info: TokenizerInfo) -> None:
        self.tokenizer = hf_tokenizer
        self.token_bytes = info.token_bytes
        self.special = frozenset(info.special_token_ids)
        self.sorted_bytes, self.sorted_ids = _sorted_tokens(info)
        self.bitmask = allocate_token_bitmask(1, info.vocab_size)

    def extendable(self, matcher: GrammarMatcher, token: int) -> bool:
        """True when the grammar allows, in ``matcher``'s state, a token other than ``token`` that
        begins with ``token``'s bytes (so the model could go on past them in one token)."""
        data = self.token_bytes[token]
        lo = bisect_left(self.sorted_bytes, data)
        stem = data.rstrip(b"\xff")
        hi = bisect_left(self.sorted_bytes, stem[:-1] + bytes([stem[-1] + 1])) if stem else len(self.sorted_bytes)
        ids = self.sorted_ids[lo:hi]
        ids = ids[ids != token]
        if not ids.shape[0]:
            return False
        matcher.fill_next_token_bitmask(self.bitmask, 0)
        words = self.bitmask.numpy()[0]
        return bool(((words[ids >> 5].astype(np.int64) >> (ids & 31)) & 1).any())

    def encode(self, data: bytes) -> list[int] | None:
        """The tokenizer's own ids for ``data`` (whole UTF-8 text), or None when they do not spell it."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        ids = list(self.tokenizer.encode(text, add_special_tokens=False))
        n = len(self.token_bytes)
        if any(not 0 <= i < n or i in self.special for i in ids):
            return None
        if b"".join(self.token_bytes[i] for i in ids) != data:
            return None  # e.g. a SentencePiece prefix space: fall back to the forced text alone
        return ids

    def _spelled(self, ids: list[int]) -> int:
        return sum(len(self.token_bytes[t]) for t in ids)

    def _window(self, out: list[int]) -> int:
        """How many of the last output tokens to re-encode: one, more while the window would begin
        inside a UTF-8 character."""
        r = min(1, len(out))
        while r < len(out) and (not self.token_bytes[out[-r]] or _continuation(self.token_bytes[out[-r]][0])):
            r += 1
        return r

    def apply(self, matcher: GrammarMatcher, out: list[int], forced_flags: list[bool], budget: int) -> int:
        """Append the text the grammar forces now to ``out`` (and the matcher), retokenised at the
        boundary; ``forced_flags`` marks which output tokens were not sampled.  ``budget`` is the
        most tokens ``out`` may hold.  Returns the change in the number of output tokens."""
        forced = matcher.find_jump_forward_string()
        if not forced or len(out) >= budget:
            return 0
        fb = forced.encode("utf-8")
        r = self._window(out)
        window = b"".join(self.token_bytes[t] for t in out[len(out) - r:])
        ids = self.encode(window + fb)
        if ids is None and r:
            r, window = 0, b""
            ids = self.encode(fb)
        if not ids:
            return 0
        old = out[len(out) - r:]
        keep = min(len(ids), budget - (len(out) - r))
        if self._spelled(ids[:keep]) < len(window):
            return 0  # the budget would cut into the sampled text
        matcher.rollback(r)
        accepted = 0
        for t in ids[:keep]:
            if not matcher.accept_token(t):
                break
            accepted += 1
        if accepted < keep:  # the tokenizer spelled the text in tokens the matcher refuses: keep the old
            matcher.rollback(accepted)
            for t in old:
                matcher.accept_token(t)
            return 0
        new = ids[:keep]
        if new and keep == len(ids) and self._spelled(new[:-1]) >= len(window):
            matcher.rollback(1)
            if self.extendable(matcher, new[-1]):
                new = new[:-1]  # forced text ends mid-token: the model chooses the last token
            else:
                matcher.accept_token(new[-1])
        same = 0
        while same < min(len(old), len(new)) and old[same] == new[same]:
            same += 1
        flags = forced_flags[len(out) - r:][:same] + [True] * (len(new) - same)
        del out[len(out) - r:]
        del forced_flags[len(forced_flags) - r:]
        out.extend(new)
        forced_flags.extend(flags)
        return len(new) - r
