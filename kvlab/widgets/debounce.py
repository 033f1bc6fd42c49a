"""Coalescing rapid control changes into one figure update.

Dragging a slider or holding an arrow key sends a burst of value changes. Recomputing on each would
queue work the user never sees. :class:`Debouncer` runs its callback once, ``delay_s`` after the last
change of a burst, on the kernel's event loop (the thread that handles widget messages, so updates
never race). Outside a running event loop (plain Python, tests, benchmarks) it runs the callback at
once, so code that sets ``control.value`` sees the new figures on the next line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Debouncer:
    """Call ``callback()`` once per burst of triggers.

    Args:
        callback: the update to run (no arguments).
        delay_s: quiet time that ends a burst, in seconds; ``0`` runs every trigger at once.
    """

    def __init__(self, callback: Callable[[], None], delay_s: float = 0.15) -> None:
        if delay_s < 0:
            raise ValueError(f"delay_s must be >= 0 seconds, got {delay_s}")
        self.callback = callback
        self.delay_s = delay_s
        self._handle: asyncio.TimerHandle | None = None
        self.calls = 0  #: how many times the callback ran
        self.triggers = 0  #: how many triggers arrived

    @property
    def pending(self) -> bool:
        """True while an update is scheduled and has not run."""
        return self._handle is not None

    def __call__(self, *_ignored) -> None:
        """Trigger (usable directly as an ``observe`` handler: the change argument is ignored)."""
        self.triggers += 1
        loop = None
        if self.delay_s > 0:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
        if loop is None:
            self._run()
            return
        if self._handle is not None:
            self._handle.cancel()
        self._handle = loop.call_later(self.delay_s, self._run)

    def now(self, *_ignored) -> None:
        """Trigger that runs the callback at once (a dropdown's single change is no burst: waiting
        would only add the delay to what the user waits for). A scheduled update is folded into it."""
        self.triggers += 1
        if self._handle is not None:
            self._handle.cancel()
        self._run()

    def flush(self) -> None:
        """Run a scheduled update now (no-op when nothing is pending)."""
        if self._handle is not None:
            self._handle.cancel()
            self._run()

    def _run(self) -> None:
        self._handle = None
        self.calls += 1
        self.callback()
