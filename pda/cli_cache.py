"""``pda cache info`` and ``pda cache clear``: the on-disk cache of compiled grammars.

    pda cache info  [--dir PATH]     # entries, bytes, least and most recent use
    pda cache clear [--dir PATH]     # delete every entry

The directory is ``--dir`` or else the ``PDA_CACHE_DIR`` environment variable (the one a
:class:`~pda.GrammarCompiler` uses when given no ``cache_dir``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TextIO

from pda.cache.disk_cache import DiskCache
from pda.compiler import CACHE_DIR_ENV

__all__ = ["add_cache_parser", "run_cache"]


def add_cache_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``cache info`` and ``cache clear`` on the ``pda`` subcommand parsers."""
    cache = sub.add_parser("cache", help="show or clear the on-disk cache of compiled grammars",
                           description=f"The on-disk cache of compiled grammars (--dir, or ${CACHE_DIR_ENV}).")
    actions = cache.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    for name, text in (("info", "entries, bytes and last use of the cache"), ("clear", "delete every cache entry")):
        p = actions.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        p.add_argument("--dir", metavar="PATH", help=f"the cache directory (default: ${CACHE_DIR_ENV})")


def run_cache(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``pda cache <action>``; exit status 0, or 2 when no directory is named."""
    directory = args.dir or os.environ.get(CACHE_DIR_ENV)
    if not directory:
        print(f"pda: no cache directory: pass --dir PATH or set {CACHE_DIR_ENV}", file=sys.stderr)
        return 2
    disk = DiskCache(os.path.expanduser(directory), max_bytes=None)
    if args.cache_command == "clear":
        n = disk.clear()
        print(f"removed {n} entr{'y' if n == 1 else 'ies'} from {disk.directory}", file=out)
        return 0
    entries = disk.entries()
    total = sum(n for _, n, _ in entries)
    print(f"directory  {disk.directory}{'' if disk.directory.is_dir() else ' (does not exist)'}", file=out)
    print(f"entries    {len(entries)}", file=out)
    print(f"bytes      {total} ({total / 1e6:.1f} MB)", file=out)
    if entries:
        def when(t: float) -> str:
            return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))

        print(f"used       {when(entries[0][2])} (least recent) .. {when(entries[-1][2])} (most recent)", file=out)
    return 0
