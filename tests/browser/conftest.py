"""Fixtures of the browser tests: a JupyterLab server on a copy of the notebooks and a Chromium page.

Without Chromium (or Playwright) the tests are skipped with the reason, unless
``KVLAB_REQUIRE_BROWSER=1`` is set (as CI does), in which case they fail.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.jupyterlab import CHROMIUM_ARGS, LabServer, copy_notebooks, find_chromium

ROOT = Path(__file__).resolve().parents[2]


def _unavailable(reason: str):
    if os.environ.get("KVLAB_REQUIRE_BROWSER") == "1":
        pytest.fail(f"KVLAB_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = find_chromium()
    if path is None:
        _unavailable("Chromium is not installed (apt-get install chromium, or set CHROMIUM=/path/to/it)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _unavailable("the playwright package is not installed (pip install 'kvlab[dev]')")
    return path


# Module scope, not session: Playwright's sync API keeps an asyncio loop marked as running in the main
# thread while it is open, which later tests (and widgets deciding how to schedule updates) would see.
@pytest.fixture(scope="module")
def lab_server(tmp_path_factory, chromium_path):
    home = tmp_path_factory.mktemp("lab-home")
    root = tmp_path_factory.mktemp("lab-root")
    copy_notebooks(ROOT / "notebooks", root)
    server = LabServer(root, home)
    server.start()
    yield server
    try:
        left = server.running_kernels()
    finally:
        server.stop()
    assert left == [], f"kernels left running after the tests: {left}"


@pytest.fixture
def kernel_shut_down(lab_server):
    """Shut the test's notebook kernel down after its checks (each test opens one notebook), and
    check that none is left running."""
    yield
    assert lab_server.shutdown_kernels() <= 1, "a test started more than one kernel"
    assert lab_server.running_kernels() == []


@pytest.fixture(scope="module")
def browser(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, kernel_shut_down):
    context = browser.new_context(viewport={"width": 1400, "height": 1800})
    pg = context.new_page()
    pg.console_errors = []
    pg.on("console", lambda m: pg.console_errors.append(m.text) if m.type == "error" else None)
    # an unhandled rejection (anywidget's "Failed to initialize model.") is a page error, not a console one
    pg.on("pageerror", lambda e: pg.console_errors.append(f"uncaught: {e}"))
    yield pg
    context.close()
