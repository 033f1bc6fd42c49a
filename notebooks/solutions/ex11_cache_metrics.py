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
# # Solution — Exercise 11, did the cache change the answer?

# %% tags=["solution"]
import torch


def cache_metrics(base_logits: torch.Tensor, logits: torch.Tensor,
                  targets: torch.Tensor) -> tuple[float, float, float]:
    """``(perplexity, top1_agreement, mean_kl)`` of the quantized run against the unquantized one."""
    lp = torch.log_softmax(base_logits.double(), dim=-1)
    lq = torch.log_softmax(logits.double(), dim=-1)
    nll = -lq.gather(1, targets.long()[:, None]).squeeze(1)
    agree = (lp.argmax(-1) == lq.argmax(-1)).double().mean()
    kl = (lp.exp() * (lp - lq)).sum(-1).mean()
    return float(torch.exp(nll.mean())), float(agree), float(kl)


# %% [markdown]
# ## Answers
#
# The worked case gives perplexity 4/3, agreement 1 and KL ≈ 0.0174 nats. On the real model the
# numbers of `kvlab quality` are this function applied to every position of the text.

# %%
if __name__ == "__main__":  # run as a notebook or a script: verify the solution
    from kvlab.exercises import check_cache_metrics

    print(check_cache_metrics(cache_metrics))
