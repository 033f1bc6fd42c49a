#!/usr/bin/env bash
# One device call: the low-bit GPU tests, Nsight Compute on one launch of the low-bit decode kernel
# per case, lowbit_bench.py rows, and the same bench on a baseline tree. Writes under $OUT (at most
# 8 files come back: the profiles go as one tarball). Each step is time-boxed and a failing step does
# not stop the next.
#   OUT=/tmp/o PROFILES="int4_b64 kivi2_b64 int4_b1" BENCH_ARGS="--case decode64 --candidate" \
#   BASE=../baseline_tree bash benchmarks/lowbit_gpu_profile.sh [tests] [profiles] [bench] [base]
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/lowbit_out}
W=/tmp/lowbit_ncu/ncu  # outside $OUT: only the tarball (refreshed after every profile) goes back
mkdir -p "$W"
STEPS=${*:-"tests profiles bench"}
LOG=$OUT/log.txt
echo "start $(date -u +%T)" | tee -a "$LOG"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee -a "$LOG"

SECTIONS="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats
  --section InstructionStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis
  --section SourceCounters"
METRICS="l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,\
l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,\
smsp__inst_executed.sum,smsp__inst_issued.sum,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active,\
dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,\
regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:smsp__pcsamp_warps_issue_stalled_.*"

profile() {  # name, kernel regex, launch skip, launch count, then profile_lowbit_decode.py arguments
  local name=$1 kre=$2 skip=$3 count=$4; shift 4
  echo "== ncu $name ($*) $(date -u +%T)" | tee -a "$LOG"
  timeout 55 ncu --clock-control none --kernel-name "regex:$kre" --launch-skip "$skip" --launch-count "$count" \
      $SECTIONS --metrics "$METRICS" -f -o "$W/$name" python3 benchmarks/profile_lowbit_decode.py "$@" \
      >> "$W/$name.run.txt" 2>&1
  echo "rc $? $(date -u +%T)" | tee -a "$LOG"
  tail -3 "$W/$name.run.txt" | tee -a "$LOG"
  if [ -f "$W/$name.ncu-rep" ]; then
    ncu --import "$W/$name.ncu-rep" --print-details all > "$W/$name.txt" 2>&1
    ncu --import "$W/$name.ncu-rep" --print-details all --print-metric-instances values > "$W/$name.instances.txt" 2>&1
    ncu --import "$W/$name.ncu-rep" --page source --csv --print-source sass > "$W/$name.sass.csv" 2>&1
    grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|DRAM Throughput|Issue Slots Busy|Warp Cycles Per Issued|bank_conflicts|No Eligible" \
      "$W/$name.txt" | head -20 | tee -a "$LOG"
  fi
  tar -C "$(dirname "$W")" --exclude="*.ncu-rep" -czf "$OUT/ncu.tar.gz" ncu
}

for step in $STEPS; do
  case $step in
  tests)
    echo "== tests $(date -u +%T)" | tee -a "$LOG"
    XDIST=$(python3 -c "import xdist" 2>/dev/null && echo "-n 8")
    timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_lowbit*.py tests/quantization/test_lowbit*.py \
      -m gpu $XDIST 2>&1 | tail -5 | tee -a "$LOG" ;;
  profiles)
    for p in ${PROFILES:-int4_b64 kivi2_b64 int4_b1}; do
      case $p in
      int4_b64) profile int4_b64 lowbit_attention_kernel 1 1 int4_per_token_head 64 32768 ;;
      kivi2_b64) profile kivi2_b64 lowbit_attention_kernel 1 1 kivi2 64 32768 ;;
      int4_b1) profile int4_b1 "lowbit_attention_kernel|_split_reduce_kernel" 2 2 int4_per_token_head 1 32768 ;;
      esac
    done ;;
  bench)
    echo "== bench $(date -u +%T)" | tee -a "$LOG"
    mkdir -p "$OUT/bench"
    timeout 200 python3 benchmarks/lowbit_bench.py --out "$OUT/bench" ${BENCH_ARGS:---case decode64 --case decode1 --candidate} \
      2>&1 | grep -v Warning | tee -a "$LOG" | tail -40 ;;
  base)
    echo "== baseline tree $BASE $(date -u +%T)" | tee -a "$LOG"
    mkdir -p "$OUT/base"
    (cd "$BASE" && PYTHONPATH=$PWD timeout 100 python3 benchmarks/lowbit_bench.py --out "$OUT/base" --case decode64 \
      --case decode1) 2>&1 | grep -v Warning | tee -a "$LOG" | tail -20 ;;
  esac
done
echo "end $(date -u +%T)" | tee -a "$LOG"
ls -la "$OUT" "$OUT/bench"
