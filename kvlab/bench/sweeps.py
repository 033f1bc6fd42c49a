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
    """The candidates behind the launch rules of :mod:`kvlab.kernels.launch_config`.

    * one sequence (B=1) at 1K, 8K and 32K tokens: split count × tile size (how short a segment
      may be, how many programs per multiprocessor);
    * the 2,048-token prefill chunk over 8,192 tokens: rows per program × key tile × warps × stages
      (the first candidate is the launch shape used before the current rule);
    * the 16K-token cache write: (token, head) rows per program.
    """
    rows = max(16, next_pow2(config.num_q_heads // config.num_kv_heads))

    def dec(tile_n, splits, stages=2, regs=None, warps=4):
        return AttentionTiling(block_m=rows, block_q=1, tile_n=tile_n, num_warps=warps, num_stages=stages,
                               num_splits=splits, max_registers=regs)

    group = config.num_q_heads // config.num_kv_heads

    def pre(block_m, tile_n, warps, stages):
        return AttentionTiling(block_m=block_m, block_q=block_m // group, tile_n=tile_n, num_warps=warps,
                               num_stages=stages)

    attention = {
        ("decode", 1, 1024, 1): [dec(16, 64), dec(32, 16), dec(64, 16)],
        ("decode", 1, 8192, 1): [dec(64, 64), dec(64, 128), dec(128, 32)],
        ("decode", 1, 32768, 1): [dec(64, 66), dec(64, 128), dec(128, 128, 2, 128), dec(128, 66, 3, 128)],
        ("prefill", 1, 8192, 2048): [pre(64, 64, 4, 3), pre(128, 128, 8, 3), pre(128, 64, 8, 2),
                                     pre(128, 64, 4, 3)],
    }
    write = {(s, 16384): [1, 8, 16] for s in ("bfloat16", "int8_per_token_head")}
    return Sweep(attention, write, decode_schemes=("bfloat16", "int8_per_token_head"),
                 prefill_schemes=("bfloat16", "int8_per_token_head"))
