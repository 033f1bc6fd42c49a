"""kvlab's result for every real vLLM start-up log in tests/data/vllm_startup_logs.json.

Prints one row per log (what vLLM printed, what kvlab predicts for a memory that rounds to the
logged GiB, and the verdict) and writes benchmarks/results/vllm_startup_logs.csv.

    python benchmarks/vllm_startup_logs.py
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvlab.serving.startup_log import predict_from_blocks, predict_from_logged_memory  # noqa: E402
from tests.sizing.startup_log_entries import engine_config, load_entries, logged  # noqa: E402


def kvlab_result(entry: dict) -> tuple[str, str]:
    """(kvlab's numbers, verdict) for one entry."""
    got = logged(entry)
    try:
        config = engine_config(entry)
        if entry["check"] == "refused":
            config.plan()
            return "accepted", "NOT REFUSED"
        if entry["check"] == "block_size":
            b = config.hybrid_block_choice().block_size
            return f"block {b}", "match" if b == got["block_size"] else "mismatch"
        if entry["check"] == "error":
            p = predict_from_logged_memory(config, got["error_available_gib"])
            est = "-".join(map(str, sorted(set(p.max_model_len_estimates))))
            ok = round(p.needed_gib, 2) == got["needed_gib"] and (
                "estimate" not in got
                or min(p.max_model_len_estimates) <= got["estimate"] <= max(p.max_model_len_estimates)
            )
            return f"needs {p.needed_gib:.2f} GiB, estimate {est}", "match" if ok else "mismatch"
        if entry["check"] == "blocks":
            p = predict_from_blocks(config, (got["blocks"],))
            return f"{p.concurrency[0]}x", "match" if p.concurrency[0] == got["concurrency"] else "mismatch"
        if entry["check"] == "no_memory":
            r = predict_from_blocks(config, (1,)).blocks_per_request
            c = float(got["concurrency"])
            p = predict_from_blocks(config, range(math.floor((c - 0.01) * r), math.ceil((c + 0.01) * r) + 1))
            hits = p.pairs_with(got["tokens"], got["concurrency"])
            return f"R={r}, blocks {hits}", "match" if hits else "mismatch"
        p = predict_from_logged_memory(config, got["available_gib"])
        hits = p.pairs_with(got.get("tokens"), got.get("concurrency"))
        tokens = sorted(set(p.kv_cache_tokens))
        conc = sorted(set(p.concurrency), key=float)
        shown = "/".join(conc) if len(conc) <= 3 else f"{conc[0]}-{conc[-1]}"  # a wide block range: its ends
        text = (f"blocks {p.num_blocks[0]}-{p.num_blocks[-1]}, {tokens[0]:,}-{tokens[-1]:,} tokens, "
                f"{shown}x")
        return text, "match" if hits else "mismatch"
    except ValueError as exc:
        return f"refused: {str(exc)[:70]}", "refused"


def main() -> None:
    rows = []
    for entry in load_entries():
        result, verdict = kvlab_result(entry)
        lines = " | ".join(entry["lines"].values())
        rows.append([entry["id"], entry["family"], entry["vllm_version"], lines, result, verdict,
                     entry["expect"], entry["url"]])
        print(f"{entry['id']:42s} {verdict:9s} (expected {entry['expect']:8s}) kvlab: {result}")
    out = ROOT / "benchmarks" / "results" / "vllm_startup_logs.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "family", "vllm_version", "logged", "kvlab", "verdict", "expected", "url"])
        w.writerows(rows)
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
