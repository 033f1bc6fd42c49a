"""Measurements the lessons show, computed with the library's own quantizers and reference attention.

* :func:`round_trip` — store a tensor with a scheme and read it back (per-element error);
* :func:`log_error_histogram` — the distribution of those errors on a log axis;
* :func:`attention_error_vs_context` — the error that reaches the attention output, by context length;
* :func:`scheme_bytes` — bytes per token on data and on scales, per scheme;
* :func:`layer_type_bytes`, :func:`request_blocks_by_group`, :func:`concurrency_curve` — capacity
  numbers of :mod:`kvlab.serving` arranged for pictures;
* :func:`as_full_attention`, :func:`with_sliding_window` — what-if variants of a model;
* :func:`request_state_spans`, :func:`blocks_in_use`, :func:`gate_points` — a simulation's timeline
  arranged for pictures;
* :func:`speedups` — GPU benchmark rows against bfloat16;
* :mod:`kvlab.analysis.kernel_check` — one paged-attention case run as truth, reference and Triton
  (imported on use: it loads the kernels only when asked to run them).
"""

from kvlab.analysis.attention_error import (
    ContextError,
    attention_error_vs_context,
    context_outputs,
    default_contexts,
)
from kvlab.analysis.benchmark_views import Speedup, fastest_per_point, speedups
from kvlab.analysis.capacity_views import (
    ConcurrencyPoint,
    GroupBlocks,
    LayerTypeBytes,
    concurrency_curve,
    layer_type_bytes,
    request_blocks_by_group,
)
from kvlab.analysis.error_stats import LogHistogram, log_error_histogram
from kvlab.analysis.model_variants import as_full_attention, sliding_window_of, with_sliding_window
from kvlab.analysis.round_trip import RoundTrip, effective_rounding, round_trip
from kvlab.analysis.scale_cost import SchemeBytes, scheme_bytes
from kvlab.analysis.time_views import latency_samples_ms, running_over_time, tokens_per_second
from kvlab.analysis.timeline_views import (
    REQUEST_STATES,
    BlockSeries,
    GatePoint,
    StateSpan,
    blocks_in_use,
    gate_points,
    request_state_spans,
)

__all__ = [
    "REQUEST_STATES",
    "BlockSeries",
    "GatePoint",
    "Speedup",
    "StateSpan",
    "blocks_in_use",
    "gate_points",
    "request_state_spans",
    "ConcurrencyPoint",
    "ContextError",
    "GroupBlocks",
    "LayerTypeBytes",
    "LogHistogram",
    "RoundTrip",
    "SchemeBytes",
    "as_full_attention",
    "attention_error_vs_context",
    "concurrency_curve",
    "context_outputs",
    "default_contexts",
    "effective_rounding",
    "fastest_per_point",
    "layer_type_bytes",
    "log_error_histogram",
    "request_blocks_by_group",
    "round_trip",
    "scheme_bytes",
    "sliding_window_of",
    "speedups",
    "with_sliding_window",
    "latency_samples_ms",
    "running_over_time",
    "tokens_per_second",
]
