"""Tuning sweeps: candidate launch shapes timed side by side with the automatic choice, in one run."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvlab.bench.config import BenchConfig
from kvlab.kernels.launch_config import MAX_SPLITS, AttentionTiling, next_pow2

#: ``(kind, batch, context, query_len)`` of an attention case.
Case = tuple[str, int, int, int]


@dataclass(frozen=True)
class Candidate:
    """One launch variant of a sweep: a tiling (``None``: the rule's own) and the fp8 decoding path
    (``fp8_fast_decode=False``: Triton's own conversion instead of the bit moves;
    ``fp8_half_dots=True``: per-tensor fp8 codes converted to fp16 and fp16 dots)."""

    tiling: AttentionTiling | None
    fp8_fast_decode: bool = True
    fp8_half_dots: bool = False

    def backend(self, kind: str) -> str:
        """The CSV's ``backend`` label: ``kvlab-triton-sweep``, with ``-castdecode`` for Triton's own fp8
        conversion, ``-f16dots`` for per-tensor fp8 read through fp16 dots and ``-shortfirst`` for a
        prefill launched in query order (not longest first)."""
        name = "kvlab-triton-sweep"
        if not self.fp8_fast_decode:
            name += "-castdecode"
        if self.fp8_half_dots:
            name += "-f16dots"
        if kind == "prefill" and self.tiling is not None and not self.tiling.longest_first:
            name += "-shortfirst"
        return name


@dataclass(frozen=True)
class Sweep:
    """What a sweep times.

    Attributes:
        attention: per attention case, the candidate launches (the automatic one is always added).
        write: per ``(scheme, tokens)`` write case, candidate (token, head) rows per program.
        decode_schemes, prefill_schemes: schemes swept per kind (``None``: the config's).
    """

    attention: dict[Case, list[Candidate]] = field(default_factory=dict)
    write: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    decode_schemes: tuple[str, ...] | None = None
    prefill_schemes: tuple[str, ...] | None = None

    def schemes_for(self, kind: str, default: tuple[str, ...]) -> tuple[str, ...]:
        chosen = self.decode_schemes if kind == "decode" else self.prefill_schemes
        return chosen or default


def default_sweep(config: BenchConfig, num_sms: int = 132) -> Sweep:
    """The candidates behind the open launch questions of :mod:`kvlab.kernels.launch_config`.

    * 8-bit decode in narrow programs: 64-key tiles on 2 warps, split so that the grid holds 8
      programs per multiprocessor (the same 16 warps as the rule's four 4-warp programs, in twice
      the independent streams), at B = 1, 16, 64 over L = 1K, 8K, 32K and at B = 4, 32 over 8K;
      at B=64 that is two segments, which fill the slots that 512 unsplit narrow programs left half
      empty (26% slower in round 4). At L = 32K and B = 1, 16 also 32-key tiles on 1 warp (16
      programs per multiprocessor; offline they spill 224 bytes per thread under the cap).
    * Per-tensor fp8 read through fp16 dots (``fp8_half_dots``): the codes go to fp16 by the
      hardware's paired conversion (``cvt.rn.f16x2.e4m3x2``, one instruction per two codes; there is
      none to bf16) instead of the bit moves to bf16, the bf16 query is scaled into fp16 by a power
      of two (exact), ``p`` is rounded to fp16 (finer than bf16). Prefill (also with 256 rows on 16
      warps) and decode at L = 32K, B = 1, 16, 64.

    Outcomes of this sweep are v18 and v19 in ``benchmarks/kernel_notes.md``: neither was adopted.
    Earlier sweeps (tile sizes and split counts, prefill rows, warps, stages and launch order, fp8
    decoding, cache-write rows per program) settled the rest of the rule; their outcomes are in
    ``benchmarks/kernel_notes.md``.
    ``num_sms`` (multiprocessors of the GPU, 132 on an H100 or H200) sizes the split counts.
    """
    rows = max(16, next_pow2(config.num_q_heads // config.num_kv_heads))
    sms = num_sms

    def narrow(batch, context, warps, programs_per_sm):
        """``warps`` per program, 32 keys per warp, split to ``programs_per_sm`` programs per SM."""
        tile_n = 32 * warps
        programs = batch * config.num_kv_heads
        splits = max(1, min(programs_per_sm * sms // programs, -(-context // tile_n), MAX_SPLITS))
        return Candidate(AttentionTiling(block_m=rows, block_q=1, tile_n=tile_n, num_warps=warps,
                                         num_stages=2, num_splits=splits, max_registers=128))

    half = Candidate(None, fp8_half_dots=True)
    group = config.num_q_heads // config.num_kv_heads
    wide_rows = Candidate(AttentionTiling(block_m=256, block_q=256 // group, tile_n=64, num_warps=16,
                                          num_stages=3, longest_first=True), fp8_half_dots=True)
    attention: dict[Case, list[Candidate]] = {}
    # the cases of the open targets first (a sweep cut short by its time limit keeps what it measured)
    for b, L in [(16, 32768), (1, 32768), (64, 32768), (0, 0), (16, 8192), (1, 8192), (64, 8192),
                 (4, 8192), (32, 8192), (1, 1024), (16, 1024), (64, 1024)]:
        if b == 0:
            attention[("prefill", 1, 8192, 2048)] = [half, wide_rows]
            attention[("prefill", 1, 8192, 8192)] = [half, wide_rows]
            continue
        one_warp = [narrow(b, L, 1, 16)] if L == 32768 and b < 64 else []
        attention[("decode", b, L, 1)] = [narrow(b, L, 2, 8)] + one_warp + ([half] if L == 32768 else [])
    return Sweep(attention, {}, decode_schemes=("int8_per_token_head", "fp8_e4m3"),
                 prefill_schemes=("bfloat16", "fp8_e4m3", "fp8_e5m2"))
