"""GPU benchmark of kvlab's low-bit schemes against kvlab's bf16 path, in the CSV columns of `kvlab bench`.

Decode at B = 1 and B = 64 sequences of L = 32,768 tokens, and one prefill chunk of 2,048 tokens over
an 8,192-token context (32 query heads, 8 KV heads, head 128, block 16, bf16 queries, N(0, 1) K/V).
Every scheme is timed on the same inputs in the same run (CUDA-graph replays, inputs rotated past the
L2), and its error against float64 attention on the unquantized K/V is recorded.

The targets it checks (printed, and written to ``lowbit_targets_<device>.csv``):

* decode B=64: speed-up over bf16 >= 85% of the byte ratio ``bf16 bytes / scheme bytes`` (the bytes
  of :mod:`kvlab.bench.traffic`, scales and zero points included);
* decode B=1: >= 60% of the measured copy bandwidth;
* prefill: time <= 1.3 × bf16's.

Each low-bit scheme is timed in its default path (the launch rule's shape of the fused kernel for
decode, dequantize-first for prefill) and, for prefill, also in the fused kernel (``VARIANTS``);
``--sweep`` adds the shapes the rule was chosen from (``SWEEP_VARIANTS``: key tile, warps, pipeline
stages, split-K); ``--int8-dots`` adds the int4 decodes on int8 tensor-core dots. Every shape is
written to ``lowbit_sweep_<device>.csv``; the default path goes to
``lowbit_<device>.csv`` and the targets, with the best shape of the sweep beside it.

Usage (needs an NVIDIA GPU):
``PYTHONPATH=. python benchmarks/lowbit_bench.py [--out DIR] [--case decode64 ...] [--sweep | --candidate |
--int8-dots]``.
Writes ``lowbit_<device>.csv``, ``lowbit_sweep_<device>.csv`` and ``lowbit_targets_<device>.csv`` to DIR
(default benchmarks/results).
"""

from __future__ import annotations

import argparse
import csv
import os
import re

import torch

from kvlab.bench.measure import copy_bandwidths_gbps, rotation_sets, time_graph_us
from kvlab.bench.results import BenchRow, format_table, write_csv
from kvlab.bench.traffic import attention_bytes
from kvlab.bench.workloads import DenseKV, paged_copies, random_kv, truth
from kvlab.cache.batch import AttentionBatch, cdiv
from kvlab.cache.lowbit_cache import LowBitPagedCache
from kvlab.reference.metrics import relative_error

SCHEMES = ("bfloat16", "int4_per_token_head", "kivi4", "kivi2")
HQ, HKV, D, BS = 32, 8, 128, 16
CASES = (("decode", 1, 32768, 1), ("decode", 64, 32768, 1), ("prefill", 1, 8192, 2048))
#: Launch shapes tried per (case kind, batch, packed-code family): dicts of prepare_lowbit_attention
#: options; the first ({}: what lowbit_paged_attention does by default, prepare_lowbit_call) is the
#: default that lowbit_<device>.csv reports. ``max_registers=255`` is no cap (the hardware's limit).
#: Prefill's default is the dequantize-first path of :mod:`kvlab.kernels.lowbit_prefill`; ``FUSED``
#: times the fused kernel beside it.
FUSED = dict(dequantize_first=False)
VARIANTS = {
    ("prefill", 1, "int4"): ({}, FUSED),
    ("prefill", 1, "kivi"): ({}, FUSED),
}
#: The launch shapes swept before the rule was set (the rule's choices were taken from their timings,
#: kept in ``results/lowbit_sweep_v4_…csv`` and ``lowbit_sweep_…csv``); ``--sweep`` times them again.
SWEEP_VARIANTS = {
    ("decode", 1, "int4"): ({}, dict(num_warps=4, tile_n=128, num_splits=33)),
    ("decode", 1, "kivi"): ({}, dict(num_splits=66)),
    ("decode", 64, "int4"): ({}, dict(num_warps=2, tile_n=64)),
    ("decode", 64, "kivi"): ({}, dict(num_warps=4, tiles_per_step=2, max_registers=168, num_splits=3),
                             dict(num_warps=2, tiles_per_step=2)),
    ("prefill", 1, "int4"): ({}, FUSED, dict(prefill_rows=128, num_warps=8)),
    ("prefill", 1, "kivi"): ({}, FUSED, dict(prefill_rows=64, num_warps=4),
                             dict(prefill_rows=128, num_warps=8)),
}

