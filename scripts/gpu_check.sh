#!/usr/bin/env bash
# The GPU round in one command that fits one call of the device tool (10 minutes):
#   bash scripts/gpu_check.sh [--plan] [RESULTS_DIR]      (default: ./gpu-results)
#   ROARFAST_GPU_STAGES=build,paper bash scripts/gpu_check.sh     (a subset, run in the order below)
# The round's stages (the default), correctness first so that a cut loan still answers "does it work":
#   build            the extension in place against this machine's torch, for its GPU (no network, no torch install)
#   cuda-tests       every cuda-marked test
#   memcheck         the noise kernel with a key per image (its cuda tests) under compute-sanitizer memcheck
#   racecheck        the same under racecheck
#   compiled-cells   benchmarks/gpu_round.py --parts in-a-row: cells one after another in one process, eager and
#                    compiled: the compile cost per process, the later cells' time, the recompilations
#   extract-passes   benchmarks/throughput.py --stages extract: grad, sg-sq and gb against the bare passes
#   airbench-timing  benchmarks/gpu_round.py --parts reference,timing: airbench94's published script, then
#                    roarfast's airbench on the same images and card, seconds per training and share of peak
#   paper            benchmarks/gpu_round.py --parts paper: the paper grid across loans (benchmarks/paper_loans.py),
#                    resumed from .device-data/paper-carry.tar.gz when carried, with every second left
# More stages, by name only: memcheck-ops (the op tests under memcheck), airbench-gap, grouped, bench-ops,
# cifar-real (GPU JPEG decoding against the CPU path's canvases), bench-throughput, run-e2e, retrain-cells, estimate.
# --plan (no GPU needed): every stage's command line checked by benchmarks/plan_check.py instead of run
# (imports resolve, arguments parse, the pytest selections are not empty), and what the loan must carry.
# Each stage's output is RESULTS_DIR/<stage>.log; summary.txt says each stage's status and seconds. A stage is cut
# by timeout at min(its cap, what is left of ROARFAST_GPU_BUDGET, default 540 s: the call's 600 less the packing).
# Under the device tool ($OUT set), after EVERY stage the results are packed into $OUT (at most 8 files come back):
# gpu-results.tar.gz (the logs and figures), summary.txt, gpu-round.md (the parts' tables, for RESULTS.md), and the
# paper grid's paper-carry.tar.gz (the next loan's .device-data/paper-carry.tar.gz) and paper-report.tar.gz.
# Carried wheels in .whl/ (captum) are installed to /tmp/site first.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PLAN=0
if [ "${1:-}" = "--plan" ]; then PLAN=1; shift; fi
RESULTS=${1:-$PWD/gpu-results}
mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)
BUDGET=${ROARFAST_GPU_BUDGET:-540}
STAGES=",${ROARFAST_GPU_STAGES:-build,cuda-tests,memcheck,racecheck,compiled-cells,extract-passes,airbench-timing,paper},"
wanted() { [[ "$STAGES" == *",$1,"* ]]; }
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
SUMMARY=$RESULTS/summary.txt
ROUND_OUT=$RESULTS/gpu-round
: > "$SUMMARY"
pack_results() {  # after every stage, so that a call cut later still returns what finished
  [ -n "${OUT:-}" ] && [ "$PLAN" = 0 ] || return 0
  tar -czf "$OUT/gpu-results.tar.gz.partial" --exclude='*.npy' --exclude='*.safetensors' --exclude='*.jpg' \
    --exclude='*.pt' --exclude='*.so' --exclude='paper-*.tar.gz' --exclude='paper-loans' \
    -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")" && mv "$OUT/gpu-results.tar.gz.partial" "$OUT/gpu-results.tar.gz"
  cp "$SUMMARY" "$OUT/summary.txt"
  for f in summary.md:gpu-round.md paper-carry.tar.gz:paper-carry.tar.gz paper-report.tar.gz:paper-report.tar.gz; do
    [ -f "$ROUND_OUT/${f%%:*}" ] && cp "$ROUND_OUT/${f%%:*}" "$OUT/${f##*:}"
  done
  return 0
}
trap pack_results EXIT
if [ "$PLAN" = 0 ] && ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

