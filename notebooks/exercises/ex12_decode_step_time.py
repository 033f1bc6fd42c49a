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
# # Exercise 12 — Predict a decode step's time from the roofline
#
# *Follows lesson `06_serving_what_if`. About 25 minutes.*
#
# In a decode step every running sequence adds one token. The GPU streams the whole model's
# weights through its matrix units once for the batch, reads every sequence's cached keys and
# values once, and writes the new tokens' K/V. With every part at the GPU's peak (the *pure
# roofline*, no overheads), the step takes:
#
# * **weight GEMMs**: `max(2 × parameters × batch / peak_bf16_flops, parameters × 2 B / bandwidth)`
#   (bf16 weights; the larger of computing and reading the weights);
# * **attention**: each sequence reads the K/V of `context + 1` tokens (its new one included) in
#   every full-attention layer, but at most `window` tokens in a sliding-window layer;
# * **cache write**: the `batch` new tokens' K/V in every layer.
#
# Write `decode_step_ms(model, kv_cache_dtype, gpu, batch, context)`, in **milliseconds**, for a
# dense preset (`llama-3.1-8b`, `qwen3-8b`, `gemma-3-27b`, …). You need:
#
# * `kvlab.models.get_model(model)`: `.num_parameters`, and `.layers`, each with `.kind`
#   (`"full"` or `"sliding_window"`), `.sliding_window`, `.num_kv_heads`, `.head_size`;
# * `kvlab.kv_bytes_per_token(kv_cache_dtype, num_kv_heads, head_size)`: bytes of one token in one
#   layer (scales included);
# * `kvlab.hardware.get_gpu(gpu)`: `.bf16_flops` (FLOP/s) and `.memory_bandwidth` (bytes/s).
#
# Example: Llama 3.1 8B, bf16 cache, H100 SXM, one sequence at context 1023 → **4.834 ms**
# (weights 4.794 ms + K/V reads 0.040 ms + writes 0.00004 ms).

# %% tags=["stub"]
from kvlab import kv_bytes_per_token  # noqa: F401 (you will need these)
from kvlab.hardware import get_gpu  # noqa: F401
from kvlab.models import get_model  # noqa: F401


def decode_step_ms(model: str, kv_cache_dtype: str, gpu: str, batch: int, context: int) -> float:
    """Pure-roofline time of one decode step of ``batch`` sequences at ``context`` tokens (ms)."""
    raise NotImplementedError("write decode_step_ms")


# %% [markdown]
# <details><summary>Hint 1 — the bytes of one layer</summary>
#
# For each layer: `per_token = kv_bytes_per_token(kv_cache_dtype, layer.num_kv_heads,
# layer.head_size)`; the keys a sequence reads are `context + 1`, or
# `min(context + 1, layer.sliding_window)` when `layer.kind == "sliding_window"`.
# </details>
#
# <details><summary>Hint 2 — adding it up</summary>
#
# `seconds = gemm + batch × Σ_layers per_token × keys / bandwidth + batch × Σ_layers per_token /
# bandwidth`; return `seconds * 1000`.
# </details>

# %% tags=["check"]
from kvlab.exercises import check_decode_step_time

result = check_decode_step_time(decode_step_ms)
result

# %% [markdown]
# ## Where does the time go?
#
# Once the check passes, the cell below prints your prediction next to kvlab's step-time model with
# its *measured* efficiencies (kernels fitted to H100 benchmarks, GEMMs timed on an H100, a 3 ms
# per-step overhead), for a growing batch.

# %%
if result.passed:
    from kvlab.timing import StepTimeModel

    measured = StepTimeModel("h100", get_model("llama-3.1-8b"), "bfloat16")
    for batch in (1, 16, 64, 256):
        mine = decode_step_ms("llama-3.1-8b", "bfloat16", "h100-sxm", batch, 4095)
        print(f"batch {batch:3d}: roofline {mine:6.2f} ms, with measured efficiencies "
              f"{measured([(1, 4095)] * batch) * 1e3:6.2f} ms")
else:
    print("Make the check above pass first.")

# %% [markdown]
# ## Think about it
#
# 1. At which batch does Llama 3.1 8B on an H100 stop being limited by reading its weights, if the
#    contexts are short? What does that say about batching decode requests?
# 2. An int8 per-token-head cache halves the attention bytes but not the weight bytes. When does it
#    speed a step up by close to 2×, and when by almost nothing?
# 3. The roofline ignores the per-step overhead. Why does a 3 ms overhead matter more for a small
#    model than for a large one?
