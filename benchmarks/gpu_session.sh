#!/usr/bin/env bash
# One GPU session for kvlab's Triton kernels: environment facts, the GPU variants of the kernel tests,
# then `kvlab bench` (the tuning sweep and/or the full grid). Logs and CSVs go to the folder named by
# the OUT environment variable (default ./gpu_out).
#
#   benchmarks/gpu_session.sh [tests] [seeds] [sweep] [quick] [prefill] [bench] [profile] [placement]  (default: tests bench)
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
      # one launch of each PROFILE_CASES entry (scheme:batch:context:query_len) under Nsight Compute,
      # clocks left alone: stall reasons, instruction mix, memory tables, source counters, shared-memory
      # bank conflicts; text into $OUT/ncu_<scheme>_B<b>_L<l>_q<q>.txt (details, then raw metrics)
      inst=""; ncu --help 2>&1 | grep -q -- --print-metric-instances && inst="--print-metric-instances values"
      for c in ${PROFILE_CASES:-int8_per_token_head:64:32768:1 int8_per_token_head:1:32768:1 bfloat16:64:32768:1 int8_per_token_head:1:8192:2048}; do
        IFS=: read -r sch b l q <<<"$c"; name="ncu_${sch}_B${b}_L${l}_q${q}"
        timeout "${PROFILE_TIMEOUT:-60}" ncu --clock-control none -k regex:paged_attention_kernel -c 1 \
          --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
          --section InstructionStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
          --section SourceCounters --section ComputeWorkloadAnalysis \
          --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum \
          -f -o "/tmp/$name" python3 benchmarks/profile_attention.py "$sch" "$b" "$l" "$q" > "/tmp/$name.log" 2>&1
        { tail -5 "/tmp/$name.log"; ncu -i "/tmp/$name.ncu-rep" --page details --print-details all
          ncu -i "/tmp/$name.ncu-rep" --page raw $inst; } > "$OUT/$name.txt" 2>&1
        echo "== $name"; grep -E "Duration|DRAM Throughput|Achieved Occupancy|Warp Cycles Per Issued|Executed Ipc A|bank_conflicts" \
          "$OUT/$name.txt" | head -12
      done ;;
    placement)
      # the int8 B=64, L=32768 row: does the placement of the K and V codes change its time?
      timeout "${PLACEMENT_TIMEOUT:-120}" python3 benchmarks/placement_check.py "$OUT" 2>&1 | tr '\r' '\n' \
        | grep -v '%|' | tee "$OUT/placement.log" | tail -20 ;;
    *) echo "unknown step $step" ;;
  esac
done
