#!/usr/bin/env bash
# One GPU session for kvlab's Triton kernels: environment facts, the GPU variants of the kernel tests,
# then `kvlab bench` (the tuning sweep and/or the full grid). Logs and CSVs go to the folder named by
# the OUT environment variable (default ./gpu_out).
#
#   benchmarks/gpu_session.sh [tests] [seeds] [sweep] [quick] [prefill] [bench] [profile]  (default: tests bench)
#
# SWEEP_ARGS adds options to the sweep (e.g. "--parts decode"); SEEDS, SEED_TESTS and SEEDS_TIMEOUT
# set the seeds step (KVLAB_TEST_SEEDS, test files, time limit).
# Each step's time limit can be set with TESTS_TIMEOUT, SWEEP_TIMEOUT, BENCH_TIMEOUT (seconds); the
# benchmark CSVs are written row by row, so a step cut short keeps what it measured.
#
# Runs from a source checkout: PYTHONPATH=. makes kvlab (and kernels/ as kvlab.kernels) importable.
set -u -o pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
export PYTHONPATH=. PYTHONUNBUFFERED=1
steps=${*:-tests bench}

{
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem,driver_version --format=csv
  python3 -c "import torch, triton, numpy; print('torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__)"
  python3 -c "import kvlab.kernels as k; print('kvlab.kernels mode:', k.mode())"
  # does torch divide CUDA tensors by a Python number exactly? (the reference writer relies on it)
  python3 -c "
import torch
x = torch.rand(1 << 20, device='cuda') * 8
exact = x.cpu() / 127.0
print('cuda x / 127.0 (Python number) bits differing from the CPU division:', int((x / 127.0).cpu().ne(exact).sum()))
print('cuda x / tensor(127.0) bits differing:', int((x / torch.tensor(127.0, device='cuda')).cpu().ne(exact).sum()))"
} 2>&1 | tee "$OUT/env.log"

for step in $steps; do
  case $step in
    tests)
      # TESTS narrows the files (default: every kernel test)
      timeout "${TESTS_TIMEOUT:-100}" python3 -m pytest ${TESTS:-tests/kernels} -m gpu -q --maxfail=20 -n 8 -p no:cacheprovider \
        2>&1 | tail -40 | tee "$OUT/gpu_tests.log" ;;
    seeds)
      # the GPU tests over SEEDS (default 0-1) with every Triton compilation logged: a kernel
      # recompiled for each seed shows as distinct keys growing with the seeds (benchmarks/compile_log.py)
      rm -rf "$OUT/compiles"
      KVLAB_TEST_SEEDS=${SEEDS:-0-1} KVLAB_COMPILE_LOG="$OUT/compiles" timeout "${SEEDS_TIMEOUT:-120}" \
        python3 -m pytest -p benchmarks.compile_log ${SEED_TESTS:-tests/kernels tests/lm/test_kernel_write_path.py} \
        -m gpu -q -n 8 -p no:cacheprovider --maxfail=20 --durations=12 2>&1 | tail -40 | tee "$OUT/seeds.log"
      python3 benchmarks/compile_log.py "$OUT/compiles" | tee -a "$OUT/seeds.log"
      cat "$OUT"/compiles/*.tsv > "$OUT/compiles.tsv" 2>/dev/null; rm -rf "$OUT/compiles" ;;
    sweep)
      # candidates of kvlab/bench/sweeps.py beside the automatic choice, same run
      timeout "${SWEEP_TIMEOUT:-180}" python3 -m kvlab.bench --sweep ${SWEEP_ARGS:-} --out "$OUT" 2>&1 | tr '\r' '\n' \
        | grep -v '%|' | tee "$OUT/sweep.log" | grep '^sweep' | tail -60 ;;
    quick)
      timeout 200 python3 -m kvlab.bench --batches 1,64 --contexts 32768 \
        --schemes bfloat16,int8_per_token_head,fp8_per_token_head --out "$OUT/quick" 2>&1 \
        | tr '\r' '\n' | grep -v '%|' | tee "$OUT/quick.log" | tail -20 ;;
    prefill)
      # the two prefill cases only (every scheme, both SDPA baselines), into $OUT/prefill
      timeout "${BENCH_TIMEOUT:-120}" python3 -m kvlab.bench --parts prefill --out "$OUT/prefill" 2>&1 \
        | tr '\r' '\n' | grep -v '%|' | tee "$OUT/prefill.log" | tail -30 ;;
    bench)
      # every row beside SDPA default dispatch, SDPA flash forced and the physical floor
      timeout "${BENCH_TIMEOUT:-270}" python3 -m kvlab.bench --out "$OUT" 2>&1 | tr '\r' '\n' | grep -v '%|' \
        | tee "$OUT/bench.log" | tail -90 ;;
    profile)
      # what limits the int8 decode kernel at B=64, L=32768: one launch under Nsight Compute
      timeout 150 ncu --clock-control none -k regex:_paged_attention_kernel -c 1 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section MemoryWorkloadAnalysis python3 benchmarks/profile_decode.py int8_per_token_head 64 32768 \
        > "$OUT/ncu_int8_decode.txt" 2>&1
      grep -E "Duration|Throughput|Registers|Shared Memory Config|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|Stall|Mem Busy|Max Bandwidth|L2 Hit|Issue Slots|Executed Ipc" \
        "$OUT/ncu_int8_decode.txt" | head -60 ;;
    *) echo "unknown step $step" ;;
  esac
done
