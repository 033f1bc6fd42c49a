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


def test_sweep_times_paired_prefill_programs_beside_the_previous_rules():
    from kvlab.bench.sweeps import default_sweep

    sweep = default_sweep(BenchConfig(), num_sms=132)
    for case in (("prefill", 1, 8192, 2048), ("prefill", 1, 8192, 8192)):
        shapes = [(c.tiling.block_m, c.tiling.block_q, c.tiling.num_warps, c.tiling.num_stages,
                   c.tiling.max_registers, c.tiling.longest_first) for c in sweep.attention[case]]
        # the previous rules (16-bit: 256 rows on 16 warps; 8-bit: one uncapped program of 128
        # rows; both 3 stages), paired programs with 3 stages, four capped 64-row programs
        assert shapes == [(256, 64, 16, 3, None, True), (128, 32, 8, 3, None, True),
                          (128, 32, 8, 3, 128, True), (64, 16, 4, 2, 128, True)]
    assert sweep.schemes_for("prefill", ()) == ("bfloat16", "fp8_e4m3", "int8_per_token_head",
                                                "fp8_per_token_head")


def test_sweep_times_decode_with_and_without_masks_on_whole_tiles():
    from kvlab.bench.sweeps import default_sweep

    sweep = default_sweep(BenchConfig(), num_sms=132)
    decode = sorted(case for case in sweep.attention if case[0] == "decode")
    assert decode == [("decode", b, L, 1) for b, L in ((1, 8192), (1, 32768), (16, 8192), (16, 32768),
                                                        (64, 1024), (64, 32768))]
    labels = [c.backend("decode") for c in sweep.attention[("decode", 64, 32768, 1)]]
    assert labels == ["kvlab-triton-sweep-fulltiles", "kvlab-triton-sweep-maskedtiles"]
    assert all(c.tiling is None for c in sweep.attention[("decode", 64, 32768, 1)])  # the rule's own tiling
    assert "int8_per_token_head" in sweep.schemes_for("decode", ())
