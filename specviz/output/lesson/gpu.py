"""The lesson's GPU stop: a forward's cost against the tokens it carries, relative to one token, measured on the
recording's CPU (the pack's cost curve) and on one H200 (a stored probe, docs/gpu/), and for a 7B model on the A100
and the H100 a roofline model from published peaks; each reduced to what a check can name.

Nothing here runs the model: the curves are stored measurements, the GPU lines arithmetic.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from specviz.core.paths import REPO

# published peaks (vendor data sheets), for a model of other hardware: (read TB/s, dense bf16 TFLOP/s)
CHIPS = {"a100": ("A100 80GB (SXM)", 2.039, 312.0), "h100": ("H100 (SXM)", 3.35, 989.0)}
SEVEN_B = 6.74e9  # a 7B model's parameters (LLaMA-2-7B)
FLAT = 1.5  # a pass "costs about one" until it costs this many times one token: the end of the flat stretch
# one forward of SmolLM2-135M over k new tokens on one H200, fp32 (scripts/gpu-check.sh; the run's notes are
# docs/gpu/2026-12-04-h200.md): the file's first line, the probe of the written-out eager forward
H200_PROBE = REPO / "docs" / "gpu" / "2026-12-04-h200" / "probe.txt"
H200_READ_TBS = 4.8  # the H200's published memory bandwidth (NVIDIA's data sheet), for the weights' read floor
SMALL_PARAMS = 134.5e6  # SmolLM2-135M's parameters (as specviz.tuning.hardware.SMALL, which imports torch)
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def knee(params: float, bytes_per: float, read_tbs: float, tflops: float) -> float:
    """MODEL: tokens per forward where reading the weights once takes as long as their arithmetic."""
    floor = params * bytes_per / (read_tbs * 1e12)
    per_token = 2 * params / (tflops * 1e12)
    return floor / per_token


def relative(ks: Sequence[float], ms: Sequence[float]) -> list[float]:
    """Each forward's time over the one-token forward's (the curve's first): its cost in tokens' worth."""
    if not ms or ms[0] <= 0:  # a curve that does not start at a positive time has no "one token" to compare to
        raise ValueError("a cost curve starts at a positive time")
    return [m / ms[0] for m in ms]


def crossing(ks: Sequence[float], ms: Sequence[float], at: float = FLAT) -> float | None:
    """The tokens one pass carries when it first costs `at`× one token, interpolated on the measured curve; None
    when it never does within the tokens measured."""
    rel = relative(ks, ms)
    for (k0, r0), (k1, r1) in zip(zip(ks, rel), zip(ks[1:], rel[1:])):
        if r0 <= at <= r1:
            return k0 + (at - r0) * (k1 - k0) / max(r1 - r0, 1e-12)
    return None


def flat_until(ks: list[float], ms: list[float], at: float = FLAT) -> float:
    """The tokens one pass carries before it costs `at`× one token (the most measured when it never does)."""
    found = crossing(ks, ms, at)
    return found if found is not None else (ks[-1] if relative(ks, ms)[-1] < at else ks[0])


def cost_at(ks: Sequence[float], ms: Sequence[float], k: float) -> float:
    """The forward's cost at `k` tokens over its cost at one, interpolated between the tokens measured (never
    beyond them: ValueError)."""
    if not ks[0] <= k <= ks[-1]:
        raise ValueError(f"the curve was measured from {ks[0]:g} to {ks[-1]:g} tokens, not at {k:g}")
    return _interpolate(ks, relative(ks, ms), k)


def _interpolate(ks: Sequence[float], vs: Sequence[float], k: float) -> float:
    """vs at k, linear between the two measured points around it."""
    for (k0, v0), (k1, v1) in zip(zip(ks, vs), zip(ks[1:], vs[1:])):
        if k0 <= k <= k1:
            return v0 + (k - k0) * (v1 - v0) / max(k1 - k0, 1e-12)
    return float(vs[0])


@dataclass(frozen=True)
class Probe:
    """A stored latency probe: ms per forward against new tokens, and where and when it was measured."""

    ks: tuple[float, ...]
    ms: tuple[float, ...]
    chip: str  # "NVIDIA H200", read from the probe's device
    model: str  # "135M", read from its model's name
    dtype: str  # "float32"
    day: str  # "2026-12-04"
    torch: str
    repeats: int
    source: str  # the file, from the repository's root

    def label(self) -> str:
        """'NVIDIA H200, 135M fp32': the legend's name for its curve (its day said beside it)."""
        return f"{self.chip}, {self.model} {self.dtype.replace('float', 'fp')}"

    def where(self) -> str:
        """Where the probe was measured, for a figure's notes (names no CPU: its badge names the GPU)."""
        return (f"{self.chip}'s curve from {self.source}, measured on {self.day} ({self.repeats} repeats, "
                f"{self.model} {self.dtype}, torch {self.torch})")  # fmt: skip

    def floor_ms(self) -> float:
        """MODEL: ms to read the model's weights once at the H200's published bandwidth (no arithmetic, no launch)."""
        return SMALL_PARAMS * BYTES[self.dtype] / (H200_READ_TBS * 1e12) * 1e3


