"""The slide deck export: a .pptx read back with python-pptx (slides, titles, image sizes, notes), and the CLI."""

from __future__ import annotations

import io
from pathlib import Path

import plotly.graph_objects as go
import pytest
from PIL import Image
from pptx import Presentation

from specviz import methods
from specviz.core.measure import provenance
from specviz.core.prompts import prepare
from specviz.core.sampling import Sampling
from specviz.core.trace import bundle_json
from specviz.output import deck

PX = (3200, 1800)  # the 1600 × 900 slide theme at 2×


def fake_png(_fig: go.Figure) -> bytes:
    """What kaleido would give, without a browser: a blank PNG of the slide size."""
    buf = io.BytesIO()
    Image.new("RGB", PX, "white").save(buf, "PNG")
    return buf.getvalue()


def figs() -> dict[str, go.Figure]:
    a = go.Figure(go.Bar(x=["ar", "pld"], y=[1, 1.4]), layout={"title": {"text": "Speedup<br><sup>on 2 cores</sup>"}})
    b = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))  # untitled: the slide takes the figure's name
    return {"speedup": a, "tokens_over_time": b}


def read_back(data: bytes) -> list[dict]:
    prs = Presentation(io.BytesIO(data))
    assert abs(prs.slide_width / prs.slide_height - 16 / 9) < 0.01
    out = []
    for slide in prs.slides:
        texts = [s.text_frame.text for s in slide.shapes if s.has_text_frame]
        pics = [s for s in slide.shapes if s.shape_type == 13]  # MSO_SHAPE_TYPE.PICTURE
        out.append(
            {
                "title": texts[0].splitlines()[0] if texts else "",
                "text": texts,
                "pixels": [Image.open(io.BytesIO(p.image.blob)).size for p in pics],
                "aspect": [p.width / p.height for p in pics],
                "inside": all(p.left >= 0 and p.left + p.width <= prs.slide_width for p in pics),
                "notes": slide.notes_slide.notes_text_frame.text,
            }
        )
    return out


def test_deck_reads_back(tmp_path):
    notes = deck.notes_text(provenance("cpu · float32 · onednn"), "SmolLM2-135M", {"Prompt": "Why?"})
    path = deck.write_deck(tmp_path / "deck.pptx", deck.slides_of(figs(), notes), render=fake_png)
    slides = read_back(path.read_bytes())
    assert [s["title"] for s in slides] == ["Speedup", "tokens over time"]
    assert "on 2 cores" in slides[0]["text"][0]  # the subtitle, under the title
    for s in slides:
        assert s["pixels"] == [PX] and abs(s["aspect"][0] - 16 / 9) < 0.01 and s["inside"]
        for word in ("Model: SmolLM2-135M", "Device: cpu · float32 · onednn", "Machine:", "Measured:", "Prompt: Why?"):
            assert word in s["notes"], word


def test_deck_refuses_nothing_and_other_suffixes(tmp_path):
    with pytest.raises(deck.DeckError, match="no figures"):
        deck.deck_bytes([], render=fake_png)
    with pytest.raises(deck.DeckError, match=r"\.pptx"):
        deck.write_deck(tmp_path / "deck.ppt", deck.slides_of(figs(), ""), render=fake_png)


@pytest.mark.full
def test_deck_with_real_images(tmp_path):
    """kaleido and chromium render each figure at the size its picture takes on a 1600 × 900 screen, SCALE× as
    many pixels, in the projector's type."""
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("chromium is not installed")
    slides = deck.slides_of(figs(), "Model: x")
    wanted = [[tuple(deck.SCALE * v for v in deck.picture_px(s))] for s in slides]
    assert [s["pixels"] for s in read_back(deck.deck_bytes(slides))] == wanted
    placed = deck.placed(figs()["speedup"], 10, 5)
    assert (placed.layout.width, placed.layout.height, placed.layout.title.text) == (1200, 600, None)
    assert placed.layout.font.size == 18 and figs()["speedup"].layout.title.text  # a copy: the figure keeps its title


@pytest.fixture(scope="module")
def bundle_file(tiny_lm, tmp_path_factory) -> Path:
    prompt = "Copy this list: apples, pears, plums, apples, pears, plums."
    ids = prepare(tiny_lm, prompt)
    traces = []
    for name in ("ar", "medusa", "lookahead", "pld"):
        hook = getattr(methods.get(name), "tiny_resources", None)
        kw = hook(tiny_lm) if hook is not None else {}
        traces.append(methods.get(name).generate(tiny_lm, ids, Sampling(max_new_tokens=10), prompt=prompt, **kw))
    path = tmp_path_factory.mktemp("bundle") / "runs.json"
    path.write_text(bundle_json(traces))
    return path


