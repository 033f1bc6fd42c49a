"""Decode tokens/s of SmolLM2-135M's shapes through kvlab's paged cache and Triton kernels, per scheme.

Random weights of the model's exact shapes (30 layers, hidden 576, MLP 1536, 9 query / 3 KV heads of
64, vocabulary 49,152, as its GGUF metadata says), so no model file is needed. For every scheme and
batch size: prefill ``--context`` random tokens per sequence, then time ``--steps`` decode steps of
the whole batch (every layer: kvlab's cache write, then ``kvlab.attention`` with the Triton backend).
The numbers include kvlab's Python-side batch bookkeeping, which dominates for a model this small;
they measure this forward, not the kernels alone (``kvlab bench`` does that).

Writes ``lm_decode_<GPU>.csv`` to ``$OUT`` (or ``--out``) and prints the table.

    python benchmarks/lm_decode_gpu.py [--batches 1,16,64] [--context 1024] [--steps 32]
"""

from __future__ import annotations

import argparse
import csv
import os
import time
import traceback
from pathlib import Path

import torch

from kvlab.lm import CacheVariant, LlamaConfig, LlamaModel, ModelKVCache
from kvlab.lm.gguf_file import LayerWeights, LlamaWeights
from kvlab.lm.variants import all_variants

#: SmolLM2-135M-Instruct's shape, as read from its GGUF metadata by :func:`kvlab.lm.gguf_file.read_config`.
SMOLLM2_135M = LlamaConfig(num_layers=30, hidden_size=576, intermediate_size=1536, num_q_heads=9,
                           num_kv_heads=3, head_size=64, rope_base=100000.0, rope_dim=64,
                           rms_norm_eps=1e-5, vocab_size=49152, context_length=8192)


def random_model(cfg: LlamaConfig, device: str, dtype: torch.dtype, seed: int = 0) -> LlamaModel:
    """A model of ``cfg``'s shapes with N(0, 0.02²) weights and unit norms."""
    g = torch.Generator(device=device).manual_seed(seed)

    def w(*shape):
        return (torch.randn(*shape, generator=g, device=device) * 0.02).to(dtype)

    h, q, kv, f = cfg.hidden_size, cfg.num_q_heads * cfg.head_size, cfg.num_kv_heads * cfg.head_size, \
        cfg.intermediate_size
    ones = torch.ones(h, device=device, dtype=dtype)
    layers = tuple(LayerWeights(ones, w(q, h), w(kv, h), w(kv, h), w(h, q), ones, w(f, h), w(f, h), w(h, f))
                   for _ in range(cfg.num_layers))
    emb = w(cfg.vocab_size, h)
    return LlamaModel(cfg, LlamaWeights(emb, layers, ones, emb))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def time_decode(model: LlamaModel, variant: CacheVariant, batch: int, context: int, steps: int) -> dict:
    """Prefill ``context`` tokens per sequence, then time ``steps`` decode steps of ``batch`` sequences."""
    on_gpu = model.device.type == "cuda"
    backend = "triton" if on_gpu else "torch"  # --device cpu: a smoke test of this script
    kv = ModelKVCache(model.config, variant.scheme, max_tokens=batch * (context + steps + 1),
                      max_sequences=batch, rounding=variant.rounding, model_dtype=model.dtype,
                      device=model.device, use_kernel=on_gpu)
    seqs = [kv.add_sequence() for _ in range(batch)]
    vocab = model.config.vocab_size
    for lo in range(0, context, 512):
        n = min(512, context - lo)
        b = kv.plan_step(seqs, [n] * batch)
        model.forward(torch.randint(0, vocab, (n * batch,)), kv, b, backend=backend)
    tokens = torch.randint(0, vocab, (batch,))
    b = kv.plan_step(seqs, [1] * batch)  # warm-up step (compiles the decode kernels)
    model.forward(tokens, kv, b, backend=backend)
    _sync(model.device)
    t0 = time.perf_counter()
    for _ in range(steps):
        b = kv.plan_step(seqs, [1] * batch)
        h = model.forward(tokens, kv, b, backend=backend)
        tokens = model.logits(h).argmax(-1).cpu()
    _sync(model.device)
    dt = time.perf_counter() - t0
    return {"step_ms": round(1e3 * dt / steps, 3), "decode_tokens_per_s": round(batch * steps / dt, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", default="1,16,64")
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--schemes", default="", help="comma-separated (default: every scheme that fits)")
    parser.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    parser.add_argument("--device", default="cuda", help="cuda (the benchmark) or cpu (a smoke test)")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("lm_decode_gpu.py needs a CUDA GPU (or --device cpu for a smoke test)")
    device_name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    model = random_model(SMOLLM2_135M, args.device, dtype)
    names = [s for s in args.schemes.split(",") if s]
    variants = [v for v in all_variants(SMOLLM2_135M.head_size) if not names or v.scheme in names]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"lm_decode_{device_name.replace(' ', '_')}.csv"
    fields = ["scheme", "batch", "context", "steps", "device", "step_ms", "decode_tokens_per_s", "error"]
    with path.open("w", newline="") as f:  # row by row: a run cut short keeps what it measured
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for v in variants:
            for batch in (int(b) for b in args.batches.split(",")):
                row = {"scheme": v.label, "batch": batch, "context": args.context, "steps": args.steps,
                       "device": device_name}
                try:
                    row |= time_decode(model, v, batch, args.context, args.steps) | {"error": ""}
                except Exception as exc:  # one failing scheme must not lose the others' rows
                    traceback.print_exc()
                    failure = f"{type(exc).__name__}: {exc}"[:200]
                    row |= {"step_ms": "", "decode_tokens_per_s": "", "error": failure}
                print(row, flush=True)
                w.writerow(row)
                f.flush()
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
