"""The step-time model against hand-computed rooflines (the figures are worked out in each test)."""

from __future__ import annotations

import random
import warnings

import pytest

from kvlab.hardware import GPU_NAMES, GPUProfile, get_gpu
from kvlab.models import get_model
from kvlab.models.model import LayerKV, ModelKV
from kvlab.timing import (
    Efficiencies,
    KernelEfficiency,
    LayerGroupCost,
    ModelCosts,
    PureRooflineWarning,
    StepTimeModel,
)

PURE = dict(gemm_compute=1.0, gemm_memory=1.0, step_overhead_s=0.0)
H100_BW, H100_BF16 = 3.35e12, 989e12


def pure_model(model="llama-3.1-8b", scheme="bfloat16", **kw):
    """Every efficiency 1 and no latency: the textbook roofline (kernels measured as perfect)."""
    kernels = tuple(
        KernelEfficiency("kvlab", scheme, kind, 1.0, 0.0, "h100-sxm", 1, "test")
        for kind in ("decode", "prefill", "write")
    )
    return StepTimeModel(
        "h100", get_model(model), scheme, efficiencies=Efficiencies(kernels=kernels, **PURE), **kw
    )


def test_single_decode_matches_the_worked_example():
    # Llama 3.1 8B: 8.03e9 bf16 weights, 32 layers × 8 KV heads × 128 × 2 (K,V) × 2 B = 4096 B/token/layer
    st = pure_model().step_time([(1, 1023)])
    assert st.gemm_s == pytest.approx(8.03e9 * 2 / H100_BW, rel=1e-9)  # 4.794 ms, weights read once
    assert st.attention_decode_s == pytest.approx(1024 * 32 * 4096 / H100_BW, rel=1e-9)
    assert st.cache_write_s == pytest.approx(32 * 4096 / H100_BW, rel=1e-9)
    assert st.total_s == pytest.approx(4.834e-3, abs=1e-6)
    assert st.gemm_bound == "memory"