# stage NAME CAP_SECONDS COMMAND...: runs COMMAND with its output in RESULTS/NAME.log, cut at min(CAP, what is
# left of the budget); records status and seconds in summary.txt, then packs the results into $OUT.
# Under --plan: COMMAND checked by benchmarks/plan_check.py instead.
stage() {
  local name=$1 cap=$2; shift 2
  wanted "$name" || return 0
  if [ "$PLAN" = 1 ]; then
    local line
    if line=$($PY benchmarks/plan_check.py "$@" 2>&1); then
      echo "$name: ok, $(echo "$line" | tail -1)" | tee -a "$SUMMARY"
    else
      echo "$name: WOULD FAIL: $(echo "$line" | tail -1)" | tee -a "$SUMMARY"; FAILED=1
    fi
    return
  fi
  local left=$((BUDGET - SECONDS))
  local limit=$((cap < left ? cap : left))
  if [ "$limit" -le 5 ]; then
    echo "$name: SKIPPED (budget of ${BUDGET}s spent)" | tee -a "$SUMMARY"; return
  fi
  local start=$SECONDS
  timeout --kill-after=10 "$limit" "$@" > "$RESULTS/$name.log" 2>&1
  local rc=$?
  local status=ok
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && status="CUT after ${limit}s"
  [ "$status" = ok ] && [ "$rc" != 0 ] && status="FAILED (exit $rc)"
  echo "$name: $status, $((SECONDS - start))s" | tee -a "$SUMMARY"
  tail -3 "$RESULTS/$name.log"
  pack_results
}
FAILED=0

if [ "$PLAN" = 1 ]; then
  echo "plan: $(git rev-parse --short HEAD 2>/dev/null), stages ${STAGES//,/ }" | tee "$RESULTS/machine.txt"
  for need in .device-data/cifar10-jpeg.npz .device-data/airbench94.py .device-data/paper-carry.tar.gz; do
    [ -f "$need" ] && echo "carried: $need ($(du -h "$need" | cut -f1))" || echo "not here: $need"
  done | tee -a "$SUMMARY"
  arch=9.0
else
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
    git rev-parse HEAD 2>/dev/null
    date -u +%Y-%m-%dT%H:%M:%SZ
  } | tee "$RESULTS/machine.txt"
  arch=$($PY -c "import torch; p=torch.cuda.get_device_properties(0); print(f'{p.major}.{p.minor}')")
fi
stage build 180 env MAX_JOBS="${MAX_JOBS:-16}" TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-$arch}" \
  $PY setup.py build_ext --inplace
if [ "$PLAN" = 0 ]; then
  ls roarfast/_C*.so >/dev/null 2>&1 || { echo "BUILD FAILED: see $RESULTS/build.log" | tee -a "$SUMMARY"; exit 1; }
  if wanted build && command -v cuobjdump >/dev/null; then
    # -fmad=false stops nvcc contracting our a*b+c; the FFMA left come from IEEE division/sqrt and libm expansions,
    # which round correctly. The CPU == CUDA bit-identity itself is what the cuda tests check.
    cuobjdump -sass roarfast/_C*.so | awk '/Function :/ {f=$3} /FFMA/ {c[f]++} END {for (k in c) print c[k], k}' \
      | sort -rn > "$RESULTS/ffma.txt"
    echo "FFMA in SASS: $(awk '{s+=$1} END {print s+0}' "$RESULTS/ffma.txt") (by kernel: ffma.txt)" | tee -a "$SUMMARY"
  fi
