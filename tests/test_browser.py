"""A real browser: serve the app, load it in headless chromium, decode, and check nothing crashed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
SHOTS = ROOT / "docs" / "screenshots"

pytestmark = [pytest.mark.browser, pytest.mark.real_model]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("chromium is missing; .ci/run should install it")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            time.sleep(0.5)
    yield url
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def page(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        pg = browser.new_page(viewport={"width": 1600, "height": 1000})
        pg.goto(server)
        yield pg
        browser.close()


def no_exception(pg) -> None:
    assert pg.locator('[data-testid="stException"]').count() == 0


def test_home_decodes_in_a_browser(page):
    page.wait_for_selector('[data-testid="stSlider"]', timeout=180_000)
    page.wait_for_selector(".js-plotly-plot", timeout=180_000)  # the latency curve
    box = page.get_by_label("Max new tokens")
    box.fill("24")
    box.press("Enter")
    page.wait_for_timeout(1000)
    page.get_by_role("button", name="Decode").click()
    page.wait_for_selector("text=forward passes", timeout=180_000)
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 2", timeout=60_000)
    page.wait_for_timeout(1500)
    no_exception(page)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "home.png"), full_page=True)
    assert (SHOTS / "home.png").stat().st_size > 20_000
