"""A real browser: serve the app, visit every page through the sidebar, move a slider, check nothing crashed.

Screenshots go to a temporary folder (or to SPECVIZ_SCREENSHOTS when set); the README's pictures come from
`bash scripts/screenshots.sh`, which takes the lecture tour with presets instead (scripts/lecture_shots.py).

The live pages (Compare, Medusa, EAGLE, Lookahead) time each method against plain decoding 3 times by default
(ui.live.DEFAULT_REPEATS); a widget that is not on screen keeps no state between pages, so the served app's
default is set to one run for this test (the server process sets it before Streamlit starts; the app's files
are not touched). A run with SPECVIZ_SCREENSHOTS set keeps the app's default."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
MAIN = '[data-testid="stMain"]'

pytestmark = [pytest.mark.browser, pytest.mark.real_model]

# the live pages' runs per method: one for the test, the app's own default when screenshots are kept
REPEATS = None if os.environ.get("SPECVIZ_SCREENSHOTS") else 1
# `streamlit run` in this process, after setting the live pages' default number of runs (None: the app's)
SERVE = (
    "import sys; import ui.live as live; from streamlit.web import cli; "
    "assert isinstance(live.DEFAULT_REPEATS, int), 'ui.live.DEFAULT_REPEATS moved: update tests/test_browser.py'; "
    "live.DEFAULT_REPEATS = {repeats} or live.DEFAULT_REPEATS; "
    "sys.argv = ['streamlit', *sys.argv[1:]]; sys.exit(cli.main())"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    """Where screenshots go: SPECVIZ_SCREENSHOTS when set (scripts/screenshots.sh), else a temporary folder."""
    folder = Path(os.environ.get("SPECVIZ_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def server():
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("chromium is missing; .ci/run should install it")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    port = free_port()
    args = ["run", "app.py", "--server.headless", "true", "--server.address", "127.0.0.1", "--server.port", str(port)]
    # no file watcher: a module edited under the running server is not reloaded (with the default put back)
    args += ["--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE.format(repeats=REPEATS), *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
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
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        pg = browser.new_page(viewport={"width": 1600, "height": 1000})
        pg.goto(server)
        pg.wait_for_selector('[data-testid="stSlider"]', timeout=300_000)
        box = pg.get_by_label("Max new tokens")
        box.fill("24")
        box.press("Enter")
        settle(pg)
        yield pg
        browser.close()


def settle(pg, timeout_ms: int = 600_000) -> None:
    """Wait until the script run finishes (the app root reports its script state)."""
    pg.wait_for_timeout(800)
    pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout_ms)
    pg.wait_for_timeout(800)


def no_exception(pg) -> None:
    assert pg.locator('[data-testid="stException"]').count() == 0


def nudge_first_slider(pg) -> None:
    """Move the first slider of the page's main area one notch (focus + arrow key; clicks can be covered)."""
    sliders = pg.locator(f'{MAIN} [role="slider"]')
    if sliders.count():
        sliders.first.focus()
        sliders.first.press("ArrowLeft")
        settle(pg)


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")


def test_home_decodes_in_a_browser(page, shots):
    page.get_by_role("button", name="Decode").click()
    page.wait_for_selector("text=forward passes", timeout=300_000)
    settle(page)
    no_exception(page)
    page.screenshot(path=str(shots / "home.png"), full_page=True)
    assert (shots / "home.png").stat().st_size > 20_000


def test_every_page_renders(page, shots):
    links = page.locator('[data-testid="stSidebarNav"] a')
    titles = [links.nth(i).inner_text().strip().splitlines()[-1] for i in range(links.count())]
    assert len(titles) >= 3
    live = []  # the pages that showed their Repeats input
    for i, title in enumerate(titles[1:], 1):
        links.nth(i).click()
        settle(page)
        if "Compare" in title:  # toggle two methods: one off, then on again
            toggles = page.locator(f'{MAIN} [data-testid="stCheckbox"]')
            for i in range(min(2, toggles.count())):
                toggles.nth(i).click()
                settle(page)
        nudge_first_slider(page)
        no_exception(page)
        repeats = page.get_by_label(re.compile(r"^Repeats"))
        if REPEATS and repeats.count():  # a live page: it ran once per method
            assert repeats.first.input_value() == str(REPEATS), title
            live.append(title)
        assert page.locator(".js-plotly-plot").count() >= 1, f"no figure on {title}"
        page.screenshot(path=str(shots / f"{slug(title)}.png"), full_page=True)
    assert live or not REPEATS, "no live page showed its Repeats input"
