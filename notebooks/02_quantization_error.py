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
# # 2 · Quantization schemes and their error
#
# A quantized KV cache stores each key and value in one byte instead of two. This lesson measures
# what that costs, question by question:
#
# 1. What does each `--kv-cache-dtype` store, and how many bytes per token?
# 2. How large is the error of a single stored number?
# 3. Where in a head does the error land: on the outlier channels or everywhere?
# 4. Does int8's rounding mode matter?
# 5. How much of that error reaches the attention output, and does it grow with the context?
# 6. Do real activations behave like the synthetic ones?
# 7. What happens below 8 bits (kvlab's 4-bit and 2-bit schemes, which vLLM does not offer)?
#
# Everything is computed by `kvlab` on the CPU in a few seconds.

# %%
from kvlab import get_scheme
from kvlab.analysis import (
    attention_error_vs_context,
    default_contexts,
    log_error_histogram,
    round_trip,
    scheme_bytes,
)
from kvlab.kvdata import kv_sample
from kvlab.plots import attention_error_figure, error_heatmaps_figure, error_log_range, scale_bytes_figure
from kvlab.widgets import build_quantization_explorer
from kvlab.widgets.quantization_explorer import COMPARED_SCHEMES

# %% [markdown]
# ## 1. What does each scheme store?
#
# Five distinct formats hide behind vLLM's dtype names (`fp8` is `fp8_e4m3`, `auto` is the model's
# dtype). The per-tensor fp8 formats keep **one** fp32 scale for all keys of a layer and one for all
# values; the per-token-head formats keep one fp32 scale **per token and per KV head**, for K and for V.

# %%
for name in COMPARED_SCHEMES:
    s = get_scheme(name)
    print(f"{name:22s} stores {str(s.storage_dtype):22s} mode {s.mode.name}")

# %% [markdown]
# Those scales are not free. For a layer with 8 KV heads of 128 channels (Llama-3-8B's shape), the
# bytes one token occupies:

# %%
rows = scheme_bytes(COMPARED_SCHEMES, num_kv_heads=8, head_size=128)
scale_bytes_figure(rows, title="Bytes per token per layer, 8 KV heads × 128 channels")

# %% [markdown]
# The per-token-head formats pay 64 bytes of scales on 2,048 bytes of data: **3.1 %** more than a
# per-tensor fp8 cache, still 48 % less than bfloat16.

# %% [markdown]
# ## 2. How large is the error of one stored number?
#
# We draw keys and values shaped like a trained decoder's: a few key channels carry a large offset
# (outliers, here 20 × the ordinary channels' spread) and keys are rotated by RoPE. Then each scheme
# stores them and reads them back.

# %%
sample = kv_sample("synthetic", num_tokens=1024, num_kv_heads=4, head_size=128, num_q_heads=16,
                   outlier_strength=20.0, seed=0)
trips = {name: (round_trip(sample.keys, name), round_trip(sample.values, name, role="v"))
         for name in COMPARED_SCHEMES}
for name, (k, v) in trips.items():
    print(f"{name:22s} mean |error|  K {k.abs_error.mean():.2e}   V {v.abs_error.mean():.2e}")

# %% [markdown]
# bfloat16 keeps 8 significant bits, so its error is about 1e-3. Among the 1-byte formats, **e5m2**
# (2 mantissa bits) is the coarsest. int8 per-token-head shows the largest gap between K and V
# (5.0e-2 against 5.5e-3): its grid is uniform within a row, with a step of `row max / 127`. Every key
# row contains an outlier channel of about 30, so every key gets a step of about 0.24; value rows
# (largest value about 3) get a step ten times finer.

# %% [markdown]
# ## 3. Where in the head does the error land?
#
# The heatmaps show `|restored − original|` for one head, token by token (rows) and channel by channel
# (columns), on a logarithmic colour scale. fp8 is a floating-point format: each value keeps 3 mantissa
# bits, so the error is *relative* (up to 1/16 of the value) and the scale hardly matters as long as
# values stay in range. The largest values — the outlier channels — carry the largest errors (the
# bright columns).
#
# Both heatmaps below use **one colour scale** (the same colour is the same error in both), so the
# two formats can be compared at a glance.

