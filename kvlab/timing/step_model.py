"""The step-time model: one scheduler step's time as a roofline of its parts.

A step runs ``chunks``: ``(new_tokens, context)`` per scheduled request (a decode is
``(1, context)``, a prefill chunk ``(n, tokens already cached)``). Its time is the sum of

* weight GEMMs: ``max(2 × active params × T / (FLOP/s × e_c), weight bytes read / (BW × e_m))``
  over the step's ``T`` tokens (a mixture-of-experts model reads at most all its experts);
* attention prefill (``n > 1``): ``max(FLOPs / (BF16 FLOP/s × e_p), KV bytes / (BW × e_d))``,
  FLOPs ``= 4 × q heads × head size × keys attended`` per layer (QKᵀ and PV, causal, windows);
* attention decode (``n = 1``): ``layers × latency + KV bytes read / (BW × e_d)``;
* cache write: ``layers × latency + T × KV bytes per token / (BW × e_w)``;
* tensor parallelism (TP > 1): two all-reduces per layer of the step's ``T × hidden`` bf16
  activations, ring algorithm: ``latency + 2 (TP − 1) / TP × bytes / (link BW per direction × e_a)``
  each, the link bandwidth per direction being half the GPU profile's ``interconnect_bandwidth``;
* a fixed per-step overhead.

Worked example (Llama 3.1 8B, bf16 weights and cache, H100 SXM, one decode at context 1023, pure
roofline: every efficiency 1, no latencies or overhead): weights ``8.03e9 × 2 B / 3.35e12 B/s =
4.794 ms``; KV read ``1024 × 32 layers × 4096 B / 3.35e12 = 0.0401 ms``; write ``32 × 4096 B /
3.35e12 ≈ 0.00004 ms``; total ≈ 4.834 ms. With TP 2 the weights and heads halve and the step adds
64 all-reduces of ``4096 × 2 B``: ``64 × (2 × 1/2 × 8192 B) / 450e9 B/s = 1.165 µs`` (pure roofline,
no all-reduce latency; kvlab's default assumes 10 µs each, 0.64 ms here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvlab.hardware import GPUProfile, get_gpu
from kvlab.models.model import ModelKV
from kvlab.timing.efficiency import Efficiencies
from kvlab.timing.model_costs import ModelCosts


@dataclass(frozen=True)
class StepTime:
    """One step's predicted time, by part (seconds).

    Attributes:
        gemm_s / attention_prefill_s / attention_decode_s / cache_write_s / overhead_s: the parts.
        gemm_bound: ``"compute"`` or ``"memory"``: which side of the roofline the GEMMs are on.
        num_tokens: tokens the step ran.
        allreduce_s: tensor-parallel all-reduces (0 with one GPU).
    """

    gemm_s: float
    attention_prefill_s: float
    attention_decode_s: float
    cache_write_s: float
    overhead_s: float
    gemm_bound: str
    num_tokens: int
    allreduce_s: float = 0.0

    @property
    def total_s(self) -> float:
        """The step's time (seconds)."""
        return (
            self.gemm_s
            + self.attention_prefill_s
            + self.attention_decode_s
            + self.cache_write_s
            + self.overhead_s
            + self.allreduce_s
        )


