# make demo   constrained generation (JSON, SQL) with a random model cached in .cache/, then validate the samples
# make test   run the whole test suite
# make bench  validation throughput, pda beside xgrammar
# Each creates .venv and installs the package (editable) with the pinned constraints when needed.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt
STAMP  := $(VENV)/.installed

.PHONY: demo test bench clean-venv

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -e '.[test]'
	$(PIP) --no-deps xgrammar apache-tvm-ffi
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m pda demo

test: $(STAMP)
	$(PY) -m pytest

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

# make bench-generate  generation: target forward passes and tokens/s with and without jump-forward and
# speculation over jsonschemabench (CORPORA/jsonschemabench) and the bundled grammars, plus the guarantee
# check (every complete output accepted; schema outputs valid under jsonschema); plot in benchmarks/results
CORPORA ?= ../shared/corpora
.PHONY: bench-generate
bench-generate: $(STAMP)
	$(PY) -c "import matplotlib" 2>/dev/null || $(PIP) -e '.[bench]'
	$(PY) benchmarks/bench_generate.py $(CORPORA)
