"""This device's roofline, measured: its read bandwidth and matmul peak, and what they mean for one forward pass.

One forward must read every weight whatever it carries (the memory floor), and does 2·params FLOPs per token
in it (the compute ceiling). Below the knee, where the two meet, a forward of k tokens costs about what one
costs: the flat stretch every method spends its drafts in. Peaks are measured once per process and device
setting, as the best of several short runs (the best is what the hardware can do; a busy machine only slows
some runs), and carry their provenance.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from specviz.core.kernels import bf16_native
from specviz.core.measure import Provenance, provenance
from specviz.core.model import LoadedModel
from specviz.tuning.hardware import ModelShape, model_shape
from specviz.tuning.probe import LatencyCurve, cached_curve

READ_MB = {"cpu": 256, "cuda": 2048}  # a buffer well past the caches: what a forward's weight read meets
MATMUL = (512, 1024, 4096)  # [m, k] @ [k, n]: an MLP-shaped product, big enough to reach the peak
BUDGET_S = 0.5  # per measurement: short runs repeated for at most this long (one at least)


@dataclass(frozen=True)
class Peaks:
    """Measured read bandwidth and dense matmul throughput of one device at one dtype."""

    device: str  # "cpu" or "cuda:0 · NVIDIA H200"
    dtype: str  # the matmul's dtype: "float32", "bfloat16"
    read_gbs: float  # GB/s, reading a large buffer once (a sum)
    tflops: float  # dense matmul TFLOP/s at `dtype`
    threads: int  # torch's intra-op threads when measured (a CPU's peak depends on them)
    provenance: dict = field(default_factory=dict)  # measure.Provenance as a dict

    def measured(self) -> str:
        """Where and when, for a caption: the machine named, never 'this machine' (a visitor's screen is not
        the server the app runs on)."""
        return Provenance.from_dict(self.provenance).describe(None)


def _best_s(fn: Callable[[], object], sync: Callable[[], None]) -> float:
    """The fastest of short runs of `fn` (one untimed first), repeated for up to BUDGET_S (one at least, however
    slow: an emulated bf16 product took 10 s a run on an AVX2 CPU)."""
    fn()
    sync()
    best, spent, runs = float("inf"), 0.0, 0
    while runs == 0 or spent < BUDGET_S:
        t = time.perf_counter()
        fn()
        sync()
        took = time.perf_counter() - t
        best, spent, runs = min(best, took), spent + took, runs + 1
        if runs >= 50:
            break
    return best


@torch.inference_mode()
def measure_peaks(device: str = "cpu", dtype: str = "float32") -> Peaks:
    """Read bandwidth (the sum of a buffer far larger than the caches) and matmul peak, on `device` at `dtype`."""
    dev, dt = torch.device(device), getattr(torch, dtype)
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    buf = torch.ones(READ_MB.get(dev.type, 256) * 2**20 // 4, dtype=torch.float32, device=dev)
    read_s = _best_s(lambda: buf.sum(), sync)
    m, k, n = MATMUL
    gen = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn(m, k, generator=gen, device=dev).to(dt)
    b = torch.randn(k, n, generator=gen, device=dev).to(dt)
    mm_s = _best_s(lambda: a @ b, sync)
    name = f"{device} · {torch.cuda.get_device_name(dev)}" if dev.type == "cuda" else device
    return Peaks(
        device=name,
        dtype=dtype,
        read_gbs=round(buf.nbytes / read_s / 1e9, 1),
        tflops=round(2 * m * k * n / mm_s / 1e12, 4),
        threads=torch.get_num_threads(),
        provenance=provenance(f"{name} · {dtype}").to_dict(),
    )


_MEASURED: set[tuple[str, str, int]] = set()  # the settings `peaks` holds: those are read without the model's lock


@functools.cache
def peaks(device: str = "cpu", dtype: str = "float32", threads: int = 0) -> Peaks:
    """`measure_peaks`, once per process for each device, dtype and thread count (threads: the caller's
    torch.get_num_threads(), so a changed setting is measured again)."""
    got = measure_peaks(device, dtype)
    _MEASURED.add((device, dtype, threads))
    return got


class Busy(RuntimeError):
    """The model is running another visitor's job, and what was asked for must be measured on it first."""


@dataclass(frozen=True)
class Roof:
    """The roofline of one forward of a model on measured peaks, against k new tokens."""

    floor_ms: float  # reading the weights (and a prefix's KV cache) once, at the measured bandwidth
    ceiling_ms: list[float]  # 2·params·k FLOPs at the measured peak, per k
    ks: list[int]
    knee: float  # the k where the two meet: up to it a forward costs about the floor
    label: str  # "CPU, fp32"

    def at(self, k: float) -> float:
        """MODEL: the roofline's time for k tokens, max(floor, ceiling)."""
        return max(self.floor_ms, self.ceiling_ms[0] * k / self.ks[0])


def roof(p: Peaks, model: ModelShape, ks: list[int], prefix: int, bytes_per_value: float) -> Roof:
    """The floor and the ceiling of one forward of `model` over a `prefix`-token KV cache, on peaks `p`."""
    floor_s = (model.weight_bytes(bytes_per_value) + model.kv_bytes(bytes_per_value, prefix)) / (p.read_gbs * 1e9)
    per_token_s = 2 * model.params / (p.tflops * 1e12)
    return Roof(
        floor_ms=1000 * floor_s,
        ceiling_ms=[1000 * per_token_s * k for k in ks],
        ks=list(ks),
        knee=floor_s / per_token_s,
        label=device_label(p),
    )


SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "float64": "fp64"}


def device_label(p: Peaks) -> str:
    """'CPU, fp32' or 'GPU (NVIDIA H200), bf16'."""
    where = "CPU" if p.device == "cpu" else f"GPU ({p.device.partition(' · ')[2] or p.device})"
    return f"{where}, {SHORT.get(p.dtype, p.dtype)}"


def explain(p: Peaks, r: Roof, model: ModelShape, bytes_per_value: float, where: bool = True) -> str:
    """One sentence: why verification is nearly free on this device and setting, and where that ends; `where`
    adds the peaks' provenance (off where a caption gives it once for several)."""
    weights = model.weight_bytes(bytes_per_value) / 1e6
    head = (
        f"**{r.label}**: a forward reads {weights:.0f} MB of weights whatever it carries, {r.floor_ms:.1f} ms at "
        f"the measured {p.read_gbs:.0f} GB/s, and computes at {1000 * p.tflops:.3g} GFLOP/s"  # 3 figures: 0.4, not 0
    )
    if p.device != "cpu":
        tree = ": a tree of 60 verifies for about the price of one token" if r.knee >= 60 else ""
        tail = (
            f", so tokens ride along nearly free up to about {r.knee:.0f} per forward{tree}, which is where the "
            "papers' speedups come from (for a model this small, fixed per-layer launch costs add on top)."
        )
    elif p.dtype == "float32":
        tail = (
            f", so only up to about {r.knee:.0f} token{'' if round(r.knee) == 1 else 's'} ride along nearly "
            "free; past that each token adds its "
            "arithmetic, which is why small trees and short chains win on a CPU."
        )
    else:
        tail = (
            f": half fp32's bytes halve the floor, and at this peak the knee sits at about {r.knee:.0f} tokens "
            "(the bf16 mode: `--dtype bf16` on the command line; the app runs fp32, where greedy output is exact)."
        )
    return f"{head}{tail}" + (f" ({p.measured()}.)" if where else "")


def emulated_bf16(lm: LoadedModel) -> str:
    """Where the model runs fp32 on a CPU that has no bf16 units, one sentence saying why no bf16 roof is drawn;
    else ''."""
    if lm.device.type != "cpu" or lm.dtype != torch.float32 or bf16_native(lm.device):
        return ""
    return (
        "**CPU, bf16**: emulated here (no avx512_bf16 or AMX units in use), so a bf16 product runs slower than an "
        "fp32 one and halving the bytes buys nothing: no bf16 roof is drawn, and the draft heads run in fp32."
    )


def device_roofs(lm: LoadedModel, ks: list[int], prefix: int, wait: bool = True) -> list[tuple[Roof, str, Peaks]]:
    """(roofline, its sentence without provenance, the peaks it is drawn from) for the loaded model's device and
    dtype first; then, on a CPU in fp32 that computes bf16 natively, the same CPU in bf16; and a GPU's in bf16 when
    one is present but the model runs on the CPU. Peaks measured before are read without the model's lock; a
    measurement takes it, and with `wait` False raises Busy instead of waiting for it."""
    model = model_shape(lm)
    dtype = str(lm.dtype).removeprefix("torch.")
    settings = [(str(lm.device), dtype, lm.dtype.itemsize)]
    if lm.device.type == "cpu" and lm.dtype == torch.float32 and bf16_native(lm.device):
        settings.append(("cpu", "bfloat16", 2))  # where bf16 is emulated its matmul is no roof (43 s to measure)
    if lm.device.type == "cpu" and torch.cuda.is_available():
        settings.append(("cuda:0", "bfloat16", 2))
    threads = torch.get_num_threads()
    if all((device, dt, threads) in _MEASURED for device, dt, _n in settings):
        return [_drawn(peaks(device, dt, threads), model, ks, prefix, nbytes) for device, dt, nbytes in settings]
    if not lm.lock.acquire(blocking=wait):
        raise Busy("the model is running another visitor's job; its peaks are measured when it is free")
    try:  # the model is shared (the app's sessions): nothing else runs on it while this measures
        return [_drawn(peaks(device, dt, threads), model, ks, prefix, nbytes) for device, dt, nbytes in settings]
    finally:
        lm.lock.release()


def stored_curve(lm: LoadedModel) -> LatencyCurve | None:
    """This device's stored latency curve, read without the model's lock (probe.cached_curve, told not to measure);
    None when it has none yet, or one due to be measured again."""

    def unmeasured(_lm: LoadedModel) -> LatencyCurve:
        raise Busy("the latency curve is not measured yet")

    try:
        return cached_curve(lm, measure=unmeasured)
    except Busy:
        return None


def _drawn(p: Peaks, model: ModelShape, ks: list[int], prefix: int, nbytes: float) -> tuple[Roof, str, Peaks]:
    r = roof(p, model, ks, prefix, nbytes)
    return r, explain(p, r, model, nbytes, where=False), p
