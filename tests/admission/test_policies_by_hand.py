"""Admission budgets on cases small enough to work out on paper.

Every expected number below is derived in the test's docstring from the policy's definition (spec §4),
not from a second call of the code under test. All cases use a sliding-window group with block size
B = 4, so ``cdiv(x, 4)`` is "x divided by 4, rounded up".
"""

from __future__ import annotations

import pytest

from kvlab.admission.policies import POLICIES, GroupBudget
from kvlab.sizing import ChunkedLocalAttentionSpec, FullAttentionSpec, SlidingWindowSpec


def _swa(window: int, block: int = 4) -> SlidingWindowSpec:
    return SlidingWindowSpec(
        block_size=block, num_kv_heads=1, head_size=8, model_dtype="float32", sliding_window=window
    )


def _budget(spec, mnbt: int, *, lagged: bool = False, max_model_len: int = 1024) -> GroupBudget:
    return GroupBudget(spec, max_model_len, mnbt, in_flight_tokens=mnbt, lagged_skip=lagged)


def test_window_plus_chunk_charges_the_window_plus_one_chunk():
    """W = 10, B = 4, MNBT = 8, N = 100 tokens.

    PR #39866 charges ``cdiv(min(N, W + MNBT), B) = cdiv(min(100, 18), 4) = cdiv(18, 4) = 5`` blocks.
    (Charging the window alone would give ``cdiv(10, 4) = 3``; charging everything ``cdiv(100, 4) = 25``.)
    A short prompt, N = 7, is charged what it really holds: ``cdiv(7, 4) = 2``.
    """
    policy = POLICIES["window_plus_chunk"]
    budget = _budget(_swa(10), mnbt=8)
    assert policy.required_blocks(budget, 100) == 5
    assert policy.required_blocks(budget, 7) == 2


def test_window_plus_chunk_leaves_full_attention_uncapped():
    """A full-attention group (B = 4) is charged every token: N = 100 -> ``cdiv(100, 4) = 25``."""
    full = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=8, model_dtype="float32")
    assert POLICIES["window_plus_chunk"].required_blocks(_budget(full, mnbt=8), 100) == 25


@pytest.mark.parametrize(
    ("num_tokens", "lagged", "expected"),
    [(16, False, 3), (24, False, 3), (24, True, 4), (16, True, 4)],
)
def test_exact_is_the_peak_of_the_chunk_schedule(num_tokens, lagged, expected):
    """W = 6, B = 4, MNBT = 4: the prompt is prefilled in chunks of 4 tokens starting at c = 0, 4, 8, ...

    Before the chunk starting at c, the group frees the tokens no later query sees: ``max(0, s - W + 1)``
    with s = c (frees happen at once) or s = c - 4 (frees lag one in-flight step); only whole blocks go,
    i.e. ``floor(skipped / 4)`` blocks. It then holds ``cdiv(c + 4, 4)`` blocks minus those freed.

    ======  ===================================  ===================================
    c       at once: skipped -> held             lagged: skipped -> held
    ======  ===================================  ===================================
    0       0 -> 1 - 0 = 1                       0 -> 1
    4       0 -> 2 - 0 = 2                       (s=0) 0 -> 2
    8       3 -> 3 - 0 = 3                       (s=4) 0 -> 3
    12      7 -> 4 - 1 = 3                       (s=8) 3 -> 4 - 0 = 4
    16      11 -> 5 - 2 = 3                      (s=12) 7 -> 5 - 1 = 4
    20      15 -> 6 - 3 = 3                      (s=16) 11 -> 6 - 2 = 4
    ======  ===================================  ===================================

    N = 16 runs chunks c = 0..12, N = 24 runs c = 0..20. Peaks: at once 3 (both N); lagged 4 (both N).
    The full need is ``cdiv(16, 4) = 4`` and ``cdiv(24, 4) = 6``, so ``exact`` = min(full, peak).
    """
    budget = _budget(_swa(6), mnbt=4, lagged=lagged)
    assert POLICIES["exact"].required_blocks(budget, num_tokens) == expected


