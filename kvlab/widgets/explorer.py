"""What every explorer shares: named controls, live figures, a status line and a debounced update.

An explorer is built by a ``build_*`` function and returned as an :class:`Explorer`: show
``explorer.ui`` in a notebook, or drive ``explorer.controls[name].value`` from Python (tests,
benchmarks) and read ``explorer.figures[name]``. Each control change triggers
:meth:`Explorer.update`, at once for a dropdown or checkbox and through a
:class:`~kvlab.widgets.debounce.Debouncer` for a slider; the update recomputes with the library,
rebuilds the figures with :mod:`kvlab.plots` and sends each ``FigureWidget`` what changed in one
message (:mod:`kvlab.widgets.figure_sync`). Any error is shown in the status line, never as a
traceback. When an update fails, every figure and panel of numbers it did not refresh for the
settings on screen is marked as not current (:mod:`kvlab.widgets.stale`): a stale view never reads
as the answer. Views drawn just after the others (:meth:`Explorer.later`) are marked as computing
until they arrive. The page holds the figures' draws from the start of an update to its last figure,
deferred ones included, and then draws them all in one task (:mod:`kvlab.widgets.one_redraw`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import ipywidgets as widgets
import plotly.graph_objects as go

from kvlab.plots.style import unvalidated_figures
from kvlab.widgets.debounce import Debouncer
from kvlab.widgets.figure_sync import sync_figure
from kvlab.widgets.plotly_bundle import SharedBundleFigureWidget, shared_bundle
from kvlab.widgets.stale import (
    STALE_NOTE,
    clear_panel,
    mark_figure_pending,
    mark_figure_stale,
    mark_panel_pending,
)
from kvlab.widgets.status import StatusLine
from kvlab.widgets.update_cost import cyclic_gc_paused, freeze_heap, one_torch_thread

log = logging.getLogger(__name__)


class Explorer:
    """Controls, figures and status of one interactive view.

    Attributes:
        ui: the widget to display.
        controls: the input widgets by name (set ``.value`` to drive the explorer).
        figures: the ``FigureWidget`` objects by name.
        status: the status line (``status.level`` and ``status.message`` for tests).
        debouncer: coalesces bursts of slider changes (other controls update at once).
        handlers: each control's change handler.
        panels: HTML panels of numbers by name (:class:`~kvlab.widgets.stale.NumberPanel`, so that a
            write of an unchanged value still counts as a refresh).
        last_error: the message of the last failed update, or ``None`` after a good one.
        stale: names of the figures and panels now marked as not current.
        pending: names of the figures and panels marked as computing: a deferred draw
            (:meth:`later`) is on its way with their values for the settings on screen.
        updates: how many updates ran.
        first_view_s: wall and CPU seconds of the last update until the figures it did not defer
            (:meth:`later`) were sent.
        merge_traces: figures are synced with ``merge`` (:func:`~kvlab.widgets.figure_sync.sync_figure`):
            traces that change different properties are updated in place, not replaced.
    """

    def __init__(
        self,
        controls: dict[str, widgets.Widget],
        figures: dict[str, go.FigureWidget],
        render: Callable[[], dict[str, go.Figure] | None],
        *,
        panels: dict[str, widgets.HTML] | None = None,
        debounce_s: float = 0.15,
        merge_traces: bool = False,
    ) -> None:
        self.controls = controls
        self.merge_traces = merge_traces
        self.figures = figures
        self.panels = dict(panels or {})
        self.stale: set[str] = set()
        self.pending: set[str] = set()
        self._later_views: set[str] = set()
        self._current: set[str] = set()
        self.status = StatusLine()
        self._render = render
        self.debouncer = Debouncer(self.update, debounce_s)
        self.last_error: str | None = None
        self.updates = 0
        self._inputs: dict[str, object] = {}
        self._later: list[Callable[[], dict[str, go.Figure] | None]] = []
        self._later_handle: asyncio.Handle | None = None
        self._later_pending: list[Callable[[], dict[str, go.Figure] | None]] = []
        self._later_figures: set[str] = set()
        self._writes: dict[str, int | None] = {}
        self._hold: int | None = None  # the page's hold on this update's draws
        self.first_view_s: tuple[float, float] = (0.0, 0.0)
        self.ui: widgets.Widget = widgets.VBox()
        freeze_heap()
        #: the change handler of each control: sliders and text boxes (the controls that send bursts,
        #: those with ``continuous_update``) are debounced; a dropdown, checkbox or button updates at once
        self.handlers: dict[str, Callable] = {}
        for name, control in controls.items():
            if hasattr(control, "value"):
                bursty = hasattr(control, "continuous_update")
                self.handlers[name] = self.debouncer if bursty else self.debouncer.now
                control.observe(self.handlers[name], names="value")

    def value(self, name: str):
        """Current value of control ``name``."""
        return self.controls[name].value

    def changed(self, figure: str, inputs: object) -> bool:
        """True when ``figure`` must be rebuilt because its ``inputs`` differ from the last ones drawn.

        Renderers call this to skip figures a control change does not affect.
        """
        if figure in self._inputs and self._inputs[figure] == inputs:
            self._current.add(figure)  # what it shows is still the answer for these settings
            return False
        self._inputs[figure] = inputs
        return True

    def fail(self, message: str) -> None:
        """Report an invalid combination from inside a renderer (figures it still returns are drawn,
        the others are marked as not current when the update ends)."""
        self.last_error = message
        self.status.error(message)

    def later(self, render: Callable[[], dict[str, go.Figure] | None], figures: tuple[str, ...] = (),
              views: tuple[str, ...] = ()) -> None:
        """From inside a renderer: draw ``render()``'s figures (and the panels it writes) once the
        others have been sent.

        Inside an event loop (a notebook) it runs as the loop's next callback: the page draws the
        first figures while the rest is computed, and a newer update cancels it. Outside one it runs
        at once, so the figures are complete when :meth:`update` returns. ``figures`` names those
        whose inputs the renderer recorded with :meth:`changed`: when the draw is cancelled they are
        forgotten, so the next update draws them. ``views`` names the figures and panels ``render``
        draws: until it has, they are marked as computing (they still show the previous setting), and
        one it did not draw is then marked as not current.
        """
        self._later.append(render)
        self._later_figures.update(figures)
        self._later_views.update(views)

    def update(self) -> None:
        """Recompute and redraw now from the current control values.

        ``first_view_s`` then holds the wall and CPU seconds until the figures not deferred with
        :meth:`later` were sent.
        """
        self._cancel_later()
        self._hold_draws()
        wall, cpu = time.perf_counter(), time.process_time()
        self.updates += 1
        self.last_error = None
        self._current = set()
        self._later = []
        self._later_views = set()
        self._writes = {name: getattr(panel, "writes", None) for name, panel in self.panels.items()}
        self._draw(self._render)
        self.first_view_s = (time.perf_counter() - wall, time.process_time() - cpu)
        pending, self._later = self._later, []
        if not pending or self.last_error is not None:
            for name in self._later_figures if pending else ():
                self._inputs.pop(name, None)  # dropped with the failed update: draw them next time
            self._mark_views(self._writes)
            self._release_draws()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._draw_later(pending)
            return
        self._mark_pending()
        self._later_handle = loop.call_soon(self._draw_later, pending)
        self._later_pending = pending

    def _draw(self, render: Callable[[], dict[str, go.Figure] | None]) -> None:
        """Run one renderer and send its figures; an error goes to the status line."""
        try:
            with cyclic_gc_paused(), one_torch_thread(), unvalidated_figures():
                new_figures = render() or {}
                for name, fig in new_figures.items():
                    sync_figure(self.figures[name], fig, merge=self.merge_traces)
                    self._current.add(name)
        except (ValueError, RuntimeError, KeyError) as exc:
            self._inputs.clear()
            self.last_error = str(exc)
            self.status.error(str(exc))
        except Exception as exc:  # noqa: BLE001 — a widget must show the problem, not a traceback
            log.exception("explorer update failed")
            self._inputs.clear()
            self.last_error = f"{type(exc).__name__}: {exc}"
            self.status.error(f"unexpected {type(exc).__name__}: {exc}")

    def _draw_later(self, pending: list[Callable[[], dict[str, go.Figure] | None]]) -> None:
        self._later_handle = None
        try:
            for render in pending:
                if self.last_error is None:
                    self._draw(render)
            self._mark_views(self._writes)
        finally:
            self._release_draws()

    def _hold_draws(self) -> None:
        """Ask the page to hold this explorer's figure draws until its update has sent its last
        figure (a newer update that cancels the deferred draw keeps the hold open)."""
        shared = any(isinstance(f, SharedBundleFigureWidget) for f in self.figures.values())
        if self._hold is None and shared:
            self._hold = shared_bundle().hold_draws()

    def _release_draws(self) -> None:
        """End the hold of :meth:`_hold_draws`: the page draws every figure of the update in one task."""
        if self._hold is not None:
            hold, self._hold = self._hold, None
            shared_bundle().release_draws(hold)

    def _cancel_later(self) -> None:
        if self._later_handle is not None:
            self._later_handle.cancel()
            self._later_handle = None
            for name in self._later_figures:
                self._inputs.pop(name, None)  # never drawn for the inputs recorded
        self._later_figures = set()

    def _mark_pending(self) -> None:
        """Mark the views a scheduled deferred draw will refresh as computing."""
        for name in self._later_views:
            if name in self.figures:
                mark_figure_pending(self.figures[name])
            elif name in self.panels:
                mark_panel_pending(self.panels[name])
                self._writes[name] = getattr(self.panels[name], "writes", None)  # the mark is no refresh
        self.pending |= self._later_views

    def _mark_views(self, writes: dict[str, int | None]) -> None:
        """After an update: views it refreshed are current; after a failed one, mark the others, and
        a view marked as computing that no draw refreshed is marked as not current."""
        refreshed = set(self._current)
        refreshed |= {name for name, panel in self.panels.items()
                      if writes[name] is not None and getattr(panel, "writes", None) != writes[name]}
        self.stale -= refreshed
        waiting, self.pending = self.pending - refreshed, set()
        if self.last_error is None:
            for name in waiting:
                self._mark_stale(name, "not current: no result for the settings on screen")
            return
        for name in (self.figures.keys() | self.panels.keys()) - refreshed:
            self._mark_stale(name, STALE_NOTE)

    def _mark_stale(self, name: str, note: str) -> None:
        if name in self.figures:
            if self.figures[name].data:
                mark_figure_stale(self.figures[name], note)
                self._inputs.pop(name, None)  # redraw it as soon as the settings work again
                self.stale.add(name)
        elif self.panels[name].value:
            clear_panel(self.panels[name], note)
            self.stale.add(name)

    def refresh(self) -> None:
        """Run any scheduled update, and any figures it deferred, now (figures are current when it
        returns)."""
        if self.debouncer.pending:
            self.debouncer.flush()
        if self._later_handle is not None:
            self._later_handle.cancel()
            self._draw_later(self._later_pending)

    def _repr_mimebundle_(self, **kwargs):
        return self.ui._repr_mimebundle_(**kwargs)


#: Width of the explorers' figures (pixels): a JupyterLab notebook column on a laptop screen. A
#: widget-hosted plotly figure does not follow its container's width, so it is set explicitly.
FIGURE_WIDTH = 940


def empty_figure_widget(height: int = 360, width: int = FIGURE_WIDTH) -> go.FigureWidget:
    """A blank ``FigureWidget`` (``width`` × ``height`` pixels) that an explorer fills on its first update."""
    from kvlab.plots.style import base_layout

    return SharedBundleFigureWidget(layout=base_layout("", height=height, width=width))


def labelled(control: widgets.Widget, width: str = "340px") -> widgets.Widget:
    """Give a control a fixed width and a description width wide enough for kvlab's labels."""
    control.layout.width = width
    control.style.description_width = "130px"
    return control
