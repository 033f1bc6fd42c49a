"""Hybrid state models through the allocator and simulator: state pages once per request, freed at the end."""

from __future__ import annotations

import pytest

from kvlab.serving import EngineConfig, simulate
from kvlab.simulator import synthetic_workload


def _peak(result):
    return max(s.pool_size - s.free_blocks for s in result.timeline)


def test_one_request_holds_its_attention_blocks_and_fixed_state_pages():
    # Qwen3-Next at TP 4 with MTP (2 tokens): block 288; 1,000 prompt tokens + 2 lookahead slots
    # -> cdiv(1,002, 288) = 4 attention blocks; 3 state groups x (1 + 2) pages = 9 -> 13 blocks
    cfg = EngineConfig("qwen3-next-80b-a3b", num_gpu_blocks_override=64, tensor_parallel_size=4,
                       max_model_len=4096, speculative_config={"method": "mtp", "num_speculative_tokens": 2})
    result = simulate(cfg, synthetic_workload(1, prompt_tokens=(1000, 1000), output_tokens=4, seed=0))
    assert result.summary.finished == 1 and _peak(result) == 13
    assert result.timeline[-1].free_blocks == result.timeline[-1].pool_size  # everything freed


def test_state_pages_limit_concurrency_whatever_the_length():
    # 63 usable blocks; a 100-token request holds 1 attention block + 3 state pages = 4 blocks, so
    # at most 15 such requests run at once even though their tokens would fit 63 blocks
    cfg = EngineConfig("qwen3-next-80b-a3b", num_gpu_blocks_override=64, tensor_parallel_size=4,
                       max_model_len=4096, max_num_seqs=64)
    result = simulate(cfg, synthetic_workload(20, prompt_tokens=(100, 100), output_tokens=8, seed=0))
    assert result.summary.finished == 20
    assert result.summary.peak_running == 15 and _peak(result) == 60


def test_mamba_cache_mode_all_is_not_simulated():
    cfg = EngineConfig("qwen3-next-80b-a3b", tensor_parallel_size=4, mamba_cache_mode="all",
                       max_model_len=4096)
    with pytest.raises(ValueError, match="does not model mamba_cache_mode='all'"):
        cfg.build_kv_cache_manager()
