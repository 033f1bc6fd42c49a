"""The explorers' axes let tick labels overflow (``ticklabeloverflow="allow"``,
:data:`kvlab.plots.style._AXIS_STYLE`), and that hides nothing: drawn by plotly.js in Chromium, every
tick label of every explorer figure lies inside its figure, over a sequence of control changes. plotly's
default ("hide past div") hides only a label that crosses the figure's edge, and measures every label
after each draw to find one; with every label inside, both settings draw the same labels.
"""

from __future__ import annotations

from pathlib import Path

import plotly
import plotly.io as pio
import pytest

from kvlab.widgets.admission_explorer import build_admission_explorer
from kvlab.widgets.block_map import build_block_map
from kvlab.widgets.kernel_explorer import build_kernel_explorer
from kvlab.widgets.memory_explorer import build_memory_explorer
from kvlab.widgets.quantization_explorer import build_quantization_explorer
from kvlab.widgets.serving_dashboard import build_serving_dashboard

pytestmark = pytest.mark.browser

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"

#: explorer → (builder, the control changed, its values in turn): the browser benchmark's changes.
CHANGES = {
    "memory": (build_memory_explorer, "kv_cache_dtype", ["fp8", "int8_per_token_head", "auto"]),
    "quantization": (build_quantization_explorer, "scheme", ["fp8_e4m3", "bfloat16", "int8_per_token_head"]),
    "kernel": (build_kernel_explorer, "scheme", ["fp8_e4m3", "bfloat16", "int8_per_token_head"]),
    "block map": (build_block_map, "workload", ["chat burst", "long prompts", "shared system prompt"]),
    "admission": (build_admission_explorer, "policy_b", ["exact", "window_plus_chunk", "vllm"]),
    "serving": (build_serving_dashboard, "kv_cache_dtype", ["fp8", "int8_per_token_head", "auto"]),
}

#: Page script: draw one figure (plotly JSON) in a fresh div; return, for every axis and colour bar,
#: its ``ticklabeloverflow``, and every tick label whose box is not inside the figure's.
DRAW_JS = """async (json) => {
  document.body.innerHTML = '<div id="fig"></div>';
  const fig = JSON.parse(json);
  const gd = document.getElementById('fig');
  await Plotly.newPlot(gd, fig.data, fig.layout);
  const full = gd._fullLayout;
  const overflow = {};
  for (const key of Object.keys(full)) {
    if (/^[xy]axis\\d*$/.test(key)) overflow[key] = full[key].ticklabeloverflow;
    if (/^coloraxis\\d*$/.test(key) && full[key].showscale) {
      overflow[key] = full[key].colorbar.ticklabeloverflow;
    }
  }
  gd._fullData.forEach((t, i) => {
    if (t.showscale && t.colorbar) overflow[`trace ${i} colorbar`] = t.colorbar.ticklabeloverflow;
  });
  const box = gd.getBoundingClientRect();
  const labels = [...gd.querySelectorAll('g[class$="tick"] text')].filter((t) => t.textContent);
  const out = (r) => r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5
    || r.bottom > box.bottom + 0.5;
  const where = (r) => [r.left, r.right, r.top, r.bottom].map(Math.round).join(" ");
  const outside = labels.map((t) => [t.textContent, t.getBoundingClientRect()]).filter(([, r]) => out(r))
    .map(([text, r]) => `${text} at (left right top bottom) ${where(r)}`);
  Plotly.purge(gd);
  return {overflow, labels: labels.length, outside, width: box.width, height: box.height};
}"""


def _states(name: str):
    """Every figure of explorer ``name`` as plotly JSON, after building it and after each change."""
    build, control, values = CHANGES[name]
    explorer = build(debounce_s=0)
    explorer.refresh()  # deferred views (Playwright keeps an event loop running in this thread)
    states = [{k: pio.to_json(f) for k, f in explorer.figures.items()}]
    for value in values:
        explorer.controls[control].value = value
        explorer.refresh()
        assert explorer.last_error is None, explorer.last_error
        states.append({k: pio.to_json(f) for k, f in explorer.figures.items()})
    return states


@pytest.mark.parametrize("name", list(CHANGES))
def test_every_tick_label_lies_inside_its_figure_so_letting_them_overflow_hides_none(browser, name):
    states = _states(name)
    page = browser.new_page(viewport={"width": 1400, "height": 1800})
    try:
        page.add_script_tag(path=str(PLOTLY_JS))
        drawn = 0
        for step, figures in enumerate(states):
            for figure, json in figures.items():
                got = page.evaluate(DRAW_JS, json)
                where = f"{name} {figure} (state {step})"
                assert got["overflow"], f"{where}: no axis"
                assert set(got["overflow"].values()) == {"allow"}, f"{where}: {got['overflow']}"
                size = f"{got['width']}x{got['height']}"
                assert got["outside"] == [], f"{where}: tick labels outside the {size} figure"
                drawn += got["labels"]
    finally:
        page.close()
    assert drawn > 10 * len(states)  # the labels were found (a wrong selector would pass vacuously)
