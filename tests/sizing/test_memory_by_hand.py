"""Byte sizes printed and GPU memory split, against values worked out by hand.

``format_gib`` switches unit where two decimals would print 0.00: at 2**30 / 100 = 10,737,418.24 B
(GiB), 2**20 / 100 = 10,485.76 B (MiB) and 1,024 B (KiB). The cases sit on both sides of each switch.
"""

from __future__ import annotations

import pytest

from kvlab.sizing.gpu_memory import kv_cache_memory_from_gpu
from kvlab.sizing.memory_units import format_gib

GIB = 2**30


@pytest.mark.parametrize(
    "num_bytes, text",
    [
        (-5, "0 B"),
        (0, "0 B"),
        (1, "1 B"),
        (500, "500 B"),
        (1023, "1023 B"),
        (1024, "1.00 KiB"),
        (1500, "1.46 KiB"),  # 1500 / 1024 = 1.4648
        (5000, "4.88 KiB"),  # 4.8828
        (10_400, "10.16 KiB"),  # 10.156
        (10_485, "10.24 KiB"),  # 10.2393, just below 10,485.76
        (10_486, "0.01 MiB"),  # 0.0100002
        (15_000, "0.01 MiB"),  # 0.0143
        (3 * 2**20, "3.00 MiB"),
        (10_700_000, "10.20 MiB"),  # 10.2043
        (10_737_418, "10.24 MiB"),  # 10.23999..., just below 10,737,418.24
        (10_737_419, "0.01 GiB"),
        (16_000_000, "0.01 GiB"),  # 0.0149
        (2 * GIB, "2.00 GiB"),
        (int(1.5 * GIB), "1.50 GiB"),
    ],
)
def test_format_gib(num_bytes, text):
    assert format_gib(num_bytes) == text


def test_kv_memory_of_an_80_gib_gpu():
    """80 GiB at utilization 0.9: budget 72 GiB; minus 16 GiB of weights and 2 GiB of activations
    leaves 54 GiB for the KV cache."""
    est = kv_cache_memory_from_gpu(80 * GIB, 0.9, 16 * GIB, 2 * GIB)
    assert est.gpu_memory_bytes == 80 * GIB and est.gpu_memory_utilization == 0.9
    assert est.budget_bytes == 72 * GIB
    assert (est.weight_bytes, est.activation_bytes) == (16 * GIB, 2 * GIB)
    assert est.kv_cache_bytes == 54 * GIB


def test_one_byte_left_is_enough_and_zero_activations_are_allowed():
    """10 GiB x 0.5 = 5 GiB; 4 GiB of weights and 1 GiB - 1 B of activations leave exactly 1 B."""
    assert kv_cache_memory_from_gpu(10 * GIB, 0.5, 4 * GIB, GIB - 1).kv_cache_bytes == 1
    assert kv_cache_memory_from_gpu(10 * GIB, 1, 4 * GIB, 0).kv_cache_bytes == 6 * GIB


@pytest.mark.parametrize(
    "args, message",
    [
        ((0, 0.9, 1, 0), "gpu_memory_bytes must be >= 1, got 0"),
        ((GIB, 0.9, 0, 0), "weight_bytes must be >= 1, got 0"),
        ((GIB, 0.9, 1, -1), "activation_bytes must be >= 0, got -1"),
        ((GIB, 0, 1, 0), "gpu_memory_utilization must be a number in (0, 1], got 0"),
        ((GIB, 1.01, 1, 0), "gpu_memory_utilization must be a number in (0, 1], got 1.01"),
        ((GIB, True, 1, 0), "gpu_memory_utilization must be a number in (0, 1], got True"),
        # 10 GiB x 0.5 = 5 GiB, all of it taken by 4 GiB of weights and 1 GiB of activations: 0 B left
        ((10 * GIB, 0.5, 4 * GIB, GIB),
         "the weights (4.00 GiB per GPU) and estimated activations (1.00 GiB) exceed gpu_memory_utilization "
         "× GPU memory (0.50 × 10.00 GiB = 5.00 GiB) by 0.00 GiB; use a GPU with more memory, more tensor "
         "parallelism, smaller weights or a higher utilization"),
        # 5 GiB + 1.5 GiB against a 5 GiB budget: 1.5 GiB too much
        ((10 * GIB, 0.5, 5 * GIB, int(1.5 * GIB)),
         "the weights (5.00 GiB per GPU) and estimated activations (1.50 GiB) exceed gpu_memory_utilization "
         "× GPU memory (0.50 × 10.00 GiB = 5.00 GiB) by 1.50 GiB; use a GPU with more memory, more tensor "
         "parallelism, smaller weights or a higher utilization"),
    ],
)
def test_gpu_memory_refusals(args, message):
    with pytest.raises(ValueError) as err:
        kv_cache_memory_from_gpu(*args)
    assert str(err.value) == message
