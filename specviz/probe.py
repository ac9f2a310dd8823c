"""The latency probe: one forward pass's cost against the number of new tokens, prefix held fixed."""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass

import torch

from specviz.model import LoadedModel, crop_to
from specviz.paths import cache_root

DEFAULT_KS = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class LatencyCurve:
    """Median forward latency per number of new tokens k, on one device."""

    model: str
    device: str
    prefix_len: int
    ks: list[int]
    ms: list[float]  # median over repeats, per k
    spread_ms: list[float]  # (max - min) over repeats, per k
    repeats: int

    def relative(self) -> list[float]:
        """Cost of k tokens relative to 1 token: the r of a step that verifies k tokens."""
        base = self.ms[0]
        return [m / base for m in self.ms]

    def cost_of(self, k: int) -> float:
        """Interpolated latency (ms) of a forward with k new tokens."""
        import numpy as np

        return float(np.interp(k, self.ks, self.ms))


@torch.inference_mode()
def probe_latency(lm: LoadedModel, ks: tuple[int, ...] = DEFAULT_KS, prefix_len: int = 128,
                  repeats: int = 5) -> LatencyCurve:
    """Time forwards of k new tokens over a fixed prefix; k values are interleaved within each repeat."""
    gen = torch.Generator().manual_seed(0)
    vocab = lm.hf.config.vocab_size
    prefix = torch.randint(100, vocab, (prefix_len,), generator=gen).tolist()
    cache = lm.new_cache()
    lm.forward(prefix, cache, logits_for=slice(-1, None))
    samples: dict[int, list[float]] = {k: [] for k in ks}
    extra = torch.randint(100, vocab, (max(ks),), generator=gen).tolist()
    lm.forward(extra[:4], cache)  # warm-up
    crop_to(cache, prefix_len)
    for _ in range(repeats):
        for k in ks:
            t = time.perf_counter()
            lm.forward(extra[:k], cache)
            if lm.device.type == "cuda":
                torch.cuda.synchronize()
            samples[k].append((time.perf_counter() - t) * 1000)
            crop_to(cache, prefix_len)
    return LatencyCurve(
        model=lm.name, device=lm.describe(), prefix_len=prefix_len, ks=list(ks),
        ms=[round(statistics.median(samples[k]), 3) for k in ks],
        spread_ms=[round(max(samples[k]) - min(samples[k]), 3) for k in ks], repeats=repeats,
    )


def _path(lm: LoadedModel):
    safe = lm.describe().replace(" · ", "_").replace("/", "_").replace(" ", "")
    return cache_root() / "probe" / f"{safe}.json"


def cached_curve(lm: LoadedModel, refresh: bool = False) -> LatencyCurve:
    """The stored curve for this model and device, measuring it first if absent or `refresh`."""
    path = _path(lm)
    if path.is_file() and not refresh:
        try:
            return LatencyCurve(**json.loads(path.read_text()))
        except (ValueError, TypeError):
            pass  # a corrupt cache file is simply re-measured
    curve = probe_latency(lm)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(curve), indent=1))
    return curve
