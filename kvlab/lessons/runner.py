"""Running a lesson notebook headless, in a real kernel, and measuring it.

The notebooks are stored as jupytext percent-format ``.py`` files. :func:`run_notebook` converts one
to a notebook in memory, executes every cell with ``nbclient`` in a fresh ``python3`` kernel whose
working directory is the notebook's folder, and reports the wall time and the peak resident memory of
the kernel's process tree (sampled with ``psutil``). The tests and ``benchmarks/widgets_bench.py``
both use it.

Needs the ``lab``/``dev`` extras: ``jupytext``, ``nbclient``, ``psutil``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class NotebookRun:
    """Outcome of one headless run.

    Attributes:
        path: the ``.py`` source.
        seconds: wall time from kernel start to the last cell's end (seconds).
        peak_rss_bytes: largest resident memory of the kernel and its children (bytes).
        notebook: the executed ``nbformat`` notebook (outputs included).
        error: ``"<cell index>: <ename>: <evalue>"`` of the first failing cell, or ``None``.
    """

    path: Path
    seconds: float
    peak_rss_bytes: int
    notebook: object
    error: str | None = None


class _PeakRss:
    """Samples the RSS of a process tree in a thread until stopped."""

    def __init__(self, pid_of, interval_s: float = 0.02) -> None:
        self._pid_of = pid_of
        self._interval = interval_s
        self._stop = threading.Event()
        self.peak = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        proc = None
        while not self._stop.is_set():
            if proc is None:
                pid = self._pid_of()
                if pid is not None:
                    try:
                        proc = psutil.Process(pid)
                    except psutil.NoSuchProcess:
                        proc = None
            if proc is not None:
                try:
                    tree = [proc, *proc.children(recursive=True)]
                    self.peak = max(self.peak, sum(p.memory_info().rss for p in tree))
                except psutil.Error:
                    pass
            self._stop.wait(self._interval)

    def __enter__(self) -> _PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def first_error(notebook) -> str | None:
    """``"<cell index>: <ename>: <evalue>"`` of the first error output, or ``None``."""
    for i, cell in enumerate(notebook.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"cell {i}: {out.get('ename')}: {out.get('evalue')}"
    return None


def run_notebook(path: Path | str, *, timeout_s: int = 300, kernel_name: str = "python3") -> NotebookRun:
    """Execute a percent-format notebook top to bottom in a fresh kernel.

    Args:
        path: the jupytext ``.py`` file.
        timeout_s: limit per cell (seconds).
        kernel_name: the Jupyter kernel to start.

    Returns:
        A :class:`NotebookRun`; a failing cell does not raise, it is reported in ``error``.
    """
    import jupytext
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    path = Path(path).resolve()
    nb = jupytext.read(path)
    client = NotebookClient(nb, timeout=timeout_s, kernel_name=kernel_name,
                            resources={"metadata": {"path": str(path.parent)}})

    def kernel_pid():
        km = client.km
        prov = getattr(km, "provisioner", None) if km is not None else None
        return getattr(prov, "pid", None) if prov is not None else None

    error = None
    start = time.perf_counter()
    with _PeakRss(kernel_pid) as rss:
        try:
            client.execute()
        except CellExecutionError as exc:
            error = str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc)
    seconds = time.perf_counter() - start
    return NotebookRun(path, seconds, rss.peak, nb, first_error(nb) or error)
