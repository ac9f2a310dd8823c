"""Several visitors on one served app: scripts/load_test.py in short, and the race it found, fixed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.full  # a fresh Python importing the app: seconds
def test_the_app_imports_pandas_before_any_page_runs():
    """plotly reads sys.modules["pandas"] without importing it, so pandas half imported by one session's thread broke
    another session's figure (AttributeError: partially initialized module 'pandas' has no attribute 'Series', two
    sessions on Timeline at once). ui.common, which app.py imports first, now imports it whole."""
    check = "import sys, ui.common; pd = sys.modules.get('pandas'); assert pd is not None and hasattr(pd, 'Series')"
    subprocess.run([sys.executable, "-c", check], cwd=ROOT, check=True, capture_output=True)


@pytest.mark.browser
@pytest.mark.real_model
@pytest.mark.soak  # minutes: scripts/soak.sh
def test_four_sessions_at_once_for_a_minute(tmp_path):
    """Four browser sessions on one server for a minute: no exception on any page or in the server's log, every
    session's own prompt and token budget kept, every session through at least one page, the server (with any child
    process) under 6 GB: docs/load_test.json's 10-minute run peaked at 4.2 GB and ended at 2.1 GB."""
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    out = tmp_path / "load.json"
    cmd = [sys.executable, "scripts/load_test.py", "--sessions", "4", "--minutes", "1", "--out", str(out)]
    subprocess.run(cmd, cwd=ROOT, timeout=1800, capture_output=True)
    res = json.loads(out.read_text())
    assert res["page_exceptions"] == 0, res["exception_boxes"]
    assert res["server_tracebacks"] == 0, res["tracebacks"]
    assert res["settings_kept"] == res["pages_visited"] and all(res["visits_by_session"])
    assert res["peak_rss_mb"] < 6144 and res["passed"]


@pytest.mark.browser
@pytest.mark.soak  # minutes: scripts/soak.sh
def test_a_class_of_ten_walks_the_recorded_lesson(tmp_path):
    """Ten visitors on one server click through the shipped pack by key presses at once (no model runs): every
    visitor reaches the last stop, with no exception on a page or in the server's log. The time from key press to
    figure is reported (the goal is a p95 under 3 s: docs/lesson_load.json holds a quiet machine's run)."""
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    out = tmp_path / "lesson_load.json"
    cmd = [sys.executable, "scripts/lesson_load.py", "--visitors", "10", "--out", str(out)]
    subprocess.run(cmd, cwd=ROOT, timeout=3000, capture_output=True)
    res = json.loads(out.read_text())
    print(f"ten visitors: press to figure {res['press_seconds']}, load {res['load_1min']}")
    assert res["page_exceptions"] == 0, res["exception_boxes"]
    assert res["server_tracebacks"] == 0 and not res["browser_errors"], (res["tracebacks"], res["browser_errors"])
    assert res["stops_reached"] == [res["stops"]] * 10 and res["passed"]
