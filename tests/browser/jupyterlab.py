"""Driving JupyterLab 4 in Debian's Chromium with Playwright: server, browser and notebook helpers.

The server is fresh per test session, serves a temporary copy of the notebooks (converted to .ipynb)
and reads an ``overrides.json`` that turns off the news toast, autosave (a long test must not write
outputs into the notebook under test) and cell windowing (every cell stays in the DOM).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

#: Overrides of JupyterLab's settings for tests.
LAB_OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
}

#: Chromium flags for a root user in a container without a GPU.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]

#: True once the notebook's kernel is attached and idle (the execution indicator alone says "idle"
#: before any kernel exists, and Run All would then open a kernel dialog).
KERNEL_READY_JS = """() => {
  const ind = document.querySelector('.jp-NotebookPanel .jp-Notebook-ExecutionIndicator');
  const bar = document.querySelector('#jp-main-statusbar');
  return ind && ind.getAttribute('data-status') === 'idle' && bar && /\\)\\s*\\|\\s*Idle/.test(bar.innerText);
}"""


def find_chromium() -> str | None:
    """Path of a Chromium binary: ``$CHROMIUM``, Debian's ``chromium`` or ``chromium-headless-shell``."""
    candidates = [os.environ.get("CHROMIUM"), shutil.which("chromium"),
                  shutil.which("chromium-headless-shell"),
                  "/usr/bin/chromium", "/usr/bin/chromium-headless-shell"]
    return next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """A JupyterLab server on a free port, serving ``root`` with test settings (or ``overrides``)."""

    def __init__(self, root: Path, home: Path, overrides: dict | None = None) -> None:
        self.root, self.home = root, home
        self.overrides = LAB_OVERRIDES if overrides is None else overrides
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = home / "jupyterlab.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 90.0) -> None:
        settings = self.home / "lab-app-settings"
        settings.mkdir(parents=True, exist_ok=True)
        (settings / "overrides.json").write_text(json.dumps(self.overrides, indent=2))
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={self.port}", "--ip=127.0.0.1",
               "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={self.root}",
               f"--LabServerApp.app_settings_dir={settings}", "--LabApp.expose_app_in_browser=True"]
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        env = dict(os.environ, HOME=str(self.home), JUPYTER_CONFIG_DIR=str(self.home / ".jupyter"),
                   JUPYTERLAB_SETTINGS_DIR=str(self.home / "lab-user-settings"),
                   JUPYTERLAB_WORKSPACES_DIR=str(self.home / "lab-workspaces"))
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT, cwd=self.root)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/status", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"JupyterLab did not answer within {timeout_s:.0f} s:\n{self.log_tail()}")

    def api(self, method: str, path: str) -> object:
        """Call the server's REST API (``/api/…``) as the page does: with the ``_xsrf`` cookie the lab
        page sets and its value in the ``X-XSRFToken`` header. Returns the decoded JSON (or ``None``)."""
        import http.cookiejar

        if getattr(self, "_opener", None) is None:
            jar = http.cookiejar.CookieJar()
            self._opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
            self._opener.open(f"{self.url}/lab", timeout=30).read()
            self._xsrf = next(c.value for c in jar if c.name == "_xsrf")
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         headers={"X-XSRFToken": self._xsrf})
        with self._opener.open(request, timeout=60) as response:
            body = response.read()
        return json.loads(body) if body else None

    def running_kernels(self) -> list[dict]:
        """The server's kernels (``GET /api/kernels``)."""
        return self.api("GET", "/api/kernels")

    def shutdown_kernels(self) -> int:
        """Shut down every session's kernel (``DELETE /api/sessions/…``, as closing a notebook with
        "shut down kernel" does), then any kernel without a session; returns how many were running."""
        running = len(self.running_kernels())
        for session in self.api("GET", "/api/sessions"):
            self.api("DELETE", f"/api/sessions/{session['id']}")
        for kernel in self.running_kernels():
            self.api("DELETE", f"/api/kernels/{kernel['id']}")
        return running

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text().splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if getattr(self, "_log", None):
            self._log.close()


def copy_notebooks(src: Path, dst: Path) -> None:
    """Copy the lesson and exercise ``.py`` files (``exercises/`` as a subfolder) and convert each to
    ``.ipynb`` next to it (outputs-free)."""
    import jupytext

    for folder, target in ((src, dst), (src / "exercises", dst / "exercises")):
        target.mkdir(parents=True, exist_ok=True)
        for py in sorted(folder.glob("*.py")):
            shutil.copy2(py, target / py.name)
            jupytext.write(jupytext.read(py), target / (py.stem + ".ipynb"))


def open_notebook(page, base_url: str, name: str, timeout_ms: int = 90_000) -> None:
    """Open ``name`` alone (``?reset``: the workspace does not reopen earlier tests' notebooks) and
    wait until its kernel is attached and idle."""
    page.goto(f"{base_url}/lab/tree/{name}?reset")
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").first.wait_for(state="visible", timeout=timeout_ms)
    page.wait_for_function(KERNEL_READY_JS, timeout=timeout_ms)


def run_all_cells(page, timeout_ms: int = 180_000) -> None:
    """Run ▸ Run All Cells, then wait until the last prompt shows a number and the kernel is idle."""
    from playwright.sync_api import expect

    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    expect(page.locator(".jp-CodeCell .jp-InputPrompt").last).to_have_text(re.compile(r"\[\d+\]"),
                                                                          timeout=timeout_ms)
    page.wait_for_function(KERNEL_READY_JS, timeout=timeout_ms)


def error_outputs(page) -> list[str]:
    """Text of every traceback shown in the open notebook."""
    stderr = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
    return page.locator(stderr).all_inner_texts()
