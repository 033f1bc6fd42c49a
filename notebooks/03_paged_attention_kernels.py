# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 3 · The paged-attention kernels
#
# kvlab's Triton kernel computes attention straight from the paged, possibly quantized cache. On a
# machine without a GPU it runs in Triton's interpreter — slowly, but with the same source. This lesson
# answers:
#
# 1. How does the kernel find a token's keys and values?
# 2. Where are the quantization scales applied?
# 3. Does the kernel agree with the float64 reference, and how closely?
# 4. When is a quantized cache actually faster on a GPU?

# %%
import torch
from IPython.display import display

import kvlab
from kvlab.analysis import speedups
from kvlab.analysis.kernel_check import KernelCase, per_head_relative_error, run_reference, run_triton
from kvlab.kvdata import find_benchmark_csv, load_benchmark_results
from kvlab.plots.kernels import benchmark_bandwidth_figure, benchmark_time_figure
from kvlab.widgets import build_kernel_explorer

# %% [markdown]
# ## 1. How does the kernel find a token's keys and values?
#
# Two sequences of 40 and 70 tokens decode one new token each. Their blocks of 16 tokens are scattered
# over a shuffled pool; each sequence's *block table* lists its blocks in token order. Unused columns
# point to a spare block that was never written (it holds NaN), so a kernel that read past a sequence
# would return NaN instead of a plausible wrong number.

# %%
ex = kvlab.build_paged_example([1, 1], [40, 70], num_q_heads=8, num_kv_heads=2, head_size=64,
                               scheme="int8_per_token_head", query_dtype=torch.float16,
                               kv_dtype=torch.float16, seed=0)
print("block tables:\n", ex.batch.block_table)
print("seq_lens:", ex.batch.seq_lens_list, " query tokens:", ex.batch.query_lens)

# %% [markdown]
# Token `p` of sequence `s` lives in block `block_table[s, p // 16]` at offset `p % 16`; its *slot* is
# `block × 16 + offset`. The new tokens of this step were written to these slots:

# %%
print("slots of the new tokens:", ex.slot_mapping.tolist())
print("cache layout:", tuple(ex.cache.key.shape), ex.cache.key.dtype,
      "+ scales", tuple(ex.cache.key_scale.shape), ex.cache.key_scale.dtype)

# %% [markdown]
# The codes are stored `[blocks, block_size, kv_heads, head_size]` in int8, and the fp32 scales of each
# (token, head) sit in their own tensor (vLLM packs them at the end of each row; kvlab keeps rows of 64
# bytes aligned for wide loads — the byte count per page is the same).

# %% [markdown]
# ## 2. Where are the scales applied?
#
# Dequantizing every key before the dot product would cost one multiply per channel. The kernel instead
# multiplies the *score*: `q · (s_j K̂_j) = s_j (q · K̂_j)`, one multiply per key. The value scale is
# folded into the softmax weight before the second dot: `Σ_j p_j (s_j V̂_j) = Σ_j (p_j s_j) V̂_j`.
# Checked on one head of the cache, in float64:

# %%
block = ex.batch.block_table[0, 0]
codes, scales = ex.cache.key[block, :, 0].double(), ex.cache.key_scale[block, :, 0].double()
q = ex.query[0, 0].double()
dequantize_first = (codes * scales[:, None]) @ q
scale_the_score = (codes @ q) * scales
print("largest difference:", (dequantize_first - scale_the_score).abs().max().item())

# %% [markdown]
# Identical (here to the last bit): the factoring changes the cost, not the result.

# %% [markdown]
# ## 3. Does the kernel agree with the reference?
#
# Three outputs per case: the *truth* (float64 attention on the original K/V), the *reference* (float64
# attention over the quantized cache) and the *Triton* kernel on that cache. Reference vs truth is the
# error of the format; Triton vs reference is the kernel's own arithmetic (fp16 dots, fp32 softmax).

# %%
for scheme in ("bfloat16", "fp8_e4m3", "int8_per_token_head", "fp8_per_token_head"):
    case = KernelCase(scheme=scheme, context=64, num_seqs=2)
    run = run_reference(case)
    out = run_triton(run, case)
    fmt = max(per_head_relative_error(run.reference, run.truth))
    kern = max(per_head_relative_error(out, run.reference))
    print(f"{scheme:20s} reference vs truth {fmt:.1e}   Triton vs reference {kern:.1e}")

# %% [markdown]
# The kernel's own error stays near fp16 precision (a few 1e-4) for every scheme, one to two orders of
# magnitude below the error the format itself brings: what you measure end to end is the format.

# %% [markdown]
# ## 4. When is a quantized cache faster?
#
# Decoding reads the whole cache once per step and does little arithmetic on it, so its time is bounded
# below by `bytes / memory bandwidth`. A 1-byte cache moves half the bytes; whether that halves the time
# depends on the kernel streaming the bytes as fast as the device can copy. The results below come from
# `kvlab bench` on a GPU, committed under `benchmarks/results/`.

