"""A decode's whole tiles run without masks (only the tile holding the sequence's end masked).

The kernel must agree with itself with every tile masked and with the float64 references, within
the kernel's own rounding (compiled, the two loops may fuse the score scaling differently, so the
bits can differ), at lengths on and off tile and block boundaries, unsplit and split into segments (a
segment's tiles are whole except the sequence's last). Caches come poisoned (NaN, or NaN scales for
int8) wherever nothing was written, so an unmasked tile that reached past a sequence would fail.
The rule that picks it is checked on hand-worked shapes.
"""

from __future__ import annotations

import pytest
import torch

from kvlab import build_paged_example
from kvlab.kernels import prepare_paged_attention
from kvlab.kernels.split_decode_rules import unmasked_decode_tiles
from kvlab.reference import paged_attention_reference, reference_attention
from kvlab.reference.metrics import relative_error

from .conftest import kernel_tolerance, poisoned, scheme_tolerance


@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("block", [8, 16, 64])
@pytest.mark.parametrize("scheme", ["int8_per_token_head", "fp8", "bfloat16"])
def test_unmasked_whole_tiles_match_masked_ones(target, seed, scheme, block, splits):
    if target.large:
        slens, hq, hkv, d = [1, 128, 300, 4097, 2048, 8192], 32, 8, 128
    else:
        slens, hq, hkv, d = [1, 64, 75, 200, 129], 4, 2, 32
    ex = build_paged_example([1] * len(slens), slens, num_q_heads=hq, num_kv_heads=hkv, head_size=d,
                             scheme=scheme, block_size=block, seed=seed, device=target.device)
    outs = []
    for full in (False, True):
        out = poisoned((len(slens), hq, d), ex.query.dtype, target.device)
        call = prepare_paged_attention(ex.query, ex.cache, ex.batch, out=out, num_splits=splits,
                                       decode_full_tiles=full)
        assert call.tiling.num_splits == splits
        call.run()
        assert torch.isfinite(out).all(), "outputs unwritten, or a poisoned slot was read"
        outs.append(out)
    k_tol = kernel_tolerance(ex.query.dtype, scheme, torch.bfloat16)
    # the same keys and operands: only the kernel's own rounding may differ between the two
    assert relative_error(outs[1], outs[0]) <= k_tol, "unmasked whole tiles changed the result"
    ref = paged_attention_reference(ex.query, ex.cache, ex.batch)
    truth = reference_attention(ex.query, ex.keys, ex.values, ex.batch)
    for out in outs:
        assert relative_error(out, ref) <= k_tol
        assert relative_error(out, truth) <= k_tol + scheme_tolerance(scheme, "nearest", torch.bfloat16)


def test_unmasked_decode_rule_on_hand_worked_shapes():
    # 32768 tokens in 128-key tiles = 256 tiles: 4 segments of 64 tiles → unmasked (1-byte codes)
    assert unmasked_decode_tiles(1, 4, 32768, 128)
    # 8192 tokens = 64 tiles over 4 segments: 16 a segment, the threshold → unmasked
    assert unmasked_decode_tiles(1, 4, 8192, 128)
    # 4096 tokens = 32 tiles over 4 segments: 8 a segment → masked
    assert not unmasked_decode_tiles(1, 4, 4096, 128)
    # B=1, 66 segments of 256 tiles: 3 a segment → masked; unsplit (B=64) → masked
    assert not unmasked_decode_tiles(1, 66, 32768, 128)
    assert not unmasked_decode_tiles(1, 1, 32768, 128)
    # 16-bit caches keep every tile masked
    assert not unmasked_decode_tiles(2, 4, 32768, 64)
