"""The latency probe: one forward pass's cost against the number of new tokens, prefix held fixed.

A curve carries its provenance (machine, date, commit, load average). A measurement taken while other
work competed for the cores (a high load average, or repeats that disagree) is not kept as if it were
quiet: `cached_curve` measures again, and if the machine stays busy it keeps the curve flagged
`contended` with the reason, so the figure can say so instead of showing it as the device's cost.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass, field, replace

import torch

from specviz.core.drafting import VerifyLatency
from specviz.core.measure import Provenance, contended, provenance
from specviz.core.model import LoadedModel, crop_to
from specviz.core.paths import cache_root

DEFAULT_KS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64)  # fine where trees fit on a CPU
MAX_SPREAD = 0.25  # (max - min) / median over repeats above which a point is treated as disturbed
ATTEMPTS = 2  # measurements tried before a disturbed curve is kept, flagged
RETRY_AFTER_S = 600  # a flagged stored curve is shown (with its warning) this long before it is re-measured


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
    provenance: dict = field(default_factory=dict)  # measure.Provenance as a dict ({} in files from before)
    contended: str = ""  # why this curve may overstate the cost ("" = a quiet measurement)

    def relative(self) -> list[float]:
        """Cost of k tokens relative to 1 token: the r of a step that verifies k tokens."""
        base = self.ms[0]
        return [m / base for m in self.ms]

    def disturbance(self) -> str:
        """Why this measurement looks disturbed, or "" when it looks quiet."""
        worst = max((sp / m for sp, m in zip(self.spread_ms, self.ms, strict=True) if m > 0), default=0.0)
        if worst > MAX_SPREAD:
            return f"repeats disagree by up to {worst:.0%}"
        if self.provenance:
            p = Provenance.from_dict(self.provenance)
            if contended(p):
                return f"load average {p.load:.1f} on {p.cores} cores while measuring"
        return ""

    def measured(self, here: Provenance | None = None) -> str:
        """Where and when, for a caption: 'measured on the computer running specviz, <machine>, on 2026-12-01' (a
        load: see `contended`)."""
        if not self.provenance:
            return "measured before curves recorded where and when"
        return Provenance.from_dict(self.provenance).describe(here, flag_load=False)

    def cost_of(self, k: int) -> float:
        """Interpolated latency (ms) of a forward with k new tokens."""
        import numpy as np

        return float(np.interp(k, self.ks, self.ms))


@torch.inference_mode()
def probe_latency(
    lm: LoadedModel, ks: tuple[int, ...] = DEFAULT_KS, prefix_len: int = 128, repeats: int = 5
) -> LatencyCurve:
    """Time forwards of k new tokens over a fixed prefix; k values are interleaved within each repeat."""
    with lm.lock:  # the model is shared (the app's sessions): nothing else runs on it while this measures
        gen = torch.Generator().manual_seed(0)
        vocab = lm.hf.config.vocab_size
        prefix = torch.randint(100, vocab, (prefix_len,), generator=gen).tolist()
        cache = lm.run_cache()  # the cache a generation decodes on (on a GPU, the captured forwards')
        lm.forward(prefix, cache, logits_for=slice(-1, None))
        samples: dict[int, list[float]] = {k: [] for k in ks}
        extra = torch.randint(100, vocab, (max(ks),), generator=gen).tolist()
        for k in ks:  # warm-up: every width once (on a GPU, captured here, not in the timings)
            lm.forward(extra[:k], cache)
            crop_to(cache, prefix_len)
        for _ in range(repeats):
            for k in ks:
                t = time.perf_counter()
                lm.forward(extra[:k], cache)
                if lm.device.type == "cuda":
                    torch.cuda.synchronize()
                samples[k].append((time.perf_counter() - t) * 1000)
                crop_to(cache, prefix_len)
    curve = LatencyCurve(
        model=lm.name,
        device=lm.describe(),
        prefix_len=prefix_len,
        ks=list(ks),
        ms=[round(statistics.median(samples[k]), 3) for k in ks],
        spread_ms=[round(max(samples[k]) - min(samples[k]), 3) for k in ks],
        repeats=repeats,
        provenance=provenance(lm.describe()).to_dict(),
    )
    return replace(curve, contended=curve.disturbance())


def _path(lm: LoadedModel):
    safe = lm.describe().replace(" · ", "_").replace("/", "_").replace(" ", "")
    return cache_root() / "probe" / f"{safe}.json"


def quiet_curve(lm: LoadedModel, attempts: int = ATTEMPTS, measure=probe_latency) -> LatencyCurve:
    """Measure until a curve looks undisturbed; after `attempts` keep the least disturbed one, flagged."""
    tried = []
    for _ in range(max(1, attempts)):
        curve = measure(lm)
        if not curve.contended:
            return curve
        tried.append(curve)
    return min(tried, key=lambda c: max(sp / m for sp, m in zip(c.spread_ms, c.ms, strict=True) if m > 0))


def _age_s(curve: LatencyCurve) -> float:
    import datetime as dt

    when = dt.datetime.fromisoformat(Provenance.from_dict(curve.provenance).date)
    return (dt.datetime.now(dt.timezone.utc) - when).total_seconds()


def cached_curve(lm: LoadedModel, refresh: bool = False, measure=probe_latency) -> LatencyCurve:
    """The stored curve for this model and device, measured (quietly, see quiet_curve) if absent or when
    `refresh`. A stored curve without provenance is re-measured; one flagged as disturbed is shown, with
    its flag, for RETRY_AFTER_S and then re-measured, so a busy start never leaves it on screen for good."""
    path = _path(lm)
    if path.is_file() and not refresh:
        try:
            stored = LatencyCurve(**json.loads(path.read_text()))
            if stored.provenance and (not stored.contended or _age_s(stored) < RETRY_AFTER_S):
                return stored
        except (ValueError, TypeError):
            pass  # a corrupt cache file is simply re-measured
    curve = quiet_curve(lm, measure=measure)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(curve), indent=1))
    return curve


def verify_cost(lm: LoadedModel) -> VerifyLatency:
    """This device's verify-cost curve (the stored probe curve, measured now if absent), as a Config holds it."""
    curve = cached_curve(lm)
    return VerifyLatency(tuple(curve.ks), tuple(curve.ms))
