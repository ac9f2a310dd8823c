"""The lesson in a real browser, by key presses only: every stop shows its figure with no exception or error, and
PageUp / ArrowLeft go back. scripts/lesson_shots.py is the same tour; it keeps the screenshots in docs/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PIL import Image

from scripts.lesson_shots import CHROMIUM, serve, tour
from specviz.output.lesson.model import ENV, load_lesson

pytestmark = [pytest.mark.browser, pytest.mark.real_model, pytest.mark.soak]  # every stop: scripts/soak.sh


def test_the_lesson_by_key_presses(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    lesson = load_lesson()
    out = Path(os.environ.get("SPECVIZ_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    proc, url = serve({ENV: lesson.source})
    try:
        shots = tour(url, out, [s.id for s in lesson.stops], back=("PageUp", "ArrowLeft"))
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    frames = {s.id: s.frames + (1 if s.questions else 0) for s in lesson.stops}  # builds, then the four questions
    wanted = [f"{i}{'' if k == 1 else f'_b{k}'}.png" for i, n in frames.items() for k in range(1, n + 1)]
    assert [name.split("_", 1)[1] for name, _ in shots] == wanted
    for name, _seconds in shots:
        with Image.open(out / name) as im:
            assert im.size == (1600, 900), name
            assert len(im.getcolors(1 << 16) or range(1 << 16)) > 500, f"{name} is nearly blank"
