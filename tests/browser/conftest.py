"""Fixtures of the browser tests: the session's real reference study (tests/reference_study.py),
`tuner dashboard` serving it, and a page of Debian's Chromium driven by Playwright (no browser
download: `make browser` installs Chromium)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from reference_study import ENV
from tuner.engine.server import free_port

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
# What works on this closed network: without the background-networking flags Chromium keeps
# trying hosts it cannot reach. Playwright gives every launch a fresh, empty profile itself
# (it refuses --user-data-dir in launch()).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@dataclass(frozen=True)
class Dashboard:
    base_url: str
    db_url: str
    log_dir: Path
    model: str
    study: dict  # what `tuner optimize --json` printed


def _stop_group(process: subprocess.Popen) -> None:
    """SIGTERM to the dashboard's process group, SIGKILL if it is still there after 15 s."""
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _wait_until_up(process: subprocess.Popen, base_url: str, log: Path,
                   timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"tuner dashboard exited with code {process.returncode}:\n"
                        f"{log.read_text(errors='replace')[-3000:]}")
        try:
            httpx.get(base_url + "/", timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.3)
    pytest.fail(f"tuner dashboard did not answer on {base_url} within {timeout:.0f} s:\n"
                f"{log.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="session")
def dashboard(tmp_path_factory, reference_study) -> Dashboard:
    """`tuner dashboard` on the session's reference study (tests/reference_study.py: one real
    study over every method)."""
    tmp = tmp_path_factory.mktemp("dashboard")
    db_url = reference_study.db_url
    model = str(reference_study.models / "target")
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    log = tmp / "dashboard.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "tuner.cli", "dashboard", "--db", db_url, "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env=ENV, cwd=ROOT, start_new_session=True)
    try:
        _wait_until_up(process, base_url, log)
        yield Dashboard(base_url=base_url, db_url=db_url, log_dir=reference_study.log_dir,
                        model=model, study=reference_study.answer)
    finally:
        _stop_group(process)


# Module scope, not session: Playwright's sync API keeps an event loop running in this thread
# while it is open, and later tests (the replay client) call asyncio.run.
@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make browser` (installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Page:
    """A Playwright page with what it saw: every request's URL and every uncaught page error."""

    page: object
    requests: list[str]
    errors: list[str]


@pytest.fixture
def page(browser, dashboard, request) -> Page:
    """A fresh 1280x900 context; its screenshot goes to test-artifacts/<test>.png, pass or fail."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    # As in a person's browser, the page may write to the clipboard (and the test reads it back).
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=dashboard.base_url)
    context.set_default_timeout(15_000)
    playwright_page = context.new_page()
    seen = Page(page=playwright_page, requests=[], errors=[])
    playwright_page.on("request", lambda r: seen.requests.append(r.url))
    playwright_page.on("pageerror", lambda e: seen.errors.append(str(e)))
    try:
        yield seen
    finally:
        try:
            ARTIFACTS.mkdir(exist_ok=True)
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
            playwright_page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        finally:
            context.close()
