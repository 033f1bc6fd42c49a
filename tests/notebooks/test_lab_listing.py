"""JupyterLab's file browser lists each lesson and exercise once and keeps solutions/ out of sight:
``jupyter-config/`` (read through ``JUPYTER_CONFIG_PATH`` by ``make lab`` and Binder) hides the
jupytext ``.py`` twins and ``solutions/``, while the paired notebooks still open with their code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest
from traitlets.config import Config

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / "jupyter-config"


@pytest.fixture
def served(tmp_path):
    """A copy of notebooks/ as ``make notebooks`` leaves it: every .py with its .ipynb twin."""
    root = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", root, ignore=shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints"))
    for py in list(root.glob("*.py")) + list(root.glob("*/*.py")):
        jupytext.write(jupytext.read(py), py.with_suffix(".ipynb"))
    return root


def _contents_manager(root: Path):
    from jupyter_server.services.contents.filemanager import FileContentsManager
    from jupytext.sync_contentsmanager import build_sync_jupytext_contents_manager_class

    config = Config(json.loads((CONFIG_DIR / "jupyter_server_config.json").read_text()))
    manager_class = build_sync_jupytext_contents_manager_class(FileContentsManager)
    return manager_class(root_dir=str(root), config=config)


def _names(manager, path: str) -> list[str]:
    return sorted(item["name"] for item in manager.get(path, content=True)["content"])


def test_each_notebook_is_listed_once_and_solutions_are_hidden(served):
    manager = _contents_manager(served)
    lessons = sorted(p.stem for p in (ROOT / "notebooks").glob("*.py"))
    assert _names(manager, "") == sorted([*(f"{s}.ipynb" for s in lessons), "exercises"])
    exercises = sorted(p.stem for p in (ROOT / "notebooks" / "exercises").glob("*.py"))
    assert _names(manager, "exercises") == sorted([*(f"{s}.ipynb" for s in exercises), "TEACHERS.md"])


def test_hidden_twins_still_pair_and_solutions_open_by_path(served):
    manager = _contents_manager(served)
    lesson = sorted((ROOT / "notebooks").glob("*.py"))[0]
    model = manager.get(f"{lesson.stem}.ipynb", content=True)
    code = [c["source"] for c in model["content"]["cells"] if c["cell_type"] == "code"]
    from_py = [c.source for c in jupytext.read(lesson).cells if c.cell_type == "code"]
    assert code == from_py  # the notebook opened is the .py's content
    solution = manager.get("solutions/ex02_int8_per_token_head.ipynb", content=True)
    assert any("def quantize_int8" in c["source"] for c in solution["content"]["cells"])


def test_make_lab_and_binder_put_the_folder_on_the_config_path(tmp_path):
    makefile = (ROOT / "Makefile").read_text()
    assert 'JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter-config' in makefile
    assert 'JUPYTER_CONFIG_PATH="$PWD/jupyter-config' in (ROOT / "binder" / "start").read_text()
    env = dict(os.environ, JUPYTER_CONFIG_PATH=str(CONFIG_DIR), JUPYTER_CONFIG_DIR=str(tmp_path))
    shown = subprocess.run([sys.executable, "-m", "jupyterlab", "--show-config"], capture_output=True,
                           text=True, env=env, cwd=tmp_path, timeout=120)
    assert str(CONFIG_DIR / "jupyter_server_config.json") in shown.stdout, shown.stdout + shown.stderr
    assert "'solutions'" in shown.stdout and "'*.py'" in shown.stdout
