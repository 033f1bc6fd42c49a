"""What the kernel sends for a figure's 2-D arrays (:mod:`kvlab.widgets.grid_transport`): one binary
buffer of the values in row order and the row length, instead of nested lists. The page side is
checked in ``tests/browser/test_grid_transport.py``."""

from __future__ import annotations

import json

import comm
import comm.base_comm
import numpy as np
import plotly.graph_objects as go

from kvlab.widgets.grid_transport import GRID_KEY, grid_to_js
from kvlab.widgets.plotly_bundle import SharedBundleFigureWidget


def _flat_values(sent: dict) -> np.ndarray:
    spec = sent[GRID_KEY]
    return np.frombuffer(bytes(spec["buffer"]), dtype=spec["dtype"])


def test_a_2d_array_travels_as_its_values_in_row_order_with_the_row_length():
    rng = np.random.default_rng()
    grid = rng.normal(size=(5, 3)).astype(np.float32)
    for array in (grid, np.asfortranarray(grid), grid.T.copy().T):  # any memory layout
        sent = grid_to_js({"z": array})["z"]
        assert sent["columns"] == 3 and sent[GRID_KEY]["shape"] == (15,)
        values = _flat_values(sent)
        assert values.dtype == np.float32
        # row r, column c of the grid is element 3 r + c of the buffer
        for r, c in ((0, 0), (0, 2), (4, 1), (2, 2)):
            assert values[3 * r + c] == grid[r, c]
    doubles = rng.normal(size=(2, 4))
    assert _flat_values(grid_to_js([doubles])[0]).tolist() == [*doubles[0], *doubles[1]]


def test_other_values_are_sent_as_plotlys_serializer_sends_them():
    column = np.arange(6, dtype=np.float32)
    sent = grid_to_js({"x": column, "big": np.arange(6, dtype=np.int64).reshape(2, 3), "name": "K",
                       "nested": [{"y": [1, 2]}], "empty": np.zeros((0, 3))})
    assert sent["x"]["dtype"] == "float32" and bytes(sent["x"]["buffer"]) == column.tobytes()
    assert sent["big"] == [[0, 1, 2], [3, 4, 5]]  # no typed array for 64-bit integers in JavaScript
    assert sent["name"] == "K" and sent["nested"] == [{"y": [1, 2]}] and sent["empty"] == []


def test_a_figure_widget_sends_a_heatmaps_grid_as_one_buffer_per_array(monkeypatch):
    sent: list[tuple[dict, list]] = []

    class RecordingComm(comm.base_comm.BaseComm):
        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            sent.append((data or {}, list(buffers or [])))

    monkeypatch.setattr(comm, "create_comm", RecordingComm)
    z = np.random.default_rng().normal(size=(64, 32))
    figure = SharedBundleFigureWidget()
    sent.clear()
    figure.add_trace(go.Heatmap(z=z))
    adds = [(d, b) for d, b in sent if "_py2js_addTraces" in d.get("state", {})
            and d["state"]["_py2js_addTraces"]]
    assert len(adds) == 1
    state, buffers = adds[0]
    trace = state["state"]["_py2js_addTraces"]["trace_data"][0]
    assert trace["z"]["columns"] == 32 and len(buffers) == 1
    assert np.array_equal(np.frombuffer(bytes(buffers[0]), dtype=np.float64).reshape(64, 32), z)
    assert len(json.dumps(state)) < 2_000  # no nested lists of numbers
    # the widget itself holds the real 2-D array (what any other renderer draws)
    assert np.array_equal(figure.data[0].z, z)
