"""A load test: N browser sessions on one served app at once, each visiting the pages and running the methods.

Serves the app once (the live pages at one run per method, as tests/ui/test_browser.py does), opens N sessions in
headless chromium (one browser context each, so N Streamlit sessions), and drives them together until the time is
up. Session i starts on page i, so the sessions sit on different pages; on each page it runs what the page runs
(Decode on the home page, two method toggles on Compare, the first slider elsewhere). Each session has its own
prompt and token budget, checked after every page, so answers from one session cannot show in another.

Recorded: sessions, minutes, pages visited (per page and session), the server's peak RSS, the exceptions (Streamlit's
exception boxes on the page and tracebacks in the server's log), the load average (the CPU is shared), and the
provenance. Usage:

    .venv/bin/python scripts/load_test.py --sessions 4 --minutes 3 --out docs/load_test.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: scripts.lecture_shots from this checkout
CHROMIUM = "/usr/bin/chromium"
NAV = '[data-testid="stSidebarNav"] a'
SIDEBAR = '[data-testid="stSidebar"]'
MAIN = '[data-testid="stMain"]'
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
RUNNING = '[data-testid="stApp"][data-test-script-state="running"]'
# `streamlit run` in this process, the live pages at one run per method (tests/ui/test_browser.py's SERVE)
SERVE = (
    "import sys; import ui.resources as resources; from streamlit.web import cli; resources.DEFAULT_REPEATS = 1; "
    "sys.argv = ['streamlit', *sys.argv[1:]]; sys.exit(cli.main())"
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)\b")
FRUITS = ("apples", "pears", "plums", "figs", "cherries", "grapes", "limes", "dates")


@dataclass
class Visit:
    """One page visit of one session."""

    session: int
    page: str
    seconds: float
    exceptions: int  # Streamlit exception boxes on the page afterwards
    kept: bool  # the session's own prompt and token budget still in its sidebar
    error: str = ""  # a browser-side failure (a timeout), not the app's
    detail: str = ""  # the first exception box's text


@dataclass
class Monitor:
    """The server's RSS (with any children) and the load average, sampled while the test runs."""

    pid: int
    rss_mb: list[float] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        proc = psutil.Process(self.pid)
        while not self.stop.is_set():
            try:
                rss = proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
            except psutil.Error:
                return
            self.rss_mb.append(rss / 2**20)
            self.load.append(os.getloadavg()[0])
            self.stop.wait(0.5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(app_dir: Path, log: Path) -> tuple[subprocess.Popen, str]:
    """The app on a free port, its output in `log`; waits until it answers."""
    port = free_port()
    args = ["run", "app.py", "--server.headless", "true", "--server.address", "127.0.0.1", "--server.port", str(port)]
    args += ["--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    out = log.open("w")
    proc = subprocess.Popen([sys.executable, "-c", SERVE, *args], cwd=app_dir, stdout=out, stderr=subprocess.STDOUT)
    from scripts.lecture_shots import when_up  # one health wait for every script that serves the app

    return proc, when_up(proc, port)


async def settle(pg, timeout_ms: int = 900_000) -> None:
    """Wait until the session's script run has started (up to 10 s: on a loaded CPU the rerun a click asks for can
    start seconds later, and a wait for 'not running' alone returns at once) and then finished."""
    with contextlib.suppress(Exception):  # a run quicker than the polling is over already
        await pg.wait_for_selector(RUNNING, timeout=10_000)
    await pg.wait_for_selector(IDLE, timeout=timeout_ms)
    await pg.wait_for_timeout(500)


async def own_settings(pg, prompt: str, tokens: int) -> None:
    """The session's own prompt and token budget in the sidebar."""
    box = pg.locator(SIDEBAR).get_by_label("Prompt", exact=True)
    await box.fill(prompt)
    await box.press("Control+Enter")
    await settle(pg)
    budget = pg.locator(SIDEBAR).get_by_label("Max new tokens")
    await budget.fill(str(tokens))
    await budget.press("Enter")
    await settle(pg)


async def kept(pg, prompt: str, tokens: int) -> bool:
    """Whether the sidebar still holds the session's own prompt and token budget."""
    sb = pg.locator(SIDEBAR)  # a page may have inputs of the same names
    box, budget = sb.get_by_label("Prompt", exact=True), sb.get_by_label("Max new tokens")
    return await box.input_value() == prompt and await budget.input_value() == str(tokens)


async def act(pg, title: str) -> None:
    """What the page runs: Decode at home, two method toggles on Compare, else the first slider one notch."""
    if "parallel" in title and await pg.get_by_role("button", name="Decode").count():
        await pg.get_by_role("button", name="Decode").click()
        await settle(pg)
    elif "Compare" in title:
        toggles = pg.locator(f'{MAIN} [data-testid="stCheckbox"]')
        for _ in range(2 if await toggles.count() else 0):
            await toggles.first.click()
            await settle(pg)
    elif await (slider := pg.locator(f'{MAIN} [role="slider"]')).count():
        await slider.first.focus()
        await slider.first.press("ArrowLeft")
        await settle(pg)


async def visit(pg, i: int, index: int, own: tuple[str, int]) -> Visit:
    """Open the sidebar's page `index`, run what it runs, and look for exceptions and the session's settings."""
    link = pg.locator(NAV).nth(index)
    title = (await link.inner_text()).strip().splitlines()[-1]
    t = time.monotonic()
    try:
        await link.click()
        await settle(pg)
        await act(pg, title)
        boxes = pg.locator('[data-testid="stException"]')
        detail = (await boxes.first.inner_text())[:600] if await boxes.count() else ""
        return Visit(i, title, round(time.monotonic() - t, 1), await boxes.count(), await kept(pg, *own), "", detail)
    except Exception as exc:  # a browser-side failure (a timeout under load): recorded, and the session goes on
        return Visit(i, title, round(time.monotonic() - t, 1), 0, False, f"{type(exc).__name__}: {str(exc)[:160]}")


async def session(browser, url: str, i: int, deadline: float, visits: list[Visit], start: int = 0) -> None:
    """One visitor: its own prompt and budget, then pages in turn from page i until the deadline, at least one page
    however slow the machine (an AVX2-only CPU spent the whole minute loading the first one)."""
    ctx = await browser.new_context(viewport={"width": 1400, "height": 900})
    pg = await ctx.new_page()
    await pg.goto(url)
    await pg.wait_for_selector(NAV, timeout=600_000)
    await settle(pg)
    own = (f"Session {i}: list {i + 2} {FRUITS[i % len(FRUITS)]} recipes.", 6 + i)
    await own_settings(pg, *own)
    pages, k = await pg.locator(NAV).count(), start + i
    while True:
        visits.append(await visit(pg, i, k % pages, own))
        k += 1
        if time.monotonic() >= deadline:
            break
    await ctx.close()


async def drive(url: str, sessions: int, seconds: float, start: int = 0) -> list[Visit]:
    """Every session at once in one headless chromium."""
    from playwright.async_api import async_playwright

    visits: list[Visit] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        deadline = time.monotonic() + seconds
        await asyncio.gather(*(session(browser, url, i, deadline, visits, start) for i in range(sessions)))
        await browser.close()
    return visits


def tracebacks(log: Path) -> list[str]:
    """The server log's tracebacks (plain or drawn by rich, colours removed), each by the exception it ends with."""
    lines = [ANSI.sub("", x) for x in log.read_text(errors="replace").splitlines()]
    found = []
    for n, line in enumerate(lines):
        if "Traceback (most recent call last)" in line:
            found.append(next((x.strip()[:200] for x in lines[n + 1 :] if EXCEPTION.match(x)), "(no exception line)"))
    return found


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def summary(visits: list[Visit], mon: Monitor, errors: list[str], a: argparse.Namespace, wall_s: float) -> dict:
    """The result as plain data, with its provenance."""
    sys.path.insert(0, str(ROOT))
    from specviz.core.measure import provenance

    by_page: dict[str, int] = {}
    for v in visits:
        by_page[v.page] = by_page.get(v.page, 0) + 1
    secs = [v.seconds for v in visits if not v.error]
    result = {
        "command": " ".join(["python", "scripts/load_test.py", *sys.argv[1:]]),
        "sessions": a.sessions,
        "minutes": round(wall_s / 60, 2),
        "pages_visited": len(visits),
        "visits_by_page": by_page,
        "visits_by_session": [sum(v.session == i for v in visits) for i in range(a.sessions)],
        "visit_seconds": {"median": statistics.median(secs), "max": max(secs)} if secs else {},
        "peak_rss_mb": round(max(mon.rss_mb), 1),
        "rss_mb": {"start": round(mon.rss_mb[0], 1), "end": round(mon.rss_mb[-1], 1)},
        "page_exceptions": sum(v.exceptions for v in visits),
        "server_tracebacks": len(errors),
        "tracebacks": errors[:10],
        "exception_boxes": [f"session {v.session} on {v.page}: {v.detail}" for v in visits if v.detail][:10],
        "browser_errors": [f"session {v.session} on {v.page}: {v.error}" for v in visits if v.error],
        "settings_kept": sum(v.kept for v in visits),
        "load_1min": {"start": mon.load[0], "max": max(mon.load), "end": mon.load[-1]},
        "torch_threads_env": os.environ.get("OMP_NUM_THREADS", "torch's default"),  # the server inherits it
        "app": {
            "dir": str(a.app_dir),
            "commit": a.app_commit or git("rev-parse", "--short", "HEAD"),
            "live_repeats": 1,
        },
        "provenance": provenance("streamlit app · default model · cpu").to_dict(),
        "visits": [asdict(v) for v in visits],
    }
    ok = not result["page_exceptions"] and not errors and not result["browser_errors"]
    ok = ok and result["settings_kept"] == len(visits)
    result["passed"] = bool(ok and all(result["visits_by_session"]))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="N browser sessions on one served app at once; a JSON result.")
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--app-dir", type=Path, default=ROOT, help="the app's folder (default: this checkout)")
    ap.add_argument("--app-commit", default="", help="the commit --app-dir holds (default: this checkout's HEAD)")
    ap.add_argument("--start", type=int, default=0, help="session i starts on page start + i")
    ap.add_argument("--out", type=Path, default=None, help="write the JSON result here")
    a = ap.parse_args(argv)
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"specviz-load-{os.getpid()}.log"
    proc, url = serve(a.app_dir.resolve(), log)
    mon = Monitor(proc.pid)
    threading.Thread(target=mon.run, daemon=True).start()
    t0 = time.monotonic()
    try:
        visits = asyncio.run(drive(url, a.sessions, a.minutes * 60, a.start))
    finally:
        wall = time.monotonic() - t0
        mon.stop.set()
        proc.terminate()
        proc.wait(timeout=30)
    result = summary(visits, mon, tracebacks(log), a, wall)
    text = json.dumps(result, indent=1)
    if a.out:
        a.out.write_text(text + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("visits", "provenance")}, indent=1))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
