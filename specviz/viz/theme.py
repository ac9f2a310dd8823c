"""One look for every figure, with a 'slide' variant: white, large fonts, 16:9."""

from __future__ import annotations

import plotly.graph_objects as go

# one colour per method, used by every chart so lanes and bars match across pages
METHOD_COLORS = {
    "ar": "#6b7280",
    "hf": "#9ca3af",
    "sps": "#d97706",
    "pld": "#0891b2",
    "hf-pld": "#67e8f9",
    "medusa": "#7c3aed",
    "eagle": "#059669",
    "jacobi": "#f59e0b",
    "lookahead": "#db2777",
}
ACCEPT, REJECT, NEUTRAL, DRAFT, VERIFY = "#16a34a", "#dc2626", "#94a3b8", "#f59e0b", "#2563eb"
FONT = "Inter, Helvetica Neue, Arial, sans-serif"
SLIDE_SIZE = (1600, 900)


def method_color(name: str) -> str:
    return METHOD_COLORS.get(name, "#334155")


def apply(fig: go.Figure, title: str | None = None, slide: bool = False, height: int | None = None) -> go.Figure:
    """Style a figure in place and return it; `slide` gives a 16:9 white figure with large type."""
    fig.update_layout(
        template="plotly_white",
        font={"family": FONT, "size": 22 if slide else 13},
        title={"text": title, "x": 0.01, "xanchor": "left"} if title else None,
        margin={"l": 60, "r": 30, "t": 70 if title else 30, "b": 50},
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "right", "x": 1},
        hoverlabel={"font": {"family": FONT}},
    )
    if slide:
        fig.update_layout(width=SLIDE_SIZE[0], height=SLIDE_SIZE[1], paper_bgcolor="white", plot_bgcolor="white")
    elif height:
        fig.update_layout(height=height)
    return fig
