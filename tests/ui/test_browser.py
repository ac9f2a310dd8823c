"""The browser smoke: serve the app once, decode on home, visit every page through the sidebar and move a slider
(one test per page, so CI's durations say which page is slow), then walk the lesson's first stops by key presses
and back. Waits are on the app's own state (its script state, the lesson banner), never fixed sleeps. The whole
lesson by key presses, and several visitors at once, are in the soak command (scripts/soak.sh).

Screenshots go to a temporary folder (or to SPECVIZ_SCREENSHOTS when set); the README's pictures come from
`bash scripts/screenshots.sh`, which takes the lecture tour with presets instead (scripts/lecture_shots.py).

The live pages (Compare, Medusa, EAGLE, Lookahead) time each method against plain decoding 3 times by default
(ui.resources.DEFAULT_REPEATS); a widget that is not on screen keeps no state between pages, so the served app's
default is set to one run for this test (the server process sets it before Streamlit starts; the app's files
are not touched). A run with SPECVIZ_SCREENSHOTS set keeps the app's default."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
MAIN = '[data-testid="stMain"]'
STATE = '[data-testid="stApp"][data-test-script-state="{}"]'
WAIT_MS = 110_000  # a page on the real model at 12 tokens, one run per method, takes well under this

pytestmark = [pytest.mark.browser, pytest.mark.real_model]


def page_titles() -> list[str]:
    """The sidebar's page titles, in order: the pages' declarations' navigation (app.py's)."""
    from specviz.output.pages import NAVIGATION

    return [title for _file, title, _icon in NAVIGATION]


# the live pages' runs per method: one for the test, the app's own default when screenshots are kept
REPEATS = None if os.environ.get("SPECVIZ_SCREENSHOTS") else 1
# `streamlit run` in this process, after setting the live pages' default number of runs (None: the app's)
SERVE = (
    "import sys; import ui.resources as resources; from streamlit.web import cli; "
    "assert isinstance(resources.DEFAULT_REPEATS, int), 'DEFAULT_REPEATS moved: update tests/ui/test_browser.py'; "
    "resources.DEFAULT_REPEATS = {repeats} or resources.DEFAULT_REPEATS; "
    "sys.argv = ['streamlit', *sys.argv[1:]]; sys.exit(cli.main())"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chromium_or_skip() -> None:
    """Skip without chromium, except in CI (CI or SPECVIZ_FULL set: .ci/run sets it), where it must be there."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI") or os.environ.get("SPECVIZ_FULL"):
            pytest.fail("chromium is missing; scripts/setup.sh installs it")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    """Where screenshots go: SPECVIZ_SCREENSHOTS when set (scripts/screenshots.sh), else a temporary folder."""
    folder = Path(os.environ.get("SPECVIZ_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def server():
    chromium_or_skip()
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
    deadline = time.monotonic() + 120
    while True:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"the app did not come up at {url} (exit code {proc.poll()})")
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
        pg.wait_for_selector('[data-testid="stSlider"]', timeout=WAIT_MS)
        box = pg.get_by_label("Max new tokens")
        box.fill("12")
        box.press("Enter")
        settle(pg)
        yield pg
        browser.close()


def settle(pg, timeout_ms: int = WAIT_MS) -> None:
    """Wait until the rerun a key press or click started has finished: until the app reports it running (or a
    moment passes: a quick rerun may be over before we look), then until it reports it is not."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):
        pg.wait_for_selector(STATE.format("running"), timeout=1500)
    pg.wait_for_selector(STATE.format("notRunning"), timeout=timeout_ms)


def no_exception(pg) -> None:
    boxes = pg.locator('[data-testid="stException"]')
    assert boxes.count() == 0, boxes.first.inner_text()[:300]


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
    page.wait_for_selector("text=forward passes", timeout=WAIT_MS)
    settle(page)
    no_exception(page)
    page.screenshot(path=str(shots / "home.png"), full_page=True)
    assert (shots / "home.png").stat().st_size > 20_000


@pytest.mark.parametrize("title", page_titles()[1:])
def test_the_page_renders_and_answers_a_slider(page, shots, title):
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text=title).first.click()
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
    assert page.locator(".js-plotly-plot").count() >= 1, f"no figure on {title}"
    page.screenshot(path=str(shots / f"{slug(title)}.png"), full_page=True)


def test_the_lesson_walks_by_key_presses_and_back(page, server):
    """?lesson opens stop 1; PageDown twice reaches stop 3, each with a figure and no exception; PageUp and
    ArrowLeft (a clicker's other button) go back to stop 1."""
    page.goto(server + "/?lesson")
    for k, key in [(1, None), (2, "PageDown"), (3, "PageDown"), (2, "PageUp"), (1, "ArrowLeft")]:
        if key:
            page.keyboard.press(key)
        page.wait_for_selector(f"{MAIN} >> text=/Stop {k} of \\d+/", timeout=WAIT_MS)
        settle(page)
        page.wait_for_selector(f"{MAIN} .js-plotly-plot .main-svg", timeout=WAIT_MS)  # the stop's figure, drawn
        no_exception(page)
