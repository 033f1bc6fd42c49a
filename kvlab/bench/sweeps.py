"""Tuning sweeps: candidate launch shapes timed side by side with the automatic choice, in one run."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvlab.bench.config import BenchConfig
from kvlab.kernels.launch_config import AttentionTiling, next_pow2

#: ``(kind, batch, context, query_len)`` of an attention case.
Case = tuple[str, int, int, int]


@dataclass(frozen=True)
class Candidate:
    """One launch variant of a sweep: a tiling (``None``: the rule's own) and the fp8 decoding path
    (``fp8_fast_decode=False``: Triton's own conversion instead of the bit moves)."""

    tiling: AttentionTiling | None
    fp8_fast_decode: bool = True

    def backend(self, kind: str) -> str:
        """The CSV's ``backend`` label: ``kvlab-triton-sweep``, with ``-castdecode`` for Triton's own fp8
        conversion and ``-shortfirst`` for a prefill launched in query order (not longest first)."""
        name = "kvlab-triton-sweep"
        if not self.fp8_fast_decode:
            name += "-castdecode"
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


def default_sweep(config: BenchConfig) -> Sweep:
    """The candidates behind the open launch questions of :mod:`kvlab.kernels.launch_config`.

    * Prefill (the 2,048-token chunk over 8,192 and 8,192 tokens from an empty cache): 128 rows on
      8 warps (the rule before, in query order) and 256 rows on 16 warps, each in both launch
      orders; for fp8, Triton's own fp8 → bf16 conversion against the bit moves. (Outcome, v16 in
      ``benchmarks/kernel_notes.md``: 256 rows longest first for 16-bit caches, 128 rows longest
      first for 8-bit ones.)
    * 8-bit decode, one sequence of 32K tokens (53% of copy bandwidth): double-buffered K/V
      (3 stages) with fewer, longer segments, so that a program has its next tile in flight while it
      works on the current one.
    * 8-bit decode, B=64, L=32K (89%): a register cap of 96 (five programs per multiprocessor
      instead of four).
    * 8-bit decode at B=1, 16 and 64 (32K tokens): 64-key tiles on 2 warps, 22 KB of shared memory
      and 128 registers, so eight programs (as many independent copy streams) share a
      multiprocessor instead of four programs of 4 warps.

    Earlier sweeps (tile sizes and split counts, prefill rows, warps and stages, cache-write rows per
    program) settled the rest of the rule; their outcomes are in ``benchmarks/kernel_notes.md``.
    """
    rows = max(16, next_pow2(config.num_q_heads // config.num_kv_heads))
    group = config.num_q_heads // config.num_kv_heads

    def dec(tile_n, splits, stages, warps=4, regs=128):
        return Candidate(AttentionTiling(block_m=rows, block_q=1, tile_n=tile_n, num_warps=warps,
                                         num_stages=stages, num_splits=splits, max_registers=regs))

    def pre(block_m, warps, longest_first, fast=True):
        return Candidate(AttentionTiling(block_m=block_m, block_q=block_m // group, tile_n=64,
                                         num_warps=warps, num_stages=3, longest_first=longest_first), fast)

    prefill = [pre(128, 8, False), pre(128, 8, True), pre(256, 16, False),
               Candidate(None, fp8_fast_decode=False), pre(128, 8, False, fast=False)]
    attention: dict[Case, list[Candidate]] = {
        ("prefill", 1, 8192, 2048): prefill,
        ("prefill", 1, 8192, 8192): prefill,
        ("decode", 1, 32768, 1): [dec(128, 33, 3, regs=None), dec(64, 66, 3), dec(128, 44, 3),
                                  dec(64, 128, 2, warps=2)],
        ("decode", 64, 32768, 1): [dec(128, 1, 2, regs=96), dec(64, 1, 2, warps=2)],
        ("decode", 16, 32768, 1): [dec(64, 8, 2, warps=2)],
    }
    return Sweep(attention, {}, decode_schemes=("int8_per_token_head",),
                 prefill_schemes=("bfloat16", "fp8_e4m3", "int8_per_token_head"))