# %%
def heatmap(name, head=0, rows=256, compared=("fp8_e4m3", "int8_per_token_head")):
    k, v = trips[name]
    shared = error_log_range(*(e for s in compared for e in (trips[s][0].abs_error[:rows, head].numpy(),
                                                            trips[s][1].abs_error[:rows, head].numpy())))
    return error_heatmaps_figure(
        k.abs_error[:rows, head].numpy(), v.abs_error[:rows, head].numpy(),
        k.original[:rows, head].numpy(), v.original[:rows, head].numpy(),
        title=f"{name}: |error| of head {head}, first {rows} tokens", log_range=shared,
    )


heatmap("fp8_e4m3")

# %% [markdown]
# int8 is an integer grid: the error is spread evenly over all channels of a row (up to half a step),
# and the outlier channels, which *are* the row maxima, come back almost exactly (the dark columns).

# %%
heatmap("int8_per_token_head")

# %% [markdown]
# ## 4. Does the int8 rounding mode matter?
#
# vLLM's Triton cache-write kernel converts floats to int8 by truncation (toward zero), not by rounding
# to nearest. The error per element then reaches a whole step instead of half a step, and it is biased
# toward zero.

# %%
for rounding in ("nearest", "truncate"):
    k = round_trip(sample.keys, "int8_per_token_head", rounding=rounding)
    hist = log_error_histogram(k.abs_error)
    print(f"{rounding:9s} mean |error| {k.abs_error.mean():.2e}   max {k.abs_error.max():.2e}   "
          f"exact elements {hist.num_exact:,} of {hist.total:,}")

# %% [markdown]
# Truncation doubles both the mean and the largest error: the rounding mode matters as much as a
# change of format.

# %% [markdown]
# ## 5. How much error reaches the attention output?
#
# The number that matters downstream is the attention output. For contexts of 16 … 1024 tokens, the
# last 4 tokens attend (causally, in float64) to the stored K/V and to the originals; the plot shows
# the relative difference. Errors in K perturb the softmax weights; errors in V are averaged.

# %%
contexts = default_contexts(sample.num_tokens)
series = {name: attention_error_vs_context(sample.queries, k, v, contexts) for name, (k, v) in trips.items()}
for name, points in series.items():
    print(f"{name:22s} {points[0].context:>4} tokens: {points[0].rel_error:.2e}   "
          f"{points[-1].context} tokens: {points[-1].rel_error:.2e}")
attention_error_figure(series, title="Attention-output error vs context (synthetic K/V, outliers ×20)")

# %% [markdown]
# The error grows only slowly with the context (1.2–1.4× from 16 to 1024 tokens): the softmax is a
# weighted average, and independent per-element errors do not pile up. The ranking is bfloat16 ≪ int8
# per-token-head < fp8 per-token-head < fp8 e4m3 < fp8 e5m2. int8 wins among the 1-byte formats although
# its mean key error is the largest: it stores the outlier channels almost exactly, and those channels
# dominate the scores because the queries share them. fp8 per-token-head beats per-tensor fp8 for a
# similar reason: each row's largest value maps exactly onto the format's maximum.

# %% [markdown]
# ## 6. Do real activations behave the same?
#
# `kvlab` can run a small real transformer, MiniLM-L6 (6 layers, 12 heads of 32 channels), on a
# passage of text and keep each layer's K and V. If its package is not installed, the sample falls back
# to synthetic data and says so.

# %%
real = kv_sample("minilm", num_tokens=512, layer=2)
print(real.label, "|", real.note or f"{real.num_tokens} tokens, {real.num_kv_heads} heads × {real.head_size}")
real_trips = {name: (round_trip(real.keys, name), round_trip(real.values, name, role="v"))
              for name in COMPARED_SCHEMES}
real_series = {name: attention_error_vs_context(real.queries, k, v, default_contexts(real.num_tokens))
               for name, (k, v) in real_trips.items()}
attention_error_figure(real_series, title=f"Attention-output error vs context ({real.label})")

# %% [markdown]
# The ranking is the same on real activations. MiniLM's keys have only mild channel structure, so
# int8's step stays small and int8 per-token-head is 4–10× more accurate than the fp8 formats here,
# whose 3-bit (e4m3) or 2-bit (e5m2) mantissa limits them whatever the scale.

