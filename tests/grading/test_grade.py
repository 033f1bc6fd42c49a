"""``kvlab grade`` on planted submissions: a right, a wrong, a crashing and a looping solution, an
untouched stub, a top-level endless loop and a notebook that is not valid JSON.

Each student's notebook is exercise 2 with the stub cell replaced by that student's code; the
expected statuses and cases follow from the code planted (worked out per student below)."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import nbformat
import pytest

from kvlab.cli.main import main
from kvlab.exercises.catalogue import get_exercise
from kvlab.grading import find_submissions

from ..exercises.notebook_cells import ROOT, exercise_path, read, tagged, with_solutions

pytestmark = pytest.mark.notebooks

EX2 = get_exercise(2)

WRONG = """import torch

def quantize_int8(x):
    xf = x.float()
    scales = torch.clamp(xf.abs().amax(dim=-1) / 127.0, min=1e-6)
    y = torch.clamp(xf * (1.0 / scales).unsqueeze(-1), -128.0, 127.0)
    return torch.trunc(y).to(torch.int8), scales
"""
CRASHING = """def quantize_int8(x):
    parts = [x]
    return parts[3]
"""
LOOPING = """def quantize_int8(x):
    n = 0
    while n >= 0:
        n += 1
"""
TOP_LEVEL_LOOP = """while True:
    pass

def quantize_int8(x):
    return x
"""


def _student_notebook(stub_source: str | None) -> nbformat.NotebookNode:
    nb = read(exercise_path(EX2))
    if stub_source is not None:
        tagged(nb, "stub")[0].source = stub_source
    return nb


def _plant(root: Path) -> None:
    """nbgrader's layout for most (student/assignment/notebook), flat for some."""
    notebooks = {
        "alice": with_solutions(EX2),
        "bob": _student_notebook(WRONG),
        "carol": _student_notebook(CRASHING),
        "dave": _student_notebook(LOOPING),
        "frank": _student_notebook(None),  # the untouched stub
        "gina": _student_notebook(TOP_LEVEL_LOOP),
    }
    for student, nb in notebooks.items():
        folder = root / student / ("ps2" if student in ("alice", "carol", "gina") else "")
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, folder / f"{EX2.slug}.ipynb")
    erin = root / "erin" / "ps2"
    erin.mkdir(parents=True)
    (erin / f"{EX2.slug}.ipynb").write_text(
        '{"cells": [ {"cell_type": "code", "source": "x = 1"'
    )  # cut short
    (root / "alice" / "ps2" / ".ipynb_checkpoints").mkdir()
    nbformat.write(with_solutions(EX2), root / "alice" / "ps2" / ".ipynb_checkpoints" / f"{EX2.slug}.ipynb")
    (root / "alice" / "notes.ipynb").write_text("{}")  # not an exercise: ignored


def test_find_submissions_follows_nbgrader_layout(tmp_path):
    _plant(tmp_path)
    found = find_submissions(tmp_path)
    assert [(s.student, s.exercise.number) for s in found] == [
        (name, 2) for name in ("alice", "bob", "carol", "dave", "erin", "frank", "gina")
    ]
    with pytest.raises(ValueError, match="one folder per student"):
        find_submissions(tmp_path / "alice" / "ps2")


def test_grade_writes_one_row_per_student_exercise_check(tmp_path, monkeypatch, capfd):
    _plant(tmp_path / "submitted")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    out = tmp_path / "grades.csv"
    code = main(
        [
            "grade",
            str(tmp_path / "submitted"),
            "--out",
            str(out),
            "--case-time-limit",
            "1",
            "--cell-time-limit",
            "25",
            "--seed",
            "5",
        ]
    )
    assert code == 0
    rows = {r["student"]: r for r in csv.DictReader(out.open())}
    assert sorted(rows) == ["alice", "bob", "carol", "dave", "erin", "frank", "gina"]
    assert all(r["exercise"] == "2" and r["check"] == "quantize_int8" for r in rows.values())

    assert rows["alice"]["status"] == "passed" and rows["alice"]["message"].startswith("✓ quantize_int8:")
    # truncation is wrong in general: a random case is named, with the truncation hint the student saw
    assert rows["bob"]["status"] == "failed" and rows["bob"]["case"].startswith("random case ")
    assert "truncation" in rows["bob"]["message"]
    # parts[3] on a one-element list: IndexError on every case, so a random case is named
    assert rows["carol"]["status"] == "error" and rows["carol"]["case"].startswith("random case ")
    assert "IndexError" in rows["carol"]["message"] and "return parts[3]" in rows["carol"]["message"]
    assert rows["dave"]["status"] == "timeout" and rows["dave"]["case"] == "all-zero head vector"
    assert "did not return within 1 s" in rows["dave"]["message"]
    assert rows["erin"]["status"] == "error" and "could not be read" in rows["erin"]["message"]
    assert rows["frank"]["status"] == "failed" and "not written yet" in rows["frank"]["message"]
    assert rows["gina"]["status"] == "timeout" and "ran longer than 25 s" in rows["gina"]["message"]
    for row in rows.values():
        assert "Traceback" not in row["message"]

    captured = capfd.readouterr()  # the file descriptors: the kernels' own processes write there too
    printed = captured.out
    assert "IPKernelApp" not in captured.err  # no kernel start-up chatter between the grading lines
    assert "7 rows (7 notebooks)" in printed
    assert "1/1" in printed and "0/1" in printed  # alice's and the others' lines of the student table
    assert "1/7" in printed  # the exercise table: one student of seven passed quantize_int8
