"""The package as users install it: every module shipped, the core importable without Triton or
plotly, and the console script working."""

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "kvlab").rglob("__init__.py")}
    found |= {"kvlab.kernels"}  # installed from kernels/
    # folders that hold only data files the package reads (no __init__.py) are listed as well
    found |= {".".join(p.relative_to(ROOT).parts) for p in (ROOT / "kvlab").rglob("data")
              if p.is_dir() and not (p / "__init__.py").exists() and any(p.glob("*.txt"))}
    assert listed == found, f"missing from pyproject: {found - listed}; listed but absent: {listed - found}"


def test_the_core_imports_without_triton_or_plotly():
    code = ("import sys, kvlab, kvlab.quantization, kvlab.cache, kvlab.reference; "
            "print(sorted(m for m in ('triton', 'plotly', 'ipywidgets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "[]"


def test_kvlab_info_reports_versions_device_and_triton_mode():
    exe = pathlib.Path(sys.executable).with_name("kvlab")
    out = subprocess.run([str(exe), "info", "--json"], capture_output=True, text=True, check=True)
    facts = json.loads(out.stdout)
    import torch

    assert facts["torch"] == torch.__version__
    assert facts["python"] == ".".join(map(str, sys.version_info[:3]))
    mode = facts["triton_mode"]
    if torch.cuda.is_available():
        assert mode.startswith("compiled")
    else:
        assert mode.startswith(("interpreter", "unavailable"))
        assert "no CUDA GPU" in facts["device"]


def test_unknown_command_and_missing_command_exit_2():
    exe = pathlib.Path(sys.executable).with_name("kvlab")
    assert subprocess.run([str(exe)], capture_output=True).returncode == 2
    bad = subprocess.run([str(exe), "no-such-command"], capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
