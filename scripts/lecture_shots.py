"""Refresh docs/screenshots/: the lecture tour in a real browser, with presets only, each page at full length.

Serves the app on the built-in model, picks a shipped prompt where the methods win (the sidebar's prompt
preset, default "Code · Add type hints"), and visits every page in the tour order. On Medusa, EAGLE and
Lookahead it clicks the "as in the paper" preset, where the figures look as they do in the papers. Each page
is saved at full length, 1600 px wide (`<page>.png`); the slides (`<page>_slide.png`, one figure each) are
drawn from the recorded lesson pack by scripts/gallery_slides.py. Run both with `bash scripts/screenshots.sh`
(it sets up the venv first).
"""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
TOUR = ["Why parallel", "Timeline", "Medusa", "EAGLE", "Lookahead", "Acceptance", "Compare", "What data", "Lineage"]
PAPER_PAGES = ("Medusa", "EAGLE", "Lookahead")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve() -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true"]
    cmd += ["--server.port", str(port), "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, when_up(proc, port)


def when_up(proc: subprocess.Popen, port: int) -> str:
    """The served app's address once its health check answers (two minutes at most; then the server is stopped)."""
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                return url
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit("the app did not start within two minutes")


def settle(pg, timeout_ms: int = 900_000) -> None:
    pg.wait_for_timeout(800)
    pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout_ms)
    pg.wait_for_timeout(1500)


def pick_prompt(pg, label: str, tokens: int) -> None:
    """The sidebar's prompt preset (a selectbox) and the number of new tokens."""
    pg.get_by_role("combobox", name="Prompt preset").click()
    pg.get_by_role("option", name=label).click()
    settle(pg)
    new = pg.get_by_label("Max new tokens")
    new.fill(str(tokens))
    new.press("Enter")
    settle(pg)


def full_page(pg, path: Path) -> None:
    """The whole page: Streamlit scrolls inside its main area, so grow the window to the content's height."""
    height = pg.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    pg.set_viewport_size({"width": 1600, "height": min(12000, max(900, int(height)))})
    pg.wait_for_timeout(1500)
    pg.screenshot(path=str(path))
    pg.set_viewport_size({"width": 1600, "height": 900})
    pg.wait_for_timeout(500)


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")


def tour(url: str, out: Path, prompt: str, tokens: int, pages: list[str] = TOUR) -> list[str]:
    from playwright.sync_api import sync_playwright

    saved = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        pg = browser.new_page(viewport={"width": 1600, "height": 900})
        pg.goto(url)
        pg.wait_for_selector('[data-testid="stSlider"]', timeout=300_000)
        pick_prompt(pg, prompt, tokens)
        links = pg.locator('[data-testid="stSidebarNav"] a')
        names = [links.nth(i).inner_text().strip().splitlines()[-1] for i in range(links.count())]
        for want in pages:
            i = next((k for k, n in enumerate(names) if want.lower() in n.lower()), None)
            if i is None:
                continue
            links.nth(i).click()
            settle(pg)
            if want in PAPER_PAGES:
                pg.get_by_text("as in the paper", exact=True).first.click()
                settle(pg)
            if want == "Why parallel":
                pg.get_by_role("button", name="Decode").click()
                settle(pg)
            if pg.locator('[data-testid="stException"]').count():
                raise SystemExit(f"{names[i]} shows an exception")
            name = slug(names[i])
            full_page(pg, out / f"{name}.png")
            saved.append(f"{name}.png")
        browser.close()
    return saved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    ap.add_argument("--prompt", default="Code · Add type hints", help="the sidebar's prompt preset, as it is listed")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--pages", default=",".join(TOUR), help="which pages of the tour, e.g. Medusa,EAGLE")
    a = ap.parse_args()
    pages = [p.strip() for p in a.pages.split(",") if p.strip()]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    proc, url = serve()
    try:
        for name in tour(url, out, a.prompt, a.tokens, pages):
            print(out / name)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
