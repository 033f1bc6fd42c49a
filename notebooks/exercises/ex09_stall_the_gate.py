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
# # Exercise 9 — Make the uncapped gate stall
#
# *Follows lesson `05_sliding_windows_and_admission`, and exercise 8. About 30 minutes.*
#
# At startup vLLM sizes the pool assuming a sliding-window group holds at most
# `cdiv(W − 1 + T, B) + 1` blocks of a request. The uncapped admission gate of vLLM ≤ 0.20 then
# charges every group `cdiv(N, B)` blocks. When the sum is larger than the pool, the request at the
# head of the queue can **never** be admitted, and everything behind it waits forever — while the
# startup said the configuration was fine.
#
# Write `stalling_config(model)` for any model with sliding-window layers. It returns
# `(config, prompt_tokens)`: a `kvlab.serving.EngineConfig` for that model and a prompt length. The
# check serves one request of `prompt_tokens` tokens alone and demands that
#
# 1. the startup accepts `config` (`kvlab.serving.capacity(config)` does not raise) and
#    `prompt_tokens <= max_model_len`;
# 2. under `policy="uncapped"` the simulator reports a **stall**;
# 3. under `policy="vllm"` the same request **finishes** — so the gate, not the pool, is to blame.
#
# It tries real models (Gemma 3, Gemma 4, gpt-oss, Mistral) and random ones.
#
# Useful: `capacity(config)` returns the startup plan, with `plan.bytes_per_block` (bytes one block
# id costs on one GPU), `plan.blocks_per_max_request` (blocks one `max_model_len` request holds at its
# peak, sliding-window groups capped) and `plan.num_blocks`. `config.replace(field=value)` copies a
# configuration with a field changed.

# %% tags=["stub"]
from kvlab.serving import EngineConfig, capacity  # noqa: F401 (you will need them)


def stalling_config(model) -> tuple[EngineConfig, int]:
    """A configuration the uncapped gate stalls on (but vLLM's capped gate serves), and a prompt length."""
    raise NotImplementedError("write stalling_config")


# %% [markdown]
# <details><summary>Hint 1 — what to choose</summary>
#
# Pick a long `max_model_len` (say 32,768 tokens, at most `model.max_position_embeddings`) and a
# prompt of that length. The only other knob you need is `kv_cache_memory`.
# </details>
#
# <details><summary>Hint 2 — measure with a big pool first</summary>
#
# `probe = EngineConfig(model, kv_cache_memory="4096GiB", max_model_len=L, max_num_batched_tokens=2048)`
# and `plan = capacity(probe)` tell you `bytes_per_block` and `blocks_per_max_request`, whatever the
# memory.
# </details>
#
# <details><summary>Hint 3 — just enough memory</summary>
#
# Give the pool room for one max-length request and nothing more:
# `plan.bytes_per_block * (plan.blocks_per_max_request + 1)` bytes (the + 1 is the null block).
# The startup accepts it, the capped gate admits the request, and the uncapped gate asks for
# `cdiv(L, B)` blocks in every group.
# </details>

# %% tags=["check"]
from kvlab.exercises import check_stalling_config

result = check_stalling_config(stalling_config)
result

# %% [markdown]
# ## Watch it stall
#
# Once the check passes, this cell serves your configuration for Gemma-3-27B under both gates and
# prints what the simulator saw.

# %%
if result.passed:
    from kvlab.models import get_model
    from kvlab.serving import simulate
    from kvlab.simulator import make_request

    config, prompt = stalling_config(get_model("gemma-3-27b"))
    for policy in ("uncapped", "vllm"):
        run = simulate(config.replace(policy=policy), [make_request("r0", prompt, 4)])
        stall = run.summary.stalled
        print(f"{policy:9s} finished={run.summary.finished}  steps={run.summary.steps}  "
              f"stall: {stall.reason if stall else '-'}")
else:
    print("Make the check above pass first.")

# %% [markdown]
# ## Think about it
#
# 1. Your configuration has room for exactly one max-length request. How much more memory would the
#    uncapped gate need to admit it? Express it as a multiple of what the sizer asked for.
# 2. A shorter prompt of `W + T` tokens: does it stall too? Where is the threshold?
# 3. Why does vLLM's fix cap the gate with the **same** function that sizes the pool?
