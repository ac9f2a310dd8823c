"""The lesson's deck opened in LibreOffice Impress (headless, converted to PDF): one page per slide, a picture on
every slide that has a figure, and no block of text running over another (read back with poppler's pdftotext).

A soak check (scripts/soak.sh): it renders every figure with kaleido and starts LibreOffice, about two minutes.
Needs `soffice` (apt-get install libreoffice-impress) and `pdftotext`/`pdfimages` (poppler-utils); skipped without.
"""

from __future__ import annotations

import html
import itertools
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from specviz.output.deck import deck_bytes
from specviz.output.lesson.deck import pack_slides
from specviz.output.lesson.model import LESSON_FILE, load_lesson
from specviz.output.lesson.pack import read

TOOLS = ("soffice", "pdftotext", "pdfimages")


def blocks(pdf: Path) -> list[list[tuple[float, float, float, float, str]]]:
    """Per page, each text block's box (x0, y0, x1, y1) and its words, from pdftotext's layout."""
    layout = subprocess.run(["pdftotext", "-bbox-layout", str(pdf), "-"], capture_output=True, text=True, check=True)
    pages = []
    for page in layout.stdout.split("<page ")[1:]:
        found = []
        for m in re.finditer(r'<block xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">(.*?)</block>',
                             page, re.S):  # fmt: skip
            words = html.unescape(" ".join(re.findall(r">([^<]+)</word>", m.group(5))))
            found.append((*(float(m.group(i)) for i in range(1, 5)), words))
        pages.append(found)
    return pages


def overlap(a: tuple, b: tuple, slack: float = 6.0) -> bool:
    """Two blocks share more than `slack` points each way: more than the leading two lines of one box share."""
    return a[0] + slack < b[2] and b[0] + slack < a[2] and a[1] + slack < b[3] and b[1] + slack < a[3]


@pytest.mark.soak
def test_the_deck_opens_in_impress_with_no_text_over_another(tmp_path):
    if missing := [t for t in TOOLS if shutil.which(t) is None]:
        pytest.skip(f"needs {', '.join(missing)} (libreoffice-impress, poppler-utils)")
    lesson = load_lesson(LESSON_FILE)
    slides = pack_slides(read(), lesson)
    deck = tmp_path / "lesson.pptx"
    deck.write_bytes(deck_bytes(slides))
    subprocess.run(["soffice", "--headless", "--convert-to", "pdf", "--outdir", str(tmp_path), str(deck)],
                   check=True, capture_output=True, timeout=900)  # fmt: skip
    pdf = tmp_path / "lesson.pdf"
    pages = blocks(pdf)
    assert len(pages) == len(slides), "one page per slide"
    images = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True, text=True, check=True).stdout
    with_picture = {int(line.split()[0]) for line in images.splitlines()[2:] if line.split()}
    for k, (slide, found) in enumerate(zip(slides, pages, strict=True), 1):
        assert slide.figure is None or k in with_picture, f"page {k} ({slide.title}) lost its figure"
        title = slide.title.split()[0]
        assert any(title in words for *_box, words in found), f"page {k}: its title is not on the page"
        for a, b in itertools.combinations(found, 2):
            assert not overlap(a, b), f"page {k} ({slide.title}): {a[4][:40]!r} runs over {b[4][:40]!r}"
