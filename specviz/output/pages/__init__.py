"""The app's pages, each declared once (one module a page): its controls, the methods it runs, its figures.

views/ builds its widgets and draws its figures from these; the lesson validates a stop's page, figure and
settings against them, runs what they run and draws what they draw; the deck and the export gallery too.
"""

from __future__ import annotations

from specviz.output.pages import acceptance, compare, data, eagle, home, lineage, lookahead, medusa, timeline
from specviz.output.pages.page import REPEATS, SOURCES, Control, Figure, Page, Shown, config_names

__all__ = [
    "NAVIGATION",
    "PAGES",
    "REPEATS",
    "SOURCES",
    "Control",
    "Figure",
    "Page",
    "Shown",
    "by_source",
    "figure",
    "get",
    "ranges",
]

# in the app's order
PAGES: dict[str, Page] = {
    p.id: p
    for p in (
        home.PAGE,
        timeline.PAGE,
        medusa.PAGE,
        eagle.PAGE,
        lookahead.PAGE,
        acceptance.PAGE,
        compare.PAGE,
        data.PAGE,
        lineage.PAGE,
    )
}
# the app's navigation (app.py), the first page its default: (file, title, icon) of every page, in order
NAVIGATION: tuple[tuple[str, str, str], ...] = tuple((p.file, p.title, p.icon) for p in PAGES.values())


def get(page: str) -> Page:
    return PAGES[page]


def figure(name: str) -> Figure:
    """A figure by name, on whichever page declares it (names are unique across pages)."""
    return next(f for p in PAGES.values() for f in p.figures if f.name == name)


def by_source(*sources: str) -> tuple[str, ...]:
    """The names of every figure drawn from one of `sources` (SOURCES)."""
    return tuple(f.name for p in PAGES.values() for f in p.figures if f.source in sources)


def ranges(method: str) -> dict[str, Control]:
    """`method`'s Config fields a page's number control sets, each with that control (its range: `low`, `high`): a
    control naming its method, else the page's own method's and those it runs beside it on the same fields. The
    Compare page's inputs for a method take these, so none reaches past the method pages' sliders."""
    out: dict[str, Control] = {}
    have = config_names(method)  # DFlash beside EAGLE has no tree
    for p in PAGES.values():
        for c in p.controls:
            whose = {c.method} if c.method else {p.method, *(b.method for b in p.beside)}
            if c.field in have and c.kind in ("int", "float") and method in whose - {""}:
                out.setdefault(c.field, c)
    return out