def test_cli_writes_a_deck_from_saved_traces(bundle_file, tmp_path, monkeypatch, capsys):
    from specviz.__main__ import main

    monkeypatch.setattr(deck, "render_png", fake_png)
    out = tmp_path / "deck.pptx"
    assert main(["export", "--traces", str(bundle_file), "--pptx", str(out)]) == 0
    slides = read_back(out.read_bytes())
    assert len(slides) >= 4 and "slides" in capsys.readouterr().out
    assert all("Model: tiny-random" in s["notes"] and "Settings (medusa)" in s["notes"] for s in slides)
    assert all("when the traces were saved" in s["notes"] and "Drawn on:" in s["notes"] for s in slides)


def test_cli_gallery_of_every_figure(bundle_file, tmp_path, monkeypatch):
    """--all adds the stored measurements' figures; index.html shows every image at once."""
    from specviz.__main__ import main
    from specviz.output import publish

    monkeypatch.setattr(publish, "write_figure", lambda fig, path, slide=True: path.write_bytes(b"png"))
    out = tmp_path / "gallery"
    assert main(["export", "--all", "--traces", str(bundle_file), "--out", str(out), "--formats", "png"]) == 0
    index = (out / "index.html").read_text()
    images = sorted(p.stem for p in out.glob("*.png"))
    assert images and all(f"{n}.png" in index for n in images)
    assert {"timeline", "medusa_tree", "medusa_budget", "lookahead_sweep"} <= set(images)


@pytest.mark.parametrize(
    "args, reason",
    [
        (["export", "--prompt", "hi"], "Give --out"),
        (["export", "--prompt", "hi", "--pptx", "deck.ppt"], "must name a .pptx"),
        (["export", "--traces", "/no/such.json", "--out", "x"], "does not exist"),
        (["export", "--prompt", "hi", "--out", "x", "--formats", "bmp"], "Unknown image format"),
        (["export", "--preset", "nope", "--out", "x"], "No shipped prompt"),
        (["export", "--methods", "ar,zzz", "--out", "x"], "Unknown method"),
        (["export", "--bogus"], "unrecognized arguments"),
    ],
)
def test_cli_bad_export_is_one_line(args, reason, capsys):
    from specviz.__main__ import main

    try:
        code = main(list(args))
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and reason in lines[-1] and "Traceback" not in err
    assert len(lines) == 1 or lines[0].startswith("usage:")  # argparse prints its usage line first


def test_page_deck_button_builds_a_deck(monkeypatch):
    """What a page's 'Slide deck' button returns when pressed: the page's figures, its settings in the notes."""
    from ui.deck import build

    monkeypatch.setattr(deck, "render_png", fake_png)
    data = build("Medusa", list(figs().items()), {}, ("smollm2-135m", "cpu · float32 · onednn", True))
    slides = read_back(data)
    assert len(slides) == 2 and all("Page: Medusa" in s["notes"] and "Measured:" in s["notes"] for s in slides)


STORED_WHERE = "measured on Intel(R) Xeon(R) Processor (2 cores), cpu · float32 · onednn, on 2026-12-01, under load"


def test_a_stored_figure_keeps_its_own_provenance_in_the_notes(monkeypatch):
    """No blanket 'this machine, measured now': a figure from a stored file says where and when that was measured."""
    from ui.deck import build

    monkeypatch.setattr(deck, "render_png", fake_png)
    a, b = figs().values()
    data = build("Compare", [("speedup", a, ""), ("sweep", b, STORED_WHERE)], {}, ("m", "cpu · float32", True))
    live, stored = read_back(data)
    assert "Machine:" in live["notes"] and "Measured:" in live["notes"]
    assert STORED_WHERE in stored["notes"] and "not measured in this session" in stored["notes"]
    assert "Machine:" not in stored["notes"] and "Measured:" not in stored["notes"]
    marked = deck.stored_measurement(go.Figure(), "measured on elsewhere")  # the mark a figure carries (CLI export)
    assert "measured on elsewhere" in deck.slides_of({"x": marked}, "Measured: now")[0].notes


def test_every_stored_figure_carries_its_own_provenance():
    from specviz.core.measure import provenance
    from specviz.output.viz.stored import stored_figures

    found = stored_figures(provenance("cpu · float32 · onednn"))
    assert {"medusa_budget", "lookahead_sweep", "where_methods_win"} <= set(found)
    for name, fig in found.items():
        where = fig.layout.meta["measured"]
        assert where.startswith(("measured on", "batched-")) and "the computer running specviz" not in where, (
            name,
            where,
        )
    assert "under load" in found["where_methods_win"].layout.meta["measured"]  # prompt-kinds.json: 2.8 on 2 cores
