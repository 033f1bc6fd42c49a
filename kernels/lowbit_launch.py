"""Launch rule of the low-bit attention kernel: key tile, tiles per loop step, split-K segments, warps
and register cap of a call, from the H100 measurements of ``benchmarks/lowbit_bench.py`` (workload and
numbers in ``benchmarks/lowbit_notes.md``: 32 query / 8 KV heads, head 128, L = 32,768; v4 there).

* A full int4 decode grid (B=64: 512 programs) runs one 128-key tile a step on 4 warps under a
  128-register cap, so four programs share a multiprocessor and B=64 is one wave (1,386 µs; 2 warps
  on 64-key tiles 1,424, 8 warps 2,275, cap 168 1,627; after the value-tile fix of notes v7 1,118,
  and 3 or 4 pipeline stages no faster: 2 stages 1,034 against 3 stages 1,143 and 4 stages 1,093 in
  one run, 1,118 against 1,082 in the other, each first-timed row slower).
* A full KIVI decode grid runs one 64-key tile a step on **2 warps**, uncapped: a program's score tile
  ``[16, 64]`` is then reduced across 2 warps instead of 4. B=64: kivi4 1,992 µs and kivi2 1,646,
  against 2,477 / 2,020 at 4 warps, two tiles a step, capped at 168 (the rule before).
  At 255 registers × 64 threads four programs fit a multiprocessor: 512 programs are one wave of 528,
  so :func:`wave_balanced_splits` leaves them unsplit.
* A grid too short to fill the GPU (B=1) is split along the keys (:func:`choose_num_splits`) into
  segments for ``SPLIT_PROGRAMS_PER_SM`` programs per multiprocessor: int4 on 2 warps, 64-key tiles,
  66 segments (31.6 µs, against 35.8 at 4 warps, 128-key tiles, 33 segments); KIVI on 4 warps,
  33 segments (kivi4 49.2 µs, against 52.4 at 66 and 56.8 on 2 warps). 2-bit KIVI codes there take
  128-key tiles once each segment holds at least 4 tiles of 64: a 64-key tile of them is 4 KB of
  codes, too little to carry a loop step's fixed work (B=1, L=32768: 38.4 against 44.5 µs; 4-16%
  faster on every short grid measured; kivi4 between 2% slower and 3% faster, so it keeps 64;
  full grids 28-51% slower with 128: ``benchmarks/kernel_notes.md``, round 13). A full grid split
  only to fill whole waves (B=32: 2 segments, B=48: 4) keeps 64-key tiles on its 2 warps (B=32,
  L=32768: 815 against 957 µs with 128; ``benchmarks/lowbit_notes.md``, round 14).
* Prefill: 64-key tiles, 2 stages, 64 query rows a program on 4 warps; 2-bit codes 128 rows on
  8 warps (kivi2 1,996 µs against 2,592: each K/V tile is dequantized once for twice the rows; the
  4-bit schemes time the same either way, int4 1,799 against 1,775, kivi4 1,804 against 1,823).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.kernels.launch_config import NO_SPLIT_PROGRAMS_PER_SM, choose_num_splits

DECODE_TILE_INT4: int = 128
DECODE_TILE_KIVI: int = 64
SHORT_GRID_TILE_INT4: int = 64
PREFILL_TILE: int = 64
INTERPRETER_TILE: int = 16
STAGES: int = 2
WARPS: int = 4
FULL_GRID_WARPS_KIVI: int = 2
SHORT_GRID_WARPS_INT4: int = 2
PREFILL_WARPS_2BIT: int = 8
#: query rows (positions × GQA group) of one prefill program: each K/V tile is dequantized once for them
PREFILL_ROWS: int = 64
PREFILL_ROWS_2BIT: int = 128
DECODE_MAX_REGISTERS_INT4: int = 128
#: programs of the KIVI decode kernel that one multiprocessor holds (65,536 registers / (256 × 64))
KIVI_RESIDENT_PROGRAMS: int = 4
#: programs per multiprocessor a short decode grid is split for: 2-warp int4 programs, 4-warp KIVI ones
SPLIT_PROGRAMS_PER_SM_INT4: int = 4
SPLIT_PROGRAMS_PER_SM_KIVI: int = 2
MAX_WAVE_SPLITS: int = 4
#: key tile of a split short-grid 2-bit KIVI decode whose segments hold at least
#: ``KIVI2_WIDE_MIN_TILES`` tiles of ``DECODE_TILE_KIVI`` keys (module docstring)
SPLIT_GRID_TILE_KIVI2: int = 128
KIVI2_WIDE_MIN_TILES: int = 4
#: loop steps each split-K segment keeps at least, when splitting only to fill whole waves
MIN_STEPS_PER_WAVE_SPLIT: int = 4


@dataclass(frozen=True)
class LowBitLaunch:
    """Launch shape of one low-bit attention call.

    Attributes:
        tile_n: keys per tile; ``tiles_per_step``: tiles whose loads one loop step issues together;
        num_splits: split-K segments; ``max_registers``: register cap per thread (``None``: none);
        num_warps: warps per program; ``num_stages``: software-pipeline stages of the key loop.
    """

    tile_n: int
    tiles_per_step: int
    num_splits: int
    max_registers: int | None
    num_warps: int
    num_stages: int = STAGES


def prefill_rows(bits: int) -> int:
    """Query rows of one prefill program for ``bits``-bit codes (module docstring)."""
    return PREFILL_ROWS_2BIT if bits == 2 else PREFILL_ROWS


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
                         num_splits: int | None = None, max_registers: int | None = None,
                         num_warps: int | None = None, bits: int = 4) -> LowBitLaunch:
    """The launch rule (module docstring); every argument given by the caller is kept as given.

    Args:
        kivi: a KIVI cache (else int4 per-token-head); ``prefill``: some query has several tokens.
        num_programs: (query block, KV head) programs before split-K.
        max_seq_len: tokens of the longest sequence; ``block_size``: tokens per cache block.
        num_sms: multiprocessors of the GPU, ``None`` in the interpreter (no split, one tile a step).
        bits: bits per code (2 or 4).
    """
    short = num_sms is not None and num_programs < NO_SPLIT_PROGRAMS_PER_SM * num_sms
    short_int4 = short and not prefill and not kivi
    tile_given = tile_n is not None
    if tile_n is None:
        if num_sms is None:
            tile_n = INTERPRETER_TILE
        elif prefill:
            tile_n = PREFILL_TILE
        elif kivi:
            tile_n = DECODE_TILE_KIVI
        else:
            tile_n = SHORT_GRID_TILE_INT4 if short_int4 else DECODE_TILE_INT4
        tile_n = max(block_size, tile_n)
    tiles = -(-max_seq_len // tile_n)
    if prefill:
        per_sm = 2
    else:
        per_sm = SPLIT_PROGRAMS_PER_SM_KIVI if kivi else SPLIT_PROGRAMS_PER_SM_INT4
    short_grid_splits = choose_num_splits(num_programs, tiles, num_sms, per_sm)
    full_grid = not prefill and num_sms is not None and short_grid_splits == 1
    if num_warps is None:
        if prefill and num_sms is not None and bits == 2:
            num_warps = PREFILL_WARPS_2BIT
        elif (full_grid and kivi) or (short_int4 and short_grid_splits > 1):
            num_warps = FULL_GRID_WARPS_KIVI if kivi else SHORT_GRID_WARPS_INT4
        else:
            num_warps = WARPS
    if tiles_per_step is None:
        tiles_per_step = 1
    if max_registers is None and full_grid and not kivi:
        max_registers = DECODE_MAX_REGISTERS_INT4
    if num_splits is None:
        num_splits = short_grid_splits
        if full_grid and kivi:
            num_splits = wave_balanced_splits(num_programs, num_sms, KIVI_RESIDENT_PROGRAMS,
                                              -(-tiles // tiles_per_step))
    if (kivi and bits == 2 and not prefill and not tile_given and not full_grid and num_splits > 1
            and -(-tiles // num_splits) >= KIVI2_WIDE_MIN_TILES):
        tile_n = max(tile_n, SPLIT_GRID_TILE_KIVI2)
    return LowBitLaunch(tile_n, tiles_per_step, num_splits, max_registers, num_warps, STAGES)
