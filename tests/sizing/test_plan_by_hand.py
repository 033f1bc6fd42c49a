"""``plan_kv_cache`` on one full-attention layer, worked by hand for each startup profile.

A page is 16 tokens x 8 KV heads x 128 x 2 bytes x (K and V) = 65,536 B; the memory is 10 pages,
655,360 B, so the pool has 10 blocks. ``max_model_len`` 40 needs ceil(40 / 16) = 3 blocks, so the
concurrency is 10 / 3 = 3.33x. "GPU KV cache size" is 10 x 16 = 160 tokens by the per-group formula
(vLLM <= 0.20) and int(3.333 x 40) = 133 tokens by the concurrency formula (>= 0.21); vLLM 0.33 prints
both on one line and keeps the null block out of the memory a request may use.
"""

from __future__ import annotations

import pytest

from kvlab.sizing.capacity import plan_kv_cache
from kvlab.sizing.specs import FullAttentionSpec

PAGE = 65_536
SPECS = {"l0": FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128)}
SIZE = "GPU KV cache size: {} tokens"
CONC = "Maximum concurrency for 40 tokens per request: 3.33x"


@pytest.mark.parametrize(
    "profile, lines",
    [
        ("vllm-0.20", (SIZE.format(160), CONC)),
        ("vllm-0.21", (SIZE.format(133), CONC)),
        ("vllm-0.33", (f"{SIZE.format(133)}, {CONC}",)),
    ],
)
def test_log_lines_by_profile(profile, lines):
    plan = plan_kv_cache(SPECS, 10 * PAGE, max_model_len=40, in_flight_tokens=16, profile=profile)
    assert plan.log_lines == lines
    assert (plan.num_blocks, plan.bytes_per_block, plan.blocks_per_request) == (10, PAGE, (3,))
    assert plan.max_concurrency == pytest.approx(10 / 3)
    assert (plan.kv_cache_tokens_per_group, plan.kv_cache_tokens_concurrency) == (160, 133)
    assert plan.profile.name == profile and plan.stages == ()


def test_the_default_profile_is_vllm_0_33():
    assert plan_kv_cache(SPECS, 10 * PAGE, max_model_len=40, in_flight_tokens=16).profile.name == "vllm-0.33"


def test_a_block_count_override_replaces_the_pool():
    plan = plan_kv_cache(SPECS, 10 * PAGE, max_model_len=40, in_flight_tokens=16, num_gpu_blocks_override=4)
    assert plan.num_blocks == 4 and plan.max_concurrency == pytest.approx(4 / 3)
    assert plan.config.pools[0].num_blocks == 4


@pytest.mark.parametrize(
    "profile, fit, estimate",
    [
        # 0.33 keeps the null block out: 9 pages = 589,824 B (0.56 MiB) -> 9 blocks -> 144 tokens
        ("vllm-0.33", "0.56 MiB", 144),
        # 0.21 lets a request use all 10 pages, 655,360 B = 0.625 MiB, printed 0.62 -> 160 tokens
        ("vllm-0.21", "0.62 MiB", 160),
    ],
)
def test_a_request_that_does_not_fit_gets_the_estimate(profile, fit, estimate):
    """1,000 tokens need ceil(1000 / 16) = 63 blocks = 4,128,768 B = 3.94 MiB."""
    with pytest.raises(ValueError) as err:
        plan_kv_cache(SPECS, 10 * PAGE, max_model_len=1000, in_flight_tokens=16, profile=profile)
    assert str(err.value) == (
        f"a request of max_model_len=1000 tokens needs 3.94 MiB of KV cache, more than the {fit} available. "
        f"Based on the available memory, the estimated maximum model length is {estimate}. Increase the "
        "KV-cache memory or decrease max_model_len.")


def test_auto_fit_picks_the_estimate():
    """max_model_len = -1 with 1,000 positions: the longest request that fits, 144 tokens under 0.33."""
    plan = plan_kv_cache(SPECS, 10 * PAGE, max_model_len=-1, max_position_embeddings=1000,
                         in_flight_tokens=16)
    assert plan.max_model_len == 144 and plan.blocks_per_request == (9,)
    # a model with fewer positions than fit keeps its positions
    assert plan_kv_cache(SPECS, 10 * PAGE, max_model_len=-1, max_position_embeddings=100,
                         in_flight_tokens=16).max_model_len == 100
