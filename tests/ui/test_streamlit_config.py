"""The served app's config: the file watcher stays off the virtualenv, and the theme uses the figures' colours."""

from __future__ import annotations

from pathlib import Path

import pytest

from specviz.output.viz import theme

ROOT = Path(__file__).resolve().parents[2]
tomllib = pytest.importorskip("tomllib")  # Python 3.11+


@pytest.fixture(scope="module")
def config() -> dict:
    return tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())


def test_file_watcher_does_not_walk_the_virtualenv(config):
    server = config["server"]
    assert server["fileWatcherType"] in ("none", "poll"), "a recursive inotify watch over .venv overflows"
    assert ".venv" in server["folderWatchBlacklist"]


def test_theme_matches_the_figures(config):
    t = config["theme"]
    assert t["chartCategoricalColors"] == list(theme.method_colors().values())  # the methods' cards, in order
    assert t["font"] == theme.FONT
    assert t["textColor"] == theme.INK  # a projected figure's type (theme.legible) in the app's ink
    assert (t["greenColor"], t["redColor"], t["blueColor"], t["orangeColor"], t["grayColor"]) == (
        theme.ACCEPT,
        theme.REJECT,
        theme.VERIFY,
        theme.DRAFT,
        theme.NEUTRAL,
    )
    assert t["primaryColor"] == t["violetColor"] == theme.ACCENT


def test_no_full_collection_after_every_script_run(config):
    """Streamlit's gc.collect(2) after each run walked the whole heap (torch, transformers, plotly): 0.28 of the
    0.33 CPU-s a lesson key press cost the server (docs/experiments/2026-12-06-lesson-load-gc.md)."""
    assert config["runner"]["postScriptGC"] is False