def test_prefill_chunk_is_compute_bound_with_causal_flops():
    # 2048 fresh tokens: GEMMs 2 × 8.03e9 × 2048 FLOPs;
    # attention 4 × 32 heads × 128 × (2048·2049/2) keys × 32 layers
    st = pure_model().step_time([(2048, 0)])
    assert st.gemm_bound == "compute"
    assert st.gemm_s == pytest.approx(2 * 8.03e9 * 2048 / H100_BF16, rel=1e-9)
    assert st.attention_prefill_s == pytest.approx(
        4 * 32 * 128 * (2048 * 2049 // 2) * 32 / H100_BF16, rel=1e-9
    )
    assert st.attention_decode_s == 0


def test_keys_attended_matches_a_direct_count(seed):
    rng = random.Random(seed)
    for _ in range(200):
        window = rng.choice([None, rng.randint(1, 300)])
        g = LayerGroupCost(1, 1, 1, 1, window)
        c, n = rng.randint(0, 600), rng.randint(1, 400)
        direct = sum(min(c + i, window) if window else c + i for i in range(1, n + 1))
        assert g.keys_attended(c, n) == direct, (c, n, window)


def test_sliding_layers_read_only_their_window_in_decode():
    # gemma-3-27b: 52 sliding layers (window 1024) + 10 full, 16 KV heads × 128 × 2 × 2 B = 8192 B/token/layer
    st = pure_model("gemma-3-27b").step_time([(1, 99_999)])
    expected = (52 * 1024 + 10 * 100_000) * 8192 / H100_BW
    assert st.attention_decode_s == pytest.approx(expected, rel=1e-9)


def test_moe_decode_reads_the_active_experts_and_a_big_batch_reads_them_all():
    m = pure_model("gpt-oss-20b")
    # weights: MXFP4 experts 24 × 32 × 3 × 3,072 × 2,944 × 17/32 B = 11,069,816,832 (padded for vLLM's
    # Marlin kernel) + bf16 rest (20.9e9 − 24 × 32 × 3 × 2,880²) × 2 B = 3,579,404,800 → 14,649,221,632 B
    weights = 14_649_221_632
    one = m.gemm_time(1)[0]
    assert one == pytest.approx(weights * (3.6 / 20.9) / H100_BW, rel=1e-6)
    assert m.gemm_time(64)[0] >= weights / H100_BW * (1 - 1e-9)  # 64 × 3.6B > 20.9B: every expert read


def test_int8_cache_halves_decode_bytes_plus_scales():
    bf16 = pure_model(scheme="bfloat16").step_time([(1, 4095)] * 8).attention_decode_s
    int8 = pure_model(scheme="int8_per_token_head").step_time([(1, 4095)] * 8).attention_decode_s
    # per token per layer: 8 heads × 256 codes × 1 B + 8 heads × 2 scales × 4 B = 2112 B vs 4096 B
    assert int8 / bf16 == pytest.approx(2112 / 4096, rel=1e-9)


def test_tensor_parallel_splits_weights_and_heads():
    one, two = pure_model(), pure_model(tensor_parallel_size=2)
    assert two.gemm_time(1)[0] == pytest.approx(one.gemm_time(1)[0] / 2, rel=1e-9)
    assert two.costs.groups[0].q_heads == 16


def test_weight_dtypes_change_bytes_and_the_tensor_core_format():
    m = get_model("llama-3.1-8b")
    fp8 = ModelCosts.from_model(m, weight_dtype="fp8")
    assert fp8.weight_bytes == 8_030_000_000 and fp8.compute_dtype == "fp8"
    nvfp4 = ModelCosts.from_model(m, weight_dtype="nvfp4")
    assert nvfp4.weight_bytes == int(8.03e9 * (0.5 + 1 / 16)) and nvfp4.compute_dtype == "fp4"
    # the A100 has no FP8 tensor cores: FP8 GEMMs run at its BF16 rate
    assert get_gpu("a100").flops_for("fp8") == get_gpu("a100").bf16_flops == 312e12
    assert get_gpu("b200").flops_for("fp4") == 9000e12


def test_fitted_kernels_slow_the_step_down_against_the_pure_roofline():
    fitted = StepTimeModel("h100", get_model("llama-3.1-8b"), "bfloat16")
    pure = pure_model()
    batch = [(1, 8191)] * 32
    assert fitted(batch) > pure(batch)
    assert fitted.step_time(batch).overhead_s == pytest.approx(0.003)
    assert not fitted.warnings


def test_a_scheme_without_a_measured_kernel_warns_and_uses_the_pure_roofline():
    eff = Efficiencies.from_table()
    eff = eff.replace(kernels=tuple(k for k in eff.kernels if k.scheme != "fp8_per_token_head"))
    with pytest.warns(PureRooflineWarning, match="fp8_per_token_head"):
        m = StepTimeModel("h100", get_model("llama-3.1-8b"), "fp8_per_token_head", efficiencies=eff)
    assert any("pure roofline" in w for w in m.warnings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = pure_model(scheme="fp8_per_token_head")
    # only the GEMM/overhead assumptions differ: attention decode is exactly the pure roofline's
    assert m.step_time([(1, 999)]).attention_decode_s == pytest.approx(
        ref.step_time([(1, 999)]).attention_decode_s
    )


def test_gpu_names_are_case_insensitive_and_unknown_ones_are_listed():
    assert get_gpu("B200") is get_gpu("b200")
    assert get_gpu("H100").name == "h100-sxm"
    with pytest.raises(ValueError, match="unknown GPU 'h800'.*h100-sxm.*mi300x"):
        get_gpu("h800")
    assert len(GPU_NAMES) >= 9
    custom = GPUProfile("my-gpu", "mine", 100e12, None, None, 1e12, 16 * 2**30)
    assert get_gpu(custom) is custom
    with pytest.raises(ValueError, match="memory_bandwidth of GPU 'x' must be a number > 0"):
        GPUProfile("x", "x", 1e12, None, None, 0, 1)


def test_models_without_parameter_counts_are_refused_with_the_fix():
    bare = ModelKV("mine", (LayerKV("l0", "full", 8, 128),), 4096, num_attention_heads=32)
    with pytest.raises(ValueError, match='add "num_parameters"'):
        ModelCosts.from_model(bare)
    with pytest.raises(ValueError, match="num_active_parameters .* exceeds num_parameters"):
        ModelKV("moe", (LayerKV("l0", "full", 8, 128),), 4096, num_parameters=10, num_active_parameters=20)


def test_efficiencies_are_validated_and_printed_with_their_source():
    with pytest.raises(ValueError, match="gemm_compute must be a fraction in \\(0, 1\\]"):
        Efficiencies(gemm_compute=1.5)
    rows = Efficiencies.from_table().rows()
    assert "timing_gemm_NVIDIA_H100" in rows[0][-1] and rows[2] == [
        "step overhead",
        "-",
        "-",
        "3.00 ms",
        "assumed",
    ]
    assert any(r[1] == "int8_per_token_head" and "decode_NVIDIA_H100" in r[-1] for r in rows)


def test_tensor_parallel_all_reduces_by_hand():
    """Llama 3.1 8B on two H100s (NVLink 900 GB/s both ways: 450e9 B/s per direction), one decode:
    32 layers × 2 all-reduces of 1 token × 4096 × 2 B; a ring moves 2 × (2 - 1) / 2 × 8192 B = 8192 B
    per GPU each, so 64 × 8192 / 450e9 = 1.165 µs at full link speed and no latency. With the
    default assumptions (70 % of the link, 10 µs each): 64 × (10 µs + 8192 / 315e9) = 641.7 µs.
    A 512-token prefill chunk: 64 × 512 × 8192 / 450e9 = 596.5 µs."""
    pure = StepTimeModel(
        "h100", get_model("llama-3.1-8b"), tensor_parallel_size=2, efficiencies=Efficiencies.pure()
    )
    assert pure.step_time([(1, 100)]).allreduce_s == pytest.approx(64 * 8192 / 450e9, rel=1e-12)
    assert pure.step_time([(512, 0)]).allreduce_s == pytest.approx(64 * 512 * 8192 / 450e9, rel=1e-12)
    default = StepTimeModel("h100", get_model("llama-3.1-8b"), tensor_parallel_size=2)
    st = default.step_time([(1, 100)])
    assert st.allreduce_s == pytest.approx(64 * (10e-6 + 8192 / (450e9 * 0.7)), rel=1e-12)
    assert st.total_s == pytest.approx(
        st.gemm_s
        + st.attention_prefill_s
        + st.attention_decode_s
        + st.cache_write_s
        + st.overhead_s
        + st.allreduce_s,
        rel=1e-12,
    )
    # one GPU: no all-reduce; four GPUs over PCIe (L40S, 64 GB/s both ways): 2 × 3/4 of the bytes
    assert StepTimeModel("h100", get_model("llama-3.1-8b")).step_time([(1, 100)]).allreduce_s == 0.0
    l40s = StepTimeModel(
        "l40s", get_model("llama-3.1-8b"), tensor_parallel_size=4, efficiencies=Efficiencies.pure()
    )
    assert l40s.step_time([(1, 100)]).allreduce_s == pytest.approx(64 * 1.5 * 8192 / 32e9, rel=1e-12)


def test_tensor_parallel_needs_a_link_bandwidth():
    mine = GPUProfile("mine", "my GPU", 100e12, None, None, 1e12, 24 * 10**9)
    assert StepTimeModel(mine, get_model("llama-3.1-8b")).step_time([(1, 10)]).allreduce_s == 0.0
    with pytest.raises(ValueError, match="no interconnect_bandwidth: give its GPU-to-GPU bandwidth"):
        StepTimeModel(mine, get_model("llama-3.1-8b"), tensor_parallel_size=2)
    with pytest.raises(ValueError, match="interconnect_bandwidth of GPU 'mine' must be a number > 0"):
        GPUProfile("mine", "my GPU", 100e12, None, None, 1e12, 24 * 10**9, interconnect_bandwidth=0)
    with pytest.raises(ValueError, match="allreduce_latency_s must be a finite number >= 0 seconds"):
        Efficiencies(allreduce_latency_s=-1e-6)
    assert Efficiencies.from_table().rows()[3][:4] == ["TP all-reduce", "-", "0.700", "10.0 us"]
