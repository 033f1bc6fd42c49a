"""The sliding-window admission fix in seconds: the scenario of vLLM PR #39866, simulated.

    python benchmarks/seed_sliding_window_admission.py

Published (Gemma 4 31B NVFP4 on one B200, TP1, --max-num-batched-tokens 8192 --max-model-len 131072
--gpu-memory-utilization 0.9 --max-num-seqs 64 --enable-prefix-caching; SCBench Code.RepoQA, four
concurrent sessions of about 65K tokens, five turns each): wall time 2,295.7 s before the fix and
286.7 s after (8.0x), average prompt throughput ~8K -> 16-25K tok/s, prefix-cache hit rate 41.6 % /
40.5 %. Here the same engine settings run under three admission policies (``uncapped`` = before,
``window_plus_chunk`` = the PR's cap, ``vllm`` = the cap vLLM released), the KV memory derived from
the B200's memory (and, to show where the gate starts to serialize the sessions, at 60, 40 and 30
GiB), every step timed by kvlab's step-time model. Writes
``benchmarks/results/seed_sliding_window_admission.csv`` (one row per policy) and
``..._timeline.csv`` (one row per request: session, turn, arrival, first token, finish).
"""

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvlab.models import get_model  # noqa: E402
from kvlab.serving import EngineConfig, simulate  # noqa: E402
from kvlab.simulator import session_workload  # noqa: E402
from kvlab.timing import estimate_kv_cache_memory  # noqa: E402

PUBLISHED = {"uncapped": 2295.7, "window_plus_chunk": 286.7}
SESSIONS, TURNS, CONTEXT, QUESTION, ANSWER = 4, 5, 65_000, 128, 256


def main() -> None:
    model = get_model("gemma-4-31b")
    est = estimate_kv_cache_memory("b200", model, "nvfp4", 0.9, 1, 8192)
    print(est.describe())
    base = EngineConfig(
        "gemma-4-31b",
        kv_cache_memory=est.kv_cache_bytes,
        max_model_len=131072,
        max_num_batched_tokens=8192,
        max_num_seqs=64,
        profile="vllm-0.20",
    )
    work = session_workload(SESSIONS, TURNS, CONTEXT, question_tokens=QUESTION, output_tokens=ANSWER)
    print(f"{len(work)} requests, {sum(r.prompt_tokens for r in work):,} prompt tokens")
    summary, timeline = [], []
    memories = [est.kv_cache_bytes, *(g * 2**30 for g in (60, 40, 30))]
    for kv_bytes, policy in ((m, p) for m in memories for p in ("uncapped", "window_plus_chunk", "vllm")):
        t0 = time.perf_counter()
        config = base.replace(policy=policy, kv_cache_memory=kv_bytes)
        res = simulate(config, work, gpu="b200", weight_dtype="nvfp4", detail="counts")
        cpu_s = time.perf_counter() - t0
        m = res.metrics
        computed = sum(r.prompt_tokens - r.cached_tokens for r in m.requests)
        peak = max(rec.num_running for rec in res.timeline)
        summary.append(
            dict(
                kv_cache_gib=round(kv_bytes / 2**30, 2),
                policy=policy,
                wall_time_s=round(m.wall_time_s, 2),
                prompt_tokens_per_s=round(m.prompt_tokens_per_s, 1),
                computed_prompt_tokens_per_s=round(computed / m.wall_time_s, 1) if m.wall_time_s else 0.0,
                prefix_cache_hit_rate=round(m.prefix_cache_hit_rate, 4),
                peak_running=peak,
                finished=m.finished,
                stalled=res.summary.stalled is not None,
                published_wall_time_s=PUBLISHED.get(policy, ""),
                simulated_in_s=round(cpu_s, 2),
            )
        )
        for r in m.requests:
            s, t = r.request_id[1:].split("t")
            timeline.append(
                dict(
                    kv_cache_gib=round(kv_bytes / 2**30, 2),
                    policy=policy,
                    session=int(s),
                    turn=int(t),
                    arrival_s=round(r.arrival_s, 3),
                    first_token_s=round(r.first_token_s, 3),
                    finish_s=round(r.finish_s, 3),
                    cached_tokens=r.cached_tokens,
                    prompt_tokens=r.prompt_tokens,
                )
            )
    before = {r["kv_cache_gib"]: r["wall_time_s"] for r in summary if r["policy"] == "uncapped"}
    for row in summary:
        ref, wall = before[row["kv_cache_gib"]], row["wall_time_s"]
        row["speedup_vs_uncapped"] = round(ref / wall, 2) if ref and wall and not row["stalled"] else ""
        if row["stalled"]:
            row["wall_time_s"] = row["prompt_tokens_per_s"] = ""
        if row["kv_cache_gib"] != summary[0]["kv_cache_gib"]:
            row["published_wall_time_s"] = ""
    out = ROOT / "benchmarks" / "results" / "seed_sliding_window_admission.csv"
    for path, rows in ((out, summary), (out.with_name(out.stem + "_timeline.csv"), timeline)):
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    cols = (
        "kv_cache_gib",
        "policy",
        "wall_time_s",
        "prompt_tokens_per_s",
        "computed_prompt_tokens_per_s",
        "prefix_cache_hit_rate",
        "peak_running",
        "speedup_vs_uncapped",
        "published_wall_time_s",
        "simulated_in_s",
    )
    print("  ".join(f"{c[:14]:>14}" for c in cols))
    for r in summary:
        cells = [
            "STALL" if r["stalled"] and c in ("wall_time_s", "speedup_vs_uncapped") else r[c] for c in cols
        ]
        print("  ".join(f"{c:>14,.2f}" if isinstance(c, float) else f"{c!s:>14}" for c in cells))
    print(
        "published: 2,295.7 s -> 286.7 s (8.0x), prompt throughput ~8K -> 16-25K tok/s, "
        "hit rate 41.6% / 40.5%"
    )
    first = [r for r in summary if r["kv_cache_gib"] == summary[0]["kv_cache_gib"]]
    at60 = [r for r in summary if r["kv_cache_gib"] == 60.0]
    print(
        f"\npredicted before/after: {first[1]['speedup_vs_uncapped']}x at the estimated "
        f"{first[0]['kv_cache_gib']} GiB, {at60[1]['speedup_vs_uncapped']}x at 60 GiB; published 8.0x."
    )
    print(
        "Difference: with the estimated KV memory two uncapped 65K requests fit the pool and the sliding\n"
        "groups free their blocks as prefill advances, so kvlab's uncapped gate overlaps the sessions and\n"
        "loses nothing; where one session fills the pool (60 GiB) the gate serialises them and their\n"
        "prefixes are evicted between turns (hit rate 0 %), the mechanism the PR describes, at 4x. Below\n"
        "that (40 GiB) the uncapped gate stalls outright. The absolute times are ~10x below the published\n"
        "ones: the outputs of SCBench's turns and the engine's real NVFP4 GEMM and prefill-attention speed\n"
        "on a B200 are not known here (the efficiencies are H100 measurements of kvlab's own kernels)."
    )
    print(f"wrote {out.relative_to(ROOT)} and its _timeline.csv")


if __name__ == "__main__":
    main()
