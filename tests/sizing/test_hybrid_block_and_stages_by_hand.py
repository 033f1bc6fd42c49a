"""Attention block size for hybrid (attention + state) models and pipeline stage splits, by hand.

Block rule: the smallest multiple of the alignment (16) whose attention page
(``block × bytes per token``) holds one state page; in ``align`` mode with a chunk size, a multiple of
``lcm(chunk, alignment)`` of the tokens a state page needs. Stage rule (``get_pp_indices``): equal
shares, the remainder going one each to the stages before the last.
"""

from __future__ import annotations

import pytest

from kvlab.sizing.pipeline import pipeline_partition
from kvlab.sizing.state_unification import hybrid_block_size

RAISED = "Setting attention block size to {} tokens to ensure that attention page size is >= mamba page size."
PADDED = ("Padding mamba page size by {} to ensure that mamba page size and attention page size are "
          "exactly equal.")


def test_block_raised_to_hold_the_state_and_the_state_padded():
    """1,000 B per token, a 50,000 B state: 16 x ceil(50,000 / 16,000) = 64 tokens, a 64,000 B page;
    the state is padded by 14,000 / 50,000 = 28.00%."""
    c = hybrid_block_size(1000, 50_000)
    assert (c.block_size, c.page_size_bytes, c.state_bytes, c.raised) == (64, 64_000, 50_000, True)
    assert c.log_lines == (RAISED.format(64), PADDED.format("28.00%"))


def test_requested_block_sizes_around_the_needed_one():
    """Asking for exactly 64 keeps it (not raised); 32 is raised to 64; 128 is kept, and the state is
    padded by 78,000 / 50,000 = 156.00%."""
    exact = hybrid_block_size(1000, 50_000, 64)
    assert (exact.block_size, exact.raised, exact.log_lines) == (64, False, (PADDED.format("28.00%"),))
    assert hybrid_block_size(1000, 50_000, 32).block_size == 64
    big = hybrid_block_size(1000, 50_000, 128)
    assert (big.block_size, big.page_size_bytes, big.raised) == (128, 128_000, False)
    assert big.log_lines == (PADDED.format("156.00%"),)


def test_a_state_that_fills_the_page_exactly_is_not_padded():
    """64,000 B of state at 1,000 B per token: 64 tokens, page = state, only the raise is logged."""
    c = hybrid_block_size(1000, 64_000)
    assert (c.block_size, c.page_size_bytes, c.log_lines) == (64, 64_000, (RAISED.format(64),))


def test_align_mode_rounds_to_the_chunk():
    """align mode, chunk 48: lcm(48, 16) = 48; the state needs 50 tokens -> 48 x ceil(50 / 48) = 96.
    Without a chunk size, or in another mode, the plain alignment gives 64."""
    assert hybrid_block_size(1000, 50_000, mamba_cache_mode="align", chunk_size=48).block_size == 96
    assert hybrid_block_size(1000, 50_000, mamba_cache_mode="align").block_size == 64
    assert hybrid_block_size(1000, 50_000, mamba_cache_mode="all", chunk_size=48).block_size == 64
    # alignment 64: 64 x ceil(50,000 / 64,000) = 64; alignment 100: 100 x ceil(50,000 / 100,000) = 100
    assert hybrid_block_size(1000, 50_000, alignment=64).block_size == 64
    assert hybrid_block_size(1000, 50_000, alignment=100).block_size == 100


@pytest.mark.parametrize(
    "args, kw, message",
    [
        ((0, 10), {}, "attention_bytes_per_token must be >= 1, got 0"),
        ((10, 0), {}, "state_bytes must be >= 1, got 0"),
        ((10, 10), {"alignment": 0}, "alignment must be >= 1, got 0"),
        ((10, 10), {"mamba_cache_mode": "align", "chunk_size": 0}, "chunk_size must be >= 1, got 0"),
    ],
)
def test_hybrid_block_refusals(args, kw, message):
    with pytest.raises(ValueError) as err:
        hybrid_block_size(*args, **kw)
    assert str(err.value) == message


@pytest.mark.parametrize(
    "layers, stages, parts",
    [
        (32, 3, (11, 11, 10)),  # 32 = 3 x 10 + 2: stages 0 and 1 (before the last) get one more
        (61, 4, (15, 15, 16, 15)),  # 61 = 4 x 15 + 1: the one extra goes to stage 2
        (8, 4, (2, 2, 2, 2)),
        (5, 1, (5,)),
    ],
)
def test_pipeline_partition(layers, stages, parts):
    assert pipeline_partition(layers, stages) == parts


def test_a_partition_given_by_hand_is_kept():
    assert pipeline_partition(10, 3, [4, 0, 6]) == (4, 0, 6)


@pytest.mark.parametrize(
    "args, message",
    [
        ((0, 2), "num_hidden_layers must be >= 1, got 0"),
        ((4, 0), "pipeline_parallel_size must be >= 1, got 0"),
        ((10, 3, (4, 6)), "the layer partition 4,6 names 2 stages but pipeline_parallel_size is 3; give one "
                          "layer count per stage"),
        ((10, 2, (4, 5)), "the layer partition 4,5 adds up to 9 layers but the model has "
                          "num_hidden_layers=10; the counts must add up to it"),
        ((10, 2, (11, -1)), "layers of a pipeline stage in the layer partition must be >= 0, got -1"),
    ],
)
def test_pipeline_partition_refusals(args, message):
    with pytest.raises(ValueError) as err:
        pipeline_partition(*args)
    assert str(err.value) == message
