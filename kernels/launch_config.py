"""How the attention kernel is cut into programs: tile shapes, warps, pipeline depth, split-K.

Pure Python, no Triton, so the choices can be read, tested and printed on any machine.

The two questions a launch must answer:

* **Tile shapes.** A program owns ``block_m`` rows = ``block_q`` query positions × the ``group``
  query heads of one KV head (``group = num_q_heads / num_kv_heads``), so one K/V tile load serves the
  whole GQA group. It walks the keys in tiles of ``tile_n`` positions, which may span several cache
  blocks. ``tl.dot`` needs every dimension >= 16, so a decode step (one query position) still has
  16 rows, of which ``group`` are live: decode is bound by bytes, not by tensor-core work.
* **Split-K** (flash-decoding). A decode batch of a few long sequences has few programs
  (``num_seqs × num_kv_heads``: 8 for one sequence with 8 KV heads) and would leave most of the GPU's
  multiprocessors idle while each program streams its whole context. Splitting the key range of
  every program into ``num_splits`` segments multiplies the programs; a second small kernel merges
  the segments' partial softmax results. **The rule, in one paragraph:** the GPU streams at full
  bandwidth once about ``P = k × SMs`` programs are resident (``k`` = 2 programs per multiprocessor,
  4 under the 8-bit register cap). A decode grid of ``B × Hkv >= 2 × SMs`` programs is not split.
  Otherwise the key tile is first halved (down to 32 keys) while the batch holds fewer than ``P``
  tiles in all, so that a short sequence still has work for every multiprocessor; then each
  program's key range is cut into ``min(P / (B × Hkv), its tiles, 128)`` segments: one wave of
  ``P`` programs, each streaming an equal share. A 1-byte decode whose segments then hold at most
  four 128-key tiles runs them in 64-key tiles (the last tile's math, which nothing overlaps, halves).
* **Prefill.** 128 rows (32 query positions of a 4-head group) on 8 warps, 64-key tiles; at head
  size 128 (16- or 8-bit cache), two such programs per multiprocessor (registers capped at 128, 2
  stages), so that one program's softmax and tile conversion overlap the other's tensor-core work
  (before: 256 rows on 16 warps for 16-bit caches, 7% slower; still so for bf16 queries over an
  fp16 cache, whose query scaling does not fit the register cap). Query blocks are launched
  last-first: under causal attention the last blocks see the most keys, and launched first they no
  longer finish alone at the end of the grid (8,192 tokens from an empty cache: 1368 against 1506 µs
  in order).
* **Registers.** A program's K and V tiles, converted for the tensor cores, live in registers; for
  8-bit caches the compiler takes 210 per thread, which leaves room for only two programs per
  multiprocessor. When more programs than that want to run, a cap of 128 (``max_registers``) lets
  four run at once, which measured faster; with few programs it measured slower, so it is not set.

How a split decode then runs (segment sizes, unmasked tiles, where and when its merge runs) is
decided in :mod:`kvlab.kernels.split_decode_rules`.

Every number quoted here was measured on an H100 with ``kvlab bench --sweep``
(``benchmarks/kernel_notes.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.cache.batch import cdiv
from kvlab.kernels.split_decode_rules import short_segment_tile_n
from kvlab.validation import require_positive_int

#: A grid of at least this many programs per multiprocessor is not split: it already keeps the
#: machine busy (two programs per SM is what fits uncapped; see ``DECODE_MAX_REGISTERS_8BIT``).
NO_SPLIT_PROGRAMS_PER_SM: int = 2
#: Programs per multiprocessor split-K aims for: as many as fit at once. Measured on an H100
#: (132 SMs, benchmarks/kernel_notes.md): bf16, B=1, L=32768 ran best at 33 segments (264
#: programs, 56 µs against 59 µs at 66); int8 under the register cap at 66 (528 programs, 45.6 µs
#: against 47.5 µs uncapped at 33); int8, B=16, L=32768 at 4-8 segments, capped (494 µs against
#: 605 µs uncapped at 2).
SPLIT_PROGRAMS_PER_SM: int = 2
SPLIT_PROGRAMS_PER_SM_CAPPED: int = 4
#: Each split segment streams at least this many key tiles. Four (the value before) left one
#: sequence of 1,024 tokens with 4 segments of 64 keys (32 programs for 132 multiprocessors).
MIN_TILES_PER_SPLIT: int = 1
#: Smallest decode key tile the launch rule shrinks to when a batch has fewer tiles than the GPU
#: wants programs (one short sequence).
MIN_DECODE_TILE_N: int = 32
#: Upper bound on segments per program (the reduction kernel holds one row per segment).
MAX_SPLITS: int = 128
#: Largest head size the kernels take (the fp32 accumulator of a program lives in registers).
MAX_HEAD_SIZE: int = 512
#: Bytes of one decode K tile (keys × padded head size × element bytes): 128 keys of int8/fp8 or 64
#: keys of bf16 at head size 128. Measured on an H100 (benchmarks/kernel_notes.md): for int8 at
#: B=64, L=32768, 128-key tiles ran in 1957 µs against 2624 µs for 64-key tiles.
DECODE_TILE_BYTES: int = 16384
# Not adopted (benchmarks/kernel_notes.md, v18 and round 13): split 8-bit grids in narrow programs
# (64-key tiles on 2 warps, eight per SM): int8 3-4% faster at B=16 and 32, L >= 8192, slower with few
# sequences (B=1, L=32768: 45.7 against 41.7 µs) and at B=64; wide ones (8 warps) 7-47% slower.

#: Pipeline depth of the decode key loop. With the block ids fetched one tile ahead, 2 stages keep one
#: K/V buffer (42 KB of shared memory for int8, 128-key tiles), so five programs fit on a
#: multiprocessor; 3 stages double-buffer (76 KB, three programs) and measured slower (2120 µs).
DECODE_STAGES: int = 2
#: Rows (query positions × heads of a group) of a prefill program at head size <= 128.
PREFILL_BLOCK_M: int = 128
#: Prefill at head size 128 (16- and 8-bit caches) runs two 128-row, 8-warp programs per
#: multiprocessor: registers capped at 128 (65,536 / 512 threads) and 2 pipeline stages (96 KB of
#: shared memory for bf16, 64 KB for 8-bit), so two programs fit. In different phases, one
#: program's softmax (and an 8-bit tile's conversion) runs while the other's tensor cores work: the
#: overlap FlashAttention-3 gets by alternating two warpgroups of one program ("ping-pong"). Offline
#: (sm_90) the cap spills 208 (bf16), 128 (fp8) and 216 (int8 per-token-head) bytes per thread.
#: Measured on an H100 (benchmarks/kernel_notes.md, v20), against the rules before (16-bit: 256
#: rows on 16 warps, one program; 8-bit: 128 rows uncapped, 3 stages, one program): bf16 on the
#: 2,048-token chunk over 8,192 574 against 591 µs, from an empty cache 1271 against 1369 µs;
#: fp8_e4m3 743-764 against 801 µs and 1657-1781 against 1786 µs; int8 per-token-head 903-927
#: against 1008 µs and 2025-2031 against 2259 µs.
PREFILL_MAX_REGISTERS_PAIRED: int = 128
PREFILL_STAGES_PAIRED: int = 2
#: Rows of a prefill program at head size 128 when the kernel scales bf16 queries into an fp16
#: cache's range: one 256-row program on 16 warps per multiprocessor (the rule before paired
#: programs). The scaling keeps the query live in fp32, and paired programs capped at 128 registers
#: ran slower there on an H100 (v20): 640 against 603 µs on the chunk, 1489 against 1409 µs.
PREFILL_BLOCK_M_SCALED_QUERY: int = 256
#: Register cap of decode programs over 8-bit caches. Uncapped, the compiler gives the int8 kernel
#: (128-key tiles) 210 registers per thread, so only two 4-warp programs fit on a multiprocessor
#: (Nsight Compute on an H100: 12.5% theoretical occupancy, DRAM at 68% of peak). Capped at 128 it
#: spills 8 bytes of stack and four programs fit.
DECODE_MAX_REGISTERS_8BIT: int = 128


def next_pow2(n: int) -> int:
    """Smallest power of two >= n (1 for n <= 1)."""
    return 1 << max(0, (int(n) - 1).bit_length())


def _is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


@dataclass(frozen=True)
class AttentionTiling:
    """One launch shape of the paged-attention kernel.

    Attributes:
        block_m: rows per program (query positions × heads of the group), a power of two >= 16.
        block_q: query positions per program (1 for a decode-only batch).
        tile_n: key positions per loop step, a power of two >= 16 (may span several cache blocks).
        num_warps: warps per program.
        num_stages: software-pipelining depth of the key loop (compiled mode only).
        num_splits: key-range segments per program (1 = no split-K).
        max_registers: cap on registers per thread (``None`` = the compiler's choice). More
            programs fit on a multiprocessor under a lower cap, which hides more memory latency.
        longest_first: launch a prefill's query blocks last-first. Under causal attention a query
            block's work grows with its position, and the GPU hands out programs in launch order:
            launched first, the longest programs no longer finish alone at the end of the grid.
            Ignored by decode-only batches.
    """

    block_m: int
    block_q: int
    tile_n: int
    num_warps: int = 4
    num_stages: int = 3
    num_splits: int = 1
    max_registers: int | None = None
    longest_first: bool = False

    def __post_init__(self) -> None:
        for name in ("block_m", "tile_n"):
            value = getattr(self, name)
            require_positive_int(value, name, minimum=16)
            if not _is_pow2(value):
                raise ValueError(f"{name} must be a power of two >= 16, got {value}")
        require_positive_int(self.block_q, "block_q")
        if self.block_q > self.block_m:
            raise ValueError(f"block_q ({self.block_q}) cannot exceed block_m ({self.block_m})")
        require_positive_int(self.num_warps, "num_warps")
        if not _is_pow2(self.num_warps) or self.num_warps > 16:
            raise ValueError(f"num_warps must be 1, 2, 4, 8 or 16, got {self.num_warps}")
        require_positive_int(self.num_stages, "num_stages")
        require_positive_int(self.num_splits, "num_splits")
        if self.num_splits > MAX_SPLITS:
            raise ValueError(f"num_splits must be <= {MAX_SPLITS}, got {self.num_splits}")
        if self.max_registers is not None:
            require_positive_int(self.max_registers, "max_registers", minimum=24)
            if self.max_registers > 255:
                raise ValueError(f"max_registers must be <= 255, got {self.max_registers}")


def choose_num_splits(num_programs: int, max_kv_tiles: int, num_sms: int | None,
                      programs_per_sm: int = SPLIT_PROGRAMS_PER_SM) -> int:
    """Split-K segments for a grid of ``num_programs`` (query blocks × KV heads).

    Args:
        num_programs: programs without split-K.
        max_kv_tiles: key tiles of the longest program.
        num_sms: multiprocessors of the GPU; ``None`` (interpreter) means no split.
        programs_per_sm: programs per multiprocessor to aim for when splitting (how many fit).

    Returns:
        1 when the grid already has ``NO_SPLIT_PROGRAMS_PER_SM × num_sms`` programs, else as many
        segments as keep the grid within ``programs_per_sm × num_sms`` programs (one wave: a
        second, partial wave measured slower, 594 µs at 5 segments against 494 µs at 4 for int8,
        B=16, L=32768), and no segment shorter than ``MIN_TILES_PER_SPLIT`` tiles.
    """
    if num_sms is None or num_programs <= 0:
        return 1
    if num_programs >= NO_SPLIT_PROGRAMS_PER_SM * num_sms:
        return 1
    splits = (programs_per_sm * num_sms) // num_programs
    splits = min(splits, max(1, max_kv_tiles // MIN_TILES_PER_SPLIT), MAX_SPLITS)
    return max(1, splits)


def choose_tiling(
    *,
    group: int,
    head_size: int,
    head_size_v: int,
    kv_element_bytes: int,
    max_query_len: int,
    max_seq_len: int,
    num_tokens: int,
    num_seqs: int,
    num_kv_heads: int,
    num_sms: int | None,
    num_splits: int | None = None,
    scaled_query: bool = False,
) -> AttentionTiling:
    """The launch shape for one batch.

    Args:
        group: query heads per KV head.
        head_size, head_size_v: K and V head sizes (elements).
        kv_element_bytes: bytes of one stored K/V element (1 for int8/fp8, 2 for bf16).
        max_query_len: most new tokens of one sequence (1 for decode-only batches).
        max_seq_len: longest sequence (tokens).
        num_tokens, num_seqs: new tokens and sequences of the batch (they size the grid).
        num_kv_heads: KV heads.
        num_sms: multiprocessors (``None`` in the interpreter).
        num_splits: force a split count (``None`` = choose).
        scaled_query: the kernel scales the query into fp16's range (bf16 queries over an fp16
            cache); prefill then keeps one 256-row program per multiprocessor (see
            :data:`PREFILL_BLOCK_M_SCALED_QUERY`).
    """
    dpad = max(16, next_pow2(max(head_size, head_size_v)))
    decode = max_query_len <= 1
    rows_for_group = max(16, next_pow2(group))
    warps = 4
    paired = False
    if decode:
        block_m = rows_for_group
        block_q = 1
        tile_n = min(128, max(16, DECODE_TILE_BYTES // (dpad * kv_element_bytes)))
        stages = DECODE_STAGES
        cap = kv_element_bytes == 1 and dpad <= 128
    else:
        # The fp32 accumulator (block_m × head) stays in registers: 16K values over 8 warps (64 per
        # thread) at head size 128. 128 rows × 64 keys per step is the tile FlashAttention-2 uses on
        # this class of GPU; the previous 64 rows × 64 keys on 4 warps measured 249 TFLOP/s on an H100.
        rows = min(PREFILL_BLOCK_M, 16384 // dpad)
        if scaled_query and dpad == 128:
            rows = PREFILL_BLOCK_M_SCALED_QUERY
        block_m = max(rows_for_group, rows)
        block_q = max(1, block_m // group)
        tile_n = min(64, max(16, 8192 // dpad))
        stages = 3
        warps = 16 if block_m >= 256 else 8 if block_m >= 128 else 4
        cap = False
        # head size 128, 16- or 8-bit cache: two programs per multiprocessor (registers capped, 2
        # stages), so that one's softmax and tile conversion run while the other's tensor cores work
        paired = kv_element_bytes <= 2 and dpad == 128 and block_m == 128
        if paired:
            stages = PREFILL_STAGES_PAIRED
    programs = query_block_count(num_tokens, num_seqs, block_q, decode) * num_kv_heads
    per_sm = SPLIT_PROGRAMS_PER_SM_CAPPED if cap else SPLIT_PROGRAMS_PER_SM
    if decode and num_splits is None and num_sms is not None:
        # a batch with fewer key tiles than the GPU wants programs gets smaller tiles first
        want = per_sm * num_sms
        while tile_n > MIN_DECODE_TILE_N and programs * cdiv(max(max_seq_len, 1), tile_n) < want:
            tile_n //= 2
    if num_splits is None:
        num_splits = choose_num_splits(programs, cdiv(max(max_seq_len, 1), tile_n), num_sms, per_sm)
        if decode:
            tile_n = short_segment_tile_n(tile_n, kv_element_bytes, num_splits, max_seq_len)
    # The register cap pays only when more programs than fit uncapped want to run at once (measured:
    # int8, B=1 at 33 segments, 264 programs, was slower capped, 53.1 µs against 47.6 µs).
    crowded = num_sms is not None and programs * num_splits > NO_SPLIT_PROGRAMS_PER_SM * num_sms
    max_registers = DECODE_MAX_REGISTERS_8BIT if cap and crowded else None
    if not decode and paired:
        max_registers = PREFILL_MAX_REGISTERS_PAIRED
    return AttentionTiling(block_m=block_m, block_q=block_q, tile_n=tile_n, num_warps=warps,
                           num_stages=stages, num_splits=num_splits, max_registers=max_registers,
                           longest_first=not decode)


#: Elements (both K and V counted once) a cache-write program aims to quantize: 32 rows of 128 for
#: 8 KV heads of head size 128, i.e. four whole tokens. The kernel is bound by bytes; more work per
#: program amortises its fixed cost (index math, slot load, launch of a tiny program).
WRITE_ELEMENTS_PER_PROGRAM: int = 4096


def write_rows_per_program(num_kv_heads: int, head_size: int) -> int:
    """(token, KV head) rows one cache-write program handles: a power of two, whole tokens where
    ``num_kv_heads`` is a power of two, about :data:`WRITE_ELEMENTS_PER_PROGRAM` elements."""
    rows = max(1, WRITE_ELEMENTS_PER_PROGRAM // next_pow2(head_size))
    return max(rows, min(next_pow2(num_kv_heads), 64))


def query_block_count(num_tokens: int, num_seqs: int, block_q: int, decode_only: bool) -> int:
    """Query blocks the grid launches.

    Decode-only batches get one program per sequence. Otherwise each sequence's new tokens are cut
    into blocks of ``block_q``; ``num_tokens // block_q + num_seqs`` bounds their number without
    reading the per-sequence lengths on the device (programs past their sequence's end exit).
    """
    if decode_only:
        return num_seqs
    return num_tokens // block_q + num_seqs
