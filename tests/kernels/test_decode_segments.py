"""Split decode segments of one size per launch (``split_decode_rules.FIXED_DECODE_SEGMENTS``).

Every sequence's key tiles are cut into segments of ``segment_tiles`` tiles (from the batch's
longest sequence), so that a program can load its first block ids before its sequence's length.
Checked here: the rule by hand; the output against the float64 reference with and without fixed
segments on fresh random lengths (one sequence shorter than a tile, so most of its segments are
empty, and NaN-poisoned block-table padding, so a block id read past a sequence shows); a decode
whose sequences grew on the device after the call was prepared, which the last segment still reads
whole; and the 64-key tiles of short 1-byte segments (``split_decode_rules.short_segment_tile_n``),
by hand and, on a GPU, on a launch the rule shrinks, against both references.
"""

from __future__ import annotations

import pytest
import torch

from kvlab import relative_error
from kvlab.cache.batch import AttentionBatch
from kvlab.kernels import prepare_paged_attention
from kvlab.kernels.launch_config import choose_tiling
from kvlab.kernels.split_decode_rules import fixed_decode_segments, segment_tiles, short_segment_tile_n
from kvlab.reference import paged_attention_reference, reference_attention

from .conftest import kernel_tolerance, poisoned, scheme_tolerance
from .test_fused_split_merge import _lengths
from .test_paged_attention import _example

SCHEMES = ["bfloat16", "int8_per_token_head", "fp8_per_token_head"]


def test_segment_size_by_hand():
    # 32,768 keys in 128-key tiles = 256 tiles over 66 segments: 3.88 → 4 (the last two segments empty)
    assert segment_tiles(66, 32768, 128) == 4
    # 8,192 keys in 64-key tiles = 128 tiles over 33 segments: 3.88 → 4
    assert segment_tiles(33, 8192, 64) == 4
    assert segment_tiles(3, 40, 16) == 1  # 3 tiles over 3 segments
    assert segment_tiles(3, 49, 16) == 2  # 4 tiles over 3 segments
    assert segment_tiles(8, 1, 16) == 1  # never 0, even for a 1-token sequence


def _decode_tiling(batch: int, context: int, element_bytes: int, **kw):
    return choose_tiling(group=4, head_size=128, head_size_v=128, kv_element_bytes=element_bytes,
                         max_query_len=1, max_seq_len=context, num_tokens=batch, num_seqs=batch,
                         num_kv_heads=8, num_sms=132, **kw)


def test_short_segments_take_half_tiles_by_hand():
    # B=1, 32,768 keys, 1-byte: 8 programs want 66 segments (4 × 132 / 8); 256 tiles of 128 keys over
    # 66 is 4 a segment, at most SHORT_SEGMENT_MAX_TILES, so the tiles halve to 64 keys
    t = _decode_tiling(1, 32768, 1)
    assert (t.tile_n, t.num_splits) == (64, 66)
    # B=4, 8,192 keys: 32 programs, 16 segments of 64 / 16 = 4 tiles: halved as well
    assert (_decode_tiling(4, 8192, 1).tile_n, _decode_tiling(4, 8192, 1).num_splits) == (64, 16)
    # B=1, 65,536 keys: 512 / 66 → 8 tiles a segment; B=16, 8,192 keys: 4 segments of 16 tiles
    assert _decode_tiling(1, 65536, 1).tile_n == 128
    assert (_decode_tiling(16, 8192, 1).tile_n, _decode_tiling(16, 8192, 1).num_splits) == (128, 4)
    # bf16 keeps its 64-key tiles; a split count given by the caller keeps the 128-key tile
    assert _decode_tiling(1, 32768, 2).tile_n == 64
    assert _decode_tiling(1, 32768, 1, num_splits=66).tile_n == 128
    assert short_segment_tile_n(128, 1, 1, 32768) == 128  # unsplit
    assert short_segment_tile_n(128, 1, 1, 512) == 128  # unsplit, even with 4 tiles: only split grids
    # a 16-bit cache at head size 64 also streams 128-key tiles; the rule was measured on 1-byte ones
    assert short_segment_tile_n(128, 2, 66, 32768) == 128
    assert short_segment_tile_n(64, 1, 66, 8192) == 64  # already short: only 128-key tiles halve
    assert short_segment_tile_n(128, 1, 33, 16384) == 64  # 128 tiles / 33 → 4
    assert short_segment_tile_n(128, 1, 25, 16384) == 128  # 128 / 25 → 6