#: ``--candidate``: the default beside the variants still open (notes v7): the int4 full grid at 3
#: pipeline stages and again at the default's 2 (timed last: does the position in the run matter?),
#: KIVI's ``c · s + z`` as packed ``fma.rn.f16x2``, 3 stages at B=1.
CANDIDATE_VARIANTS = {
    **VARIANTS,
    ("decode", 64, "int4"): ({}, dict(num_stages=3), dict(num_stages=2)),
    ("decode", 64, "kivi"): ({}, dict(packed_fma=True)),
    ("decode", 1, "int4"): ({}, dict(num_stages=3)),
    ("decode", 1, "kivi"): ({}, dict(packed_fma=True), dict(num_stages=3)),
}
#: ``--int8-dots``: the int4 decodes also on int8 tensor-core dots (``kernels/lowbit_int8_dot.py``, opt-in)
INT8_DOT_VARIANTS = {
    **VARIANTS,
    ("decode", 64, "int4"): ({}, dict(int8_dots=True)),
    ("decode", 1, "int4"): ({}, dict(int8_dots=True)),
}
#: untimed CUDA-graph replays before each timed row (3 left the first-timed row of a scheme 5-10% slow
#: in the v7 runs)
WARMUP_REPLAYS = 20


def lowbit_copies(scheme: str, kv: DenseKV, query_len: int, sets: int, gen: torch.Generator):
    """``sets`` copies of ``kv`` in one low-bit cache over shuffled blocks (Triton writer), one batch each."""
    from kvlab.kernels.lowbit_cache_write import write_lowbit_cache

    per_seq = cdiv(kv.context, BS)
    total = sets * kv.batch * per_seq + 1
    order = torch.randperm(total, generator=gen, device="cuda").to(torch.int32)
    cache = LowBitPagedCache.allocate(scheme, total, BS, HKV, D, device="cuda", residual_pages=per_seq + 1)
    pos = torch.arange(kv.context, device="cuda")
    batches = []
    for s in range(sets):
        ids = order[s * kv.batch * per_seq:(s + 1) * kv.batch * per_seq].view(kv.batch, per_seq)
        table = torch.cat([ids, order[-1:].expand(kv.batch, 1)], dim=1).contiguous()
        for b in range(kv.batch):
            k, v = kv.sequence(b)
            write_lowbit_cache(cache, k, v, table[b, pos // BS].long() * BS + pos % BS)
        batches.append(AttentionBatch.from_lengths([query_len] * kv.batch, [kv.context] * kv.batch, table))
    return cache, batches


def calls_for(scheme: str, kv: DenseKV, queries: list[torch.Tensor], query_len: int, gen: torch.Generator,
              variants: tuple[dict, ...] = ({},)):
    """Prepared calls over ``len(queries)`` copies of ``kv``: one list of calls per launch variant."""
    if scheme in ("bfloat16", "int8_per_token_head"):
        from kvlab.kernels.attention import prepare_paged_attention

        paged = paged_copies(scheme, kv, query_len=query_len, block_size=BS, sets=len(queries), gen=gen)
        calls = [prepare_paged_attention(q, paged.cache, b)
                 for q, b in zip(queries, paged.batches, strict=True)]
        return [calls], (paged,), lambda c: (c.tiling.num_splits, c.tiling.tile_n, c.tiling.num_warps,
                                             c.tiling.num_stages, c.tiling.max_registers, 1)
    from kvlab.kernels.lowbit_attention_call import prepare_lowbit_attention, prepare_lowbit_call

    cache, batches = lowbit_copies(scheme, kv, query_len, len(queries), gen)
    calls = []
    for opts in variants:  # a shape the launcher refuses is reported, and the sweep goes on
        # the default call (the path lowbit_paged_attention picks) or the fused kernel in a given shape
        prepare = prepare_lowbit_call if not opts or "dequantize_first" in opts else prepare_lowbit_attention
        try:
            calls.append([prepare(q, cache, b, **opts) for q, b in zip(queries, batches, strict=True)])
        except ValueError as exc:
            print(f"{scheme}: launch {opts} refused: {exc}")
            calls.append(None)
    return calls, (cache,), lambda c: (c.num_splits, c.tile_n, c.num_warps, c.options["num_stages"],
                                       c.options.get("maxnreg"), c.tiles_per_step)


def run(out_dir: str, repeats: int, cases: tuple = CASES, variants: dict | None = None) -> None:
    import triton

    ways = copy_bandwidths_gbps()
    copy_bw = max(ways.values())
    device = torch.cuda.get_device_name()
    print(f"{device}: copy bandwidth {copy_bw:.0f} GB/s (read + written)")
    stem = "".join(ch if ch.isalnum() else "_" for ch in device).strip("_")
    rows: list[BenchRow] = []
    sweep: list[BenchRow] = []
    for kind, batch, context, qlen in cases:
        gen = torch.Generator(device="cuda").manual_seed(batch * 7 + context + qlen)
        kv = random_kv(batch, context, HKV, D, torch.bfloat16, gen)
        smallest = attention_bytes("kivi2", batch=batch, context=context, query_len=qlen, num_q_heads=HQ,
                                   num_kv_heads=HKV, head_size=D, block_size=BS)
        sets = rotation_sets(smallest, 4, cap=8)
        queries = [torch.randn(batch * qlen, HQ, D, generator=gen, device="cuda").to(torch.bfloat16)
                   for _ in range(sets)]
        meta = AttentionBatch.from_lengths([qlen] * batch, [context] * batch,
                                           torch.zeros(batch, 1, dtype=torch.int32, device="cuda"))
        want = truth(queries[0], kv, meta)
        for scheme in SCHEMES:
            family = "kivi" if scheme.startswith("kivi") else "int4"
            shapes = VARIANTS if variants is None else variants
            tried = shapes.get((kind, batch, family), ({},)) if scheme != "bfloat16" else ({},)
            all_calls, keep, shape = calls_for(scheme, kv, queries, qlen, gen, tried)
            nbytes = attention_bytes(scheme, batch=batch, context=context, query_len=qlen, num_q_heads=HQ,
                                     num_kv_heads=HKV, head_size=D, block_size=BS)
            for i, calls in enumerate(all_calls):
                if calls is None:
                    continue
                try:
                    us = time_graph_us([c.run for c in calls], repeats, warmup=WARMUP_REPLAYS)
                    err = relative_error(calls[0].run(), want)
                except Exception as exc:  # one failing launch shape must not lose the rest of the sweep
                    print(f"{scheme} {kind} B={batch} variant {tried[i]}: {type(exc).__name__}: {exc}")
                    continue
                gbps = nbytes / us / 1e3
                splits, tile, warps, stages, cap, step = shape(calls[0])
                row = BenchRow(scheme=scheme, batch=batch, context=context, kind=kind, query_len=qlen,
                               median_us=round(us, 2), bytes=nbytes, gbps=round(gbps, 1),
                               pct_copy_bw=round(100 * gbps / copy_bw, 1), rel_err_truth=float(f"{err:.3e}"),
                               device=device, copy_bw_gbps=round(copy_bw, 1), num_splits=splits, tile_n=tile,
                               num_warps=warps, num_stages=stages,
                               max_registers=cap,
                               backend=("kvlab-triton" if i == 0 else "kvlab-triton-sweep")
                               + ("-byte-unpack" if tried[i].get("fast_unpack") is False else "")
                               + ("-packed-fma" if tried[i].get("packed_fma") else "")
                               + ("-int8-dots" if tried[i].get("int8_dots") else "")
                               + (f"-{step}-tiles-per-step" if step > 1 else "")
                               + (f"-{calls[0].block_m}-rows" if kind == "prefill" and scheme != "bfloat16"
                                  else "")
                               + ("-dequantize-first" if hasattr(calls[0], "scratch") else ""),
                               triton=triton.__version__, torch=torch.__version__)
                (rows if i == 0 else sweep).append(row)
                print(format_table([row]).splitlines()[-1], tried[i] or "default", flush=True)
            del all_calls, keep
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        del kv, queries, want
        torch.cuda.empty_cache()
        # written after every case, so that a later case that dies loses nothing measured
        write_csv(rows + sweep, os.path.join(out_dir, f"lowbit_sweep_{stem}.csv"))
    write_csv(rows, os.path.join(out_dir, f"lowbit_{stem}.csv"))
    write_csv(rows + sweep, os.path.join(out_dir, f"lowbit_sweep_{stem}.csv"))
    targets = target_rows(rows, rows + sweep)
    print(format_table(rows))
    if not targets:
        return
    with open(os.path.join(out_dir, f"lowbit_targets_{stem}.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(targets[0]))
        w.writeheader()
        w.writerows(targets)
    for t in targets:
        print(t)


def _best(rows: list[BenchRow], kind: str, batch: int, scheme: str) -> BenchRow:
    mine = [r for r in rows if (r.kind, r.batch, r.scheme) == (kind, batch, scheme)]
    return min(mine, key=lambda r: r.median_us)


def target_rows(rows: list[BenchRow], swept: list[BenchRow] | None = None) -> list[dict]:
    """The issue's three targets per low-bit scheme: the default launch's value against the bar, and
    the best launch shape of the sweep (``best``, ``best_shape``) beside it."""
    swept = swept or rows
    by = {(r.kind, r.batch, r.scheme): r for r in rows}
    out = []

    def shape(r: BenchRow) -> str:
        step = re.search(r"-(\d+)-tiles-per-step", r.backend)
        step = step.group(1) if step else "1"
        rows = re.search(r"-(\d+)-rows", r.backend)
        prefill_rows = f", {rows.group(1)} rows" if rows else ""
        if r.backend.endswith("-dequantize-first"):
            prefill_rows += ", dequantized first"
        if "-int8-dots" in r.backend:
            prefill_rows += ", int8 dots"
        return (f"tile {r.tile_n} x {step} a step, {r.num_warps} warps, {r.num_stages} stages, "
                f"{r.num_splits} splits, cap {r.max_registers}{prefill_rows}")

    for scheme in SCHEMES[1:]:
        if not all((kind, batch, s) in by for kind, batch, _, _ in CASES for s in (scheme, "bfloat16")):
            continue  # a run of some cases only (--case): no target row for this scheme
        d64, b64 = by[("decode", 64, scheme)], by[("decode", 64, "bfloat16")]
        ratio = b64.bytes / d64.bytes
        best = _best(swept, "decode", 64, scheme)
        out.append(dict(scheme=scheme, target="decode B=64 L=32k speed-up >= 85% of byte ratio",
                        measured=round(b64.median_us / d64.median_us, 3), bar=round(0.85 * ratio, 3),
                        byte_ratio=round(ratio, 3), met=b64.median_us / d64.median_us >= 0.85 * ratio,
                        best=round(b64.median_us / best.median_us, 3), best_shape=shape(best)))
        d1 = by[("decode", 1, scheme)]
        best = _best(swept, "decode", 1, scheme)
        out.append(dict(scheme=scheme, target="decode B=1 L=32k >= 60% of copy bandwidth",
                        measured=d1.pct_copy_bw, bar=60.0, byte_ratio="", met=d1.pct_copy_bw >= 60.0,
                        best=best.pct_copy_bw, best_shape=shape(best)))
        p, pb = by[("prefill", 1, scheme)], by[("prefill", 1, "bfloat16")]
        best = _best(swept, "prefill", 1, scheme)
        out.append(dict(scheme=scheme, target="prefill time <= 1.3x bf16",
                        measured=round(p.median_us / pb.median_us, 3),
                        bar=1.3, byte_ratio="", met=p.median_us / pb.median_us <= 1.3,
                        best=round(best.median_us / pb.median_us, 3), best_shape=shape(best)))
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--case", action="append", choices=[f"{c[0]}{c[1]}" for c in CASES],
                    help="only this case (decode1, decode64, prefill1); repeatable, run in the order given")
    ap.add_argument("--sweep", action="store_true",
                    help="also time the launch shapes the rule was chosen from (SWEEP_VARIANTS)")
    ap.add_argument("--candidate", action="store_true",
                    help="also time the variants still open beside the default (CANDIDATE_VARIANTS)")
    ap.add_argument("--int8-dots", action="store_true",
                    help="also time the int4 decodes on int8 tensor-core dots (INT8_DOT_VARIANTS)")
    a = ap.parse_args()
    names = a.case or [f"{c[0]}{c[1]}" for c in CASES]  # in the order given: the first is measured first
    run(a.out, a.repeats, tuple(c for n in names for c in CASES if f"{c[0]}{c[1]}" == n),
        SWEEP_VARIANTS if a.sweep else CANDIDATE_VARIANTS if a.candidate else
        INT8_DOT_VARIANTS if a.int8_dots else VARIANTS)
