"""Decodes that ask their K/V rows into L2 ahead of use (``kernels/l2_prefetch.py``).

A prefetch may change no number, so every check here runs the prefetching kernel into a NaN-filled
output and compares it with the float64 references, on fresh random shapes: split segments whose
prefetch must stop at the segment's end, a sliding window whose first tile starts mid-block, a
sequence shorter than one tile, prefetch distances longer than a segment. In the interpreter the
prefetch instruction itself is a no-op, but the block-id loads and masks it is built from run, so a
wrong index (an out-of-range block table read) fails here too; on the GPU the PTX runs.
"""

from __future__ import annotations

import pytest
import torch

import kvlab
from kvlab import relative_error
from kvlab.kernels import prepare_paged_attention
from kvlab.kernels.launch_config import l2_prefetch
from kvlab.kernels.lowbit_attention_call import prepare_lowbit_attention
from kvlab.reference import reference_attention

from .conftest import poisoned
from .test_lowbit_kernels import _example as _lowbit_example
from .test_lowbit_kernels import _tolerances
from .test_paged_attention import _check, _example


def _lengths(target, seed: int, count: int) -> list[int]:
    """Distinct random lengths, the last one shorter than a 16-key tile."""
    gen = torch.Generator().manual_seed(seed + 11)
    top = 9000 if target.large else 150
    lens = torch.randperm(top - 17, generator=gen)[: count - 1] + 17
    return [int(n) for n in lens] + [int(torch.randint(1, 16, (1,), generator=gen))]


@pytest.mark.parametrize("scheme", ["bfloat16", "int8_per_token_head", "fp8_per_token_head", "fp8"])
@pytest.mark.parametrize("ahead", [1, 2, 5])
def test_prefetching_decode_matches_references(target, seed, scheme, ahead):
    slens = _lengths(target, seed, 4)
    ex = _example(target, seed, [1] * len(slens), slens, hq=8, hkv=2, d=64, scheme=scheme)
    _check(ex, target, scheme=scheme, l2_ahead=ahead)
    _check(ex, target, scheme=scheme, l2_ahead=ahead, num_splits=3)
    _check(ex, target, scheme=scheme, l2_ahead=ahead, num_splits=3, sliding_window=37)


def test_prefetch_grain_and_wide_head(target, seed):
    """Head size 80 (rows of 80 bytes: prefetches not a power of two apart) at a 32-byte grain."""
    slens = _lengths(target, seed, 3)
    ex = _example(target, seed, [1] * 3, slens, hq=8, hkv=2, d=80, scheme="int8_per_token_head")
    _check(ex, target, scheme="int8_per_token_head", l2_ahead=2, l2_grain=32, num_splits=4)


@pytest.mark.parametrize("scheme", ["int4_per_token_head", "kivi2", "kivi4_g32_r2"])
@pytest.mark.parametrize("splits", [1, 3])
def test_prefetching_lowbit_decode_matches_references(target, seed, scheme, splits):
    slens = _lengths(target, seed, 3)
    ex = _lowbit_example(target, seed, [1] * len(slens), slens, scheme)
    q = ex.query
    out = poisoned((q.shape[0], q.shape[1], ex.cache.head_size_v), q.dtype, target.device)
    prepare_lowbit_attention(q, ex.cache, ex.batch, out=out, num_splits=splits, l2_ahead=2).run()
    assert torch.isfinite(out).all(), "outputs left unwritten or poisoned"
    k_tol, t_tol = _tolerances(scheme, q.dtype)
    assert relative_error(out, kvlab.attention(q, ex.cache, ex.batch)) <= k_tol
    assert relative_error(out, reference_attention(q, ex.keys, ex.values, ex.batch)) <= t_tol


def test_prefetch_rule():
    """Hand-worked cases of the rule: distance and prefetches per row."""
    assert l2_prefetch(True, 128, ahead=2, grain=128) == (2, 1)  # an int8 row of head 128: one line
    assert l2_prefetch(True, 128, ahead=2, grain=32) == (2, 4)  # ... or four sectors
    assert l2_prefetch(True, 256, ahead=3, grain=128) == (3, 2)  # a bf16 row
    assert l2_prefetch(True, 80, ahead=1, grain=32) == (1, 4)  # 3 sectors, rounded up to 4
    assert l2_prefetch(True, 64, ahead=0, grain=32) == (0, 1)  # off
    assert l2_prefetch(False, 128, ahead=2, grain=128) == (0, 1)  # prefill never prefetches
    with pytest.raises(ValueError, match="ahead must be >= 0 tiles and grain >= 16 bytes, got -1, 128"):
        l2_prefetch(True, 128, ahead=-1, grain=128)
    with pytest.raises(ValueError, match="got 2, 8"):
        l2_prefetch(True, 128, ahead=2, grain=8)


def test_prefetch_is_off_in_the_interpreter_unless_asked(target, seed):
    if target.name != "interpreter":
        pytest.skip("the interpreter's default")
    ex = _example(target, seed, [1, 1], [40, 9], hq=4, hkv=2, d=32, scheme="bfloat16")
    assert prepare_paged_attention(ex.query, ex.cache, ex.batch)._launch.consts["L2_AHEAD"] == 0
    assert prepare_paged_attention(ex.query, ex.cache, ex.batch, l2_ahead=3)._launch.consts["L2_AHEAD"] == 3
