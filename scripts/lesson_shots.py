"""The lesson in a real browser, by key presses only: one screenshot per stop (1600 × 900), and the time it took.

Serves the app on the built-in model, opens it at ?lesson (the lesson's first stop), and presses PageDown (what a
presenter's clicker sends) until the last stop, waiting at each for its page to finish and its figure in focus
to be drawn. Each stop is saved as docs/screenshots/lesson/<nn>_<stop id>.png. Run it with
`.venv/bin/python scripts/lesson_shots.py [--out FOLDER] [--lesson FILE] [--size 1280x720] [--zoom 0.8]` (another
window size; the browser zoomed, as a lecturer fits the 1600 × 900 lesson on a 1280 × 720 screen);
tests/ui/test_browser.py runs the same tour.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: specviz from this checkout
CHROMIUM = "/usr/bin/chromium"
BANNER = ".st-key-lesson_banner"
SIZE = (1600, 900)  # the projector's screen; --size 1280x720 for a smaller one
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


def window(size: tuple[int, int], zoom: float = 1.0) -> dict:
    """A page's settings for a screen of `size` px with the browser zoomed to `zoom`: laid out on size / zoom CSS
    px, each drawn on `zoom` screen px (what Ctrl − does), so a screenshot is `size`."""
    return {"viewport": {"width": round(size[0] / zoom), "height": round(size[1] / zoom)}, "device_scale_factor": zoom}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(env: dict[str, str] | None = None, python: str = sys.executable) -> tuple[subprocess.Popen, str]:
    """`streamlit run app.py` on a free port; returns the process and its address once it answers."""
    port = free_port()
    cmd = [python, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.address", "127.0.0.1"]
    cmd += ["--server.port", str(port), "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})}
    )
    from scripts.lecture_shots import when_up  # one health wait for every script that serves the app

    return proc, when_up(proc, port)


WAIT_MS = 2_400_000  # a cold stop on a loaded 2-core CPU can take many minutes: its page runs every method


def settle(pg, timeout_ms: int = WAIT_MS) -> None:
    """Wait until the script run finishes (the app root reports its script state)."""
    pg.wait_for_timeout(800)
    pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout_ms)
    pg.wait_for_timeout(800)


def at_stop(pg, k: int, total: int, timeout_ms: int = WAIT_MS) -> None:
    """Wait for stop k (1-based) to be shown, its page to finish and its figure in focus to be drawn."""
    pg.wait_for_selector(f"{BANNER} >> text=Stop {k} of {total}", timeout=timeout_ms)
    settle(pg, timeout_ms)
    pg.wait_for_selector(f"{BANNER} .js-plotly-plot .main-svg", timeout=timeout_ms)
    pg.wait_for_timeout(1200)  # plotly's transitions


def problems(pg) -> list[str]:
    """Exceptions, errors and warnings on the page (the stop's own 'no figure' warning among them)."""
    found = pg.locator('[data-testid="stException"], [data-testid="stAlertContentError"]')
    texts = [found.nth(i).inner_text()[:200] for i in range(found.count())]
    missing = pg.locator(f"{BANNER} >> text=The page drew no figure")
    return texts + ([missing.first.inner_text()[:200]] if missing.count() else [])


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def builds_of(stops: list[str]) -> list[int]:
    """Each stop's clicks (its figures, then its four questions) in the lesson these ids are from (1 if unknown)."""
    from specviz.output.lesson.model import LessonError, load_lesson

    try:
        by_id = {s.id: s.clicks for s in load_lesson().stops}
    except LessonError:
        by_id = {}
    return [by_id.get(i, 1) for i in stops]


def walk_builds(pg, out: Path, k: int, total: int, frames: int, name: str, key: str) -> list[tuple[str, float]]:
    """A stop's clicks after its first figure, by key presses: a screenshot of each ('<nn>_<id>_b2.png', …)."""
    done = []
    for b in range(2, frames + 1):
        began = time.monotonic()
        pg.keyboard.press(key)
        pg.wait_for_selector(f"{BANNER} >> text=Stop {k} of {total} · {b} of {frames}", timeout=WAIT_MS)
        settle(pg)
        pg.wait_for_selector(f"{BANNER} .js-plotly-plot .main-svg", timeout=WAIT_MS)
        pg.wait_for_timeout(1200)
        if bad := problems(pg):
            raise AssertionError(f"stop {k}, build {b}: {bad}")
        shot = name.replace(".png", f"_b{b}.png")
        pg.screenshot(path=str(out / shot))
        done.append((shot, time.monotonic() - began))
    return done


def tour(
    url: str,
    out: Path,
    stops: list[str],
    key: str = "PageDown",
    back: tuple[str, ...] = (),
    start: int = 0,
    size: tuple[int, int] = SIZE,
    zoom: float = 1.0,
) -> list[tuple[str, float]]:
    """Every stop by key presses only (from stop `start`, 0-based), a screenshot of each and of each of its builds;
    (file, seconds until drawn) per figure. Then each key of `back` (PageUp, ArrowLeft: a clicker's other button)
    goes one back."""
    from playwright.sync_api import sync_playwright

    done, frames = [], builds_of(stops)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(**window(size, zoom))
        began = time.monotonic()
        pg.goto(url + (f"/?lesson={stops[start]}" if start else "/?lesson"))
        for k, stop in enumerate(stops, 1):
            if k <= start:
                continue
            if k > start + 1:
                began = time.monotonic()
                pg.keyboard.press(key)
            at_stop(pg, k, len(stops))
            took = time.monotonic() - began
            if bad := problems(pg):
                raise AssertionError(f"stop {k} ({stop}): {bad}")
            name = f"{k:02d}_{slug(stop)}.png"
            pg.screenshot(path=str(out / name))
            done.append((name, took))
            done += walk_builds(pg, out, k, len(stops), frames[k - 1], name, key)
        for k, press in enumerate(back, 1):
            pg.keyboard.press(press)
            at_stop(pg, len(stops) - k, len(stops))
        browser.close()
    return done


def retake(
    url: str, out: Path, stops: list[str], only: list[str], size: tuple[int, int] = SIZE, zoom: float = 1.0
) -> list[tuple[str, float]]:
    """Some stops again, each opened at ?lesson=<id> (after a change to them) and its builds clicked through,
    saved under the tour's names."""
    from playwright.sync_api import sync_playwright

    done, frames = [], builds_of(stops)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for stop in only:
            k, start = stops.index(stop) + 1, time.monotonic()
            pg = browser.new_page(**window(size, zoom))
            pg.goto(f"{url}/?lesson={stop}")
            at_stop(pg, k, len(stops))
            if bad := problems(pg):
                raise AssertionError(f"stop {k} ({stop}): {bad}")
            name = f"{k:02d}_{slug(stop)}.png"
            pg.screenshot(path=str(out / name))
            done.append((name, time.monotonic() - start))
            done += walk_builds(pg, out, k, len(stops), frames[k - 1], name, "PageDown")
            pg.close()
        browser.close()
    return done


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots" / "lesson"))
    ap.add_argument("--lesson", default="", help="a lesson file (default: the shipped one, or $SPECVIZ_LESSON)")
    ap.add_argument("--start", default="", help="begin the tour at this stop (its id) instead of the first")
    ap.add_argument("--only", default="", help="retake these stops (ids, comma-separated), each opened by its address")
    ap.add_argument("--size", default="1600x900", help="the browser window, WIDTHxHEIGHT (default 1600x900)")
    ap.add_argument("--zoom", type=float, default=1.0, help="the browser's zoom (0.8: a 1280x720 screen at 80%%)")
    a = ap.parse_args()
    size = (int(a.size.lower().split("x")[0]), int(a.size.lower().split("x")[1]))
    from specviz.output.lesson.model import ENV, load_lesson

    lesson = load_lesson(a.lesson or None)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    proc, url = serve({ENV: lesson.source})
    try:
        ids = [s.id for s in lesson.stops]
        only = [x for x in a.only.split(",") if x]
        begin = ids.index(a.start) if a.start else 0
        if only:
            shots = retake(url, out, ids, only, size, a.zoom)
        else:
            shots = tour(url, out, ids, start=begin, size=size, zoom=a.zoom)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    for name, took in shots:
        print(f"{out / name}  {took:6.1f} s")
    print(f"{len(shots)} stops in {sum(t for _, t in shots):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
