"""The Lineage page: the works and what each changed, with the stored Spec-Bench numbers of those that run here."""

from __future__ import annotations

from specviz.output.pages.page import Figure, Page

PAGE = Page("lineage", "views/lineage.py", "Lineage", figures=(Figure("lineage", source="lineage", wide=True),))
