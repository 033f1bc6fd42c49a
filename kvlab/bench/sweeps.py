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
    masked (``False``); ``None``: the rule's choice."""

    tiling: AttentionTiling | None
    fp8_fast_decode: bool = True
    fp8_half_dots: bool = False
    decode_full_tiles: bool | None = None

    def backend(self, kind: str) -> str:
        """The CSV's ``backend`` label: ``kvlab-triton-sweep``, with ``-castdecode`` for Triton's own fp8
        conversion, ``-f16dots`` for per-tensor fp8 read through fp16 dots, ``-fulltiles`` and
        ``-maskedtiles`` for the decode option above and ``-shortfirst`` for a prefill launched in query
        order (not longest first)."""
        name = "kvlab-triton-sweep"
        if not self.fp8_fast_decode:
            name += "-castdecode"
        if self.fp8_half_dots:
            name += "-f16dots"
        if self.decode_full_tiles is not None:
            name += "-fulltiles" if self.decode_full_tiles else "-maskedtiles"
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

    Prefill (the 2,048-token chunk over 8,192 and 8,192 tokens from an empty cache), paired programs:
    the rule runs two 128-row, 8-warp programs per multiprocessor at head size 128 (registers capped
    at 128, 2 stages), so that one's softmax and tile conversion overlap the other's tensor-core
    work. Timed beside the rules before it (16-bit caches: 256 rows on 16 warps, 3 stages; 8-bit:
    one uncapped 128-row program, 3 stages), paired programs with 3 stages (the 8-bit ones still fit
    twice), and four 64-row, 4-warp programs per multiprocessor (capped at 128, 2 stages).

    Decode (B = 64, 16, 1 at 32K, and B=64 at 1K, B=16 and 1 at 8K): the rule's tiling with the tiles
    wholly inside the sequence unmasked, and with every tile masked (the rule picks one of the two,
    :func:`kvlab.kernels.launch_config.unmasked_decode_tiles`).

    Earlier sweeps (tile sizes and split counts, prefill rows, warps, stages and launch order, fp8
    decoding, narrow decode programs, fp16 dots over per-tensor fp8, cache-write rows per program)
    settled the rest of the rule; their outcomes are in ``benchmarks/kernel_notes.md``.
    ``num_sms`` (multiprocessors of the GPU) is kept for candidates sized by the grid.
    """
    group = config.num_q_heads // config.num_kv_heads

    def prefill(block_m, warps, stages, regs):
        return Candidate(AttentionTiling(block_m=block_m, block_q=block_m // group, tile_n=64,
                                         num_warps=warps, num_stages=stages, max_registers=regs,
                                         longest_first=True))

    candidates = [prefill(256, 16, 3, None), prefill(128, 8, 3, None), prefill(128, 8, 3, 128),
                  prefill(64, 4, 2, 128)]
    attention: dict[Case, list[Candidate]] = {
        ("prefill", 1, 8192, 2048): candidates,
        ("prefill", 1, 8192, 8192): candidates,
    }
    decode = [Candidate(None, decode_full_tiles=True), Candidate(None, decode_full_tiles=False)]
    for batch, context in ((64, 32768), (64, 1024), (16, 32768), (16, 8192), (1, 32768), (1, 8192)):
        attention[("decode", batch, context, 1)] = decode
    schemes = ("bfloat16", "fp8_e4m3", "int8_per_token_head", "fp8_per_token_head")
    return Sweep(attention, {}, decode_schemes=schemes, prefill_schemes=schemes)
