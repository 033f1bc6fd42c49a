"""Split-K decode with the merge fused into the attention kernel (the last segment merges).

Each check runs the kernel into a NaN-filled output and compares it with the float64 references
(``_check`` of the paged-attention tests). Shapes are drawn fresh from the test's seed: several
sequences of different lengths (one shorter than a segment, so some segments are empty), grouped
query heads, split grids, sliding windows. The ticket counters must be back at zero after every
launch, or a second launch (a CUDA-graph replay) would merge too early or never.
"""

from __future__ import annotations

import pytest
import torch

from kvlab import relative_error
from kvlab.kernels import prepare_paged_attention
from kvlab.kernels.split_decode_rules import fused_split_merge
from kvlab.reference import paged_attention_reference

from .conftest import kernel_tolerance, poisoned
from .test_paged_attention import _check, _example

SCHEMES = ["bfloat16", "float16", "fp8", "int8_per_token_head", "fp8_per_token_head"]


def _lengths(target, seed: int, num_seqs: int) -> list[int]:
    """Sequence lengths: random, all different, one of them shorter than a 16-key tile."""
    gen = torch.Generator().manual_seed(seed)
    top = 6000 if target.large else 120
    lens = torch.randperm(top - 17, generator=gen)[: num_seqs - 1] + 17
    return [int(n) for n in lens] + [int(torch.randint(1, 16, (1,), generator=gen))]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("num_splits", [3, 8])
def test_fused_merge_matches_reference(target, seed, scheme, num_splits):
    slens = _lengths(target, seed, 4)
    ex = _example(target, seed, [1] * len(slens), slens, hq=8, hkv=2, d=64, scheme=scheme)
    _check(ex, target, scheme=scheme, num_splits=num_splits, fused_merge=True)
    _check(ex, target, scheme=scheme, num_splits=num_splits, fused_merge=True, sliding_window=37)


def test_fused_merge_wide_head_and_groups(target, seed):
    """Head size 80 (a partial last channel slice) and 4 query heads per KV head."""
    slens = _lengths(target, seed, 3)
    ex = _example(target, seed, [1] * 3, slens, hq=8, hkv=2, d=80, scheme="int8_per_token_head")
    _check(ex, target, scheme="int8_per_token_head", num_splits=5, fused_merge=True)


def test_fused_merge_replays_with_counters_reset(target, seed):
    """The same prepared call launched twice (what a CUDA-graph replay does): both launches merge
    every row, and each leaves every ticket counter at zero."""
    slens = _lengths(target, seed, 3)
    ex = _example(target, seed, [1] * 3, slens, hq=8, hkv=2, d=64, scheme="bfloat16")
    q = ex.query
    out = poisoned((q.shape[0], q.shape[1], 64), q.dtype, target.device)
    call = prepare_paged_attention(q, ex.cache, ex.batch, out=out, num_splits=4, fused_merge=True)
    tickets = call._launch.args[3]
    assert call._launch.fused_merge and call.tiling.num_splits == 4
    assert tickets.dtype == torch.int32 and tickets.numel() == 3 * 2
    ref = paged_attention_reference(q, ex.cache, ex.batch)
    tol = kernel_tolerance(q.dtype, "bfloat16")
    for launch in range(2):
        out.copy_(poisoned(out.shape, out.dtype, out.device))
        call.run()
        unmerged = int((~torch.isfinite(out)).sum())
        assert unmerged == 0, f"launch {launch}: {unmerged} outputs unmerged"
        assert relative_error(out, ref) <= tol
        assert int(tickets.abs().sum()) == 0, f"launch {launch} left counters {tickets.tolist()}"


def test_fused_merge_rule():
    """Only split decode grids can fuse; an explicit request overrides the default."""
    assert not fused_split_merge(True, 1, True)  # unsplit: nothing to merge
    assert not fused_split_merge(False, 4, True)  # prefill: several query tokens per program
    assert fused_split_merge(True, 4, True)
    assert not fused_split_merge(True, 4, False)
