"""Each page is declared once (specviz/output/pages/): the lesson's stops, its deck and its checks read the
declarations, and no lesson module keeps a table of a page's figures or settings (issue 38, item 4)."""

from __future__ import annotations

import re
from pathlib import Path

import plotly.io as pio

from specviz import methods
from specviz.output.lesson import facts as lesson_facts
from specviz.output.lesson import pages as lesson_pages
from specviz.output.lesson.model import LESSON_FILE, load_lesson
from specviz.output.lesson.names import relabel
from specviz.output.lesson.pack import PACK_FILE, read
from specviz.output.lesson.settings import configs
from specviz.output.pages import NAVIGATION, PAGES, SOURCES, Shown

ROOT = Path(__file__).resolve().parents[2]
ROUTING = ["specviz/output/lesson/deck.py", "specviz/output/lesson/figures.py", "specviz/output/lesson/pages.py",
           "specviz/output/lesson/facts.py", "specviz/output/lesson/settings.py"]  # fmt: skip


def test_every_lesson_stop_draws_its_figure_from_its_pages_declaration():
    lesson, pack = load_lesson(LESSON_FILE), read(PACK_FILE)
    for stop in lesson.stops:
        for b in range(stop.frames):
            at = stop.at(b)
            declared = PAGES[at.page].figure(at.figure)  # KeyError: a stop's figure its page does not declare
            assert declared.source in SOURCES
            assert declared.draw is not None or declared.source != "runs", at.figure
            if declared.source != "runs" or pack.stops.get(stop.id, {}).get("stored", {}).get(at.figure):
                continue
            group = pack.group(at)
            assert group is not None, at.id
            runs = set(configs(at)[0]) | {"ar"}  # what the page declares it runs for this figure
            traces = {n: t for n, t in lesson_facts.traces(group).items() if n in runs}
            mine = PAGES[at.page].draw(at.figure, traces, Shown(at.widget_values(), at.step))
            shown, _measured = lesson_facts.figure(pack, at)  # relabelled, as the lesson shows it
            assert pio.to_json(relabel(mine)) == pio.to_json(shown), (stop.id, at.figure)


def test_the_declarations_are_the_only_tables():
    names = {f.name for p in PAGES.values() for f in p.figures}
    assert len(names) == sum(len(p.figures) for p in PAGES.values()), "a figure name is declared on two pages"
    for page in PAGES.values():
        assert (ROOT / page.file).is_file(), page.file
        assert all(c.key.startswith(f"{page.id}.") for c in page.controls), page.id
    for gone in ("FIGURES", "SETTINGS", "LESSON_ONLY", "OLD_SETTINGS"):
        assert not hasattr(lesson_pages, gone), gone


def test_the_navigation_is_the_declarations():
    """app.py's navigation is derived from the declarations: every declared page in it, every view declared."""
    assert [file for file, _title, _icon in NAVIGATION] == [p.file for p in PAGES.values()]
    assert all(title and icon.startswith(":material/") for _file, title, icon in NAVIGATION)
    views = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "views").glob("*.py"))
    assert views == sorted(p.file for p in PAGES.values()), "a view without a declaration, or one without a view"
    app = (ROOT / "app.py").read_text(encoding="utf-8")
    assert "NAVIGATION" in app and not any(title in app for _file, title, _icon in NAVIGATION), "a title in app.py"


def test_views_draw_no_figure_themselves():
    """A view hands its inputs to its page's declared figure (ui.declared.draw); it renders none itself.
    (tests/ui/test_pages_fast.py counts the charts each page renders against the figures drawn through it.)"""
    for view in (ROOT / "views").glob("*.py"):
        text = view.read_text(encoding="utf-8")
        assert not re.search(r"\b(show_figure|plotly_chart)\b", text), view.name


def test_lesson_routing_names_no_method_code_name():
    """Hydra and EAGLE-3 are named by the pages that run them; the lesson's routing derives them (issue 43)."""
    for code in ("hydra", "eagle3"):
        assert code in methods.available()
        for path in ROUTING:
            text = (ROOT / path).read_text(encoding="utf-8")
            assert not re.search(rf"\b{code}\b", text), (path, code)


def test_each_drafting_method_has_its_own_views_registered_by_one_page():
    """The pages register each method's own figures (what `export` writes) by import: every method but plain
    decoding, each by one page (the contract draws them from every method's run: test_figures_build_from_the_trace)."""
    from specviz.output.viz.gallery import views

    registered = [m for p in PAGES.values() for m in p.views]
    assert len(registered) == len(set(registered)), f"a method's views registered twice: {registered}"
    assert set(registered) == set(methods.available()) - {"ar"}, registered
    assert views("ar") is None and all(callable(views(m)) for m in registered)
