"""Trim an Nsight Compute ``--print-details all`` text report to the numbers the low-bit notes rank:
throughput, issue, warp stalls, occupancy, registers, shared-memory bank conflicts and DRAM; then the
per-opcode summary of its SASS page (:mod:`ncu_sass_summary`).

    python benchmarks/ncu_trim.py int4_b64.txt int4_b64.sass.csv > results/ncu_....txt
"""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ncu_sass_summary import summarise  # noqa: E402

KEEP = re.compile(
    r"lowbit_attention_kernel|_split_reduce_kernel|Duration|SM Frequency|Elapsed Cycles|Memory Throughput"
    r"|DRAM Throughput|Compute \(SM\) Throughput|Issue Slots Busy|Issued Ipc Active|Warp Cycles Per Issued"
    r"|Stall |Selected  |Registers Per Thread|Theoretical Occupancy|Achieved Occupancy|Achieved Active Warps"
    r"|Block Limit Registers|Waves Per SM|Grid Size|Block Size|Dynamic Shared Memory Per Block|L2 Hit Rate"
    r"|L1/TEX Hit Rate|bank_conflicts|wavefronts_mem_shared|inst_executed.sum|inst_issued.sum"
    r"|dram__bytes_read|Executed Instructions  |Local Memory Spilling Requests  |Mem Pipes Busy")


def trim(text: str) -> str:
    out, seen = [], set()
    for line in text.splitlines():
        if "pcsamp" in line or "average_warps_issue_stalled" in line or not KEEP.search(line):
            continue
        key = re.sub(r"\s+", " ", line.strip())
        kernel_line = "lowbit_attention_kernel" in key or "_split_reduce_kernel" in key
        if key in seen and not kernel_line:
            continue
        seen.add(key)
        out.append(line.rstrip())
    return "\n".join(out)


if __name__ == "__main__":
    details, sass = sys.argv[1], sys.argv[2]
    with open(details) as f:
        print(trim(f.read()))
    print()
    print(summarise(sass, 25))
