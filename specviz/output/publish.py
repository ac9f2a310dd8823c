"""The export command's work: get traces (run or load), draw the pages' figures, write images, an index, a deck."""

from __future__ import annotations

import datetime as dt
import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from specviz import methods
from specviz.core.measure import provenance
from specviz.core.model import LoadedModel
from specviz.core.prompts import PromptError, prepare, preset_prompts
from specviz.core.sampling import ConfigError, Sampling
from specviz.core.trace import Trace, TraceError, bundle_json, load_traces, read_file
from specviz.output.deck import DeckError, notes_text, slides_of, stored_measurement, write_deck
from specviz.output.export import FORMATS, ExportError, write_figure

DEFAULT_PRESET = "code-hints"  # a shipped prompt on which the methods win, when no prompt is given


@dataclass(frozen=True)
class Request:
    """What to export: where from (a prompt or saved traces), which methods, and where to."""

    out: Path | None = None  # folder for images, traces.json and index.html
    pptx: Path | None = None  # slide deck
    formats: tuple[str, ...] = ("png", "svg")
    names: tuple[str, ...] = ("ar", "medusa", "eagle", "lookahead")
    every: bool = False  # --all: every method and the stored measurements' figures
    prompt: str = ""
    preset: str = ""
    traces: Path | None = None

    def check(self) -> None:
        """ConfigError with one sentence for a request that cannot be carried out (before any model loads)."""
        if self.out is None and self.pptx is None:
            raise ConfigError("Give --out FOLDER (images) or --pptx DECK.pptx (slides), or both.")
        if self.pptx is not None and self.pptx.suffix.lower() != ".pptx":
            raise ConfigError(f"--pptx must name a .pptx file, got {self.pptx.name!r}.")
        if bad := [f for f in self.formats if f not in FORMATS]:
            raise ConfigError(f"Unknown image format {bad[0]!r}; choose from {', '.join(FORMATS)}.")
        if self.traces is not None and not self.traces.is_file():
            raise ConfigError(f"Trace file {self.traces} does not exist.")
        for n in self.names:
            methods.get(n)  # UnknownMethod (a ValueError) names the methods there are


def prompt_text(req: Request) -> tuple[str, str]:
    """(prompt, where it came from): --prompt, a shipped preset by id, or the default preset."""
    if req.prompt:
        return req.prompt, "--prompt"
    items = {p.id: p for p in preset_prompts()}
    pid = req.preset or DEFAULT_PRESET
    if pid not in items:
        raise PromptError(f"No shipped prompt {pid!r}; choose from {', '.join(items)}.")
    return items[pid].text, f"the shipped prompt {pid!r}"


def run_traces(lm: LoadedModel, req: Request, sampling: Sampling) -> dict[str, Trace]:
    """Every requested method (plain decoding first) on the prompt, with its default settings, after a warm-up.

    One run each: the figures show the runs; for speedups with their spread, the pages or `bench`."""
    names = ["ar", *(methods.available() if req.every else [n for n in req.names if n != "ar"])]
    from specviz.tuning import fit

    configs = fit.prepare(lm, {}, names)  # every default Config; PLD steers by this device's curve
    text, _ = prompt_text(req)
    ids = prepare(lm, text)
    warm = Sampling(max_new_tokens=4, temperature=sampling.temperature, seed=sampling.seed)
    for n in names:  # first calls pay one-off costs (kernel selection, allocation); keep them out of the figures
        methods.get(n).generate(lm, ids, warm, configs[n], prompt=text)
    return {n: methods.get(n).generate(lm, ids, sampling, configs[n], prompt=text) for n in names}


def load(req: Request) -> dict[str, Trace]:
    assert req.traces is not None
    traces = load_traces(read_file(req.traces))
    if unknown := [t.method for t in traces if t.method not in methods.available()]:  # names become file names
        raise TraceError(f"The file holds a trace of {unknown[0][:40]!r}, not a method specviz runs.")
    return {t.method: t for t in traces}


def figures(traces: dict[str, Trace], lm: LoadedModel | None, every: bool) -> dict[str, go.Figure]:
    """The cross-method and per-method figures of the traces; with `every`, the stored and latency figures too."""
    from specviz.output.viz.gallery import figures as trace_figures

    out = trace_figures(traces)
    if every:
        from specviz.output.viz.stored import stored_figures

        here = provenance(lm.describe()) if lm is not None else None
        out |= stored_figures(here)
        if lm is not None:
            from specviz.output.viz.latency import latency_figure
            from specviz.tuning.probe import cached_curve

            curve = cached_curve(lm)
            flag = f", disturbed: {curve.contended}" if curve.contended else ""
            out["latency_curve"] = stored_measurement(latency_figure(curve, here=here), curve.measured(here) + flag)
    return out


def notes(traces: dict[str, Trace], lm: LoadedModel | None, source: str) -> str:
    """The deck's speaker notes: model, device, machine, date, then the prompt and each method's settings."""
    first = next(iter(traces.values()))
    device = lm.describe() if lm is not None else first.device
    settings: dict[str, Any] = {
        "Source": source,
        "Prompt": first.prompt[:300] + ("…" if len(first.prompt) > 300 else ""),
    }
    settings |= {f"Settings ({n})": json.dumps(t.config, sort_keys=True) for n, t in traces.items()}
    return notes_text(provenance(device), lm.name if lm is not None else first.model, settings, live=lm is not None)


def index_html(names: list[str], title: str) -> str:
    """A page showing every PNG at once, for review."""
    cells = "\n".join(
        f'<figure><img src="{html.escape(n)}.png" loading="lazy"><figcaption>{html.escape(n)}</figcaption></figure>'
        for n in names
    )
    style = (
        "body{font-family:sans-serif;margin:16px}main{display:grid;grid-template-columns:repeat(auto-fill,"
        "minmax(480px,1fr));gap:16px}img{width:100%;border:1px solid #e2e8f0}figcaption{font-size:13px}"
    )
    return (
        f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title><style>{style}</style>"
        f"<h1>{html.escape(title)}</h1><main>\n{cells}\n</main>\n"
    )


def write(req: Request, traces: dict[str, Trace], figs: dict[str, go.Figure], note: str) -> list[str]:
    """Write what was asked for; the lines to report. ExportError / DeckError become ConfigError (one line)."""
    done = []
    try:
        if req.out is not None:
            req.out.mkdir(parents=True, exist_ok=True)
            (req.out / "traces.json").write_text(bundle_json(list(traces.values())))
            for name, fig in figs.items():
                for fmt in req.formats:
                    write_figure(fig, req.out / f"{name}.{fmt}", slide=True)
            if "png" in req.formats:
                stamp = dt.date.today().isoformat()
                (req.out / "index.html").write_text(index_html(list(figs), f"specviz figures, {stamp}"))
            done.append(f"wrote {len(figs) * len(req.formats)} images and traces.json to {req.out}")
        if req.pptx is not None:
            write_deck(req.pptx, slides_of(figs, note))
            done.append(f"wrote {len(figs)} slides to {req.pptx}")
    except (ExportError, DeckError) as exc:
        raise ConfigError(str(exc)) from None
    return done
