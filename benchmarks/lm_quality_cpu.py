"""Scoring a text under every KV-cache scheme on the CPU: time, memory and quality against position.

Loads SmolLM2-135M-Instruct, scores the first ``--tokens`` tokens of the shipped text teacher-forced
under the unquantized cache and every scheme (in lockstep chunks, see :mod:`kvlab.lm.scoring`), and
writes three CSVs to ``--out``:

* ``lm_quality_cpu.csv`` — one row per scheme: perplexity, top-1 agreement, mean KL;
* ``lm_quality_by_position.csv`` — the same metrics in bins of ``--bin`` positions (does the error
  grow with the context?);
* ``lm_timing_cpu.csv`` — load seconds, scoring seconds (wall and this process's CPU time), forward
  passes, peak RSS, CPU threads and the machine's load average before and after. Other processes on
  the machine slow every number here; with more runnable processes than cores, ``--threads 1`` is
  faster, because each of torch's parallel regions waits for its slowest thread to be scheduled.

Targets (issue figures, 2 CPU cores): 2,048 tokens under every scheme in <= 60 s and <= 1.5 GB RSS.

Where the time goes (cProfile in CPU time, one thread, 512 tokens, 13 cache runs): the weight
multiplications of the 30 layers 51%, the vocabulary projection 15%, attention (SDPA) 8%,
log-softmax and the metrics 12%; cache writes, gathers and Python bookkeeping a few percent. One
fp32 matmul of these shapes runs at about 62 GFLOP/s on one core of this machine, and scoring
2,048 tokens costs about 0.34 GFLOP per token and cache run (0.27 in the weights, 0.07 in
attention at the mean context), so 13 runs are about 9 TFLOP: close to 75 s on two ideal cores
before any overhead. Sharing work between the runs cannot help: from layer 0's attention on, each
cache changes everything after it.

    python benchmarks/lm_quality_cpu.py [--tokens 2048] [--schemes auto,int8_per_token_head,...]
                                        [--chunk 128] [--lockstep-runs 4] [--threads N]
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
SCORE_TARGET_S = 60.0
RSS_TARGET_BYTES = 1.5e9


def _write(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--schemes", default="", help="comma-separated names (default: every scheme)")
    parser.add_argument("--bin", type=int, default=256, help="positions per bin of the position table")
    parser.add_argument("--chunk", type=int, default=128, help="prefill chunk, tokens")
    parser.add_argument("--lockstep-runs", type=int, default=4,
                        help="caches run through one forward together (fewer: less memory)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch CPU threads (default: torch's choice, one per core)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from kvlab.lm import BASELINE_SCHEME, CacheVariant, load_model, parse_variants, score_tokens
    from kvlab.lm.corpus import corpus_text
    from kvlab.lm.quality import error_by_position, quality_rows

    t0 = time.perf_counter()
    model = load_model()
    load_s = time.perf_counter() - t0
    names = [s for s in args.schemes.split(",") if s.strip()] or None
    variants = parse_variants(names, head_size=model.config.head_size)
    ids = model.encode(corpus_text())[: args.tokens]
    load_before = os.getloadavg()[0]
    t1, c1 = time.perf_counter(), time.process_time()
    scores = score_tokens(model, ids, variants, chunk_size=args.chunk, lockstep_runs=args.lockstep_runs)
    score_s, score_cpu_s = time.perf_counter() - t1, time.process_time() - c1
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    passes = len({v.computation_key(model.dtype) for v in [CacheVariant(BASELINE_SCHEME), *variants]})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [{k: v for k, v in r.as_json().items() if k != "first_divergence"} for r in quality_rows(scores)]
    _write(out / "lm_quality_cpu.csv", rows)
    _write(out / "lm_quality_by_position.csv", [{"kv_cache_dtype": label, **b} for label, s in scores.items()
                                                 for b in error_by_position(s, args.bin)])
    timing = {"tokens": len(ids), "variants": len(scores), "forward_passes": passes,
              "chunk": args.chunk, "lockstep_runs": args.lockstep_runs,
              "load_s": round(load_s, 1), "score_s": round(score_s, 1),
              "score_cpu_s": round(score_cpu_s, 1),
              "score_target_s": SCORE_TARGET_S, "peak_rss_mib": round(peak / 2**20),
              "rss_target_mib": round(RSS_TARGET_BYTES / 2**20), "torch_threads": torch.get_num_threads(),
              "cpu_count": os.cpu_count(), "load_average_1min_before": round(load_before, 2),
              "load_average_1min_after": round(os.getloadavg()[0], 2)}
    _write(out / "lm_timing_cpu.csv", [timing])
    for r in rows:
        print(f"{r['kv_cache_dtype']:<22} {r['rounding'] or '':<9} ppl {r['perplexity']:9.4f}  "
              f"top1 {r['top1_agreement']:.4f}  KL {r['mean_kl']:.5f}")
    for k, v in timing.items():
        print(f"{k:20s} {v}")
    met = score_s <= SCORE_TARGET_S and peak <= RSS_TARGET_BYTES
    print(f"target ({SCORE_TARGET_S:.0f} s, {RSS_TARGET_BYTES / 1e9:.1f} GB): {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
