"""The gallery's slides: each page's figure in slide form, drawn from the shipped (recorded) lesson pack.

For every page a lesson stop opens, the first such stop's figure in focus is drawn from the pack, as the lesson
and its deck draw it (display names, the slide theme: white, large type, 1600 × 900), and written to
docs/screenshots/<page>_slide.png: one figure a slide, its numbers the pack's (recorded once, with provenance),
never the first screen of a live page. The whole pages (<page>.png) are scripts/lecture_shots.py's.

    .venv/bin/python scripts/gallery_slides.py [--pack docs/lesson/pack.json] [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: specviz from this checkout

from specviz.output.export import figure_bytes  # noqa: E402
from specviz.output.lesson import facts  # noqa: E402
from specviz.output.lesson.model import load_lesson  # noqa: E402
from specviz.output.lesson.names import relabel  # noqa: E402
from specviz.output.lesson.pack import PACK_FILE, read  # noqa: E402
from specviz.output.pages import PAGES  # noqa: E402

NAMES = {"home": "home"}  # the README's file names: a page's title in snake case, the home page "home"


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pack", type=Path, default=PACK_FILE)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    a = ap.parse_args()
    pack = read(a.pack)
    lesson = load_lesson(None)
    a.out.mkdir(parents=True, exist_ok=True)
    for page in PAGES.values():
        stop = next((s for s in lesson.stops if s.page == page.id), None)
        if stop is None:
            continue
        fig, _measured = facts.figure(pack, stop.at(0))
        fig = relabel(fig)
        path = a.out / f"{NAMES.get(page.id, slug(page.title))}_slide.png"
        path.write_bytes(figure_bytes(fig, "png", slide=True, scale=1.0))
        print(f"{path}  ({stop.id}: {stop.figure})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
