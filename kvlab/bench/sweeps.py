"""Tuning sweeps: candidate launch shapes timed side by side with the automatic choice, in one run."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvlab.bench.config import BenchConfig
from kvlab.kernels.launch_config import AttentionTiling, next_pow2

#: ``(kind, batch, context, query_len)`` of an attention case.
Case = tuple[str, int, int, int]


@dataclass(frozen=True)
class Sweep:
    """What a sweep times.

    Attributes:
        attention: per attention case, the candidate tilings (the automatic one is always added).
        write: per ``(scheme, tokens)`` write case, candidate (token, head) rows per program.
        decode_schemes, prefill_schemes: schemes swept per kind (``None``: the config's).
    """

    attention: dict[Case, list[AttentionTiling]] = field(default_factory=dict)
    write: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    decode_schemes: tuple[str, ...] | None = None
    prefill_schemes: tuple[str, ...] | None = None

    def schemes_for(self, kind: str, default: tuple[str, ...]) -> tuple[str, ...]:
        chosen = self.decode_schemes if kind == "decode" else self.prefill_schemes
        return chosen or default


def default_sweep(config: BenchConfig) -> Sweep:
    """The candidates behind the open launch question of :mod:`kvlab.kernels.launch_config`: 8-bit
    decode at B=64 and B=16 (32K tokens), where the per-token-head caches stop near 89% (B=64) and
    70-75% (B=16) of copy bandwidth. The rule's tiling (128-key tiles, one K/V buffer, 4 warps,
    registers capped at 128) is timed against 64-key tiles with two and three buffers and 256-key
    tiles on 8 warps. The prefill chunk (2,048 tokens over 8,192) tries 256 rows on 16 warps, which
    would halve the per-FLOP cost of converting an 8-bit K/V tile for the tensor cores.

    Earlier sweeps (tile sizes and split counts at B=1, prefill rows, warps and stages, cache-write
    rows per program) settled the rest of the rule; their outcomes are in
    ``benchmarks/kernel_notes.md``.
    """
    rows = max(16, next_pow2(config.num_q_heads // config.num_kv_heads))

    def dec(tile_n, splits, stages, warps=4, regs=128):
        return AttentionTiling(block_m=rows, block_q=1, tile_n=tile_n, num_warps=warps, num_stages=stages,
                               num_splits=splits, max_registers=regs)

    group = config.num_q_heads // config.num_kv_heads

    def pre(block_m, tile_n, warps, stages):
        return AttentionTiling(block_m=block_m, block_q=block_m // group, tile_n=tile_n, num_warps=warps,
                               num_stages=stages)

    attention: dict[Case, list[AttentionTiling]] = {
        ("decode", 64, 32768, 1): [dec(64, 1, 3), dec(64, 1, 4), dec(256, 1, 2, 8)],
        ("decode", 16, 32768, 1): [dec(64, 4, 3), dec(256, 2, 2, 8)],
        ("prefill", 1, 8192, 2048): [pre(256, 64, 16, 3), pre(128, 64, 8, 4)],
    }
    return Sweep(attention, {}, decode_schemes=("int8_per_token_head", "fp8_per_token_head"),
                 prefill_schemes=("bfloat16", "int8_per_token_head"))
