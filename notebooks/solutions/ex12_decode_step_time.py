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
# # Solution — Exercise 12, predict a decode step's time from the roofline

# %% tags=["solution"]
from kvlab import kv_bytes_per_token
from kvlab.hardware import get_gpu
from kvlab.models import get_model


def decode_step_ms(model: str, kv_cache_dtype: str, gpu: str, batch: int, context: int) -> float:
    """Pure-roofline time of one decode step of ``batch`` sequences at ``context`` tokens (ms)."""
    m, g = get_model(model), get_gpu(gpu)
    compute = 2 * m.num_parameters * batch / g.bf16_flops
    weights = m.num_parameters * 2 / g.memory_bandwidth
    read = written = 0
    for layer in m.layers:
        per_token = kv_bytes_per_token(kv_cache_dtype, layer.num_kv_heads, layer.head_size)
        keys = context + 1
        if layer.kind == "sliding_window":
            keys = min(keys, layer.sliding_window)
        read += batch * keys * per_token
        written += batch * per_token
    return (max(compute, weights) + (read + written) / g.memory_bandwidth) * 1e3


# %% [markdown]
# ## Answers
#
# 1. The GEMMs turn compute bound when `2 × P × batch / FLOP/s` exceeds `2 P / bandwidth`, i.e. at a
#    batch of `FLOP/s / bandwidth` = 989e12 / 3.35e12 ≈ 295 sequences on an H100 (bf16). Below that,
#    a decode step costs about the same for 1 or 200 sequences: batching is nearly free throughput.
# 2. Close to 2× when the K/V reads dominate the step (many sequences with long contexts); almost
#    nothing when the weights dominate (few or short sequences). Its larger win is capacity: twice
#    the tokens fit, so larger batches run.
# 3. An 8B model's weight read takes ~5 ms on an H100, so 3 ms is +60 %; a 70B model's takes ~42 ms
#    and the same overhead is +7 %.

# %%
if __name__ == "__main__":  # run as a notebook or a script: verify the solution
    from kvlab.exercises import check_decode_step_time

    print(check_decode_step_time(decode_step_ms))
