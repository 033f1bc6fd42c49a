"""Exercise 12's check: the solution passes, and common mistakes fail with a hint."""

from __future__ import annotations

from kvlab import kv_bytes_per_token
from kvlab.exercises import check_decode_step_time
from kvlab.hardware import get_gpu
from kvlab.models import get_model


def make(window=True, write=True, compute=True, scale=1e3):
    def decode_step_ms(model, kv_cache_dtype, gpu, batch, context):
        m, g = get_model(model), get_gpu(gpu)
        gemm = m.num_parameters * 2 / g.memory_bandwidth
        if compute:
            gemm = max(gemm, 2 * m.num_parameters * batch / g.bf16_flops)
        total = 0
        for layer in m.layers:
            per = kv_bytes_per_token(kv_cache_dtype, layer.num_kv_heads, layer.head_size)
            keys = context + 1
            if window and layer.kind == "sliding_window":
                keys = min(keys, layer.sliding_window)
            total += batch * per * (keys + (1 if write else 0))
        return (gemm + total / g.memory_bandwidth) * scale

    return decode_step_ms


def test_a_hand_written_solution_passes(seed):
    assert check_decode_step_time(make(), seed=seed, num_random=30).passed


def test_mistakes_fail_with_a_hint(seed):
    seconds = check_decode_step_time(make(scale=1.0), seed=seed, num_random=5)
    assert not seconds.passed and "milliseconds" in seconds.message
    no_write = check_decode_step_time(make(write=False), seed=seed, num_random=5)
    assert not no_write.passed and "cache write" in no_write.message
    no_compute = check_decode_step_time(make(compute=False), seed=seed, num_random=5)
    assert not no_compute.passed and "compute bound" in no_compute.message
    assert not check_decode_step_time(make(window=False), seed=seed, num_random=5).passed
