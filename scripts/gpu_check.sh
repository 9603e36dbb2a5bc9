#!/usr/bin/env bash
# On a machine with a GPU and torch already installed (no network): build the extension in place
# against that torch, run the cuda-marked tests (and the rest of the suite), then the benchmarks.
# Results go to ${OUT:-gpu-results}/: build log, test log, benchmark tables (markdown + JSON).
# Carried wheels (captum) in .whl/ are installed to /tmp/site first when present.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/gpu-results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  date -u +%Y-%m-%d
} | tee "$OUT/machine.txt"
arch=$($PY -c "import torch; p=torch.cuda.get_device_properties(0); print(f'{p.major}.{p.minor}')")
if ! MAX_JOBS=${MAX_JOBS:-16} TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-$arch} \
    $PY -m pip install -v --no-deps --no-build-isolation -e . > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"; echo "BUILD FAILED"; exit 1
fi
echo "build ok"
$PY -m pytest -q -m "${PYTEST_MARK:-cuda}" -p no:cacheprovider tests 2>&1 | tee "$OUT/tests.log" | tail -25
for bench in ${BENCHMARKS:-benchmarks/ops.py benchmarks/throughput.py}; do
  name=$(basename "$bench" .py)
  [ -f "$bench" ] || continue
  timeout "${BENCH_TIMEOUT:-240}" $PY "$bench" --device cuda --json "$OUT/$name.json" 2>&1 | tee "$OUT/$name.md"
done
