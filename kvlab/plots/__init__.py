"""Figures: pure functions from numbers the library computed to plotly figures.

Nothing here computes a KV-cache quantity; every function takes already measured or computed data
and returns a :class:`plotly.graph_objects.Figure` with titled axes (units included), hover text and
colours from :mod:`kvlab.plots.palette`. The widgets in :mod:`kvlab.widgets` copy these figures into
live ``FigureWidget`` objects.
"""

from kvlab.plots.palette import CATEGORICAL, OKABE_ITO, SCHEME_COLORS, SEQUENTIAL, STATE_COLORS
from kvlab.plots.quantization import (
    attention_error_figure,
    error_heatmaps_figure,
    error_histogram_figure,
    error_log_range,
    scale_bytes_figure,
)

__all__ = [
    "CATEGORICAL",
    "OKABE_ITO",
    "SCHEME_COLORS",
    "SEQUENTIAL",
    "STATE_COLORS",
    "attention_error_figure",
    "error_heatmaps_figure",
    "error_histogram_figure",
    "error_log_range",
    "scale_bytes_figure",
]
