"""Launch rule of the low-bit attention kernel: key tile, tiles per loop step, split-K segments and
register cap of a call, from the H100 measurements of ``benchmarks/lowbit_bench.py`` (workload and
numbers in ``benchmarks/lowbit_notes.md``: 32 query / 8 KV heads, head 128, L = 32,768).

* Key tiles of 128 keys (int4) and 64 (KIVI) in decode, 64 in prefill; 2 pipeline stages, 4 warps
  (KIVI at 3 stages: 5.3 ms against 3.1 ms; prefill at 8 warps: 1.7x slower).
* A grid too short to fill the GPU is split along the keys (:func:`choose_num_splits`); KIVI aims at
  twice the 8-bit rule's programs (B=1: kivi4 61 µs at 66 segments against 94 µs at 33) and keeps one
  tile a step and no register cap there (B=1, kivi4: 61 µs, against 75 µs at four tiles capped).
* A full int4 decode grid runs one 128-key tile a step under a 128-register cap, so four programs
  share a multiprocessor and B=64 is one wave of 512 (1,264 µs; 1,695 µs uncapped, 1,416 µs at two
  tiles a step).
* A full KIVI decode grid loads four tiles a step (the kernel's docstring says why) under a
  168-register cap: three programs per multiprocessor. 512 programs are then 1.3 waves of 396, the
  second two-thirds idle, so the keys are split into the segments (1-4) that best fill whole waves
  (B=64: kivi4 2,707 µs at 3 segments against 2,899 unsplit, kivi2 2,280 against 2,686).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.kernels.launch_config import choose_num_splits

DECODE_TILE_INT4: int = 128
DECODE_TILE_KIVI: int = 64
PREFILL_TILE: int = 64
#: query rows (positions × GQA group) of one prefill program: each K/V tile is dequantized once for them
PREFILL_ROWS: int = 64
INTERPRETER_TILE: int = 16
STAGES: int = 2
WARPS: int = 4
DECODE_MAX_REGISTERS_INT4: int = 128
DECODE_MAX_REGISTERS_KIVI: int = 168
#: programs of the KIVI decode kernel that one multiprocessor holds under its register cap
#: (65,536 registers / (168 × 128 threads) = 3)
KIVI_RESIDENT_PROGRAMS: int = 3
DECODE_STEP_KIVI: int = 2
KIVI_SPLIT_PROGRAMS_PER_SM: int = 2
MAX_WAVE_SPLITS: int = 4
#: loop steps each split-K segment keeps at least, when splitting only to fill whole waves
MIN_STEPS_PER_WAVE_SPLIT: int = 4


@dataclass(frozen=True)
class LowBitLaunch:
    """Launch shape of one low-bit attention call.

    Attributes:
        tile_n: keys per tile; ``tiles_per_step``: tiles whose loads one loop step issues together;
        num_splits: split-K segments; ``max_registers``: register cap per thread (``None``: none).
    """

    tile_n: int
    tiles_per_step: int
    num_splits: int
    max_registers: int | None


def wave_balanced_splits(num_programs: int, num_sms: int, resident: int, max_steps: int) -> int:
    """Split-K segments (1 to ``MAX_WAVE_SPLITS``) whose grid best fills whole waves.

    A wave is ``resident × num_sms`` programs; a grid of ``n`` programs fills ``n / (⌈n / wave⌉ ·
    wave)`` of its waves. Fewer segments win ties, and each keeps ``MIN_STEPS_PER_WAVE_SPLIT`` of the
    ``max_steps`` loop steps. Example: 512 programs, 132 SMs, 3 resident (waves of 396): 1 segment
    fills 512/792 = 65%, 2 fill 1024/1188 = 86%, 3 fill 1536/1584 = 97%, 4 fill 2048/2376 = 86%: 3.
    """
    wave = resident * num_sms
    best, best_fill = 1, 0.0
    for s in range(1, MAX_WAVE_SPLITS + 1):
        if s > 1 and max_steps < s * MIN_STEPS_PER_WAVE_SPLIT:
            break
        n = num_programs * s
        fill = n / (-(-n // wave) * wave)
        if fill > best_fill + 1e-9:
            best, best_fill = s, fill
    return best


def choose_lowbit_launch(*, kivi: bool, prefill: bool, num_programs: int, max_seq_len: int, block_size: int,
                         num_sms: int | None, tile_n: int | None = None, tiles_per_step: int | None = None,
                         num_splits: int | None = None, max_registers: int | None = None) -> LowBitLaunch:
    """The launch rule (module docstring); every argument given by the caller is kept as given.

    Args:
        kivi: a KIVI cache (else int4 per-token-head); ``prefill``: some query has several tokens.
        num_programs: (query block, KV head) programs before split-K.
        max_seq_len: tokens of the longest sequence; ``block_size``: tokens per cache block.
        num_sms: multiprocessors of the GPU, ``None`` in the interpreter (no split, one tile a step).
    """
    if tile_n is None:
        if num_sms is None:
            tile_n = INTERPRETER_TILE
        elif prefill:
            tile_n = PREFILL_TILE
        else:
            tile_n = DECODE_TILE_KIVI if kivi else DECODE_TILE_INT4
        tile_n = max(block_size, tile_n)
    tiles = -(-max_seq_len // tile_n)
    per_sm = KIVI_SPLIT_PROGRAMS_PER_SM if kivi and not prefill else 2
    short_grid_splits = choose_num_splits(num_programs, tiles, num_sms, per_sm)
    full_grid = not prefill and num_sms is not None and short_grid_splits == 1
    if tiles_per_step is None:
        tiles_per_step = DECODE_STEP_KIVI if full_grid and kivi else 1
    if max_registers is None and full_grid:
        max_registers = DECODE_MAX_REGISTERS_KIVI if kivi else DECODE_MAX_REGISTERS_INT4
    if num_splits is None:
        num_splits = short_grid_splits
        if full_grid and kivi:
            num_splits = wave_balanced_splits(num_programs, num_sms, KIVI_RESIDENT_PROGRAMS,
                                              -(-tiles // tiles_per_step))
    return LowBitLaunch(tile_n, tiles_per_step, num_splits, max_registers)
