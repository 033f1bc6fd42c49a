"""Time real scheduler steps on a GPU, for the step-time model's validation (needs CUDA).

    PYTHONPATH=. python benchmarks/timing_validation_gpu.py [OUT_DIR]

A step is a llama-like decoder of 4 layers (hidden 4096, 32 query / 8 KV heads of 128, MLP 14336,
synthetic bf16 weights): per layer the QKV GEMM, kvlab's Triton cache write, kvlab's Triton paged
attention over a paged cache, the output projection and the gated MLP. Each step is captured in a
CUDA graph and timed as the median of replays (kvlab.bench.measure). Two tables come out:

* ``timing_gemm_<device>.csv``: the weight GEMMs alone at a few token counts (to fit the GEMM
  efficiencies, which the model otherwise assumes);
* ``timing_steps_<device>.csv``: whole steps at other points (decode batches × contexts × schemes,
  prefill chunks, a mixed step) — what ``benchmarks/timing_validation.py`` predicts and compares.

The committed H100 steps were timed with the kernels of the committed kernel benchmark (8-bit prefill
converting each block once); the GEMM-only timings come from an earlier session (a re-run with the
steps fitted 0.594 / 0.763 against the committed 0.601 / 0.750). Re-running this script on the GPU
refreshes both.
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvlab.bench.measure import time_graph_us  # noqa: E402
from kvlab.cache.batch import AttentionBatch  # noqa: E402
from kvlab.cache.paged_cache import PagedKVCache  # noqa: E402
from kvlab.quantization import get_scheme  # noqa: E402

LAYERS, HIDDEN, QH, KVH, HEAD, INTER, BLOCK = 4, 4096, 32, 8, 128, 14336, 16
DEVICE = "cuda"
GEMM_TOKENS = (4, 32, 1024, 4096)
# (scheme, [(new tokens, context) per sequence]) — decode batches, prefill chunks, one mixed step
STEPS = [
    *[
        (s, [(1, c)] * b)
        for s in ("bfloat16", "int8_per_token_head")
        for b in (1, 64)
        for c in (1024, 8192)
    ],
    ("bfloat16", [(2048, 0)]),
    ("bfloat16", [(512, 4096)]),
    ("int8_per_token_head", [(2048, 0)]),
    ("bfloat16", [(1024, 0)] + [(1, 4096)] * 32),
]


def weights(gen: torch.Generator) -> list[dict[str, torch.Tensor]]:
    def w(i, o):
        return (torch.randn(i, o, generator=gen, device=DEVICE) * i**-0.5).to(torch.bfloat16)

    return [
        dict(
            qkv=w(HIDDEN, (QH + 2 * KVH) * HEAD),
            o=w(QH * HEAD, HIDDEN),
            gu=w(HIDDEN, 2 * INTER),
            d=w(INTER, HIDDEN),
        )
        for _ in range(LAYERS)
    ]


def mlp_and_projections(x: torch.Tensor, w: dict[str, torch.Tensor], attn: torch.Tensor) -> torch.Tensor:
    o = attn @ w["o"]
    gu = (x + o) @ w["gu"]
    return F.silu(gu[:, :INTER]) * gu[:, INTER:] @ w["d"]


def gemm_only(ws, tokens: int, gen) -> float:
    x = torch.randn(tokens, HIDDEN, generator=gen, device=DEVICE).to(torch.bfloat16)

    def step():
        h = x
        for w in ws:
            qkv = h @ w["qkv"]
            h = mlp_and_projections(h, w, qkv[:, : QH * HEAD])
        return h

    return time_graph_us([step], repeats=10)


def full_step(ws, scheme: str, chunks: list[tuple[int, int]], gen) -> float:
    from kvlab.kernels.attention import prepare_paged_attention
    from kvlab.kernels.cache_write import launch_cache_write

    sch = get_scheme(scheme)
    tokens = sum(n for n, _ in chunks)
    per_seq = [math.ceil((c + n) / BLOCK) for n, c in chunks]
    num_blocks = sum(per_seq) + 1
    layers = []
    for w in ws:
        cache = PagedKVCache.allocate(sch, num_blocks, BLOCK, KVH, HEAD, device=DEVICE)
        for t in (cache.key, cache.value):
            t.view(torch.uint8).random_(0, 64, generator=gen)  # any finite codes: only the time matters
        for t in (cache.key_scale, cache.value_scale):
            if t is not None:
                t.fill_(0.02)
        order = torch.randperm(num_blocks - 1, generator=gen, device=DEVICE).to(torch.int32) + 1
        rows, start = [], 0
        for k in per_seq:
            rows.append(order[start : start + k].tolist() + [0])
            start += k
        batch = AttentionBatch.from_lengths(
            [n for n, _ in chunks], [c + n for n, c in chunks], rows, device=DEVICE
        )
        table = batch.block_table.long()
        slots = torch.cat(
            [
                table[i, torch.arange(c, c + n, device=DEVICE) // BLOCK] * BLOCK
                + torch.arange(c, c + n, device=DEVICE) % BLOCK
                for i, (n, c) in enumerate(chunks)
            ]
        )
        q = torch.empty(tokens, QH, HEAD, dtype=torch.bfloat16, device=DEVICE)
        call = prepare_paged_attention(q, cache, batch)
        layers.append((w, cache, slots, q, call))
    x = torch.randn(tokens, HIDDEN, generator=gen, device=DEVICE).to(torch.bfloat16)

    def step():
        h = x
        for w, cache, slots, q, call in layers:
            qkv = h @ w["qkv"]
            k = qkv[:, QH * HEAD : (QH + KVH) * HEAD].view(tokens, KVH, HEAD)
            v = qkv[:, (QH + KVH) * HEAD :].view(tokens, KVH, HEAD)
            launch_cache_write(cache, k, v, slots)
            q.copy_(qkv[:, : QH * HEAD].view(tokens, QH, HEAD))
            h = mlp_and_projections(h, w, call.run().view(tokens, QH * HEAD))
        return h

    us = time_graph_us([step], repeats=10)
    layers.clear()
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    return us


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "benchmarks" / "results")
    out.mkdir(parents=True, exist_ok=True)
    device = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu"
    tag = device.replace(" ", "_")
    gen = torch.Generator(device=DEVICE).manual_seed(0)
    ws = weights(gen)
    with (out / f"timing_gemm_{tag}.csv").open("w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["tokens", "layers", "measured_us", "device"])
        for t in GEMM_TOKENS:
            us = gemm_only(ws, t, gen)
            wr.writerow([t, LAYERS, round(us, 2), device])
            f.flush()
            print(f"gemm tokens={t:5d} {us:9.1f} us", flush=True)
    with (out / f"timing_steps_{tag}.csv").open("w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["scheme", "chunks", "tokens", "measured_us", "device"])
        for scheme, chunks in STEPS:
            us = full_step(ws, scheme, chunks, gen)
            text = ";".join(f"{n}x{c}" for n, c in chunks)
            wr.writerow([scheme, text, sum(n for n, _ in chunks), round(us, 2), device])
            f.flush()
            print(f"{scheme:20s} {len(chunks):3d} seqs {text[:40]:40s} {us:9.1f} us", flush=True)


if __name__ == "__main__":
    main()