# %% [markdown]
# ## 7. Below 8 bits: the error-versus-bytes frontier
#
# vLLM's formats stop at one byte per element. `kvlab` adds three schemes that go below, **kvlab
# schemes, not vLLM `--kv-cache-dtype` values**:
#
# * `int4_per_token_head`: int8 per-token-head with 4-bit codes (−7…7), two per byte;
# * `kivi4` and `kivi2` (after KIVI, Liu et al. 2024): **keys per channel** (one fp16 scale and zero
#   point per channel over the 16 tokens of a block), **values per token** in groups of G channels,
#   and the newest tokens kept in bf16 (the *residual*: the block being filled, or `_r<n>` blocks).
#
# Why two axes? The outlier channels of section 3 are *channels*: a per-token scale must stretch over
# them in every row, a per-channel scale isolates them. Values have no such channels, and their error
# passes straight into the output token by token, so they are grouped per token.

# %%
from kvlab.analysis.frontier import frontier
from kvlab.plots.frontier import frontier_figure
from kvlab.quantization import KVLAB_SCHEME_NAMES

for name in ("int4_per_token_head", "kivi4", "kivi2"):
    print(get_scheme(name).describe())
print("kvlab schemes:", ", ".join(KVLAB_SCHEME_NAMES))

# %%
low_bit = ("bfloat16", "fp8_e4m3", "int8_per_token_head", "fp8_per_token_head", "int4_per_token_head",
           "kivi4", "kivi2", "kivi2_g128", "kivi2_g32_r8")
points = frontier(kv_sample("synthetic", num_tokens=512, num_kv_heads=4, head_size=128), low_bit)
for p in points:
    print(f"{p.scheme:<22} {p.bits_per_element:5.2f} bits/element  {p.bytes_per_token:5d} B/token  "
          f"attention error {p.rel_error:.3g}")
frontier_figure(points, "Error vs bytes, synthetic K/V with outlier channels (512 tokens)")

# %% [markdown]
# At 4 bits the axis matters more than the bits: `kivi4` (5.5 bits with its scales) is several times
# more accurate than `int4_per_token_head` (4.25 bits), because its keys are quantized per channel.
# At 2 bits the error is large on this data whatever the group; a longer residual (`_r8`: 128 tokens
# in bf16) helps in proportion to the share of the context it covers. `benchmarks/frontier.py` draws
# the full table (G = 32/64/128, two residual lengths, synthetic and MiniLM K/V, and what each scheme
# does to a real model: SmolLM2-135M's perplexity and top-1 agreement, as in lesson 7) into
# `benchmarks/results/frontier.csv`. There 4-bit KIVI is as good as the 8-bit formats; 2 bits are not.
#
# What the bytes buy: `kvlab capacity --model gemma-4-31b -tp 2 --kv-cache-memory 16GiB
# --max-model-len 131072 --kv-cache-dtype kivi2` fits about 4.6 times as many 128k-token requests as
# the bf16 cache (and says that `kivi2` is a kvlab scheme). The explorer below shows both numbers
# for any bits, group, residual and block size.

# %%
from kvlab.widgets.frontier_explorer import build_frontier_explorer

low_bit_explorer = build_frontier_explorer(context=256)
low_bit_explorer.ui

# %% [markdown]
# ## Explore
#
# Change the format, the rounding, the outlier strength, the head size and the context length; switch
# to MiniLM's real K/V and pick a layer. The heatmap shows one head (pick it with *heatmap head*).

# %%
explorer = build_quantization_explorer()
explorer.ui

# %% [markdown]
# ## Summary
#
# * Per-token-head formats spend `2 × 4` bytes of scales per KV head per token: about 3 % for 128
#   channels, 6 % for 64.
# * fp8's error is relative (it lands on the large values, the outlier channels); int8's is uniform
#   within a row, with a step set by the row's largest value.
# * int8 truncation, as vLLM's Triton store does it, doubles the error of round-to-nearest.
# * What reaches the attention output depends on the format and the data, hardly on the context length;
#   on both data sets here int8 per-token-head is the most accurate 1-byte format.
# * Below 8 bits (kvlab's own schemes), the quantization axis decides: keys per channel, values per
#   token. `kivi4` beats per-token 4-bit codes by a wide margin on keys with outlier channels.
# * Does any of this change what a model says? Lesson `07_does_it_change_the_answer` runs a real
#   language model through each cache and compares its answers.
