"""The low-bit kernel's launch rule, on the benchmark's shapes, worked by hand (an H100: 132 SMs)."""

from __future__ import annotations

import pytest

from kvlab.kernels.lowbit_launch import LowBitLaunch, choose_lowbit_launch, prefill_rows, wave_balanced_splits


@pytest.mark.parametrize("programs, sms, resident, steps, want", [
    (512, 132, 3, 128, 3),   # waves of 396: fills 65% / 86% / 97% / 86% for 1 / 2 / 3 / 4 segments
    (396, 132, 3, 128, 1),   # exactly one wave
    (512, 132, 2, 128, 1),   # waves of 264: 512 / 528 = 97% unsplit; 2 and 4 segments fill no more
    (512, 132, 3, 11, 2),    # 11 steps keep 4 per segment for at most 2 segments
    (512, 132, 3, 7, 1),     # too short to split at all
])
def test_wave_balanced_splits(programs, sms, resident, steps, want):
    assert wave_balanced_splits(programs, sms, resident, steps) == want


def _launch(kivi, batch, *, prefill=False, seq_len=32768, **given):
    return choose_lowbit_launch(kivi=kivi, prefill=prefill, num_programs=batch * 8, max_seq_len=seq_len,
                                block_size=16, num_sms=132, **given)


def test_full_decode_grids():
    # B=64 x 8 KV heads = 512 programs: int4 one 128-key tile a step on 4 warps, capped for 4 programs per SM
    assert _launch(False, 64) == LowBitLaunch(128, 1, 1, 128, 4)
    # KIVI: 64-key tiles on 2 warps, uncapped: 4 resident per SM, waves of 528 hold 512 (97%): unsplit
    assert _launch(True, 64) == LowBitLaunch(64, 1, 1, None, 2)


def test_short_decode_grids_split_without_step_or_cap():
    # B=1: 8 programs. KIVI aims at 2 programs x 132 SMs = 264 -> 33 segments, on 4 warps;
    # int4 switches to 64-key tiles on 2 warps and aims at 4 x 132 = 528 -> 66 segments
    assert _launch(True, 1) == LowBitLaunch(64, 1, 33, None, 4)
    assert _launch(False, 1) == LowBitLaunch(64, 1, 66, None, 2)
    # B=16: 128 programs -> 528 // 128 = 4 segments for int4, 264 // 128 = 2 for KIVI
    assert _launch(False, 16) == LowBitLaunch(64, 1, 4, None, 2)
    assert _launch(True, 16) == LowBitLaunch(64, 1, 2, None, 4)


def test_split_2bit_kivi_decodes_take_128_key_tiles():
    # B=1, 32,768 keys: 512 tiles of 64 over 33 segments is 16 a segment (>= 4): 128-key tiles, same split
    assert _launch(True, 1, bits=2) == LowBitLaunch(128, 1, 33, None, 4)
    # B=1, 8,192 keys: 128 / 33 -> 4 tiles a segment, still wide; 4,096 keys: 64 / 33 -> 2, kept at 64
    assert _launch(True, 1, bits=2, seq_len=8192).tile_n == 128
    assert _launch(True, 1, bits=2, seq_len=4096).tile_n == 64
    # B=16 (128 programs, a short grid): 2 segments of 256 tiles of 64, 128-key tiles on 4 warps
    assert _launch(True, 16, bits=2) == LowBitLaunch(128, 1, 2, None, 4)
    # kivi4, full grids (split only to fill waves or not at all), prefill and a tile given by the
    # caller keep theirs. B=32: 256 programs of 2 warps, waves of 528 -> 2 segments fill 97%
    assert _launch(True, 1, bits=4).tile_n == 64
    assert _launch(True, 32, bits=2) == LowBitLaunch(64, 1, 2, None, 2)
    assert _launch(True, 48, bits=2) == LowBitLaunch(64, 1, 4, None, 2)
    assert _launch(True, 64, bits=2) == LowBitLaunch(64, 1, 1, None, 2)
    assert _launch(True, 1, bits=2, prefill=True).tile_n == 64
    assert _launch(True, 1, bits=2, tile_n=64).tile_n == 64


def test_prefill_and_interpreter_and_given_options():
    # 2,048 new tokens in blocks of 16 queries: 128 x 8 = 1024 programs, no split, no cap;
    # 4-bit codes on 4 warps, 2-bit codes on 8 (their programs hold 128 rows: prefill_rows)
    assert choose_lowbit_launch(kivi=True, prefill=True, num_programs=1024, max_seq_len=8192, block_size=16,
                                num_sms=132) == LowBitLaunch(64, 1, 1, None, 4)
    assert choose_lowbit_launch(kivi=True, prefill=True, num_programs=512, max_seq_len=8192, block_size=16,
                                num_sms=132, bits=2) == LowBitLaunch(64, 1, 1, None, 8)
    assert (prefill_rows(2), prefill_rows(4)) == (128, 64)
    assert choose_lowbit_launch(kivi=True, prefill=False, num_programs=512, max_seq_len=300, block_size=32,
                                num_sms=None) == LowBitLaunch(32, 1, 1, None, 4)
    assert _launch(True, 64, tiles_per_step=2, num_splits=1, max_registers=255,
                   num_warps=4) == LowBitLaunch(64, 2, 1, 255, 4)
    assert _launch(False, 64, tile_n=64) == LowBitLaunch(64, 1, 1, 128, 4)
