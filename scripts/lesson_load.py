"""A class on one server: N visitors click through the lesson from a recorded pack at once, by key presses only.

Serves the app once, opens N pages of one headless chromium (one browser context each, so N Streamlit sessions), each
at `?pack` (the shipped recording: no model runs) or `?pack=<name>`, and drives them together: every visitor presses
PageDown (what a presenter's clicker sends) until the lesson's last stop, waiting at each press for the app's own
state (the banner changed, the script run over, the figure in focus drawn), never for a fixed time. Visitor i starts
i × --stagger seconds after the first and reads each stop for --think seconds before pressing on (default 5 s: a
class follows a lecturer, it does not press in step or as fast as the server allows; --think 0 measures that).

Recorded: every press's time from key to figure (median, p95, max), the stops each visitor reached, the exceptions
(Streamlit's exception boxes and the server log's tracebacks), the server's peak RSS, the load average (the CPU is
shared), the CPU seconds the server and the browser each used (on one machine both share its cores, so the split
says whose work a press waits for) and the provenance. With --live-tokens N, one more visitor decodes N tokens on
the home page again and again until the class has finished (the largest answer the sidebar allows is 512), and the
result counts its runs. Usage:

    .venv/bin/python scripts/lesson_load.py --visitors 10 [--live-tokens 512] --out docs/lesson_load.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: scripts.* and specviz from this checkout

from scripts.load_test import CHROMIUM, IDLE, Monitor, git, serve, tracebacks  # noqa: E402

BANNER = ".st-key-lesson_banner"
STOP = re.compile(r"Stop (\d+) of (\d+)")
FIGURE = f"{BANNER} .js-plotly-plot .main-svg"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
WAIT_MS = 180_000  # one press, on a 2-core CPU shared by ten sessions
CHANGED = """([sel, old]) => {
  const b = document.querySelector(sel);
  const idle = document.querySelector('[data-testid="stApp"][data-test-script-state="notRunning"]');
  return b !== null && idle !== null && b.innerText !== old && b.querySelector('.js-plotly-plot .main-svg') !== null;
}"""


@dataclass
class Visitor:
    """One visitor's walk: the banner's first line at each stop reached and each press's seconds."""

    index: int
    stops: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    exceptions: int = 0
    detail: str = ""  # the first exception box's text
    error: str = ""  # a browser-side failure (a timeout), not the app's


def last(line: str) -> bool:
    """The banner's 'Stop k of n' says the last stop."""
    found = STOP.search(line)
    return bool(found) and found.group(1) == found.group(2)


async def banner(pg) -> str:
    return await pg.locator(BANNER).first.inner_text()


async def exceptions(pg) -> list[str]:
    found = pg.locator('[data-testid="stException"], [data-testid="stAlertContentError"]')
    return [(await found.nth(i).inner_text())[:200] for i in range(await found.count())]


async def walk(browser, url: str, v: Visitor, presses: int, delay: float, think: float) -> None:
    """Open the lesson from the pack, then press PageDown until the last stop (at most `presses` times: a stop's
    builds take presses too), timing each press until its figure is drawn."""
    await asyncio.sleep(delay)
    ctx = await browser.new_context(viewport={"width": 1600, "height": 900})
    pg = await ctx.new_page()
    try:
        began = time.monotonic()
        await pg.goto(url, timeout=WAIT_MS)  # ten pages open at once on 2 cores: 30 s is not enough
        await pg.wait_for_selector(FIGURE, timeout=WAIT_MS)
        await pg.wait_for_selector(IDLE, timeout=WAIT_MS)
        v.seconds.append(time.monotonic() - began)
        v.stops.append((await banner(pg)).splitlines()[0])
        while not last(v.stops[-1]) and len(v.seconds) <= presses:
            await asyncio.sleep(think)  # the visitor reads the stop (not part of the time measured)
            old = await banner(pg)
            began = time.monotonic()
            await pg.keyboard.press("PageDown")
            await pg.wait_for_function(CHANGED, arg=[BANNER, old], timeout=WAIT_MS, polling=50)
            v.seconds.append(time.monotonic() - began)
            v.stops.append((await banner(pg)).splitlines()[0])
            if bad := await exceptions(pg):
                v.exceptions += len(bad)
                v.detail = v.detail or bad[0]
    except Exception as e:  # a timeout or a closed page: recorded, the other visitors go on
        v.error = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    finally:
        await ctx.close()


