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


# -- state prefix caching, mamba_cache_mode="align" --------------------------------------------------
def _tiny_hybrid():
    """One full-attention layer (1 KV head x 64: 256 B per token) and one small Mamba-2 layer (state
    96 x 3 x 2 B + 4 x 16 x 16 x 2 B = 2,624 B): block 16 x cdiv(2,624, 16 x 256) = 16, page 4,096 B."""
    from kvlab.models import ModelKV
    from kvlab.models.model import LayerKV
    from kvlab.models.state_layers import StateLayerKV

    state = StateLayerKV("layers.0.state", "mamba2", conv_kernel=4, state_size=16, intermediate_size=64,
                         n_groups=1, num_heads=4, head_dim=16)
    return ModelKV("tiny-hybrid", (LayerKV("layers.1", "full", 1, 64),), max_position_embeddings=512,
                   state_layers=(state,))


def _doc_requests(same_step: bool):
    from kvlab.simulator.workload import RequestSpec, content_id

    doc = ((content_id("doc"), 100),)
    return [RequestSpec("a", 0, doc, 3), RequestSpec("b", 0, doc, 3, after=None if same_step else "a")]


def _run(mode: str, same_step: bool = False):
    cfg = EngineConfig(_tiny_hybrid(), num_gpu_blocks_override=64, max_model_len=512,
                       mamba_cache_mode=mode, profile="vllm-0.21")
    assert [(g.kind, g.block_size) for g in cfg.plan().config.groups] == [("full", 16), ("mamba", 16)]
    return simulate(cfg, _doc_requests(same_step))


def test_align_mode_restarts_from_the_state_at_the_last_block_boundary():
    # a: the 100-token prompt is cut at the last block boundary (96 + 4), then two decode steps; its
    # state after 96 tokens is cached under block 5's hash. b, same prompt, hits 96 tokens in both
    # groups and computes only the last 4. Without state caching b recomputes all 100.
    steps = [s.scheduled for s in _run("align").timeline if s.scheduled]
    assert steps == [{"a": 96}, {"a": 4}, {"a": 1}, {"a": 1}, {"b": 4}, {"b": 1}, {"b": 1}]
    steps = [s.scheduled for s in _run("none").timeline if s.scheduled]
    assert steps == [{"a": 100}, {"a": 1}, {"a": 1}, {"b": 100}, {"b": 1}, {"b": 1}]


def test_align_mode_holds_at_most_two_state_pages_per_request():
    # step 1: the page with the state at 96 tokens and the running page; the first is freed next step
    # (the last step's pages are freed with the finished request)
    in_use = [s.blocks_in_use[1] for s in _run("align").timeline if s.scheduled.get("a")]
    assert in_use == [1, 2, 1, 0]


def test_a_state_cached_in_this_step_is_used_from_the_next_one():
    # a and b arrive together: a caches the state at 96 in step 0, while it is still being written,
    # so b is refused in step 0 and starts in step 1 from that state (4 tokens left)
    timeline = _run("align", same_step=True).timeline
    assert [(x.request_id, x.admitted) for x in timeline[0].attempts] == [("a", True), ("b", False)]
    assert timeline[0].scheduled == {"a": 96} and timeline[1].scheduled == {"a": 4, "b": 4}


@pytest.mark.parametrize(("start", "n", "tokens", "expected"), [
    (0, 8192, 100, 96),   # cut at the last boundary (96) so that the state there is cached
    (96, 4, 100, 4),      # the tail
    (0, 40, 100, 32),     # a chunk before the boundary: whole blocks only
    (0, 10, 100, 0),      # less than a block fits: not scheduled this step
    (100, 1, 101, 1),     # decode
])
def test_chunks_are_cut_to_block_boundaries(start, n, tokens, expected):
    from kvlab.simulator.scheduler import Scheduler, SchedulerConfig

    class Req:
        num_tokens = tokens

    sched = Scheduler(None, SchedulerConfig(8192, 4, 512, mamba_align_block_size=16))
    assert sched.align_chunk(Req(), start, n) == expected


def test_align_mode_refusals():
    with pytest.raises(ValueError, match="needs max_num_batched_tokens >= the block size"):
        EngineConfig(_tiny_hybrid(), num_gpu_blocks_override=64, max_model_len=512, mamba_cache_mode="align",
                     max_num_batched_tokens=8).scheduler_config()
    with pytest.raises(ValueError, match="speculative decoding with mamba_cache_mode='align'"):
        EngineConfig("qwen3-next-80b-a3b", tensor_parallel_size=4, mamba_cache_mode="align",
                     max_model_len=4096, speculative_config={"method": "mtp", "num_speculative_tokens": 1},
                     ).build_kv_cache_manager()
