"""Why the gain depends on the machine: a measured batch × tokens latency surface, and a roofline model."""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from specviz.model import LoadedModel, crop_to
from specviz.paths import cache_root
from specviz.probe import LatencyCurve


@dataclass(frozen=True)
class Surface:
    """Median forward latency (ms) for a batch of b sequences each adding k new tokens."""

    device: str
    batches: list[int]
    ks: list[int]
    ms: list[list[float]]  # [batch index][k index]
    prefix_len: int

    def at(self, b: int, k: float) -> float:
        """Latency at batch b (measured row), interpolated in k."""
        return float(np.interp(k, self.ks, self.ms[self.batches.index(b)]))


@torch.inference_mode()
def probe_surface(
    lm: LoadedModel,
    batches: tuple[int, ...] = (1, 2, 4, 8, 16),
    ks: tuple[int, ...] = (1, 4, 16, 64),
    prefix_len: int = 64,
    repeats: int = 3,
) -> Surface:
    """Time forwards of b × k new tokens over a b × prefix cache; k interleaved within each repeat."""
    gen = torch.Generator().manual_seed(0)
    vocab = lm.hf.config.vocab_size
    rows = []
    for b in batches:
        prefix = torch.randint(100, vocab, (b, prefix_len), generator=gen).to(lm.device)
        extra = torch.randint(100, vocab, (b, max(ks)), generator=gen).to(lm.device)
        cache = lm.new_cache()
        lm.hf(input_ids=prefix, cache=cache, use_cache=True, logits_to_keep=1)
        samples: dict[int, list[float]] = {k: [] for k in ks}
        for _ in range(repeats):
            for k in ks:
                pos = torch.arange(prefix_len, prefix_len + k, device=lm.device).expand(b, k)
                t = time.perf_counter()
                lm.hf(input_ids=extra[:, :k], position_ids=pos, cache=cache, use_cache=True)
                if lm.device.type == "cuda":
                    torch.cuda.synchronize()
                samples[k].append((time.perf_counter() - t) * 1000)
                crop_to(cache, prefix_len)
        rows.append([round(statistics.median(samples[k]), 2) for k in ks])
    return Surface(lm.describe(), list(batches), list(ks), rows, prefix_len)


def cached_surface(lm: LoadedModel, refresh: bool = False) -> Surface:
    """The stored surface for this device, measured first if absent."""
    path = cache_root() / "probe" / (lm.describe().replace(" · ", "_").replace("/", "_") + ".surface.json")
    if path.is_file() and not refresh:
        try:
            return Surface(**json.loads(path.read_text()))
        except (ValueError, TypeError):
            pass
    surface = probe_surface(lm)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(surface)))
    return surface


def modeled_batch_speedup(surface: Surface, mean_accepted: float, width: float, draft_share: float) -> list[float]:
    """MODEL: speedup at each batch = A · L(b, 1) / (L(b, w) · (1 + draft share)), from the measured surface."""
    return [mean_accepted * surface.at(b, 1) / (surface.at(b, width) * (1 + draft_share)) for b in surface.batches]


@dataclass(frozen=True)
class Device:
    """A roofline: how fast weights stream in and how fast arithmetic runs."""

    name: str
    bandwidth_gbs: float  # memory bandwidth, GB/s
    tflops: float  # dense matmul throughput at the model's dtype, TFLOP/s
    overhead_ms: float = 0.0  # fixed cost per forward (launches, Python)


A100 = Device("A100 80GB (bf16)", 2039.0, 312.0, 0.0)
H100 = Device("H100 SXM (bf16)", 3350.0, 989.0, 0.0)


def fit_device(curve: LatencyCurve, params: float, bytes_per_param: float) -> Device:
    """This device's effective roofline, fitted to the measured latency curve.

    The 1-token pass sets the effective bandwidth; the widest pass, taken as compute-bound, sets FLOP/s.
    """
    t1, tk, k = curve.ms[0] / 1000, curve.ms[-1] / 1000, curve.ks[-1]
    tflops = 2 * params * k / tk / 1e12
    bandwidth = params * bytes_per_param / t1 / 1e9
    return Device(f"this device, fitted ({curve.device})", round(bandwidth, 1), round(tflops, 3), 0.0)


def step_ms(dev: Device, params: float, bytes_per_param: float, tokens: float, batch: int = 1) -> float:
    """MODEL: roofline time of one forward pass over `tokens` new tokens per sequence."""
    memory = params * bytes_per_param / (dev.bandwidth_gbs * 1e9)
    compute = 2 * params * tokens * batch / (dev.tflops * 1e12)
    return 1000 * max(memory, compute) + dev.overhead_ms


def modeled_speedup(
    dev: Device, params: float, bytes_per_param: float, mean_accepted: float, width: float, draft_share: float = 0.0
) -> float:
    """MODEL: A · t(1) / (t(width) · (1 + draft share)) on a roofline device."""
    t1 = step_ms(dev, params, bytes_per_param, 1)
    return mean_accepted * t1 / (step_ms(dev, params, bytes_per_param, width) * (1 + draft_share))


SMALL_PARAMS = 134.5e6  # SmolLM2-135M, used when no model is loaded (replay)
BIG_PARAMS = 6.7e9  # a Vicuna-7B-class model, the size the reference papers report on


def whatif(
    shapes: dict[str, tuple[float, float, float]], here: Device | None, params: float, bytes_here: float = 4.0
) -> dict[str, dict[str, float]]:
    """MODEL: speedup[device][method] from each method's measured (A, width, draft share)."""
    devices = ([(here, bytes_here)] if here else []) + [(A100, 2.0), (H100, 2.0)]
    return {
        d.name: {n: modeled_speedup(d, params, b, a, w, dr) for n, (a, w, dr) in shapes.items()} for d, b in devices
    }


def param_count(lm: LoadedModel) -> int:
    return sum(p.numel() for p in lm.hf.parameters())


def bytes_per_param(lm: LoadedModel) -> int:
    return lm.dtype.itemsize
