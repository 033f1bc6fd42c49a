"""The GPU benchmark's configuration and command line refuse what they cannot run, on any machine."""

from __future__ import annotations

import argparse

import pytest

from kvlab.bench.config import BenchConfig
from kvlab.cli.bench import add_arguments


def _parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(p)
    return p.parse_args(list(argv))


def test_low_bit_schemes_are_sent_to_their_own_benchmark():
    with pytest.raises(argparse.ArgumentError, match="lowbit_bench.py"):
        _parse("--schemes", "bfloat16,kivi4")
    with pytest.raises(ValueError, match="schemes"):
        BenchConfig(schemes=("kivi2",))
    assert _parse("--schemes", "bfloat16,int8_per_token_head").schemes == ("bfloat16", "int8_per_token_head")


def test_prefill_cases_are_checked():
    assert BenchConfig().prefill == ((2048, 8192), (8192, 8192))  # a chunk over context, a whole prompt
    with pytest.raises(ValueError, match="cannot exceed its length"):
        BenchConfig(prefill=((4096, 2048),))
    with pytest.raises(ValueError, match="prefill new tokens"):
        BenchConfig(prefill=((0, 2048),))


def test_parts_pick_the_cases():
    assert _parse().parts == ("decode", "prefill", "write")
    assert _parse("--parts", "prefill").parts == ("prefill",)
    with pytest.raises(argparse.ArgumentError, match="unknown part"):
        _parse("--parts", "prefil")


def test_sweep_times_one_byte_decode_tiles_beside_the_rule():
    from kvlab.bench.sweeps import default_sweep

    sweep = default_sweep(BenchConfig(), num_sms=132)
    assert sorted(sweep.attention) == [("decode", b, L, 1) for b, L in ((16, 8192), (64, 1024), (64, 8192),
                                                                        (64, 32768))]
    for (_, batch, _, _), cands in sweep.attention.items():
        shapes = [(c.tiling.tile_n, c.tiling.num_stages, c.tiling.num_warps, c.tiling.num_splits,
                   c.tiling.max_registers) for c in cands]
        splits = 4 if batch == 16 else 1
        assert shapes == [(64, 2, 4, splits, 128), (64, 3, 4, splits, 128), (64, 4, 4, splits, 128),
                          (128, 3, 4, splits, 128)]
        assert all(c.backend("decode") == "kvlab-triton-sweep" for c in cands)
    assert sweep.schemes_for("decode", ()) == ("int8_per_token_head", "fp8_per_token_head", "fp8_e4m3")
