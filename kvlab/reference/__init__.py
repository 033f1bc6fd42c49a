"""Float64 reference attention (the oracle) and error measures."""

from kvlab.reference.attention import (
    check_attention_options,
    check_paged_inputs,
    paged_attention_reference,
    prefix_attention,
    reference_attention,
)
from kvlab.reference.metrics import relative_error
from kvlab.reference.torch_attention import paged_attention_torch

__all__ = [
    "check_attention_options",
    "check_paged_inputs",
    "paged_attention_reference",
    "paged_attention_torch",
    "prefix_attention",
    "reference_attention",
    "relative_error",
]
