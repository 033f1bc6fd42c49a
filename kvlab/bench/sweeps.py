"""Tuning sweeps: candidate launch shapes timed side by side with the automatic choice, in one run."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kvlab.bench.config import BenchConfig
from kvlab.kernels.launch_config import AttentionTiling, choose_tiling, next_pow2

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


def default_sweep(config: BenchConfig, num_sms: int = 132) -> Sweep:
    """The candidates behind the open launch questions of :mod:`kvlab.kernels.launch_config`.

    * 8-bit decode (int8 and fp8 per-token-head) at B=64 and B=16, and B=1 at 8K and 32K tokens: the
      automatic tiling against the same tiling with the V tile decoded from 32-bit words
      (``v_words``), and at B=64 also against one pipeline stage and 64-key tiles;
    * the 2,048-token prefill chunk over 8,192 tokens: 128 rows × 64 keys on 8 warps (the rule) against
      four pipeline stages and 32-key tiles, and with ``v_words``.

    Earlier sweeps (tile sizes and split counts at B=1, prefill rows and warps, cache-write rows per
    program) settled the rest of the rule; their outcomes are in ``benchmarks/kernel_notes.md``.
    ``num_sms`` is the multiprocessor count the candidates are derived for (an H100 or H200 SXM: 132).
    """
    group = config.num_q_heads // config.num_kv_heads
    rows = max(16, next_pow2(group))

    def auto(batch: int, context: int, query_len: int, element_bytes: int) -> AttentionTiling:
        return choose_tiling(group=group, head_size=config.head_size, head_size_v=config.head_size,
                             kv_element_bytes=element_bytes, max_query_len=query_len, max_seq_len=context,
                             num_tokens=batch * query_len, num_seqs=batch, num_kv_heads=config.num_kv_heads,
                             num_sms=num_sms)

    def dec(tile_n, stages, regs=128, warps=4):
        return AttentionTiling(block_m=rows, block_q=1, tile_n=tile_n, num_warps=warps, num_stages=stages,
                               num_splits=1, max_registers=regs, v_words=True)

    def pre(block_m, tile_n, warps, stages):
        return AttentionTiling(block_m=block_m, block_q=block_m // group, tile_n=tile_n, num_warps=warps,
                               num_stages=stages)

    attention: dict[Case, list[AttentionTiling]] = {
        ("decode", 64, 32768, 1): [replace(auto(64, 32768, 1, 1), v_words=True), dec(128, 1), dec(64, 3)],
    }
    for batch, context in ((16, 8192), (1, 8192), (1, 32768)):
        attention[("decode", batch, context, 1)] = [replace(auto(batch, context, 1, 1), v_words=True)]
    attention[("prefill", 1, 8192, 2048)] = [pre(128, 64, 8, 4), pre(128, 32, 8, 3),
                                             replace(auto(1, 8192, 2048, 1), v_words=True)]
    return Sweep(attention, {}, decode_schemes=("int8_per_token_head", "fp8_per_token_head"),
                 prefill_schemes=("bfloat16", "int8_per_token_head"))