@dataclass
class Browser:
    """The CPU seconds chromium's processes used during the walk (read just before it closes)."""

    seconds: float = 0.0


LONG = "Write a long, detailed story about a lighthouse keeper and a storm, in many paragraphs."


async def live_runs(browser, url: str, tokens: int, live: dict, done: asyncio.Event) -> None:
    """One more visitor, on the home page, decoding `tokens` tokens of a long story (the largest answer the sidebar
    allows: 512) again and again until the class has finished: the model is never free while the class walks."""
    ctx = await browser.new_context(viewport={"width": 1600, "height": 900})
    pg = await ctx.new_page()
    await pg.goto(url.split("?")[0], timeout=WAIT_MS)
    await pg.get_by_role("button", name="Decode").wait_for(timeout=WAIT_MS)
    box = pg.get_by_label("Max new tokens")
    await box.fill(str(tokens))
    await box.press("Enter")
    prompt = pg.get_by_label("Prompt", exact=True)
    await prompt.fill(LONG)
    await prompt.press("Control+Enter")
    await pg.wait_for_selector(IDLE, timeout=WAIT_MS)
    live["runs"], began = 0, time.monotonic()
    while not done.is_set():
        await pg.get_by_role("button", name="Decode").click()
        await pg.get_by_role("button", name="Stop").wait_for(timeout=WAIT_MS)
        await pg.get_by_role("button", name="Stop").wait_for(state="detached", timeout=WAIT_MS)
        live["runs"] += 1
    live["seconds"] = round(time.monotonic() - began, 1)
    await ctx.close()


async def drive(
    url: str, visitors: int, presses: int, stagger: float, think: float, used: Browser, live: dict
) -> list[Visitor]:
    from playwright.async_api import async_playwright

    walks = [Visitor(i) for i in range(visitors)]
    async with async_playwright() as p:
        before = cpu_seconds(named="chrom")
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        done = asyncio.Event()
        runner = asyncio.create_task(live_runs(browser, url, live["tokens"], live, done)) if live["tokens"] else None
        if runner is not None:
            await asyncio.sleep(20)  # the first live run under way before the class arrives
        await asyncio.gather(*(walk(browser, url, v, presses, i * stagger, think) for i, v in enumerate(walks)))
        done.set()
        if runner is not None:
            await runner
        used.seconds = cpu_seconds(named="chrom") - before
        await browser.close()
    return walks


def cpu_seconds(pids: set[int] | None = None, named: str = "") -> float:
    """User + system CPU seconds of the processes `pids` and their children, or of every process whose name
    contains `named` (the browser's renderers are children of playwright's driver, not of this script)."""
    found = [psutil.Process(p) for p in pids or ()]
    found += [c for p in list(found) for c in p.children(recursive=True)]
    if named:
        found += [p for p in psutil.process_iter(["name"]) if named in (p.info["name"] or "")]
    total = 0.0
    for proc in {p.pid: p for p in found}.values():
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            total += t.user + t.system + getattr(t, "children_user", 0) + getattr(t, "children_system", 0)
    return total


