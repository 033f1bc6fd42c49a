"""The benchmark's timing warm-up and its CSV writer for comparison scripts (``kvlab.bench``).

The warm-up is checked on the CPU with the GPU synchronisation replaced by a no-op (the step is a
counter, the clock is read around the call); the writer by reading its file back.
"""

from __future__ import annotations

import time

import pytest
import torch

from kvlab.bench import measure


def test_warm_up_lasts_the_minimum_time(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(measure, "MIN_WARMUP_S", 0.05)
    calls = []
    start = time.perf_counter()
    measure.warm_up(lambda: calls.append(1), count=3)
    elapsed = time.perf_counter() - start
    assert elapsed >= 0.05
    assert len(calls) > 3  # three fast steps take far less than 50 ms: time, not count, ended it


def test_warm_up_runs_at_least_the_count(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(measure, "MIN_WARMUP_S", 0.0)
    calls = []
    measure.warm_up(lambda: (calls.append(1), time.sleep(0.002)), count=7)
    assert len(calls) == 7


def test_dict_rows_round_trip_in_column_order(tmp_path):
    """A comparison script's rows: header from the first row's keys, in order; read back as strings."""
    from kvlab.bench.results import read_csv, write_dict_rows

    path = tmp_path / "sub" / "ab.csv"
    write_dict_rows([{"scheme": "fp8_e4m3", "us": 1553.58, "same": True},
                     {"scheme": "int8_per_token_head", "us": 1636.1, "same": ""}], str(path))
    assert path.read_text().splitlines()[0] == "scheme,us,same"
    assert read_csv(str(path)) == [{"scheme": "fp8_e4m3", "us": "1553.58", "same": "True"},
                                   {"scheme": "int8_per_token_head", "us": "1636.1", "same": ""}]
    with pytest.raises(ValueError, match="no rows to write"):
        write_dict_rows([], str(tmp_path / "empty.csv"))
    assert not (tmp_path / "empty.csv").exists()
