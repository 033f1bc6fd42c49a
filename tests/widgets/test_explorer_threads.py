"""An explorer computes with one torch thread (its tensors are small, and waiting threads multiply
the time on a busy 2-core machine) and gives the previous thread count back afterwards."""

from __future__ import annotations

import ipywidgets as widgets
import torch

from kvlab.widgets.explorer import Explorer


def test_render_runs_on_one_torch_thread_and_the_count_is_restored():
    seen = []
    slider = widgets.IntSlider(value=0)

    def render():
        seen.append(torch.get_num_threads())
        if slider.value == 2:
            raise ValueError("two is refused")
        return {}

    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        explorer = Explorer({"x": slider}, {}, render, debounce_s=0)
        explorer.update()
        slider.value = 2  # a failing update restores the count too
        assert seen == [1, 1] and explorer.last_error == "two is refused"
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous)