def percentile(xs: list[float], q: float) -> float:
    """The q-quantile by the nearest rank (no interpolation: a reported p95 is a press that happened)."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * len(s) + 0.5) - 1))]


def summary(
    walks: list[Visitor], mon: Monitor, errors: list[str], a: argparse.Namespace, wall: float, cpu: dict[str, float]
) -> dict:
    from specviz.core.measure import provenance

    presses = [s for v in walks for s in v.seconds[1:]]  # the first is opening the page, not a key press
    opens = [v.seconds[0] for v in walks if v.seconds]
    result = {
        "command": " ".join(["python", "scripts/lesson_load.py", *sys.argv[1:]]),
        "visitors": a.visitors,
        "pack": a.pack or "(the shipped recording)",
        "stops": a.stops,
        "think_seconds": a.think,
        "stagger_seconds": a.stagger,
        "minutes": round(wall / 60, 2),
        "stops_reached": [len({m.group(1) for x in v.stops if (m := STOP.search(x))}) for v in walks],
        "press_seconds": {
            "n": len(presses),
            "median": round(statistics.median(presses), 2) if presses else None,
            "p95": round(percentile(presses, 0.95), 2) if presses else None,
            "max": round(max(presses), 2) if presses else None,
        },
        "open_seconds": {"median": round(statistics.median(opens), 2), "max": round(max(opens), 2)} if opens else {},
        "page_exceptions": sum(v.exceptions for v in walks),
        "exception_boxes": [f"visitor {v.index}: {v.detail}" for v in walks if v.detail][:10],
        "browser_errors": [f"visitor {v.index}: {v.error}" for v in walks if v.error],
        "server_tracebacks": len(errors),
        "tracebacks": errors[:10],
        "peak_rss_mb": round(max(mon.rss_mb), 1) if mon.rss_mb else None,
        "load_1min": {"start": mon.load[0], "max": max(mon.load), "end": mon.load[-1]} if mon.load else {},
        "cpus": os.cpu_count(),
        "cpu_seconds": cpu,  # the server's and the browser's, over the whole walk (wall: its length)
        "app_commit": git("rev-parse", "--short", "HEAD"),
        "provenance": provenance("streamlit app · lesson from a recorded pack · no model").to_dict(),
        "walks": [asdict(v) for v in walks],
    }
    every = all(n == a.stops for n in result["stops_reached"])
    result["passed"] = bool(every and not result["page_exceptions"] and not errors and not result["browser_errors"])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--visitors", type=int, default=10)
    ap.add_argument("--pack", default="", help="a pack's name under docs/lesson/ (default: the shipped recording)")
    ap.add_argument("--stagger", type=float, default=1.0, help="seconds between two visitors' arrivals")
    ap.add_argument("--think", type=float, default=5.0, help="seconds a visitor reads a stop before pressing on")
    ap.add_argument("--out", type=Path, default=None, help="write the JSON result here")
    ap.add_argument("--live-tokens", type=int, default=0, help="one more visitor decodes this many tokens meanwhile")
    a = ap.parse_args(argv)
    from specviz.output.lesson.model import load_lesson

    a.stops = len(load_lesson().stops)
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"specviz-lesson-load-{os.getpid()}.log"
    proc, url = serve(ROOT, log)
    mon = Monitor(proc.pid)
    threading.Thread(target=mon.run, daemon=True).start()
    t0, server0 = time.monotonic(), cpu_seconds({proc.pid})
    browser = Browser()
    try:
        where = f"{url}/?pack={a.pack}" if a.pack else f"{url}/?pack"
        live = {"tokens": a.live_tokens}
        walks = asyncio.run(drive(where, a.visitors, 4 * a.stops, a.stagger, a.think, browser, live))
        server = cpu_seconds({proc.pid}) - server0
    finally:
        mon.stop.set()
        proc.terminate()
        proc.wait(timeout=30)
    wall = time.monotonic() - t0
    cpu = {"server": round(server, 1), "browser": round(browser.seconds, 1), "wall": round(wall, 1)}
    result = summary(walks, mon, tracebacks(log), a, wall, cpu) | ({"live_run": live} if a.live_tokens else {})
    if a.out:
        a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("walks", "provenance")}, indent=1))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
