"""Every dropdown of every explorer shows a label: a ``None`` option value reads as "nothing
selected" in ipywidgets and shows a blank box (lesson 03's window and softcap did)."""

from __future__ import annotations

import ipywidgets as widgets
import pytest

from kvlab.widgets.admission_explorer import build_admission_explorer
from kvlab.widgets.kernel_explorer import build_kernel_explorer
from kvlab.widgets.memory_explorer import build_memory_explorer


@pytest.mark.parametrize("build", [build_kernel_explorer, build_admission_explorer, build_memory_explorer])
def test_every_dropdown_shows_a_label(build):
    explorer = build(debounce_s=0)
    dropdowns = {n: w for n, w in explorer.controls.items() if isinstance(w, widgets.Dropdown)}
    assert dropdowns
    for name, dropdown in dropdowns.items():
        assert dropdown.index is not None and dropdown.label, name  # what the browser shows
        values = [o[1] if isinstance(o, tuple) else o for o in dropdown.options]
        assert None not in values, name


def test_kernel_explorer_none_choices_mean_no_window_and_no_softcap():
    explorer = build_kernel_explorer(debounce_s=0)
    assert explorer.controls["sliding_window"].label == "none"
    assert explorer.controls["softcap"].label == "none"
    assert explorer.status.level != "error"
    explorer.controls["softcap"].value = 30.0
    explorer.controls["softcap"].value = 0.0  # back to "none": the same output as at the start
    assert explorer.status.level != "error" and explorer.last_error is None
