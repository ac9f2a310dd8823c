"""The home page: why parallel decoding (a forward pass costs about the same for one token and for many)."""

from __future__ import annotations

from specviz.output.pages.page import Figure, Page

PAGE = Page(
    "home",
    "views/home.py",
    "Why parallel decoding",
    figures=(
        Figure("latency_curve", source="latency"),  # this device's cost curve over its roofline
        Figure("gpu_whatif", source="computed", lesson_only=True),
        Figure("published_figures", source="computed", lesson_only=True),  # the papers' numbers, copied
    ),
)
