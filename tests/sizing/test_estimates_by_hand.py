"""Weight and activation estimates, per-layer block caps and stage lists, against hand arithmetic."""

from __future__ import annotations

import pytest

from kvlab.sizing.gpu_memory import estimate_activation_bytes, weight_bytes
from kvlab.sizing.pipeline import parse_layer_partition, parse_stage_memory
from kvlab.sizing.specs import ChunkedLocalAttentionSpec, SlidingWindowSpec

SHAPE = dict(block_size=16, num_kv_heads=8, head_size=128)


def test_weight_bytes():
    """bf16 (the default) is 2 bytes a parameter, fp8 1; tensor parallelism splits them evenly."""
    assert weight_bytes(1000) == 2000
    assert weight_bytes(1000, "fp8") == 1000
    assert weight_bytes(1000, tensor_parallel_size=4) == 500
    assert weight_bytes(1001, tensor_parallel_size=2) == 1001  # 2002 B over 2 GPUs


def test_activation_estimate():
    """tokens x hidden x 36 B / tp + 1 GiB: 8,192 x 4,096 x 36 = 1,207,959,552 B, plus 1,073,741,824 B
    = 2,281,701,376 B; over 2 GPUs, 603,979,776 + 1,073,741,824 = 1,677,721,600 B."""
    assert estimate_activation_bytes(8192, 4096) == 2_281_701_376
    assert estimate_activation_bytes(8192, 4096, 2) == 1_677_721_600


def test_block_caps_of_local_layers():
    """Chunked local, chunk 32, 16 tokens in flight, blocks of 16: ceil(min(32 + 16, L) / 16) = 3 blocks for
    a long L, ceil(20 / 16) = 2 when L = 20. Sliding window 8: ceil(min(8 - 1 + 16, L) / 16) + 1 = 3."""
    chunked = ChunkedLocalAttentionSpec(**SHAPE, attention_chunk_size=32)
    assert chunked.admission_cap_blocks(16, 1000) == 3
    assert chunked.admission_cap_blocks(16, 20) == 2
    assert SlidingWindowSpec(**SHAPE, sliding_window=8).admission_cap_blocks(16, 1000) == 3


def test_stage_lists():
    assert parse_stage_memory("1GiB, 2GiB", 2) == (2**30, 2 * 2**30)
    assert parse_stage_memory([1024, "2KiB"], 2) == (1024, 2048)
    assert parse_layer_partition("16,32") == (16, 32)
    assert parse_layer_partition([3, 4]) == (3, 4)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: parse_stage_memory("1GiB", 2),
         "1 pipeline stage memories given but pipeline_parallel_size is 2; give one KV-cache memory per "
         "stage, e.g. 3.18GiB,24GiB"),
        (lambda: parse_stage_memory("1GiB, lots", 2),
         "pipeline stage memory must be a number with an optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, "
         "TiB, or vLLM's k, K, M, G), such as 16GiB, 11.54GiB, 12e9 or 16GB; got 'lots'"),
        (lambda: parse_layer_partition("16,x"),
         "pipeline_layer_partition must be layer counts per stage separated by commas, e.g. \"16,32\"; "
         "got '16,x'"),
        (lambda: weight_bytes(0), "num_parameters must be >= 1, got 0"),
        (lambda: weight_bytes(10, "x"),
         "weight_dtype must be one of 'bf16', 'fp16', 'fp8', 'int4', 'nvfp4', 'mxfp4'; got 'x'"),
        (lambda: weight_bytes(10, tensor_parallel_size=0), "tensor_parallel_size must be >= 1, got 0"),
        (lambda: estimate_activation_bytes(0, 10), "max_num_batched_tokens must be >= 1, got 0"),
        (lambda: estimate_activation_bytes(10, 0), "hidden_size must be >= 1, got 0"),
        (lambda: estimate_activation_bytes(10, 10, 0), "tensor_parallel_size must be >= 1, got 0"),
    ],
)
def test_estimate_refusals(make, message):
    with pytest.raises(ValueError) as err:
        make()
    assert str(err.value) == message