def test_exact_rounds_the_held_blocks_up_and_the_freed_blocks_down():
    """W = 6, B = 4, MNBT = 5, N = 13: chunks start at c = 0, 5, 10 with 5, 5, 3 tokens.

    c = 0: holds ``cdiv(5, 4) = 2``; c = 5: skipped ``max(0, 5 - 5) = 0``, holds ``cdiv(10, 4) = 3``;
    c = 10: skipped ``10 - 5 = 5`` tokens = ``floor(5 / 4) = 1`` whole block, holds
    ``cdiv(13, 4) - 1 = 4 - 1 = 3``. Peak 3 < full ``cdiv(13, 4) = 4``, so the answer is 3.
    (Flooring the held blocks would give 2, 2, 2 -> 2.)

    W = 6, B = 4, MNBT = 4, N = 12: c = 8 has skipped ``8 - 5 = 3`` tokens, not one whole block, so
    nothing is freed and it holds ``cdiv(12, 4) = 3`` (rounding the freed blocks up would free one and
    give a peak of 2).
    """
    exact = POLICIES["exact"]
    assert exact.required_blocks(_budget(_swa(6), mnbt=5), 13) == 3
    assert exact.required_blocks(_budget(_swa(6), mnbt=4), 12) == 3


def test_vllm_cap_and_uncapped_by_hand():
    """W = 6, B = 4, T = MNBT = 4, L = 1024, N = 100.

    uncapped: ``cdiv(100, 4) = 25``. vllm: ``min(25, cdiv(min(6 - 1 + 4, 1024), 4) + 1) = cdiv(9, 4) + 1
    = 3 + 1 = 4``. trtllm (first step, window pool): ``cdiv(min(100, 6), 4) = 2``.
    """
    budget = _budget(_swa(6), mnbt=4)
    assert POLICIES["uncapped"].required_blocks(budget, 100) == 25
    assert POLICIES["vllm"].required_blocks(budget, 100) == 4
    assert POLICIES["trtllm"].required_blocks(budget, 100) == 2


def test_exact_keeps_the_extra_retained_tokens():
    """W = 6 plus 2 extra retained tokens (MTP), B = 4, MNBT = 4, N = 16: a token is skipped only when it
    is more than W + 2 = 8 tokens back, so before chunk c the skipped tokens are ``max(0, c - 8 + 1)``:
    c = 0, 4, 8, 12 -> skipped 0, 0, 1, 5 -> 0, 0, 0, 1 whole blocks -> held 1, 2, 3, 4 - 1 = 3. Peak 3.
    (Subtracting the extra tokens, window 4, would free ``c - 3`` tokens: held 1, 2 - 0, 3 - 1, 4 - 2 -> 2.)
    """
    spec = SlidingWindowSpec(block_size=4, num_kv_heads=1, head_size=8, model_dtype="float32",
                             sliding_window=6, extra_retained_tokens=2)
    assert POLICIES["exact"].required_blocks(_budget(spec, mnbt=4), 16) == 3


def test_exact_frees_finished_chunks_of_a_chunked_local_layer():
    """C = 8, B = 4, MNBT = 4, N = 24: before chunk c the layer frees every token of a finished attention
    chunk, ``(c // 8) * 8``: c = 0, 4, 8, 12, 16, 20 -> freed 0, 0, 8, 8, 16, 16 tokens = 0, 0, 2, 2, 4, 4
    blocks -> held 1, 2, 3 - 2, 4 - 2, 5 - 4, 6 - 4 = 1, 2, 1, 2, 1, 2. Peak 2, against ``cdiv(24, 4) = 6``.
    """
    spec = ChunkedLocalAttentionSpec(block_size=4, num_kv_heads=1, head_size=8, model_dtype="float32",
                                     attention_chunk_size=8)
    assert POLICIES["exact"].required_blocks(_budget(spec, mnbt=4), 24) == 2
