"""specviz: step through how LLM decoding is accelerated, on a real model. Run: streamlit run app.py"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from specviz.output.pages import NAVIGATION
from ui import lesson
from ui.common import deck_button, sidebar

ROOT = Path(__file__).parent
# the pages' declarations give the navigation: (file, title, icon) each; a page appears once its file exists. The
# folder is views/, not pages/: a pages/ folder also switches on Streamlit's older auto-discovered multipage mode,
# under which AppTest reruns a page without this script (and its sidebar) after any widget change.

st.set_page_config(page_title="specviz", page_icon=":material/speed:", layout="wide")
pages = {
    f: st.Page(f, title=t, icon=i, default=(n == 0)) for n, (f, t, i) in enumerate(NAVIGATION) if (ROOT / f).is_file()
}
nav = st.navigation(list(pages.values()))
lesson.route(pages, nav)  # a lesson stop just chosen on another page goes there first
with st.sidebar:
    lesson.controls(st.sidebar)
    sidebar()
stop = lesson.banner(pages, nav)  # the stop's header and narration above the page
if lesson.page_runs(stop):  # a recorded stop is its slide; its page below only when asked (ui.lesson_pack)
    nav.run()
lesson.focus(stop)  # the figure the page just drew, in focus at the top
deck_button(nav.title)  # after the page: it holds every figure the page drew
