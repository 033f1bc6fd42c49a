"""Bursts of control changes become one update inside an event loop, and run at once outside one."""

from __future__ import annotations

import asyncio

import ipywidgets as widgets

from kvlab.widgets import Debouncer


def test_a_burst_runs_the_callback_once_after_the_quiet_time():
    seen = []
    slider = widgets.IntSlider(value=0, max=100)
    debounced = Debouncer(lambda: seen.append(slider.value), delay_s=0.05)
    slider.observe(debounced, names="value")

    async def drag():
        for v in range(1, 21):
            slider.value = v
            await asyncio.sleep(0.005)
        assert debounced.pending and seen == []
        await asyncio.sleep(0.2)

    asyncio.run(drag())
    assert seen == [20]  # one update, with the final value
    assert debounced.triggers == 20 and debounced.calls == 1


def test_separate_bursts_give_separate_updates():
    seen = []
    debounced = Debouncer(lambda: seen.append(len(seen)), delay_s=0.02)

    async def two_bursts():
        for _ in range(3):
            debounced()
        await asyncio.sleep(0.1)
        for _ in range(3):
            debounced()
        await asyncio.sleep(0.1)

    asyncio.run(two_bursts())
    assert debounced.calls == 2 and debounced.triggers == 6


def test_flush_runs_a_pending_update_now():
    seen = []
    debounced = Debouncer(lambda: seen.append(1), delay_s=10.0)

    async def trigger_then_flush():
        debounced()
        assert debounced.pending
        debounced.flush()
        assert not debounced.pending

    asyncio.run(trigger_then_flush())
    assert seen == [1]


def test_without_an_event_loop_every_trigger_runs_synchronously():
    seen = []
    debounced = Debouncer(lambda: seen.append(1), delay_s=0.5)
    debounced()
    debounced()
    assert seen == [1, 1] and not debounced.pending


def test_now_runs_at_once_inside_an_event_loop_and_folds_a_scheduled_update():
    seen = []
    debounced = Debouncer(lambda: seen.append(1), delay_s=10.0)

    async def slider_then_dropdown():
        debounced()  # a slider: scheduled 10 s later
        assert debounced.pending and seen == []
        debounced.now()  # a dropdown: runs now, and the slider's update with it
        assert seen == [1] and not debounced.pending
        await asyncio.sleep(0.05)

    asyncio.run(slider_then_dropdown())
    assert seen == [1] and debounced.calls == 1 and debounced.triggers == 2


def test_an_explorer_debounces_its_sliders_and_updates_at_once_for_a_dropdown():
    from kvlab.widgets.explorer import Explorer

    slider = widgets.FloatSlider(value=1.0, min=0.0, max=10.0)
    dropdown = widgets.Dropdown(options=["a", "b"], value="a")
    drawn = []
    explorer = Explorer({"x": slider, "kind": dropdown}, {},
                        lambda: drawn.append((slider.value, dropdown.value)) or {}, debounce_s=10.0)

    async def interact():
        slider.value = 2.0
        assert drawn == [] and explorer.debouncer.pending
        dropdown.value = "b"
        assert drawn == [(2.0, "b")] and not explorer.debouncer.pending

    asyncio.run(interact())
    assert explorer.updates == 1
