"""The progress bar of a background run ends at 100 %, whatever the ticker thread was doing."""

from kvlab.widgets.background import BackgroundRun


def test_a_finished_run_shows_100_percent_even_when_the_ticker_was_mid_tick():
    """A ticker that ticks every 10 us is almost always mid-tick when the work ends; it used to write
    its capped 95 % after the worker's 100 %. Expected after every run: exactly 100.0 and 'success'."""
    run = BackgroundRun(expected_s=1e-6, tick_s=1e-5)
    finished = []
    for i in range(300):
        def keep(result, seconds):
            finished.append(result)

        assert run.start(lambda: sum(range(2000)), keep, lambda exc: None)
        run.join(10)
        assert (run.progress.value, run.progress.bar_style) == (100.0, "success"), f"run {i}"
    assert finished == [sum(range(2000))] * 300
