"""Memory and token-count parsing, per-request block needs and the GPU memory line, by hand."""

from __future__ import annotations

import pytest

from kvlab.sizing.gpu_memory import kv_cache_memory_from_gpu
from kvlab.sizing.memory_units import parse_memory, parse_token_count
from kvlab.sizing.specs import FullAttentionSpec, SlidingWindowSpec, UniformTypeSpecs
from kvlab.sizing.state_spec import MambaSpec

UNITS = "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, or vLLM's k, K, M, G"


@pytest.mark.parametrize(
    "text, size",
    [("16GiB", 16 * 2**30), ("12e9", 12_000_000_000), ("16GB", 16_000_000_000), (2**20, 2**20),
     (1048576.0, 2**20), ("1048576", 2**20)],
)
def test_memory_sizes(text, size):
    """A bare number is bytes and must be at least 1 MiB (1,048,576), so that "16" is not 16 bytes."""
    assert parse_memory(text) == size


@pytest.mark.parametrize(
    "text, message",
    [
        ("1048575", "kv_cache_memory=1048575 has no unit, so it would mean 1048575 bytes; write the unit, "
                    f"e.g. 1048575GiB or 1048575GB (units: {UNITS}; a number without a unit is bytes and "
                    "must be at least 1,048,576)"),
        ("0", "kv_cache_memory must be positive and finite, got '0'"),
        ("1e-30GiB", "kv_cache_memory must be at least 1 byte, got '1e-30GiB'"),
        (True, "kv_cache_memory must be a size such as 16GiB, 12e9 or 16GB; got True"),
        ([1], "kv_cache_memory must be a string or a number of bytes, got list"),
        ("lots", f"kv_cache_memory must be a number with an optional unit ({UNITS}), such as 16GiB, "
                 "11.54GiB, 12e9 or 16GB; got 'lots'"),
    ],
)
def test_memory_refusals(text, message):
    with pytest.raises(ValueError) as err:
        parse_memory(text)
    assert str(err.value) == message


def test_token_counts():
    """Lower-case k is 1,000 (decimals allowed if the result is whole), upper-case K is 1,024."""
    assert [parse_token_count(t) for t in ("32768", "32k", "25.6k", "32K", 4096)] == [32768, 32000, 25600,
                                                                                      32768, 4096]
    usage = ("max_model_len must be a whole number of tokens such as 32768, 32k (= 32,000), 25.6k (= 25,600) "
             "or 32K (= 32,768; upper-case suffixes are powers of 1024 and take whole numbers); got {!r}")
    for text, message in [
        ("1.5K", usage.format("1.5K")), ("2.5", usage.format("2.5")), ("abc", usage.format("abc")),
        (True, "max_model_len must be a whole number of tokens, got True"),
        (3.0, "max_model_len must be a whole number of tokens, got 3.0"),
        ("1.0005k", "max_model_len='1.0005k' is 1000.5 tokens, not a whole number"),
    ]:
        with pytest.raises(ValueError) as err:
            parse_token_count(text)
        assert str(err.value) == message


def test_blocks_and_bytes_one_request_needs():
    """Blocks of 16, 65,536 B pages. Full attention, 100 tokens: ceil(100 / 16) = 7 blocks, 458,752 B.
    Sliding window 8 with 16 tokens in flight: ceil((7 + 16) / 16) + 1 = 3 blocks, 196,608 B. A Mamba
    state: 1 page of 1,000 B whatever the length. Two full layers of 8 and 4 heads in one uniform-type
    group: a page of 65,536 + 32,768 = 98,304 B, 7 of them = 688,128 B."""
    full = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128)
    sliding = SlidingWindowSpec(block_size=16, num_kv_heads=8, head_size=128, sliding_window=8)
    mamba = MambaSpec(block_size=16, state_bytes=1000)
    assert (full.max_blocks_per_request(100, 16), full.max_memory_usage_bytes(100, 16)) == (7, 458_752)
    assert (sliding.max_blocks_per_request(1000, 16),
            sliding.max_memory_usage_bytes(1000, 16)) == (3, 196_608)
    assert (mamba.max_blocks_per_request(100, 16), mamba.max_memory_usage_bytes(100, 16)) == (1, 1000)
    uniform = UniformTypeSpecs((("a", full),
                                ("b", FullAttentionSpec(block_size=16, num_kv_heads=4, head_size=128))))
    assert (uniform.page_size_bytes, uniform.max_blocks_per_request(100, 16)) == (98_304, 7)
    assert uniform.max_memory_usage_bytes(100, 16) == 688_128


def test_gpu_memory_line():
    est = kv_cache_memory_from_gpu(80 * 2**30, 0.9, 16 * 2**30, 2 * 2**30)
    assert est.describe() == ("KV cache 54.00 GiB (estimate) = 0.90 × 80.00 GiB − weights 16.00 GiB − "
                              "activations and non-torch memory 2.00 GiB (estimated)")
