"""specviz: step through how LLM decoding is accelerated, on a real model. Run: streamlit run app.py"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from ui.common import sidebar

ROOT = Path(__file__).parent
# (file, title, icon); a page appears once its file exists
PAGES = [
    ("pages/home.py", "Why parallel decoding", ":material/home:"),
    ("pages/timeline.py", "Timeline", ":material/timeline:"),
    ("pages/medusa.py", "Medusa", ":material/account_tree:"),
    ("pages/eagle.py", "EAGLE", ":material/flight:"),
    ("pages/lookahead.py", "Lookahead & Jacobi", ":material/grid_on:"),
    ("pages/acceptance.py", "Acceptance decisions", ":material/rule:"),
    ("pages/compare.py", "Compare methods", ":material/leaderboard:"),
]

st.set_page_config(page_title="specviz", page_icon=":material/speed:", layout="wide")
nav = st.navigation([st.Page(f, title=t, icon=i, default=(n == 0))
                     for n, (f, t, i) in enumerate(PAGES) if (ROOT / f).is_file()])
with st.sidebar:
    sidebar()
nav.run()
