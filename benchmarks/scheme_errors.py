"""Reconstruction error of every KV-cache scheme on N(0, 1) K and V.

    python benchmarks/scheme_errors.py [--tokens 4096] [--heads 8] [--head-size 128] [--seed 0]

Writes the table to stdout and to benchmarks/results/scheme_errors.csv. Relative error is
‖dequantize(quantize(x)) − x‖₂ / ‖x‖₂ in float64; bytes are per token per layer, scales included.
"""

from __future__ import annotations

import argparse
import csv
import pathlib

import torch

from kvlab import SCHEME_NAMES, QuantMode, calibrate_scale, get_scheme, kv_bytes_per_token, relative_error
from kvlab.cache import PagedKVCache

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-size", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    gen = torch.Generator().manual_seed(args.seed)
    shape = (args.tokens, args.heads, args.head_size)
    key, value = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
    variants = [(n, "nearest") for n in SCHEME_NAMES if n != "auto"] + [("int8_per_token_head", "truncate")]
    rows = []
    for name, rounding in variants:
        sch = get_scheme(name)
        scales = {}
        if sch.mode == QuantMode.FP8_PER_TENSOR:
            scales = {"k_scale": calibrate_scale(key, sch), "v_scale": calibrate_scale(value, sch)}
        cache = PagedKVCache.allocate(sch, args.tokens // 16 + 1, 16, args.heads, args.head_size, **scales)
        report = cache.write(key, value, torch.arange(args.tokens), rounding=rounding)
        k_back, v_back = (t.reshape(-1, args.heads, args.head_size)[: args.tokens]
                          for t in cache.dequantize())
        rows.append({
            "scheme": name,
            "rounding": rounding if sch.storage_dtype == torch.int8 else "nearest-even",
            "bytes_per_token": kv_bytes_per_token(sch, args.heads, args.head_size),
            "rel_err_k": relative_error(k_back, key),
            "rel_err_v": relative_error(v_back, value),
            "saturated": report.key_saturated + report.value_saturated,
        })
    header = (f"{'scheme':<22}{'rounding':<14}{'bytes/token':>12}"
              f"{'rel err K':>12}{'rel err V':>12}{'saturated':>10}")
    print(f"N(0,1) K and V, {args.tokens} tokens x {args.heads} KV heads x head {args.head_size}, "
          f"seed {args.seed}")
    print(header)
    for r in rows:
        print(f"{r['scheme']:<22}{r['rounding']:<14}{r['bytes_per_token']:>12}"
              f"{r['rel_err_k']:>12.3e}{r['rel_err_v']:>12.3e}{r['saturated']:>10}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / "scheme_errors.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {RESULTS / 'scheme_errors.csv'}")


if __name__ == "__main__":
    main()