fi
stage cuda-tests 120 $PY -m pytest -q -rfEs -m cuda -p no:cacheprovider --junitxml="$RESULTS/cuda-tests.xml" tests
# the sanitizers slow kernels ~50x: the noise kernel's per-image-key tests (small images) only
SANITIZE=(-m pytest -q -rfE -m cuda -p no:cacheprovider -k "noise_per_image_cuda" tests/test_ops_noise.py)
if [ "$PLAN" = 1 ] || command -v compute-sanitizer >/dev/null; then
  stage memcheck 90 compute-sanitizer --tool memcheck --error-exitcode 3 --target-processes all $PY "${SANITIZE[@]}"
  stage racecheck 75 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 3 \
    --target-processes all $PY "${SANITIZE[@]}"
  SMALL="not 224 and not large and not grid_stride and not uint16_boundary and not 65536 and not batch_sizes"
  stage memcheck-ops 150 compute-sanitizer --tool memcheck --error-exitcode 3 --target-processes all \
    $PY -m pytest -q -rfE -m cuda -p no:cacheprovider -k "$SMALL and not opcheck and not stream" \
    tests/test_ops_rank.py tests/test_ops_mask.py tests/test_ops_noise.py tests/test_ops_ensemble.py \
    tests/test_ops_reduce_channels.py tests/test_ops_impute.py
else
  echo "memcheck, racecheck: SKIPPED (no compute-sanitizer on PATH)" | tee -a "$SUMMARY"
fi
ROUND=(benchmarks/gpu_round.py --pack .device-data --out "$ROUND_OUT")
PACKED=1
[ -f .device-data/cifar10-jpeg.npz ] || PACKED=0
if [ "$PACKED" = 1 ] || [ "$PLAN" = 1 ]; then
  stage compiled-cells 240 $PY "${ROUND[@]}" --parts in-a-row --cells 8 --ways loop+reduce-overhead,loop+default
fi
stage extract-passes 60 $PY benchmarks/throughput.py --device cuda --quick --stages extract --model airbench \
  --methods grad,sg-sq,gb --json "$RESULTS/extract-passes.json" --md "$RESULTS/extract-passes.md"
if [ "$PACKED" = 1 ] || [ "$PLAN" = 1 ]; then
  stage airbench-timing 180 $PY "${ROUND[@]}" --parts reference,timing --reference-runs 5 --seeds 3 \
    --ways loop+reduce-overhead
  stage airbench-gap 240 $PY "${ROUND[@]}" --parts gap --seeds 5
  stage grouped 300 $PY "${ROUND[@]}" --parts grouped
  # the paper part ends its own sweeps 15 s before the stage's cut, so that it packs what the next loan needs
  left=$((BUDGET - SECONDS - 15))
  [ "$PLAN" = 1 ] && left=480
  stage paper 600 $PY "${ROUND[@]}" --parts paper --seconds "$left" \
    ${ROARFAST_GROUP_SIZE:+--group-size "$ROARFAST_GROUP_SIZE"} --sweep-args="${ROARFAST_SWEEP_ARGS:-}"
else
  for s in compiled-cells airbench-timing airbench-gap grouped paper cifar-real; do
    wanted $s && echo "$s: SKIPPED (no .device-data/cifar10-jpeg.npz: see benchmarks/cifar_gpu.py pack)" | tee -a "$SUMMARY"
  done
fi
stage bench-ops 75 $PY benchmarks/ops.py --device cuda --min-run-time 0.2 --rank-sort device,segmented \
  --json "$RESULTS/ops.json"
if [ "$PACKED" = 1 ] || [ "$PLAN" = 1 ]; then
  stage cifar-real 150 $PY benchmarks/cifar_gpu.py run --pack .device-data --out "$RESULTS/cifar" ${ROARFAST_CIFAR_ARGS:-}
fi
stage bench-throughput 100 $PY benchmarks/throughput.py --device cuda --quick --json "$RESULTS/throughput.json"
stage run-e2e 150 $PY -m roarfast.cli run --device cuda --run-dir "$RESULTS/run" --no-progress
stage retrain-cells 180 $PY benchmarks/retrain_cells.py --out "$RESULTS/cells"
stage estimate 90 $PY benchmarks/throughput.py --device cuda --estimate paper --json "$RESULTS/estimate.json"
echo "total ${SECONDS}s; results in $RESULTS" | tee -a "$SUMMARY"
exit $FAILED
