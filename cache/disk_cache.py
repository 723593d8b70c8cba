"""An on-disk cache of serialised compiled grammars: one file per key, bounded in bytes, LRU.

Each entry is ``<key>.pdacg`` in the cache directory, holding the bytes of
:func:`pda.serialize.to_bytes`.  Writes go to a temporary file in the same directory, are
flushed with ``fsync`` and then renamed over the entry (``os.replace``), so a reader sees either
the old file or the new one, never a half-written one, and several processes may write the same
key at once.  A hit sets the file's modification time to now; when the directory holds more than
``max_bytes`` of entries, the least recently used (oldest mtime) are deleted.  Entries the caller
finds unsound (corrupted, truncated, another tokenizer or format version) are dropped with
:meth:`DiskCache.discard` and rebuilt.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["DiskCache", "DEFAULT_DISK_MAX_BYTES", "SUFFIX"]

DEFAULT_DISK_MAX_BYTES = 4 << 30  # 4 GiB
SUFFIX = ".pdacg"
_TMP_PREFIX = ".tmp-"
_STALE_TMP_S = 3600.0  # clear() leaves younger temporary files alone: another process may be writing them


class DiskCache:
    """``get(key)`` -> bytes or None; ``put(key, data)``; ``info()``; ``clear()``."""

    def __init__(self, directory: str | os.PathLike[str], max_bytes: int | None = DEFAULT_DISK_MAX_BYTES) -> None:
        if max_bytes is not None and max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0 or None, got {max_bytes}")
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    def path(self, key: str) -> Path:
        if not key or not all(c.isalnum() or c in "-_" for c in key):
            raise ValueError(f"disk cache keys are letters, digits, '-' and '_', got {key!r}")
        return self.directory / (key + SUFFIX)

    def get(self, key: str) -> bytearray | None:
        """The entry's bytes (and mark it used), or None when there is none."""
        p = self.path(key)
        try:
            with open(p, "rb") as f:
                data = bytearray(os.fstat(f.fileno()).st_size)
                n = f.readinto(data)
                if n < len(data):  # shrank while read (not with os.replace): the checksum will tell
                    del data[n:]
        except OSError:  # none, or unreadable: a miss (a rebuild will try to write it)
            self.misses += 1
            return None
        try:
            os.utime(p)
        except OSError:  # evicted meanwhile, or a read-only directory: the bytes are still good
            pass
        self.hits += 1
        return data

    def put(self, key: str, data: bytes) -> None:
        """Write the entry atomically (temp file, fsync, rename), then evict past ``max_bytes``."""
        p = self.path(key)
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=SUFFIX, dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, p)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self.evict()

    def discard(self, key: str) -> None:
        """Delete an entry (an unsound one; a missing one is fine)."""
        try:
            os.unlink(self.path(key))
        except OSError:
            pass

    def entries(self) -> list[tuple[Path, int, float]]:
        """(path, bytes, mtime) of every entry, least recently used first."""
        out = []
        try:
            it = os.scandir(self.directory)
        except (FileNotFoundError, NotADirectoryError):
            return []
        with it:
            for e in it:
                if e.name.endswith(SUFFIX) and not e.name.startswith(_TMP_PREFIX):
                    try:
                        st = e.stat()
                    except OSError:
                        continue
                    out.append((Path(e.path), st.st_size, st.st_mtime))
        out.sort(key=lambda t: t[2])
        return out

    def evict(self) -> int:
        """Delete least recently used entries until the total is at most ``max_bytes``; how many."""
        if self.max_bytes is None:
            return 0
        with self._lock:
            entries = self.entries()
            total = sum(n for _, n, _ in entries)
            gone = 0
            for p, n, _ in entries:
                if total <= self.max_bytes:
                    break
                try:
                    os.unlink(p)
                except OSError:
                    continue
                total -= n
                gone += 1
            return gone

    def info(self) -> dict[str, object]:
        entries = self.entries()
        return {"directory": str(self.directory), "entries": len(entries), "bytes": sum(n for _, n, _ in entries),
                "max_bytes": self.max_bytes}

    def clear(self) -> int:
        """Delete every entry (and temporary files older than an hour); how many entries."""
        n = 0
        for p, _, _ in self.entries():
            try:
                os.unlink(p)
                n += 1
            except OSError:
                pass
        try:
            with os.scandir(self.directory) as it:
                for e in it:
                    if e.name.startswith(_TMP_PREFIX) and e.name.endswith(SUFFIX):
                        try:
                            if time.time() - e.stat().st_mtime > _STALE_TMP_S:
                                os.unlink(e.path)
                        except OSError:
                            pass
        except OSError:
            pass
        return n
