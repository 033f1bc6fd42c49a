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
# # Exercise 3 — Truncation versus round-to-nearest
#
# *Follows lesson `02_quantization_error`. About 15 minutes.*
#
# Triton converts a float to an integer with `fptosi`, which rounds **toward zero**. vLLM's int8
# per-token-head store therefore *truncates* `y = x * (1/s)` instead of rounding it. How much does
# that cost?
#
# Write `compare_roundings(x)` that quantizes `x` twice with kvlab's
# `quantize_per_token_head(x, "int8_per_token_head", rounding)` — once with `rounding="nearest"`,
# once with `rounding="truncate"` — dequantizes both in float64, and returns three numbers:
#
# * `error_nearest`: `relative_error(dequantized, x)` with nearest rounding,
# * `error_truncate`: the same with truncation,
# * `fraction_differ`: the fraction of int8 codes on which the two roundings disagree.
#
# `relative_error(out, ref)` is kvlab's `‖out − ref‖₂ / ‖ref‖₂` (`from kvlab import relative_error`).
# Compare against `x` converted to float64.

# %% [markdown]
# **Predict first.** On Gaussian data, about what ratio `error_truncate / error_nearest` do you
# expect, and about what `fraction_differ`? Write your guesses down before you run anything.

# %% tags=["stub"]
import torch

from kvlab import dequantize_per_token_head, quantize_per_token_head, relative_error  # noqa: F401 (you need them)


def compare_roundings(x: torch.Tensor) -> tuple[float, float, float]:
    """``(error_nearest, error_truncate, fraction_differ)`` of int8 per-token-head storage of ``x``."""
    raise NotImplementedError("write compare_roundings")


# %% [markdown]
# <details><summary>Hint 1 — one rounding</summary>
#
# `codes, scales = quantize_per_token_head(x, "int8_per_token_head", "nearest")`, then
# `restored = dequantize_per_token_head(codes, scales, torch.float64)` and
# `relative_error(restored, x.double())`.
# </details>
#
# <details><summary>Hint 2 — the fraction</summary>
#
# Compare the two code tensors element-wise: `(codes_nearest != codes_truncate)` is a boolean
# tensor; its mean (as float) is the fraction. Return plain floats (`float(...)`).
# </details>
#
# <details><summary>Hint 3 — an all-zero input</summary>
#
# If `x` is all zeros, `‖x‖ = 0`. `kvlab.relative_error` handles that case for you (it returns the
# plain norm of the difference); a hand-written `norm / norm` returns NaN.
# </details>

# %% tags=["check"]
from kvlab.exercises import check_rounding_comparison

result = check_rounding_comparison(compare_roundings)
result

# %% [markdown]
# ## Was your prediction right?
#
# Once the check passes, this cell measures one layer's worth of Gaussian keys (512 tokens, 8 KV
# heads, head size 128).

# %%
if result.passed:
    keys = torch.randn(512, 8, 128, generator=torch.Generator().manual_seed(0))
    nearest, truncate, differ = compare_roundings(keys)
    print(f"relative error, nearest : {nearest:.5f}")
    print(f"relative error, truncate: {truncate:.5f}   ({truncate / nearest:.2f}× nearest)")
    print(f"codes that differ       : {differ:.1%}")
else:
    print("Make the check above pass first.")

# %% [markdown]
# ## Think about it
#
# 1. Explain the ratio you measured from the error of one element: nearest rounding leaves an error
#    spread over half a step either side; where does truncation leave it?
# 2. Why do about half of the codes differ?
# 3. Truncation errors all point toward zero. What does that do to the dot product `q · k` when many
#    keys are quantized — does the bias average out like the nearest-rounding error does?