@cache
def h200_probe(path: Path = H200_PROBE) -> Probe:
    """The H200 probe (the file's first line); ValueError with one sentence when it does not hold a curve."""
    data = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    ks, ms = tuple(float(k) for k in data["ks"]), tuple(float(m) for m in data["ms"])
    if len(ks) < 2 or len(ks) != len(ms) or list(ks) != sorted(set(ks)) or ks[0] != 1:
        raise ValueError(f"{path.name}: a probe gives one time for each number of tokens, from one token up")
    if not all(m > 0 and math.isfinite(m) for m in ms):
        raise ValueError(f"{path.name}: a probe's times are positive")
    parts = [p.strip() for p in str(data["device"]).split("·")]
    chip = next((p for p in parts if p.startswith(("NVIDIA", "AMD", "Intel"))), parts[-2])
    size = re.search(r"(\d+(?:\.\d+)?[mb])\b", str(data["model"]), re.IGNORECASE)
    where = data["provenance"]
    return Probe(ks, ms, chip, size.group(1).upper() if size else str(data["model"]), parts[-1],
                 str(where["date"])[:10], str(where.get("torch", "")), int(data.get("repeats", 0)),
                 path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.name)  # fmt: skip


def whatif_functions(ks: list[float], ms: list[float], gpu: Probe | None = None) -> dict[str, Callable[..., Any]]:
    """flat(device): tokens before a pass costs 1.5× one (measured on the CPU, modelled on the A100 and H100);
    knee(chip); flat_at(): that 1.5; cpu_cost(k): the recording's forward at k tokens over its one-token
    forward; gpu_cost(k), gpu_ms(k): the H200's, and its time in ms (both interpolated between the tokens
    measured); gpu_tokens(): the most tokens its probe measured; gpu_floor_ms(): reading its weights once, a model."""
    gpu = gpu or h200_probe()
    knees = {k: knee(SEVEN_B, 2, c[1], c[2]) for k, c in CHIPS.items()}
    flats = {"cpu": flat_until(ks, ms)} | {k: FLAT * v for k, v in knees.items()}
    return {
        "knee": lambda name: round(knees[name], 2),
        "flat": lambda name: round(flats[name], 2),
        "flat_at": lambda: FLAT,
        "cpu_cost": lambda k: round(cost_at(ks, ms, float(k)), 4),
        "gpu_cost": lambda k: round(cost_at(gpu.ks, gpu.ms, float(k)), 4),
        "gpu_ms": lambda k: round(cost_at(gpu.ks, gpu.ms, float(k)) * gpu.ms[0], 3),
        "gpu_tokens": lambda: int(gpu.ks[-1]),
        "gpu_floor_ms": lambda: round(gpu.floor_ms(), 4),
    }


def _curve(stored: dict[str, Any]) -> tuple[list[float], list[float], str]:
    """The recorded cost curve (the latency_curve stop's data in a pack) and the machine it was measured on, named
    as its provenance names it (a pack is replayed on other screens: never "this CPU")."""
    from specviz.output.deck import machines

    for entry in stored.values():
        data = entry.get("data", {}) if isinstance(entry, dict) else {}
        if "ks" in data:
            ks, ms = [float(k) for k in data["ks"]], [float(m) for m in data["ms"]]
            if not ks or len(ks) != len(ms) or not all(m > 0 and math.isfinite(m) for m in ms):
                raise ValueError("the recorded cost curve needs one positive time for each number of tokens")
            named = machines(str(entry.get("measured", "")))
            return ks, ms, named[0].split(",")[0] if named else "the recording's CPU"
    raise KeyError("the pack holds no cost curve (a latency_curve stop) to draw this machine from")


def _rounded(x: float | None) -> float | None:
    """A crossing as flat() gives it (two decimals), so a legend and a narration's fill of it agree."""
    return None if x is None else round(x, 2)


def whatif(stored: dict[str, Any]) -> tuple[Any, dict[str, Callable[..., Any]], str]:
    """The GPU stop's figure (badged with the H200 probe's chip and day), its functions, and where its curves
    were measured."""
    from specviz.output.deck import badge
    from specviz.output.viz.whatif import Line, whatif_figure

    ks, ms, cpu = _curve(stored)
    gpu = h200_probe()
    fns = whatif_functions(ks, ms, gpu)
    lines = [
        Line(f"{cpu}, 135M fp32", tuple(ks), tuple(relative(ks, ms)), _rounded(crossing(ks, ms))),
        Line(gpu.label(), gpu.ks, tuple(relative(gpu.ks, gpu.ms)), _rounded(crossing(gpu.ks, gpu.ms)), day=gpu.day),
    ]
    size = f"{SEVEN_B / 1e9:.0f}B"
    lines += [Line(f"{size} on {c[0]}, bf16", flat=fns["flat"](n), knee=fns["knee"](n)) for n, c in CHIPS.items()]
    chips = " and ".join(c[0].split()[0] for c in CHIPS.values())
    title = (
        f"Where the knee sits: {cpu} and {gpu.chip} measured, {size} on GPUs modelled<br><sup>the {chips} "
        f"lines a MODEL from published peaks ({size}, bf16), not a measurement</sup>"
    )
    where = f"the recording's curve on {cpu}; the {gpu.where()}; {size} on the {chips} modelled from published peaks"
    return badge(whatif_figure(lines, FLAT, title), f"stored: {gpu.chip}, {gpu.day}"), fns, where
