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
# # Solution — Exercise 9, make the uncapped gate stall

# %% tags=["solution"]
from kvlab.serving import EngineConfig, capacity


def stalling_config(model) -> tuple[EngineConfig, int]:
    """A configuration the uncapped gate stalls on (but vLLM's capped gate serves), and a prompt length."""
    max_model_len = min(32768, model.max_position_embeddings)
    probe = EngineConfig(model, kv_cache_memory="4096GiB", max_model_len=max_model_len,
                         max_num_batched_tokens=2048)
    plan = capacity(probe)
    just_enough = plan.bytes_per_block * (plan.blocks_per_max_request + 1)  # + 1: the null block
    return probe.replace(kv_cache_memory=just_enough), max_model_len


# %% [markdown]
# ## Answers
#
# 1. The uncapped gate asks `cdiv(L, B)` blocks of every group, i.e. `num_groups × cdiv(L, B)`,
#    against `blocks_per_max_request` blocks the sizer reserved. For Gemma-3-27B at L = 32,768 and
#    B = 16 that is 7 × 2,048 = 14,336 blocks for a pool of 3,974 usable ones: about 3.6× the memory.
# 2. The stall needs `Σ_groups cdiv(N, B)` to exceed the pool. Sliding-window groups are only charged
#    more than their cap when `N` is larger than about `W − 1 + T` tokens; below that the two gates ask
#    the same. Between the two, the threshold is the `N` at which the uncapped sum crosses the pool
#    size — find it with `kvlab.serving.admission_need` and a bisection.
# 3. Because then "the sizer accepted `max_model_len`" implies "an empty pool admits a
#    `max_model_len` request": the gate can never ask for more than the pool was built to give. Two
#    formulas for the same quantity drift apart; one function cannot.

# %%
if __name__ == "__main__":  # run as a notebook or a script: verify the solution
    from kvlab.exercises import check_stalling_config

    print(check_stalling_config(stalling_config))
