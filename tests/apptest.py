"""Shared AppTest helpers: open the app on one page with sidebar values set, and read its charts."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")


LIVE_PAGES = ("compare", "medusa", "eagle", "lookahead")  # pages that time the method against plain decoding


def app_on(page: str, repeats: int = 1, **sidebar) -> AppTest:
    """The app after one run of `page`; `sidebar` sets sidebar.<key> values (max_new_tokens defaults to 12).

    The live pages run each method `repeats` times against plain decoding (the app's default is 3); tests
    that only check what is drawn use one run, labelled as such on the page.
    """
    at = AppTest.from_file(APP, default_timeout=600)
    for key, value in {"max_new_tokens": 12, **sidebar}.items():
        at.session_state[f"sidebar.{key}"] = value
    for name in LIVE_PAGES:
        at.session_state[f"{name}.repeats"] = repeats
    # straight to the page (a first run of the home page cost every test half a second); before any run
    # AppTest finds a page by its file name, so check that st.navigation registered that very file
    at.switch_page(page).run()
    ran = at._registered_pages.get(at._page_hash, {}).get("script_path")
    assert ran and Path(ran).resolve() == (Path(APP).parent / page).resolve(), (page, ran)
    return at


def chart_specs(at: AppTest) -> list[dict]:
    """Every plotly chart on the page, as its JSON spec."""
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def chart_title(spec: dict) -> str:
    return (spec["layout"].get("title") or {}).get("text", "")


def titled(specs: list[dict], word: str) -> dict:
    """The first chart whose title contains `word`."""
    return next(s for s in specs if word in chart_title(s))


def turns_taken(monkeypatch, module, name: str) -> list[str | None]:
    """Spy on `module.name`, a library function that runs the model (its first argument): the name of the turn in
    line (specviz.tuning.turns) each call ran in, None for a call made outside any turn."""
    from specviz.tuning import turns

    seen: list[str | None] = []
    real = getattr(module, name)

    def spy(lm, *args, **kw):
        job = turns.of(lm).held()
        seen.append(job.request.what if job is not None else None)
        return real(lm, *args, **kw)

    monkeypatch.setattr(module, name, spy)
    return seen
