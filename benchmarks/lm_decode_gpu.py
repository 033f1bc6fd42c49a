"""Decode tokens/s of SmolLM2-135M's shapes through kvlab's paged cache and Triton kernels, per scheme.

Random weights of the model's exact shapes (30 layers, hidden 576, MLP 1536, 9 query / 3 KV heads of
64, vocabulary 49,152, as its GGUF metadata says), so no model file is needed. For every scheme and
batch size: prefill ``--context`` random tokens per sequence, then time ``--steps`` decode steps of
the whole batch (every layer: kvlab's cache write, then ``kvlab.attention`` with the Triton backend).
The numbers include kvlab's Python-side batch bookkeeping, which dominates for a model this small;
they measure this forward, not the kernels alone (``kvlab bench`` does that).

Compiling the Triton kernels of every scheme takes longer than timing them, so ``--warm-processes N``
first runs one untimed step of every (scheme, batch) in N processes side by side: they fill Triton's
on-disk kernel cache with the exact launch shapes, and the timed run (one process, alone on the GPU)
then loads the compiled kernels. Schemes that store identical codes (``fp8``, ``fp8_e4m3``) are
timed once. Rows are written as they finish; ``--budget-s`` stops starting new ones after that many
seconds, so a run cut short still keeps what it measured.

Writes ``lm_decode_<GPU>.csv`` to ``$OUT`` (or ``--out``) and prints the table.

    python benchmarks/lm_decode_gpu.py [--batches 1,16,64] [--context 1024] [--steps 32]
                                       [--warm-processes 8] [--budget-s 120]
"""

from __future__ import annotations

import argparse
import csv
import os
import time
import traceback
from pathlib import Path

import torch

from kvlab.lm import CacheVariant, LlamaModel, ModelKVCache
from kvlab.lm.random_weights import SMOLLM2_135M, random_model
from kvlab.lm.variants import all_variants


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _warm(args: tuple) -> str:
    """Worker of ``--warm-processes``: one untimed decode step of each (variant, batch) given."""
    jobs, context, device, dtype = args
    model = random_model(SMOLLM2_135M, device, dtype)
    for variant, batch in jobs:
        try:
            time_decode(model, variant, batch, context, 1)
        except Exception as exc:  # the timed run reports it in its row
            print(f"warm-up {variant.label} B={batch}: {type(exc).__name__}: {exc}", flush=True)
    return "ok"


def warm_up(jobs: list[tuple[CacheVariant, int]], context: int, device: str, dtype: torch.dtype,
            processes: int) -> float:
    """Compile every job's kernels in ``processes`` processes side by side; returns the seconds taken."""
    import multiprocessing

    t0 = time.perf_counter()
    shares = [jobs[i::processes] for i in range(processes)]
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        pool.map(_warm, [(share, context, device, dtype) for share in shares if share])
    return time.perf_counter() - t0


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
    parser.add_argument("--warm-processes", type=int, default=0,
                        help="compile the kernels in this many processes first (0: compile while timing)")
    parser.add_argument("--budget-s", type=float, default=0.0,
                        help="start no new row after this many seconds (0: no limit)")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("lm_decode_gpu.py needs a CUDA GPU (or --device cpu for a smoke test)")
    device_name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    model = random_model(SMOLLM2_135M, args.device, dtype)
    names = [s for s in args.schemes.split(",") if s]
    variants, seen = [], set()
    for v in all_variants(SMOLLM2_135M.head_size):
        key = v.computation_key(dtype)
        if (not names or v.scheme in names) and key not in seen:
            seen.add(key)
            variants.append(v)
    batches = [int(b) for b in args.batches.split(",")]
    t_start = time.perf_counter()
    if args.warm_processes > 0:
        jobs = [(v, b) for v in variants for b in batches]
        print(f"compiled in {warm_up(jobs, args.context, args.device, dtype, args.warm_processes):.1f} s "
              f"({args.warm_processes} processes)", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"lm_decode_{device_name.replace(' ', '_')}.csv"
    fields = ["scheme", "batch", "context", "steps", "device", "step_ms", "decode_tokens_per_s", "error"]
    with path.open("w", newline="") as f:  # row by row: a run cut short keeps what it measured
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for v in variants:
            for batch in batches:
                if args.budget_s and time.perf_counter() - t_start > args.budget_s:
                    print(f"budget of {args.budget_s:.0f} s spent: {v.label} B={batch} not timed", flush=True)
                    continue
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
