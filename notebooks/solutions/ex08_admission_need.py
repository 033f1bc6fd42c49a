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
# # Solution — Exercise 8, what the admission gate asks for

# %% tags=["solution"]
def admission_need(policy: str, num_tokens: int, block_size: int, sliding_window: int | None,
                   max_num_batched_tokens: int, max_model_len: int) -> int:
    """Blocks the admission gate charges one group for a ``num_tokens``-token request."""
    need = -(-num_tokens // block_size)
    if policy == "vllm" and sliding_window is not None:
        tokens = min(sliding_window - 1 + max_num_batched_tokens, max_model_len)
        need = min(need, -(-tokens // block_size) + 1)
    return need


# %% [markdown]
# ## Answers
#
# 1. No: the uncapped gate charges every sliding-window group the full `cdiv(N, B)`, which is more
#    than the whole pool, while the startup sized the pool with the *capped* footprint and so
#    accepted the length. Nothing that frees blocks can help — even an empty pool is too small — and
#    vLLM's waiting queue is strictly first-come-first-served: the head blocks everyone behind it.
# 2. A prefill chunk of up to `T` tokens is computed in one step, and blocks are only freed *before*
#    a step (for tokens already computed). During the step the group holds the `W − 1` tokens before
#    the chunk that the chunk's first token attends to, plus the chunk itself.

# %%
if __name__ == "__main__":  # run as a notebook or a script: verify the solution
    from kvlab.exercises import check_admission_need

    print(check_admission_need(admission_need))
