"""What the lesson reads of the pages, derived from their declarations (specviz/output/pages/): no table here.

A stop's page, figure and settings are checked against the page's own declaration, so a stop's values are ones
the page's widgets accept, and its figure one the page (or the lesson, from the page's runs) draws.
"""

from __future__ import annotations

from specviz.output.pages import PAGES, REPEATS, Figure, Page, by_source

__all__ = ["COMPUTED", "PAGES", "REPEATS", "Figure", "Page", "figure_of"]

COMPUTED = by_source("computed")  # drawn from stored data or arithmetic (output/lesson/formulas.py), no run


def figure_of(page: str, name: str) -> Figure:
    """A stop's figure as its page declares it."""
    return PAGES[page].figure(name)
