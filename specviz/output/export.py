"""Static images of figures for slides (kaleido drives the system chromium)."""

from __future__ import annotations

import contextlib
import copy
import threading
import warnings
from pathlib import Path

import plotly.graph_objects as go

from specviz.output.viz.theme import apply

FORMATS = ("png", "svg", "pdf")
_started = threading.Lock()
_server = {"up": False}


class ExportError(RuntimeError):
    """An image that could not be written (usually: no chromium installed)."""


def _ensure_server() -> None:
    """Start kaleido's persistent browser once: each image then costs ~0.6 s instead of ~2.3 s."""
    import kaleido

    with _started:
        if not _server["up"]:
            with contextlib.suppress(Exception):  # an already-running server is fine
                kaleido.start_sync_server(silence_warnings=True)
            _server["up"] = True


def slide_version(fig: go.Figure) -> go.Figure:
    """A copy of the figure in the slide theme: white, large fonts, 16:9."""
    out = go.Figure(copy.deepcopy(fig.to_dict()))
    title = out.to_dict()["layout"].get("title", {}).get("text") or None
    return apply(out, title=title, slide=True)


def figure_bytes(fig: go.Figure, fmt: str = "png", slide: bool = False, scale: float = 2.0) -> bytes:
    """Render a figure to PNG, SVG or PDF bytes."""
    if fmt not in FORMATS:
        raise ExportError(f"Unknown image format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    import plotly.io as pio

    _ensure_server()
    target = slide_version(fig) if slide else fig
    try:
        with warnings.catch_warnings():  # plotly warns that kaleido's server ignores per-call options
            warnings.simplefilter("ignore", UserWarning)
            return pio.to_image(target, format=fmt, scale=scale if fmt == "png" else 1)
    except Exception as exc:
        raise ExportError(
            f"Could not render the image ({str(exc).splitlines()[0][:160]}); "
            "is chromium installed (apt-get install -y chromium)?"
        ) from exc


def write_figure(fig: go.Figure, path: Path, slide: bool = True) -> Path:
    """Write one figure; the format follows the file suffix."""
    path.write_bytes(figure_bytes(fig, path.suffix.lstrip("."), slide=slide))
    return path
