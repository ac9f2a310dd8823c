"""Methods compared on one prompt: summary rows from traces, and the output-length sweep."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from specviz import methods
from specviz.model import LoadedModel
from specviz.sampling import Sampling
from specviz.trace import Trace


@dataclass(frozen=True)
class Row:
    """One method's measured summary against plain decoding on the same prompt."""

    method: str
    tokens: int
    steps: int
    seconds: float
    speedup: float  # ar seconds / method seconds
    mean_accepted: float  # A
    step_cost: float  # r: mean step time / ar's mean step time
    tokens_per_s: float
    ttft_ms: float
    identical: bool  # same tokens as ar

    @property
    def predicted(self) -> float:
        """A / r: the speedup the two measured factors predict."""
        return self.mean_accepted / self.step_cost if self.step_cost else 0.0


def summarize(traces: dict[str, Trace]) -> list[Row]:
    """Rows for every trace, measured against the `ar` trace (which must be present)."""
    base = traces["ar"]
    rows = []
    for name, t in traces.items():
        rows.append(Row(
            method=name, tokens=t.new_tokens, steps=len(t.steps), seconds=t.total_s,
            speedup=base.total_s / t.total_s if t.total_s else 0.0, mean_accepted=t.mean_accepted,
            step_cost=t.mean_step_s / base.mean_step_s if base.mean_step_s else 0.0,
            tokens_per_s=t.tokens_per_s, ttft_ms=1000 * t.ttft_s,
            identical=t.output_ids == base.output_ids,
        ))
    return rows


def drafted(step) -> int:
    """Draft tokens a step put in its forward pass (all but the root)."""
    return max(0, step.forward_tokens - 1)


def acceptance_series(trace: Trace) -> tuple[list[float], list[float]]:
    """Per step, accepted draft tokens / drafted tokens; and the cumulative rate over the run."""
    per, cum, acc_sum, draft_sum = [], [], 0, 0
    for s in trace.steps:
        acc, d = max(0, s.accepted - 1), drafted(s)
        acc_sum, draft_sum = acc_sum + acc, draft_sum + d
        per.append(acc / d if d else 0.0)
        cum.append(acc_sum / draft_sum if draft_sum else 0.0)
    return per, cum


@dataclass(frozen=True)
class LengthPoint:
    """Speedup of a method at one output length (median of interleaved repeats)."""

    method: str
    max_new_tokens: int
    speedup: float
    tokens: int


def length_sweep(lm: LoadedModel, ids: list[int], configs: dict[str, Any], sampling: Sampling,
                 lengths: tuple[int, ...] = (128, 256, 512), repeats: int = 1,
                 progress: Callable[[float], None] | None = None) -> list[LengthPoint]:
    """Speedup against output length: every method (and ar) at each length, interleaved."""
    names = ["ar"] + [n for n in configs if n != "ar"]
    points, done, total = [], 0, len(lengths) * repeats * len(names)
    for n in lengths:
        s = replace(sampling, max_new_tokens=n)
        times: dict[str, list[float]] = {m: [] for m in names}
        tokens: dict[str, int] = {}
        for _ in range(repeats):
            for m in names:
                with lm.lock:
                    t = methods.get(m).generate(lm, ids, s, configs.get(m))
                times[m].append(t.total_s)
                tokens[m] = t.new_tokens
                done += 1
                if progress:
                    progress(done / total)
        base = statistics.median(times["ar"])
        points += [LengthPoint(m, n, base / statistics.median(times[m]), tokens[m]) for m in names]
    return points


def method_shape(trace: Trace) -> tuple[float, float, float]:
    """A, mean forward width (tokens per target pass), and draft time as a share of verify time."""
    fwd = [s for s in trace.steps if s.forward_tokens]
    width = sum(s.forward_tokens for s in fwd) / max(1, len(fwd))
    draft = sum(s.draft_s for s in trace.steps) / max(1e-9, sum(s.verify_s for s in trace.steps))
    return trace.mean_accepted, width, draft
