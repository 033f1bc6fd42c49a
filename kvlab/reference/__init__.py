"""Float64 reference attention (the oracle) and error measures."""

from kvlab.reference.attention import (
    check_attention_options,
    check_paged_inputs,
    paged_attention_reference,
    reference_attention,
)
from kvlab.reference.metrics import relative_error

__all__ = [
    "check_attention_options",
    "check_paged_inputs",
    "paged_attention_reference",
    "reference_attention",
    "relative_error",
]