# %%
paths = find_benchmark_csv()
results = load_benchmark_results(paths) if paths else None
print("results:", [p.name for p in paths] or "none found (run `kvlab bench` on a GPU)")
if results:
    source, device = paths[0].name, results.values("device")[0]
    batch = 16 if results.select(kind="decode", batch=16, source=source) else results.values("batch")[-1]
    rows = results.select(kind="decode", batch=batch, device=device, source=source)
    display(benchmark_time_figure(rows, title=f"Decode, batch {batch}: µs per call (dashed: bandwidth)"))
    display(benchmark_bandwidth_figure(rows, title=f"Decode, batch {batch}: share of copy bandwidth"))

# %% [markdown]
# The speed-up over bfloat16 for every batch size and context of the decode benchmark:

# %%
if results:
    for b in sorted({r["batch"] for r in results.select(kind="decode", source=source)}):
        for s in speedups(results, kind="decode", batch=b, device=device, source=source):
            if s.scheme in ("fp8_e4m3", "int8_per_token_head", "fp8_per_token_head"):
                print(f"batch {b:>2}  {s.scheme:20s} context {s.context:>6,}: {s.median_us:7.1f} µs vs "
                      f"{s.baseline_us:7.1f} µs → {s.speedup:.2f}×  ({s.pct_copy_bw:.0f} % of copy bw)")

# %% [markdown]
# On the H100 the answer has three parts:
#
# * **One short sequence** (batch 1, 1,024 tokens): every format takes about 7 µs, the 1-byte caches
#   included. There are too few bytes to save: the time is launch and memory latency, not bandwidth.
# * **Longer or more sequences**: from batch 1 at 8,192 tokens (1.2×) or batch 16 at 1,024
#   tokens (1.2–1.4×) on, they are faster; batch 1 at 32,768 tokens 1.4–1.5×; batch 16 at 8,192 and
#   32,768 tokens 1.5–1.8×.
# * **Large batches** (64): 1.6–1.8×. bfloat16 there already streams at the copy bandwidth (93–102 %),
#   the 1-byte kernels at 76–94 %: half the bytes, but not quite half the time.
# * On an H200, with 1.4× the H100's bandwidth and the same multiprocessors, bfloat16 at batch 64 gets
#   1.39–1.45× faster and the 1-byte kernels only 1.03–1.10×: they are limited by the work of converting
#   codes, not by bytes (`benchmarks/results/decode_NVIDIA_H200.csv`).
#
# "Faster than PyTorch" means little without saying which PyTorch. Every row of the benchmark is timed
# in the same run against torch SDPA on contiguous bf16 K/V twice: with its default dispatch (which
# picks cuDNN or flash itself) and with the flash backend forced. The ratio is kvlab's time over
# SDPA's (below 1: kvlab is faster); the floor is bytes over copy bandwidth or FLOPs over the
# measured matrix rate, whichever is larger.

# %%
if results:
    for r in results.select(scheme="bfloat16", backend="kvlab-triton", source=source):
        if r["kind"] in ("decode", "prefill") and r.get("x_sdpa_default") is not None:
            flash = r["x_sdpa_flash"] if r["x_sdpa_flash"] is not None else float("nan")
            print(f"{r['kind']:7s} B={r['batch']:<3} L={r['context']:>6,} new={r['query_len']:>5,}: "
                  f"{r['median_us']:8.1f} µs = {r['x_sdpa_default']:.2f}× SDPA default "
                  f"({r['sdpa_default_backend']}), {flash:.2f}× SDPA flash, "
                  f"{r['pct_floor']:.0f} % of the floor's speed")

# %% [markdown]
# Prefill is another matter: a 2,048-token chunk over 8,192 tokens is dominated by matrix products, not
# by reading the cache.

# %%
if results:
    for r in results.select(kind="prefill", source=source):
        print(f"prefill {r['scheme']:20s} {r['query_len']:,} new tokens over {r['context']:,}: "
              f"{r['median_us']:7.1f} µs  {r['tflops']:.0f} TFLOP/s")

# %% [markdown]
# There a quantized cache costs about the time of bfloat16 (0.93–1.05× on the H100): it saves memory
# in prefill, not time.
# Converting codes inside the attention loop would cost more (1.3–1.7× on the H100), because a
# 2,048-token chunk is served by 32 query blocks per KV head that each read, and would each convert,
# every tile of the context. So a prefill first converts each block it reads once into a temporary
# 16-bit copy and then runs the bfloat16 kernel over that (`kernels/dequantized_prefill.py`).

# %% [markdown]
# ## Explore
#
# The sliders drive the float64 reference live. **Run Triton kernel** runs the interpreter in the
# background (about a second for these sizes); keep moving the sliders meanwhile — the result is shown
# only while the settings still match it. Below, the committed GPU results by kind and batch.

# %%
explorer = build_kernel_explorer()
explorer.ui

# %% [markdown]
# ## Summary
#
# * The kernel reaches token `p` through `block_table[seq, p // block_size]`; no copy of the context is
#   ever made.
# * Per-token-head scales are applied once per key (on the score) and once per value (on the softmax
#   weight), not once per channel: exact, and cheaper.
# * Against the float64 reference the kernel's own error is at fp16 level, far below the format's error.
# * A quantized cache makes decode faster only where it is bandwidth-bound — long contexts, large batches
#   (up to 1.8× on the H100 at batch 64) — and not for one short sequence; prefill does not gain.