@pytest.mark.parametrize("scheme", ["int8_per_token_head", "fp8", "fp8_per_token_head"])
def test_short_segment_launch_agrees_with_both_references(target, seed, scheme):
    """The launch the rule gives two 1-byte sequences, one ending mid-segment (on a GPU: 16 programs,
    33 segments of at most 4 tiles, so 64-key tiles; the interpreter never splits), into NaN-poisoned
    outputs."""
    gen = torch.Generator().manual_seed(seed)
    long = int(torch.randint(12000, 16384, (1,), generator=gen)) if target.large else 90
    ex = _example(target, seed, [1, 1], [long, long // 3 + 7], hq=32, hkv=8, d=128, scheme=scheme)
    call = prepare_paged_attention(ex.query, ex.cache, ex.batch)
    if target.large:
        assert call.tiling.tile_n == 64 and call.tiling.num_splits > 1
    for t in (call.out, call._launch.part_acc, call._launch.part_stat):
        t.copy_(poisoned(t.shape, t.dtype, t.device))
    out = call.run()
    assert torch.isfinite(out).all()
    tol = kernel_tolerance(ex.query.dtype, scheme)
    assert relative_error(out, paged_attention_reference(ex.query, ex.cache, ex.batch)) <= tol
    truth = reference_attention(ex.query, ex.keys, ex.values, ex.batch)
    assert relative_error(out, truth) <= tol + scheme_tolerance(scheme)


def test_which_launches_use_fixed_segments():
    assert fixed_decode_segments(True, 4, False)
    assert not fixed_decode_segments(True, 1, False)  # unsplit: measured slower for 1-byte caches
    assert not fixed_decode_segments(False, 4, False)  # prefill: not a decode
    assert not fixed_decode_segments(True, 4, True)  # a window's first tile depends on the length


def _run(call, launch_fixed: bool) -> torch.Tensor:
    launch = call._launch
    launch.consts = dict(launch.consts, FIXED_SEGMENTS=launch_fixed)
    for t in (call.out, launch.part_acc, launch.part_stat):
        t.copy_(poisoned(t.shape, t.dtype, t.device))
    return call.run().clone()


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("num_splits", [1, 3, 7])
def test_fixed_and_per_sequence_segments_agree_with_the_reference(target, seed, scheme, num_splits):
    slens = _lengths(target, seed, 4)
    ex = _example(target, seed, [1] * len(slens), slens, hq=8, hkv=2, d=64, scheme=scheme)
    call = prepare_paged_attention(ex.query, ex.cache, ex.batch, num_splits=num_splits)
    assert call._launch.consts["FIXED_SEGMENTS"] is (num_splits > 1)  # unsplit: forced on below
    ref = paged_attention_reference(ex.query, ex.cache, ex.batch)
    tol = kernel_tolerance(ex.query.dtype, scheme)
    for fixed in (True, False):
        out = _run(call, fixed)
        assert torch.isfinite(out).all(), f"fixed={fixed}: a row was left unwritten or read poison"
        assert relative_error(out, ref) <= tol, f"fixed={fixed}"


@pytest.mark.parametrize("scheme", ["bfloat16", "int8_per_token_head"])
def test_sequences_that_grew_after_the_call_was_prepared(target, seed, scheme):
    """Prepared for short sequences, launched after ``seq_lens`` grew in place: the segments were
    sized for the short lengths, and the last one must take every tile past them."""
    gen = torch.Generator().manual_seed(seed)
    lo, hi = (2000, 3000) if target.large else (560, 700)
    long = [int(n) for n in torch.randint(lo, hi, (3,), generator=gen)]
    ex = _example(target, seed, [1, 1, 1], long, hq=8, hkv=2, d=64, scheme=scheme)
    short = torch.tensor([n // 8 for n in long], dtype=torch.int32, device=ex.batch.seq_lens.device)
    seq_lens = short.clone()
    prepared_for = AttentionBatch(ex.batch.query_start_loc, seq_lens, ex.batch.block_table)
    call = prepare_paged_attention(ex.query, ex.cache, prepared_for, num_splits=4)
    assert call._launch.consts["FIXED_SEGMENTS"] is True
    covered = 4 * call._launch.args[-1] * call.tiling.tile_n  # keys the four segments were sized for
    assert min(long) > covered, "the grown sequences must reach past the segments' keys"
    seq_lens.copy_(ex.batch.seq_lens)  # the sequences grow on the device; the call is not rebuilt
    out = _run(call, True)
    ref = paged_attention_reference(ex.query, ex.cache, ex.batch)
    assert torch.isfinite(out).all()
    assert relative_error(out, ref) <= kernel_tolerance(ex.query.dtype, scheme)
    stale = paged_attention_reference(ex.query, ex.cache, AttentionBatch(
        ex.batch.query_start_loc, short, ex.batch.block_table))
    assert relative_error(out, stale) > 10 * kernel_tolerance(ex.query.dtype, scheme), \
        "the output is the short sequences' answer: the grown keys were not read"
