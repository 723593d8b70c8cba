# make demo   validate every bundled sample against its bundled grammar
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

# make bench-batch  batch mask fills (1, 8, 32, 128 matchers) with pda.BatchGrammarMatcher, beside a
# one-by-one loop and xgrammar's BatchGrammarMatcher; writes benchmarks/results/batch.json
.PHONY: bench-batch
bench-batch: $(STAMP)
	$(PY) benchmarks/bench_batch.py $(BENCH_BATCH_ARGS)
