"""What keeps an explorer's update cheap on a busy 2-core machine: one torch thread, the cycle
collector paused during the update, and the kernel's start-up heap out of the collector's reach."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the body with one intra-op torch thread, then restore the previous count.

    An explorer's tensors are small: splitting them over threads costs more than it saves, and on
    a busy 2-core machine (a classroom server, Binder) waiting threads multiply the time. Measured
    with ``benchmarks/widgets_bench.py``: one quantization-explorer update 2,752 → 208 ms of CPU.
    """
    import torch

    before = torch.get_num_threads()
    if before == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Run the body with Python's cycle collector paused, then resume it (reference counting still
    frees everything that is not in a cycle).

    An update builds tens of thousands of short-lived objects (a recorded simulation, figure
    traces); each 700 allocations start a collection, and the older generations walk the whole heap
    of a notebook kernel (torch, plotly, ipywidgets). One collection after the update, if due,
    replaces many during it. Measured with ``benchmarks/widgets_bench.py``: block map p95 297 → 164 ms
    of CPU.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


_heap_frozen = False


def freeze_heap() -> None:
    """Once per process: move every object alive now out of the cycle collector's reach (``gc.freeze``).

    A notebook kernel holds hundreds of thousands of long-lived objects (torch, plotly, ipywidgets,
    the lesson's imports); every full collection walks all of them, about 50 ms on a 2-core machine,
    and an update that allocates much triggers one. Frozen objects are skipped from then on. Only
    the first explorer's build freezes (after a full collection), so what is frozen is what the
    kernel had loaded by then: later explorers, figures and runs are collected as usual.
    """
    global _heap_frozen
    if _heap_frozen:
        return
    _heap_frozen = True
    gc.collect()
    gc.freeze()
