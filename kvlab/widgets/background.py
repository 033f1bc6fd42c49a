"""Running slow work (a Triton interpreter call) off the kernel's main thread, with progress shown.

The work runs in a thread, so widget messages keep flowing and other controls stay responsive. A
second thread ticks a progress bar with the elapsed time (the expected time is the last run's, the
work itself reports no progress). The result is handed back on the kernel's event loop, where every
other widget update runs, so figures are never updated from two threads at once; outside an event
loop (plain Python) it is handed back from the worker thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import ipywidgets as widgets


class BackgroundRun:
    """One background job at a time, with a progress bar and an elapsed-time label.

    Attributes:
        progress: the bar (0–100 %, the last 5 % are reserved for the hand-back).
        label: elapsed and expected time.
        expected_s: how long the next run is expected to take (seconds): the last run's duration.
        last_seconds: duration of the last finished run (seconds), or ``None``.
    """

    def __init__(self, expected_s: float = 2.0, tick_s: float = 0.2) -> None:
        self.progress = widgets.FloatProgress(value=0.0, min=0.0, max=100.0, description="Triton",
                                              layout=widgets.Layout(width="300px"))
        self.label = widgets.Label(value="")
        self.expected_s = expected_s
        self.last_seconds: float | None = None
        self._tick = tick_s
        self._thread: threading.Thread | None = None
        self._done = threading.Event()

    @property
    def running(self) -> bool:
        """True while a job is in flight."""
        return self._thread is not None and self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the current job (tests and scripts)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def start(self, work: Callable[[], object], on_done: Callable[[object, float], None],
              on_error: Callable[[Exception], None]) -> bool:
        """Run ``work()`` in a thread; then ``on_done(result, seconds)`` or ``on_error(exc)``.

        Returns:
            ``False`` (and does nothing) when a job is already running.
        """
        if self.running:
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self._done.clear()
        self.progress.bar_style = "info"
        self.progress.value = 0.0
        start = time.perf_counter()

        def hand_back(fn, *args) -> None:
            if loop is not None and loop.is_running():
                loop.call_soon_threadsafe(fn, *args)
            else:
                fn(*args)

        def ticker() -> None:
            while not self._done.wait(self._tick):
                elapsed = time.perf_counter() - start
                self.progress.value = min(95.0, 100.0 * elapsed / max(self.expected_s, 1e-3))
                self.label.value = f"running… {elapsed:.1f} s (last run {self.expected_s:.1f} s)"

        def stop_ticker() -> None:
            # the ticker may be half-way through a tick: let it finish, or it would overwrite the final value
            self._done.set()
            ticking.join()

        def worker() -> None:
            try:
                result = work()
            except Exception as exc:  # noqa: BLE001 — reported in the widget, never raised into the kernel
                stop_ticker()
                self.progress.bar_style = "danger"
                self.label.value = f"failed: {type(exc).__name__}"
                hand_back(on_error, exc)
                return
            seconds = time.perf_counter() - start
            stop_ticker()
            self.last_seconds = self.expected_s = seconds
            self.progress.value = 100.0
            self.progress.bar_style = "success"
            self.label.value = f"done in {seconds:.1f} s"
            hand_back(on_done, result, seconds)

        ticking = threading.Thread(target=ticker, daemon=True)
        ticking.start()
        self._thread = threading.Thread(target=worker, daemon=True, name="kvlab-triton-run")
        self._thread.start()
        return True
