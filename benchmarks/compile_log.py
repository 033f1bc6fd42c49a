"""A pytest plugin that logs every Triton compilation of a test run, to tell a kernel compiled once
from one compiled again for each new test input (a launch value that specialises the kernel).

    KVLAB_COMPILE_LOG=out/ python -m pytest -p benchmarks.compile_log tests/kernels -m gpu -n 8
    python benchmarks/compile_log.py out/        # summary: compiles per kernel, seconds, repeats

Each pytest process (xdist worker) appends one line per compilation to ``<dir>/<worker>.tsv``:
the test that triggered it, the kernel, the seconds it took, and a hash of Triton's specialisation
key (argument types, constexpr values, alignment). A key compiled by several processes is normal
(each process has its own in-memory cache; the disk cache makes repeats cheap); many distinct keys
per kernel and test, growing with the number of seeds, is a recompilation per input.
"""

from __future__ import annotations

import collections
import hashlib
import os
import sys
import time

_state: dict = {"test": "", "start": 0.0}


def _log_path() -> str | None:
    folder = os.environ.get("KVLAB_COMPILE_LOG")
    if not folder:
        return None
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, os.environ.get("PYTEST_XDIST_WORKER", "main") + ".tsv")


def pytest_configure(config) -> None:  # noqa: ARG001 (pytest hook signature)
    path = _log_path()
    if path is None:
        return
    import triton

    def before(*, key, fn, **_) -> bool:
        _state["start"] = time.perf_counter()
        return False  # go on compiling

    def after(*, key, fn, **_) -> bool:
        seconds = time.perf_counter() - _state["start"]
        digest = hashlib.sha1(str(key).encode()).hexdigest()[:12]
        with open(path, "a") as f:
            f.write(f"{_state['test']}\t{fn.name}\t{seconds:.2f}\t{digest}\n")
        return False

    triton.knobs.runtime.jit_cache_hook = before
    triton.knobs.runtime.jit_post_compile_hook = after


def pytest_runtest_setup(item) -> None:
    _state["test"] = item.nodeid


def summarise(folder: str) -> str:
    """Compiles per kernel: count, seconds, distinct keys, and the tests that compiled most."""
    rows = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".tsv"):
            with open(os.path.join(folder, name)) as f:
                rows += [line.rstrip("\n").split("\t") for line in f if line.strip()]
    lines = [f"{len(rows)} compilations, {sum(float(r[2]) for r in rows):.0f} s in all"]
    by_kernel = collections.defaultdict(list)
    for test, kernel, secs, key in rows:
        by_kernel[kernel].append((test, float(secs), key))
    for kernel, items in sorted(by_kernel.items(), key=lambda kv: -sum(s for _, s, _ in kv[1])):
        keys = {k for _, _, k in items}
        lines.append(f"  {kernel}: {len(items)} compilations, {sum(s for _, s, _ in items):.0f} s, "
                     f"{len(keys)} distinct keys")
    by_test = collections.Counter((r[0].split("[")[0], r[1]) for r in rows)
    lines.append("tests compiling most (test function, kernel): " + "; ".join(
        f"{t} {k} x{n}" for (t, k), n in by_test.most_common(8)))
    return "\n".join(lines)


if __name__ == "__main__":
    print(summarise(sys.argv[1]))
