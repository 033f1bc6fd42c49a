"""Every refused sizing input gets one exact message: what was wrong and what is allowed.

The expected strings are the messages as a reader should see them, written out here in full (not a
``match`` on a fragment), so a message that loses its field name, its bound or the offending value
fails. Beside each refusal sits the edge value that must still be accepted (the bound itself).
"""

from __future__ import annotations

import dataclasses

import pytest

from kvlab.sizing.capacity import plan_kv_cache
from kvlab.sizing.mla_spec import MLAAttentionSpec
from kvlab.sizing.profiles import get_profile
from kvlab.sizing.specs import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    SlidingWindowSpec,
    UniformTypeSpecs,
)
from kvlab.sizing.state_spec import MambaSpec

SHAPE = dict(block_size=16, num_kv_heads=8, head_size=128)
# one bf16 page: 16 tokens x 8 heads x 128 x 2 bytes x (K and V) = 65,536 B
PAGE = 16 * 8 * 128 * 2 * 2
FULL = {"l0": FullAttentionSpec(**SHAPE)}


def _spec(cls, **kw):
    return lambda: cls(**{**SHAPE, **kw})


REFUSED = [
    (_spec(FullAttentionSpec, block_size=0), "block_size must be >= 1, got 0"),
    (_spec(FullAttentionSpec, num_kv_heads=0), "num_kv_heads must be >= 1, got 0"),
    (_spec(FullAttentionSpec, head_size=0), "head_size must be >= 1, got 0"),
    (_spec(FullAttentionSpec, head_size_v=0), "head_size_v must be >= 1, got 0"),
    (_spec(FullAttentionSpec, model_dtype="float64"),
     "model_dtype must be one of 'bfloat16', 'float16', 'float32'; got 'float64'"),
    (_spec(FullAttentionSpec, dcp_world_size=0), "decode_context_parallel_size must be >= 1, got 0"),
    (_spec(FullAttentionSpec, page_size_padded=PAGE - 1),
     "page_size_padded (65535 B) must be >= the real page (65536 B)"),
    (_spec(SlidingWindowSpec, sliding_window=0), "sliding_window must be >= 1, got 0"),
    (_spec(SlidingWindowSpec, sliding_window=8, extra_retained_tokens=-1),
     "extra_retained_tokens must be >= 0, got -1"),
    (_spec(ChunkedLocalAttentionSpec, attention_chunk_size=0), "attention_chunk_size must be >= 1, got 0"),
    (_spec(MLAAttentionSpec, block_size=0), "block_size must be >= 1, got 0"),
    (_spec(MLAAttentionSpec, num_kv_heads=0), "num_kv_heads must be >= 1, got 0"),
    (_spec(MLAAttentionSpec, head_size=0), "head_size must be >= 1, got 0"),
    (_spec(MLAAttentionSpec, dcp_world_size=0), "decode_context_parallel_size must be >= 1, got 0"),
    (_spec(MLAAttentionSpec, model_dtype="float64"),
     "model_dtype must be one of 'bfloat16', 'float16', 'float32'; got 'float64'"),
    (_spec(MLAAttentionSpec, kv_cache_dtype="int8_per_token_head"),
     "kv_cache_dtype of an MLA layer must be one of 'auto', 'bfloat16', 'float16', 'fp8', 'fp8_e4m3', "
     "'fp8_ds_mla'; got 'int8_per_token_head'"),
    (_spec(MLAAttentionSpec, element_bytes=0), "element_bytes must be >= 1, got 0"),
    # MLA: one latent row of 576 bf16 values per token, 16 tokens -> 18,432 B
    (_spec(MLAAttentionSpec, num_kv_heads=1, head_size=576, page_size_padded=16 * 576 * 2 - 1),
     "page_size_padded (18431 B) must be >= the real page (18432 B)"),
    (lambda: MambaSpec(block_size=0, state_bytes=100), "block_size must be >= 1, got 0"),
    (lambda: MambaSpec(block_size=16, state_bytes=0), "state_bytes must be >= 1, got 0"),
    (lambda: MambaSpec(block_size=16, state_bytes=100, mamba_cache_mode="some"),
     "mamba_cache_mode must be one of 'none', 'align', 'all'; got 'some'"),
    (lambda: MambaSpec(block_size=16, state_bytes=100, num_speculative_blocks=-1),
     "num_speculative_blocks must be >= 0, got -1"),
    (lambda: MambaSpec(block_size=16, state_bytes=100, page_size_padded=99),
     "page_size_padded (99 B) must be >= the state (100 B)"),
    (lambda: UniformTypeSpecs(()), "UniformTypeSpecs needs at least one layer spec"),
    (lambda: UniformTypeSpecs((("a", FullAttentionSpec(**SHAPE)),
                               ("b", FullAttentionSpec(**{**SHAPE, "block_size": 32})))),
     "layer 'b' (full, block 32) does not match full with block 16: "
     "a uniform-type group needs one type and block size"),
    (lambda: UniformTypeSpecs((("a", FullAttentionSpec(**SHAPE)),
                               ("b", SlidingWindowSpec(**SHAPE, sliding_window=8)))),
     "layer 'b' (sliding_window, block 16) does not match full with block 16: "
     "a uniform-type group needs one type and block size"),
    (lambda: dataclasses.replace(get_profile("vllm-0.33"), log_formula="x"),
     "log_formula must be one of 'per_group', 'concurrency'; got 'x'"),
    (lambda: dataclasses.replace(get_profile("vllm-0.33"), free_placement="x"),
     "free_placement must be one of 'append', 'prepend_unhashed'; got 'x'"),
    (lambda: dataclasses.replace(get_profile("vllm-0.33"), skip_on="x"),
     "skip_on must be one of 'scheduled', 'processed'; got 'x'"),
    (lambda: plan_kv_cache(FULL, 1.5, max_model_len=16, in_flight_tokens=16),
     "available memory must be an integer number of bytes, got 1.5"),
    (lambda: plan_kv_cache(FULL, True, max_model_len=16, in_flight_tokens=16),
     "available memory must be an integer number of bytes, got True"),
    (lambda: plan_kv_cache(FULL, 0, max_model_len=16, in_flight_tokens=16),
     "No available memory for the cache blocks (0 B). Try increasing the KV-cache memory "
     "(gpu_memory_utilization) when initializing the engine."),
    (lambda: plan_kv_cache(FULL, 1, max_model_len=16, in_flight_tokens=16),
     "1 B of KV-cache memory holds fewer than 2 blocks of 0.06 MiB (block 0 is the null block, "
     "so at least one more is needed). Increase the KV-cache memory."),
    (lambda: plan_kv_cache(FULL, 10**9, max_model_len=16, in_flight_tokens=0),
     "in_flight_tokens must be >= 1, got 0"),
    (lambda: plan_kv_cache(FULL, 10**9, max_model_len=16, in_flight_tokens=16, num_gpu_blocks_override=0),
     "num_gpu_blocks_override must be >= 1, got 0"),
    (lambda: plan_kv_cache({}, 10**9, max_model_len=16, in_flight_tokens=16),
     "the model has no attention layers, so it has no KV cache to size"),
    # 2 pages less one byte: block 0 is the null block, so one usable block needs 2 pages
    (lambda: plan_kv_cache(FULL, 2 * PAGE - 1, max_model_len=16, in_flight_tokens=16),
     "0.12 MiB of KV-cache memory holds fewer than 2 blocks of 0.06 MiB (block 0 is the null block, "
     "so at least one more is needed). Increase the KV-cache memory."),
    (lambda: plan_kv_cache(FULL, 10**9, max_model_len=0, in_flight_tokens=16),
     "max_model_len must be >= 1, got 0"),
    (lambda: plan_kv_cache(FULL, 10**9, max_model_len=-1, in_flight_tokens=16),
     "max_position_embeddings (needed to auto-fit max_model_len=-1) must be >= 1, got 0"),
]


@pytest.mark.parametrize("make, message", REFUSED, ids=[m[:40] for _, m in REFUSED])
def test_each_refusal_has_its_exact_message(make, message):
    with pytest.raises(ValueError) as err:
        make()
    assert str(err.value) == message


def test_the_bounds_themselves_are_accepted():
    """Each bound above, met exactly, passes: a padded page of exactly one page (65,536 B), a Mamba
    state padded to exactly its size, no extra retained tokens and no speculative blocks (0), and
    exactly 2 pages of memory: the null block plus one usable block of 16 tokens."""
    assert FullAttentionSpec(**SHAPE, page_size_padded=PAGE).page_size_padded == PAGE
    assert MambaSpec(block_size=16, state_bytes=100, page_size_padded=100, num_speculative_blocks=0)
    assert SlidingWindowSpec(**SHAPE, sliding_window=1, extra_retained_tokens=0).sliding_window == 1
    plan = plan_kv_cache(FULL, 2 * PAGE, max_model_len=16, in_flight_tokens=16)
    assert plan.num_blocks == 2
