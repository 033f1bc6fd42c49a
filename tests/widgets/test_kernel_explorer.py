"""The kernel explorer: reference numbers live, the Triton run in the background, the GPU CSV plotted."""

from __future__ import annotations

import csv
import threading
from pathlib import Path

import pytest
import torch

from kvlab.analysis.kernel_check import build_case
from kvlab.widgets import kernel_explorer as ke
from kvlab.widgets.kernel_explorer import build_kernel_explorer
from tests.widgets.figure_checks import assert_well_formed

SAMPLE_CSV = Path(__file__).parent / "fixtures" / "kernel_bench_sample.csv"


@pytest.fixture
def explorer():
    return build_kernel_explorer(benchmark_csv=SAMPLE_CSV, debounce_s=0)


def _series(fig, name_start):
    return next(t for t in fig.data if t.name.startswith(name_start))


def _plain_attention(q, keys, values, query_lens):
    """Causal softmax attention per sequence, written out with loops (float64)."""
    out, row = [], 0
    for k, v, n in zip(keys, values, query_lens, strict=True):
        k, v = k.double(), v.double()
        hq, hkv = q.shape[1], k.shape[1]
        for t in range(n):
            pos = k.shape[0] - n + t
            heads = []
            for h in range(hq):
                s = k[: pos + 1, h // (hq // hkv)] @ q[row, h].double() / q.shape[2] ** 0.5
                heads.append(torch.softmax(s, 0) @ v[: pos + 1, h // (hq // hkv)])
            out.append(torch.stack(heads))
            row += 1
    return torch.stack(out)


def test_format_error_per_head_matches_plain_attention_over_the_dequantized_cache(explorer):
    explorer.controls["scheme"].value = "fp8_per_token_head"
    case = ke.KernelCase(scheme="fp8_per_token_head", context=64, num_seqs=2, query_len=1)
    ex = build_case(case)
    lens = ex.batch.seq_lens_list
    deq = [ex.cache.gather(ex.batch.block_table[i], n) for i, n in enumerate(lens)]
    ref = _plain_attention(ex.query, [k for k, _ in deq], [v for _, v in deq], ex.batch.query_lens)
    truth = _plain_attention(ex.query, ex.keys, ex.values, ex.batch.query_lens)
    expected = torch.linalg.vector_norm(ref - truth, dim=(0, 2)) / torch.linalg.vector_norm(truth, dim=(0, 2))
    shown = _series(explorer.figures["heads"], "format").y
    assert list(shown) == pytest.approx(expected.tolist(), rel=1e-9)
    assert len(explorer.figures["heads"].data) == 1  # no kernel series before a run


@pytest.mark.interpreter
def test_triton_run_in_the_background_adds_the_kernel_error(explorer):
    from kvlab.kernels import paged_attention

    explorer.run_triton()
    assert explorer.controls["run"].disabled
    explorer.background.join(120)
    assert not explorer.controls["run"].disabled and explorer.background.progress.value == 100.0
    case = ke.KernelCase()
    ex = build_case(case)
    out = paged_attention(ex.query, ex.cache, ex.batch).double()
    ref = ke._reference(case).reference
    expected = torch.linalg.vector_norm(out - ref, dim=(0, 2)) / torch.linalg.vector_norm(ref, dim=(0, 2))
    kernel = _series(explorer.figures["heads"], "kernel")
    assert list(kernel.y) == pytest.approx(expected.tolist(), rel=1e-9)
    assert max(kernel.y) < 5e-3  # fp16 arithmetic against float64, far below the format's error
    assert "Triton vs reference" in explorer.status.message


def test_controls_stay_live_while_the_kernel_runs_and_a_stale_result_is_not_shown(explorer, monkeypatch):
    release, started = threading.Event(), threading.Event()

    def slow_kernel(run, case):
        started.set()
        release.wait(30)
        return run.reference.to(torch.float16)  # stands in for the kernel's output

    monkeypatch.setattr(ke, "run_triton", slow_kernel)
    explorer.run_triton()
    assert started.wait(10) and explorer.background.running
    assert explorer.status.level == "busy"
    before = list(_series(explorer.figures["heads"], "format").y)
    explorer.controls["context"].value = 128  # handled now, while the worker is blocked
    assert explorer.background.running
    assert list(_series(explorer.figures["heads"], "format").y) != before
    release.set()
    explorer.background.join(10)
    assert "other settings" in explorer.status.message  # the result was for context 64
    assert len(explorer.figures["heads"].data) == 1
    explorer.controls["context"].value = 64
    assert len(explorer.figures["heads"].data) == 2


def test_a_failing_run_is_reported_in_the_widget(explorer, monkeypatch):
    def broken(run, case):
        raise RuntimeError("0 active drivers")

    monkeypatch.setattr(ke, "run_triton", broken)
    explorer.run_triton()
    explorer.background.join(10)
    assert explorer.status.level == "error" and "0 active drivers" in explorer.status.message
    assert not explorer.controls["run"].disabled


def test_window_not_smaller_than_the_context_is_refused_with_a_message(explorer):
    explorer.controls["context"].value = 32
    explorer.controls["sliding_window"].value = 64
    assert explorer.status.level == "error" and "sliding_window" in explorer.status.message


def _csv_rows(**where):
    with SAMPLE_CSV.open() as fh:
        return [r for r in csv.DictReader(fh) if all(r[k] == str(v) for k, v in where.items())]


def test_benchmark_figures_plot_the_csv_and_its_bandwidth_floor(explorer):
    assert explorer.controls["bench_batch"].value == 16
    for scheme in ("bfloat16", "int8_per_token_head", "fp8_e4m3"):
        rows = sorted(_csv_rows(kind="decode", batch=16, scheme=scheme), key=lambda r: int(r["context"]))
        time = next(t for t in explorer.figures["bench_time"].data if t.name == scheme)
        assert list(time.x) == [int(r["context"]) for r in rows]
        assert list(time.y) == [float(r["median_us"]) for r in rows]
        floor = next(t for t in explorer.figures["bench_time"].data
                     if t.name == f"{scheme}: bandwidth floor")
        floor_us = [int(r["bytes"]) / float(r["copy_bw_gbps"]) / 1e3 for r in rows]  # bytes / GB/s → µs
        assert list(floor.y) == pytest.approx(floor_us)
        bw = next(t for t in explorer.figures["bench_bandwidth"].data if t.name == scheme)
        assert list(bw.y) == [float(r["pct_copy_bw"]) for r in rows]
    explorer.controls["bench_batch"].value = 1
    assert [t.name for t in explorer.figures["bench_bandwidth"].data] == ["bfloat16"]
    explorer.controls["bench_kind"].value = "prefill"
    assert [t.name for t in explorer.figures["bench_bandwidth"].data] == ["bfloat16"]


def test_without_results_the_explorer_says_how_to_make_them():
    explorer = build_kernel_explorer(benchmark_csv=[], debounce_s=0)
    assert explorer.bench_status.level == "note" and "kvlab bench" in explorer.bench_status.message
    assert explorer.figures["bench_time"].layout.annotations[0].text.startswith("no benchmark rows")


def test_every_figure_is_labelled(explorer):
    for name, fig in explorer.figures.items():
        assert_well_formed(fig, name)