class StepTimeModel:
    """Predicts a scheduler step's time on one GPU.

    Args:
        gpu: a GPU name (``"h100"``, ``"b200"``, …) or a :class:`~kvlab.hardware.GPUProfile`.
        model: the model (with ``num_parameters`` and ``num_attention_heads``).
        kv_cache_dtype: the KV scheme.
        weight_dtype: ``bf16``, ``fp16``, ``fp8``, ``int4`` or ``nvfp4``.
        tensor_parallel_size: GPUs the model is split over.
        efficiencies: the efficiencies (default: kvlab's fitted kernels and the stated assumptions).
    """

    def __init__(
        self,
        gpu: str | GPUProfile,
        model: ModelKV,
        kv_cache_dtype: str = "auto",
        weight_dtype: str = "bf16",
        tensor_parallel_size: int = 1,
        efficiencies: Efficiencies | None = None,
    ) -> None:
        self.gpu = get_gpu(gpu)
        self.costs = ModelCosts.from_model(model, kv_cache_dtype, weight_dtype, tensor_parallel_size)
        self.efficiencies = efficiencies if efficiencies is not None else Efficiencies.from_table()
        scheme = model.dtype if kv_cache_dtype == "auto" else kv_cache_dtype
        eff = self.efficiencies
        self._decode_eff, self._decode_lat = eff.lookup(scheme, "decode")
        self._prefill_eff, _ = eff.lookup(scheme, "prefill")
        self._write_eff, self._write_lat = eff.lookup(scheme, "write")
        g = self.gpu
        self._gemm_flops = g.flops_for(self.costs.compute_dtype) * eff.gemm_compute
        self._bw_gemm = g.memory_bandwidth * eff.gemm_memory
        self._bw_decode = g.memory_bandwidth * self._decode_eff
        self._attn_flops = g.bf16_flops * self._prefill_eff
        self._num_layers = sum(gr.num_layers for gr in self.costs.groups)
        self._write_per_token = self.costs.kv_bytes_per_token / (g.memory_bandwidth * self._write_eff)
        self._active_share = self.costs.active_parameters / self.costs.total_parameters
        tp = self.costs.tensor_parallel_size
        if tp > 1 and g.interconnect_bandwidth is None:
            raise ValueError(
                f"GPU {g.name!r} has no interconnect_bandwidth: give its GPU-to-GPU bandwidth (bytes/s) "
                "in the GPUProfile to time tensor parallelism, or use tensor_parallel_size=1"
            )
        # per token: 2 all-reduces per layer, each moving 2 (tp - 1) / tp of the bf16 activations
        self._allreduces = 2 * self._num_layers if tp > 1 else 0
        link = (g.interconnect_bandwidth or 1.0) / 2 * eff.allreduce
        self._allreduce_per_token = 2 * (tp - 1) / tp * self.costs.hidden_size * 2 / link

    @property
    def warnings(self) -> list[str]:
        """Parts that fell back to the pure roofline (no measured efficiency)."""
        return self.efficiencies.warnings

    def gemm_time(self, num_tokens: int) -> tuple[float, str]:
        """Weight-GEMM time of ``num_tokens`` tokens (seconds) and its bound."""
        c = self.costs
        compute = 2 * c.active_parameters * num_tokens / self._gemm_flops
        read = (
            c.weight_bytes
            * min(1.0, max(self._active_share, num_tokens * self._active_share))
            / self._bw_gemm
        )
        return (compute, "compute") if compute >= read else (read, "memory")

    def step_time(self, chunks: Sequence[tuple[int, int]]) -> StepTime:
        """Predict one step running ``chunks`` = ``[(new_tokens, context_tokens), …]``."""
        tokens = 0
        decode_bytes = 0
        any_decode = False
        prefill_s = 0.0
        groups = self.costs.groups
        for n, ctx in chunks:
            tokens += n
            if n == 1:
                any_decode = True
                for g in groups:
                    keys = ctx + 1 if g.window is None or ctx < g.window else g.window
                    decode_bytes += g.num_layers * g.kv_bytes_per_token * keys
                continue
            flops = kv = 0
            for g in groups:
                flops += 4 * g.q_heads * g.head_size * g.keys_attended(ctx, n) * g.num_layers
                seen = ctx + n if g.window is None else min(ctx + n, g.window + n)
                kv += g.num_layers * g.kv_bytes_per_token * seen
            prefill_s += max(flops / self._attn_flops, kv / self._bw_decode)
        if tokens == 0:
            return StepTime(0.0, 0.0, 0.0, 0.0, 0.0, "memory", 0)
        gemm_s, bound = self.gemm_time(tokens)
        decode_s = self._num_layers * self._decode_lat + decode_bytes / self._bw_decode if any_decode else 0.0
        write_s = self._num_layers * self._write_lat + tokens * self._write_per_token
        allreduce_s = self._allreduces * (
            self.efficiencies.allreduce_latency_s + tokens * self._allreduce_per_token
        )
        return StepTime(
            gemm_s,
            prefill_s,
            decode_s,
            write_s,
            self.efficiencies.step_overhead_s,
            bound,
            tokens,
            allreduce_s,
        )

    def __call__(self, chunks: Sequence[tuple[int, int]]) -> float:
        """The step's total time (seconds)."""
        return self.step_time(chunks).total_s
