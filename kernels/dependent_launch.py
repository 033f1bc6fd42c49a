"""Programmatic dependent launch: the split-K merge scheduled before the attention kernel ends.

In a CUDA graph (or a stream) a kernel normally starts only after the kernel before it has
finished and its writes are flushed; the GPU then needs about a microsecond more to launch the next
grid. For one long sequence that gap sits between a 10-40 µs attention kernel and a 1-2 µs merge, a
visible part of the step. Hopper (compute capability 9.0) lets a kernel be launched as a
*programmatic dependent* of the one before it:

* the first kernel executes ``griddepcontrol.launch_dependents`` (:func:`trigger_dependents`):
  once every one of its programs has done so (or exited), the GPU may launch the dependent grid;
* the dependent's programs start where room frees up, and each executes ``griddepcontrol.wait``
  (:func:`wait_for_primary`) before it reads anything the first kernel wrote: that wait returns when
  the whole first grid has finished and its memory is visible.

A split decode is one wave of programs, so they all trigger at once at their start, and the merge's
launch overlaps the attention kernel instead of following it. Nothing here changes a result: the
merge still reads every partial after the wait (``tests/kernels/test_dependent_merge.py`` compares
outputs bit for bit). The interpreter has neither instruction and never launches dependents.
"""

from __future__ import annotations

from functools import cache

import torch

from kvlab.kernels.runtime import INTERPRET

if not INTERPRET:
    from triton.language.extra.cuda import gdc_launch_dependents as trigger_dependents
    from triton.language.extra.cuda import gdc_wait as wait_for_primary
else:  # never reached there: kernels call these only under a constexpr that is False
    trigger_dependents = None
    wait_for_primary = None

__all__ = ["overlaps_dependent_launches", "trigger_dependents", "wait_for_primary"]


@cache
def overlaps_dependent_launches(device_index: int) -> bool:
    """Whether kernels on CUDA device ``device_index`` can be launched as programmatic dependents
    (compute capability 9.0 and later), never in the interpreter."""
    if INTERPRET:
        return False
    return torch.cuda.get_device_capability(device_index) >= (9, 0)
