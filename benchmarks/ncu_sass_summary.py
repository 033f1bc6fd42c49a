"""Summarise Nsight Compute's per-instruction SASS page (``ncu --import R --page source --csv
--print-source sass``) by opcode: warp instructions executed, warp-stall samples by reason, and
shared-memory wavefronts (with those that bank conflicts add).

    python benchmarks/ncu_sass_summary.py kivi2_b64.sass.csv [--top 25]

Stall samples are where a warp stood when sampled; an instruction's ``stall_short_sb`` samples, say,
are warps waiting at it for a shared-memory (or special-function) result an earlier one produces.
"""

from __future__ import annotations

import argparse
import collections
import csv
import re

REASONS = ("long_sb", "short_sb", "wait", "selected", "not_selected", "barrier", "math", "mio", "dispatch",
           "branch_resolving", "lg", "no_inst", "drain", "tex", "membar", "misc", "sleep", "imc")


def _num(x: str) -> float:
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def opcode(sass: str) -> str:
    """Opcode of a SASS line without its predicate and register operands (``@!P0 LDS.U.128 R4, [R2]``
    → ``LDS.U.128``)."""
    return re.sub(r"^@!?U?P\w+\s+", "", sass.strip()).split(" ")[0].rstrip(";")


def summarise(path: str, top: int) -> str:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    cols = rows[head]
    idx = {c: i for i, c in enumerate(cols)}
    by = collections.defaultdict(lambda: collections.Counter())
    excess = []  # (extra shared wavefronts, wavefronts, ideal, SASS) per instruction
    for r in rows[head + 1:]:
        if len(r) < len(cols) or not r[1].strip():
            continue
        wf, ideal = _num(r[idx["L1 Wavefronts Shared"]]), _num(r[idx["L1 Wavefronts Shared Ideal"]])
        if wf > ideal:
            excess.append((wf - ideal, wf, ideal, r[idx["Source"]].strip()))
        op = opcode(r[idx["Source"]])
        c = by[op]
        c["inst"] += _num(r[idx["Instructions Executed"]])
        c["samples"] += _num(r[idx["Warp Stall Sampling (All Samples)"]])
        c["shared_wf"] += _num(r[idx["L1 Wavefronts Shared"]])
        c["shared_wf_ideal"] += _num(r[idx["L1 Wavefronts Shared Ideal"]])
        for reason in REASONS:
            c[reason] += _num(r[idx[f"stall_{reason}"]])
    total = collections.Counter()
    for c in by.values():
        total.update(c)
    lines = [f"{path}: {total['inst']:,.0f} warp instructions executed, "
             f"{total['samples']:,.0f} stall samples, "
             f"shared wavefronts {total['shared_wf']:,.0f} (ideal {total['shared_wf_ideal']:,.0f})",
             "stall samples by reason (% of all): " + ", ".join(
                 f"{r} {100 * total[r] / total['samples']:.1f}"
                 for r in sorted(REASONS, key=lambda r: -total[r]) if total[r] / total["samples"] >= 0.005)]
    shown = ("long_sb", "short_sb", "wait", "selected", "not_selected", "barrier", "math", "mio", "dispatch")
    lines.append(f"{'opcode':22s} {'inst %':>7s} {'samples %':>9s} " + " ".join(f"{r[:8]:>8s}" for r in shown)
                 + f" {'shared wf':>10s} {'ideal':>10s}")
    for op, c in sorted(by.items(), key=lambda kv: -kv[1]["samples"])[:top]:
        lines.append(f"{op:22s} {100 * c['inst'] / total['inst']:7.1f} "
                     f"{100 * c['samples'] / total['samples']:9.1f} "
                     + " ".join(f"{100 * c[r] / total['samples']:8.1f}" for r in shown)
                     + f" {c['shared_wf']:10,.0f} {c['shared_wf_ideal']:10,.0f}")
    lines.append("instructions with the most bank-conflict wavefronts (wavefronts / ideal):")
    for _, wf, ideal, sass in sorted(excess, reverse=True)[:8]:
        lines.append(f"  {wf:12,.0f} / {ideal:12,.0f} ({wf / ideal:4.1f}x)  {sass[:80]}")
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    for p in a.csv:
        print(summarise(p, a.top))
        print()
