"""Trim Nsight Compute text reports (``gpu_session.sh profile``) to the numbers that rank a kernel.

    python benchmarks/ncu_summary.py OUT/ncu_*.txt > benchmarks/results/ncu_<round>_<GPU>.txt

For each report: the launch, time, DRAM/L2/issue use, occupancy, registers and shared memory,
the warp-state breakdown (cycles per issued instruction, by stall reason), executed instructions
(all, shared loads and stores, per SASS opcode as ncu lists them, largest first), shared-memory bank
conflicts and wavefronts, and the excess L2 sectors of uncoalesced global accesses.
"""

from __future__ import annotations

import re
import sys

#: (label, regular expression on one line of the details page; group 1 is the value)
FIELDS = (
    ("duration", r"^\s+Duration\s+(\S+\s+[\d.,]+)"),
    ("DRAM throughput %", r"^\s+DRAM Throughput\s+%\s+([\d.,]+)"),
    ("L2 throughput %", r"^\s+L2 Cache Throughput\s+%\s+([\d.,]+)"),
    ("issue slots busy %", r"^\s+Issue Slots Busy\s+%\s+([\d.,]+)"),
    ("executed IPC (active)", r"^\s+Executed Ipc Active\s+inst/cycle\s+([\d.,]+)"),
    ("registers per thread", r"^\s+Registers Per Thread\s+register/thread\s+(\d+)"),
    ("dynamic shared memory per block", r"^\s+Dynamic Shared Memory Per Block\s+(\S+\s+[\d.,]+)"),
    ("theoretical occupancy %", r"^\s+Theoretical Occupancy\s+%\s+([\d.,]+)"),
    ("achieved occupancy %", r"^\s+Achieved Occupancy\s+%\s+([\d.,]+)"),
    ("warp cycles per issued instruction", r"^\s+Warp Cycles Per Issued Instruction\s+cycle\s+([\d.,]+)"),
    ("instructions executed", r"^\s+Instructions Executed\s+inst\s+([\d,]+)"),
    ("shared load instructions", r"^\s+smsp__sass_inst_executed_op_shared_ld.sum\s+inst\s+([\d,]+)"),
    ("shared store instructions", r"^\s+smsp__sass_inst_executed_op_shared_st.sum\s+inst\s+([\d,]+)"),
    ("shared load bank conflicts",
     r"^\s+l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum\s+([\d,]+)"),
    ("shared store bank conflicts",
     r"^\s+l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum\s+([\d,]+)"),
    ("shared load wavefronts", r"^\s+l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum\s+([\d,]+)"),
    ("shared store wavefronts", r"^\s+l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum\s+([\d,]+)"),
    ("L2 sectors of global accesses", r"^\s+L2 Theoretical Sectors Global\s+sectors\s+([\d,]+)"),
)


def summary(path: str) -> str:
    with open(path) as f:
        text = f.read()
    lines = text.splitlines()
    out = [f"== {path.rsplit('/', 1)[-1]}"]
    launch = next((ln.strip() for ln in lines if re.search(r"paged_attention_kernel \(\d+", ln)), "")
    out.append(f"  launch: {launch.split(', Context')[0]}")
    for label, pattern in FIELDS:
        hit = next((m.group(1) for ln in lines if (m := re.search(pattern, ln))), None)
        if hit is not None:
            out.append(f"  {label}: {' '.join(hit.split())}")
    excess = re.search(r"total of (\d+) excessive sectors \((\d+)% of the\s+total", text)
    if excess:
        out.append(f"  excess L2 sectors of uncoalesced global accesses: {int(excess.group(1)):,} "
                   f"({excess.group(2)}%)")
    stalls = re.search(r"Table Name : Warp State \(All Cycles\)(.*?)Section:", text, re.S)
    if stalls:
        rows = re.findall(r"Stall ([A-Za-z ]+?)\s+inst\s+([\d.]+)", stalls.group(1))
        out.append("  stall reasons, cycles per issued instruction: "
                   + ", ".join(f"{name.strip()} {v}" for name, v in rows if float(v) >= 0.01))
    mix = re.search(r"By Basic SASS Opcode\s+([\d,]+) \((.*?)\)", text, re.S)
    if mix:
        counts = [c.strip() for c in " ".join(mix.group(2).split()).split(";")]
        out.append(f"  executed warp instructions by SASS opcode (ncu's order, largest first; labels not in "
                   f"the text report): {', '.join(counts[:16])}")
    return "\n".join(out)


if __name__ == "__main__":
    print("\n\n".join(summary(p) for p in sys.argv[1:]))
