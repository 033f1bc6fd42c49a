"""In a real kernel the Triton run of the kernel explorer finishes in the background and its result is
drawn by the kernel's event loop (not from the worker thread), while the kernel stays free."""

from __future__ import annotations

import nbformat
import pytest

pytestmark = [pytest.mark.notebooks, pytest.mark.interpreter]

CELLS = [
    """
import threading
from kvlab.widgets import build_kernel_explorer
explorer = build_kernel_explorer(benchmark_csv=[])
drawn_on = []
redraw = explorer.update
def update_and_record():
    drawn_on.append(threading.current_thread().name)
    redraw()
explorer.update = update_and_record
explorer.run_triton()
print("started", explorer.background.running, explorer.status.level)
""",
    """
import asyncio
other_work = 0
for _ in range(300):
    if not explorer.background.running and len(explorer.figures["heads"].data) == 2:
        break
    other_work += 1          # the kernel keeps executing code meanwhile
    await asyncio.sleep(0.1)
heads = len(explorer.figures["heads"].data)
print("done", heads, explorer.status.level, sorted(set(drawn_on)), other_work > 0)
""",
]


def test_triton_run_finishes_in_the_background_and_is_drawn_on_the_main_thread():
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in CELLS])
    NotebookClient(nb, timeout=180, kernel_name="python3").execute()
    started = nb.cells[0].outputs[-1]["text"]
    done = nb.cells[1].outputs[-1]["text"]
    assert started.strip() == "started True busy"
    assert done.strip() == "done 2 ok ['MainThread'] True"
