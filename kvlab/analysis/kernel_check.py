"""One small paged-attention case, run three ways: truth, float64 reference, Triton kernel.

* *truth*: float64 attention on the original (unquantized) K/V;
* *reference*: float64 attention over the paged, quantized cache (:func:`kvlab.attention`,
  ``backend="reference"``) — its distance to the truth is the error of the format;
* *Triton*: the kernel (``backend="triton"``; Triton's interpreter on CPU) — its distance to the
  reference is the kernel's own arithmetic (dot dtype, scale application, online softmax).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import kvlab
from kvlab.cache import PagedExample
from kvlab.kvdata.synthetic import SyntheticKVConfig, synthetic_kv_source
from kvlab.reference import reference_attention


@dataclass(frozen=True)
class KernelCase:
    """The batch and cache of one comparison.

    Attributes:
        scheme: kv-cache dtype.
        context: tokens per sequence, new ones included (tokens).
        num_seqs: sequences in the batch.
        query_len: new tokens per sequence (1 = decode).
        head_size: channels per head.
        num_q_heads, num_kv_heads: attention heads (GQA group = their ratio).
        sliding_window: window (tokens) or ``None``.
        softcap: logit softcap or ``None``.
        outliers: draw K/V with outlier key channels and RoPE instead of N(0, 1).
        seed: seeds the example.
    """

    scheme: str = "int8_per_token_head"
    context: int = 64
    num_seqs: int = 2
    query_len: int = 1
    head_size: int = 64
    num_q_heads: int = 8
    num_kv_heads: int = 2
    sliding_window: int | None = None
    softcap: float | None = None
    outliers: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if self.query_len > self.context:
            raise ValueError(f"query_len ({self.query_len}) cannot exceed the context ({self.context})")
        if self.sliding_window is not None and self.sliding_window >= self.context:
            raise ValueError(f"sliding_window ({self.sliding_window}) must be smaller than the context "
                             f"({self.context} tokens) to make a difference")

    @property
    def options(self) -> dict:
        """The attention keyword arguments (window, softcap)."""
        return dict(sliding_window=self.sliding_window, softcap=self.softcap)


def build_case(case: KernelCase) -> PagedExample:
    """The paged example of ``case``: fp16 queries and K/V, context lengths ``context - 3·i``."""
    seq_lens = [max(case.query_len, case.context - 3 * i) for i in range(case.num_seqs)]
    source = synthetic_kv_source(SyntheticKVConfig(outlier_strength=20.0)) if case.outliers else None
    extra = {"kv_source": source} if source is not None else {}
    return kvlab.build_paged_example(
        [case.query_len] * case.num_seqs, seq_lens, num_q_heads=case.num_q_heads,
        num_kv_heads=case.num_kv_heads, head_size=case.head_size, scheme=case.scheme,
        query_dtype=torch.float16, kv_dtype=torch.float16, seed=case.seed, **extra,
    )


@dataclass(frozen=True)
class ReferenceRun:
    """Truth and reference outputs of one case, ``[num_tokens, num_q_heads, head_size]`` float64."""

    example: PagedExample
    truth: torch.Tensor
    reference: torch.Tensor


def run_reference(case: KernelCase) -> ReferenceRun:
    """Build the case and compute the truth and the paged float64 reference."""
    ex = build_case(case)
    truth = reference_attention(ex.query, ex.keys, ex.values, ex.batch, **case.options)
    ref = kvlab.attention(ex.query, ex.cache, ex.batch, backend="reference", **case.options)
    return ReferenceRun(ex, truth, ref)


def run_triton(run: ReferenceRun, case: KernelCase) -> torch.Tensor:
    """The Triton kernel on the same cache and batch (seconds per call in the interpreter)."""
    ex = run.example
    return kvlab.attention(ex.query, ex.cache, ex.batch, backend="triton", **case.options)


def per_head_relative_error(out: torch.Tensor, ref: torch.Tensor) -> list[float]:
    """``‖out_h − ref_h‖₂ / ‖ref_h‖₂`` for every query head ``h`` (over tokens and channels)."""
    o, r = out.double(), ref.double()
    num = torch.linalg.vector_norm(o - r, dim=(0, 2))
    den = torch.linalg.vector_norm(r, dim=(0, 2))
    return (num / den).tolist()
