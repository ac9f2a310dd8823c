"""Two visitors on one served app (issue 63's check): visitor A starts plain decoding at the largest answer the
sidebar allows; while it runs, visitor B opens the home page (how long until it renders, against the same page
opened while nothing runs, and what it says) and presses Decode (how long until it says it waits, and in what
words); A presses Stop (how long until its run ends); then B's run starts (how long after A's Stop).

    python scripts/two_visitors.py [--url http://127.0.0.1:8501] [--tokens 512] [--out FILE.json]

Serve the app first (streamlit run app.py --server.headless true --server.address 127.0.0.1). Debian's chromium.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from playwright.async_api import async_playwright

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
LONG = "Write a long, detailed story about a lighthouse keeper and a storm, in many paragraphs."


async def opened(browser, url: str):
    page = await (await browser.new_context(viewport={"width": 1600, "height": 900})).new_page()
    t = time.perf_counter()
    await page.goto(url)
    await page.get_by_role("button", name="Decode").wait_for(timeout=120_000)
    return page, time.perf_counter() - t


async def until(page, text: str, timeout_s: float = 120) -> float:
    t = time.perf_counter()
    await page.get_by_text(text, exact=False).first.wait_for(timeout=timeout_s * 1000)
    return time.perf_counter() - t


async def main(url: str, tokens: int) -> dict:
    out: dict = {"url": url, "tokens": tokens}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        a, out["a_first_render_s"] = await opened(browser, url)
        idle, out["b_home_render_idle_s"] = await opened(browser, url)  # the same page with no run going: the floor
        await idle.context.close()
        box = a.get_by_label("Max new tokens")
        await box.fill(str(tokens))
        await box.press("Enter")
        await a.wait_for_timeout(1500)
        prompt = a.get_by_label("Prompt", exact=True)
        await prompt.fill(LONG)
        await prompt.press("Control+Enter")
        await a.wait_for_timeout(2500)
        await a.get_by_role("button", name="Decode").click()
        await a.get_by_role("button", name="Stop").wait_for(timeout=60_000)
        await a.wait_for_timeout(3000)  # A's run is under way
        b, out["b_home_render_s"] = await opened(browser, url)
        await b.get_by_role("button", name="Decode").click()
        out["b_told_it_waits_s"] = await until(b, "waiting for")
        out["b_words"] = await b.get_by_text("waiting for", exact=False).first.inner_text()
        t = time.perf_counter()
        await a.get_by_role("button", name="Stop").click()
        await a.get_by_text("Stopped", exact=False).first.wait_for(timeout=60_000)
        out["a_stop_to_ended_s"] = time.perf_counter() - t
        await b.get_by_role("button", name="Stop").wait_for(timeout=60_000)  # B's own run started
        out["b_started_after_a_stop_s"] = time.perf_counter() - t
        await b.screenshot(path="/tmp/two_visitors_b.png")
        await browser.close()
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8501")
    ap.add_argument("--tokens", type=int, default=512)  # the sidebar's largest answer
    ap.add_argument("--out")
    a = ap.parse_args()
    got = asyncio.run(main(a.url, a.tokens))
    print(json.dumps(got, indent=1))
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(got, f, indent=1)
