"""Interactive explorers for JupyterLab: ipywidgets controls driving plotly ``FigureWidget`` figures.

Each ``build_*`` function returns an :class:`Explorer` (``ui``, ``controls``, ``figures``, ``status``).
Display ``explorer.ui`` (or the explorer itself) in a notebook; tests and benchmarks set
``explorer.controls[name].value`` and read ``explorer.figures[name]``. The numbers come from the
library (:mod:`kvlab.serving`, :mod:`kvlab.analysis`, …) and the figures from :mod:`kvlab.plots`.

* :func:`build_memory_explorer` — bytes per token, pool, capacity and concurrency of a model;
* :func:`build_family_picker` — each model family's memory trick and where a request's bytes go;
* :func:`build_quantization_explorer` — K/V error heatmaps, error histogram, attention error vs
  context, scale bytes;
* :func:`build_admission_explorer` — two admission policies side by side: timeline, blocks, gate;
* :func:`build_block_map` — the block pool as a grid, stepped through a simulated run;
* :func:`build_kernel_explorer` — reference vs Triton on one batch, and the GPU benchmark results;
* :func:`build_serving_dashboard` — capacity per KV dtype and a simulated run of one configuration.
"""

from kvlab.widgets.admission_explorer import build_admission_explorer
from kvlab.widgets.block_map import build_block_map
from kvlab.widgets.debounce import Debouncer
from kvlab.widgets.explorer import Explorer
from kvlab.widgets.family_picker import build_family_picker
from kvlab.widgets.kernel_explorer import build_kernel_explorer
from kvlab.widgets.memory_explorer import build_memory_explorer
from kvlab.widgets.quantization_explorer import build_quantization_explorer
from kvlab.widgets.serving_dashboard import build_serving_dashboard
from kvlab.widgets.status import StatusLine

__all__ = [
    "Debouncer",
    "Explorer",
    "StatusLine",
    "build_admission_explorer",
    "build_block_map",
    "build_family_picker",
    "build_kernel_explorer",
    "build_memory_explorer",
    "build_quantization_explorer",
    "build_serving_dashboard",
]
