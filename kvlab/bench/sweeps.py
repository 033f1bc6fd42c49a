"""Tuning sweeps: candidate launch shapes timed side by side with the automatic choice, in one run."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvlab.bench.config import BenchConfig
from kvlab.kernels.launch_config import AttentionTiling

#: ``(kind, batch, context, query_len)`` of an attention case.
Case = tuple[str, int, int, int]


@dataclass(frozen=True)
class Candidate:
    """One launch variant of a sweep: a tiling (``None``: the rule's own) and the fp8 decoding path
    (``fp8_fast_decode=False``: Triton's own conversion instead of the bit moves;
    ``fp8_half_dots=True``: per-tensor fp8 codes converted to fp16 and fp16 dots);
    ``decode_full_tiles``: a decode's tiles inside the sequence run without masks (``True``) or all
    masked (``False``); ``None``: the rule's choice; ``int8_fast_decode=False``: Triton's own
    int8 → bf16 cast instead of the subnormal trick of :mod:`kvlab.kernels.int8_decode`;
    ``int8_fast_values``: int8 values by the trick (``True``) or by the cast (``False``, keys still by
    the trick); ``None``: the rule's choice; ``fused_merge``: a split decode merges its segments in
    the attention kernel (``True``) or in the merge kernel (``False``); ``None``: the rule's choice."""

    tiling: AttentionTiling | None
    fp8_fast_decode: bool = True
    fp8_half_dots: bool = False
    decode_full_tiles: bool | None = None
    int8_fast_decode: bool = True
    int8_fast_values: bool | None = None
    fused_merge: bool | None = None

    def backend(self, kind: str) -> str:
        """The CSV's ``backend`` label: ``kvlab-triton-sweep``, with ``-castdecode`` for Triton's own fp8
        conversion (or Triton's own int8 cast), ``-f16dots`` for per-tensor fp8 read through fp16 dots,
        ``-fulltiles`` and
        ``-maskedtiles`` for the decode option above, ``-int8kv`` / ``-int8k`` for int8 values by the trick or
        not, ``-fusedmerge`` / ``-mergekernel`` for the split-K merge, and ``-shortfirst`` for a prefill
        launched in query order (not longest first)."""
        name = "kvlab-triton-sweep"
        if not self.fp8_fast_decode or not self.int8_fast_decode:
            name += "-castdecode"
        if self.fp8_half_dots:
            name += "-f16dots"
        if self.decode_full_tiles is not None:
            name += "-fulltiles" if self.decode_full_tiles else "-maskedtiles"
        if self.int8_fast_values is not None:
            name += "-int8kv" if self.int8_fast_values else "-int8k"
        if self.fused_merge is not None:
            name += "-fusedmerge" if self.fused_merge else "-mergekernel"
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
    """The candidates behind the last launch question of 1-byte decode: the key tile of full grids.

    The rule reads 128 keys a step from a 1-byte cache (the same 16 KB per K tile as 64 keys of
    bf16) on 4 warps with 2 stages under a 128-register cap. At B=64, L=1024 each program then runs
    8 steps, and 1-byte decode reaches 74–77% of copy bandwidth where bf16 (16 steps of 64 keys)
    reaches 94%. Candidates: 64-key tiles with 2, 3 and 4 stages, and 128-key tiles with 3 stages,
    at B=64 (1K, 8K, 32K tokens, unsplit) and B=16 at 8K (4 segments, the rule's split), for the
    three 1-byte formats of the benchmark. On an H100 the rule was fastest in all 12 cases
    (``kernel_notes.md``, round 10); the sweep stays the default so that another GPU can check it.

    Earlier sweeps (tile sizes and split counts, prefill rows, warps, stages and launch order, fp8
    decoding, narrow decode programs, unmasked decode tiles, fp16 dots over per-tensor fp8,
    cache-write rows per program, the int8 conversion, the split-K merge fused into the attention
    kernel) settled the rest of the rule; their outcomes are in ``benchmarks/kernel_notes.md``.
    ``num_sms`` (multiprocessors of the GPU) is kept for candidates sized by the grid.
    """
    attention: dict[Case, list[Candidate]] = {}
    for batch, context, splits in ((64, 1024, 1), (64, 8192, 1), (16, 8192, 4), (64, 32768, 1)):
        attention[("decode", batch, context, 1)] = [
            Candidate(AttentionTiling(block_m=16, block_q=1, tile_n=tile, num_warps=4, num_stages=stages,
                                      num_splits=splits, max_registers=128))
            for tile, stages in ((64, 2), (64, 3), (64, 4), (128, 3))]
    schemes = ("int8_per_token_head", "fp8_per_token_head", "fp8_e4m3")
    return Sweep(attention, {}, decode_schemes=schemes, prefill_schemes=schemes)
