"""One visitor alone through the recorded lesson: what each key press costs the server and the browser.

Serves the app, opens `?pack` in one headless chromium page and presses PageDown to the last stop. For each press:
the seconds from key to figure (as scripts/lesson_load.py waits for it), the server's CPU seconds (user + system,
its process and children), and chromium's main-thread seconds from the DevTools Performance metrics (TaskDuration,
ScriptDuration, LayoutDuration, RecalcStyleDuration), read after a second's rest. `--spy FILE` also samples the
server with py-spy (its raw, collapsed stacks) to say where its seconds go. The load test measures ten of these at
once on one machine; this says what one press is made of. Usage:

    .venv/bin/python scripts/lesson_press_profile.py --out press.json [--spy server-stacks.txt]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: scripts.* and specviz from this checkout

from scripts.lesson_load import ARGS, BANNER, CHANGED, FIGURE, banner, cpu_seconds, last  # noqa: E402
from scripts.load_test import CHROMIUM, IDLE, serve  # noqa: E402

METRICS = ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration")


async def metrics(cdp) -> dict[str, float]:
    found = {m["name"]: m["value"] for m in (await cdp.send("Performance.getMetrics"))["metrics"]}
    return {k: found[k] for k in METRICS}


async def walk(url: str, server: int, presses: int) -> list[dict]:
    from playwright.async_api import async_playwright

    rows = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        ctx = await browser.new_context(viewport={"width": 1600, "height": 900})
        pg = await ctx.new_page()
        cdp = await ctx.new_cdp_session(pg)
        await cdp.send("Performance.enable")
        await pg.goto(url, timeout=300_000)
        await pg.wait_for_selector(FIGURE, timeout=300_000)
        await pg.wait_for_selector(IDLE)
        await asyncio.sleep(2)
        for _ in range(presses):
            old = await banner(pg)
            if last(old.splitlines()[0]):
                break
            m0, s0, t0 = await metrics(cdp), cpu_seconds({server}), time.monotonic()
            await pg.keyboard.press("PageDown")
            await pg.wait_for_function(CHANGED, arg=[BANNER, old], timeout=180_000, polling=50)
            wall = time.monotonic() - t0
            await asyncio.sleep(1.0)  # what the page does after the figure is drawn counts too
            m1, s1 = await metrics(cdp), cpu_seconds({server})
            row = {"stop": (await banner(pg)).splitlines()[0][:60], "wall": round(wall, 3), "server": round(s1 - s0, 3)}
            rows.append(row | {k: round(m1[k] - m0[k], 3) for k in METRICS})
        await browser.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="the presses as JSON")
    ap.add_argument("--presses", type=int, default=100)
    ap.add_argument("--spy", type=Path, default=None, help="py-spy's raw stacks of the server here")
    a = ap.parse_args()
    proc, url = serve(ROOT, Path(os.environ.get("TMPDIR", "/tmp")) / f"specviz-press-profile-{os.getpid()}.log")
    spy = None
    if a.spy:
        cmd = [str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(proc.pid), "-r", "50"]
        spy = subprocess.Popen([*cmd, "--format", "raw", "-o", str(a.spy)])
    try:
        rows = asyncio.run(walk(url + "/?pack", proc.pid, a.presses))
    finally:
        if spy:
            spy.send_signal(2)  # py-spy writes its stacks on Ctrl-C
            spy.wait(timeout=60)
        proc.terminate()
        proc.wait(timeout=30)
    a.out.write_text(json.dumps(rows, indent=1) + "\n")
    for k in ("wall", "server", *METRICS):
        xs = sorted(r[k] for r in rows)
        print(f"{k:20s} median {statistics.median(xs):.3f} s   sum {sum(xs):.1f} s   ({len(xs)} presses)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
