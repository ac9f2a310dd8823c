"""Methods compared on one prompt: summary rows from traces, and the output-length sweep."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from specviz import methods
from specviz.core import measure
from specviz.core.model import LoadedModel
from specviz.core.sampling import Sampling
from specviz.core.trace import Trace
from specviz.methods.base import OnStep, unmeasured
from specviz.tuning import fit, turns


@dataclass(frozen=True)
class Row:
    """One method's measured summary against plain decoding on the same prompt (specviz.core.measure's definitions)."""

    method: str
    tokens: int
    steps: int
    seconds: float  # generation time: the prefill and every step (median over repeats)
    speedup: float  # measure.speedup: plain decoding's generation time over the method's (median over repeats)
    mean_accepted: float  # A
    step_cost: float  # r: mean step time / ar's mean step time
    tokens_per_s: float  # new tokens over generation time, the median over repeats
    ttft_ms: float
    identical: bool | None  # same tokens as ar; None at T > 0, where token identity means nothing
    label: str = ""  # the speedup with its spread, e.g. "1.31× (1.24–1.38), 3 runs" or "1.31× (one run)"

    @property
    def predicted(self) -> float:
        """A / r: the speedup the two measured factors predict."""
        return self.mean_accepted / self.step_cost if self.step_cost else 0.0

    @property
    def same_tokens(self) -> str:
        """'yes', 'no', or 'n/a at T > 0'."""
        return "n/a at T > 0" if self.identical is None else "yes" if self.identical else "no"


def greedy(trace: Trace) -> bool:
    """Whether the run decoded at T = 0 (only then is token identity with plain decoding a check)."""
    return float(trace.config.get("sampling", {}).get("temperature", 0.0)) == 0.0


def summarize(traces: dict[str, Trace] | dict[str, list[Trace]]) -> list[Row]:
    """Rows for every method against `ar` (which must be present); lists are interleaved repeats, paired by index.

    Every timed figure is a median over the repeats (never the first one's); tokens, steps and identity are the
    first repeat's (the same in every repeat at T = 0, and with a fixed seed at T > 0)."""
    runs = {n: t if isinstance(t, list) else [t] for n, t in traces.items()}
    base = runs["ar"]
    rows = []
    for name, ts in runs.items():
        pair = measure.paired(base[: len(ts)], ts)
        t = ts[0]
        rows.append(
            Row(
                method=name,
                tokens=t.new_tokens,
                steps=len(t.steps),
                seconds=measure.spread([measure.generation_s(x) for x in ts]).median,
                speedup=pair["speedup"].median,
                mean_accepted=pair["A"].median,
                step_cost=pair["r"].median,
                tokens_per_s=measure.spread([x.tokens_per_s for x in ts]).median,
                ttft_ms=1000 * pair["ttft_s"].median,
                identical=(t.output_ids == base[0].output_ids) if greedy(t) else None,
                label=pair["speedup"].label(),
            )
        )
    return rows


def pairable(base: Trace, other: Trace) -> bool:
    """Whether two traces may be divided into a speedup: the same prompt, model, device and sampling settings."""

    def key(t: Trace) -> tuple:
        return (t.prompt_ids, t.model, t.device, t.config.get("sampling"))

    return key(base) == key(other)


def replay_runs(traces: dict[str, Trace], names: list[str]) -> tuple[dict[str, list[Trace]], list[str]]:
    """Loaded traces as runs (one each) for `names`, and those that ran another prompt or other settings than the
    loaded plain decoding. Plain decoding joins the runs (and every page pairs it with each method) only when no
    method is unrelated to it: a trace is never divided by another prompt's or setting's time because of its name."""
    found = {n: traces[n] for n in names if n in traces and n != "ar"}
    base = traces.get("ar")
    unrelated = [n for n, t in found.items() if base is not None and not pairable(base, t)]
    runs = {n: [t] for n, t in found.items()}
    return ({"ar": [base], **runs} if base is not None and not unrelated else runs), unrelated


def steered(lm: LoadedModel, config: Any, method: str = "") -> Any:
    """`config` as it runs on `lm` (tuning.fit.measured): what it measures of the device filled in (prompt lookup's
    verify cost from the latency probe; a tree's or a window's shape left unset, from the fit); any other Config
    goes on as it was built, never through the probe."""
    return fit.measured(lm, config, method) if unmeasured(config) else config


def run_once(
    lm: LoadedModel,
    name: str,
    ids: list[int],
    sampling: Sampling,
    config: Any = None,
    prompt: str = "",
    on_step: OnStep | None = None,
) -> Trace:
    """One run of a method, in its job's turn (tuning.turns: the one this thread holds, else its own), holding the
    model's lock: the model is shared (the app's sessions), one run at a time, each with its own cache. The job's
    `stop` is asked between steps (Run.decode): a stopped run raises methods.base.Stopped."""
    with turns.turn(lm, turns.Request(f"a run of {name}")) as job, lm.lock:
        gen = methods.get(name).generate
        return gen(lm, ids, sampling, config, prompt=prompt, on_step=on_step, stop=job.request.stop)


def interleaved_runs(
    lm: LoadedModel,
    ids: list[int],
    configs: dict[str, Any],
    sampling: Sampling,
    repeats: int = 3,
    warmup: bool = True,
    prompt: str = "",
    progress: Callable[[float], None] | None = None,
) -> dict[str, list[Trace]]:
    """Plain decoding and every method, run in turn `repeats` times after one untimed warm-up pass of each, a Config
    that steers by this device's cost first given it (`steered`).

    Repeat i of every method ran right next to repeat i of plain decoding, so `measure.paired` can
    divide them pairwise; the warm-up pays the first-run costs (kernel selection, caches) for all.
    """
    names = ["ar"] + [n for n in configs if n != "ar"]
    configs = {n: steered(lm, c, n) for n, c in configs.items()}  # once for every repeat: one curve for them all
    runs: dict[str, list[Trace]] = {n: [] for n in names}
    warm = [(n, True) for n in names] if warmup else []
    plan = warm + [(n, False) for _ in range(max(1, repeats)) for n in names]
    with turns.turn(lm, turns.Request("a comparison")):  # one turn for every run (the caller's, when it holds one)
        for i, (name, is_warmup) in enumerate(plan):
            t = run_once(lm, name, ids, sampling, configs.get(name), prompt=prompt)
            if not is_warmup:
                runs[name].append(t)
            if progress:
                progress((i + 1) / len(plan))
    return runs


WARM_TOKENS = 4  # a warm-up run's length: its prefill and first steps are what a cold process pays for


def race(lm: LoadedModel, ids: list[int], configs: dict[str, Any], sampling: Sampling, prompt: str = "") -> list[Trace]:
    """Plain decoding, then each method, once each on one prompt, for the timeline's lanes.

    Every lane first runs a short untimed warm-up, so no lane pays the first-run costs (allocation, kernel
    choice) in its timed prefill: unwarmed, the first lane's ran 1.25x to 2x the others' on a 2-core CPU.
    """
    names = ["ar"] + [n for n in configs if n != "ar"]
    warm = replace(sampling, max_new_tokens=min(WARM_TOKENS, sampling.max_new_tokens))
    with turns.turn(lm, turns.Request("a race")):  # the warm-ups and the lanes in one turn
        for name in names:
            run_once(lm, name, ids, warm, configs.get(name), prompt=prompt)
        runs = interleaved_runs(lm, ids, configs, sampling, repeats=1, warmup=False, prompt=prompt)
    return [runs[n][0] for n in names]


@dataclass(frozen=True)
class LengthPoint:
    """Speedup of a method at one output length (median of interleaved repeats)."""

    method: str
    max_new_tokens: int
    speedup: float
    tokens: int


def length_sweep(
    lm: LoadedModel,
    ids: list[int],
    configs: dict[str, Any],
    sampling: Sampling,
    lengths: tuple[int, ...] = (128, 256, 512),
    repeats: int = 1,
    progress: Callable[[float], None] | None = None,
) -> list[LengthPoint]:
    """Speedup against output length: every method (and ar) at each length, interleaved (measure.paired)."""
    points, total = [], len(lengths)
    for i, n in enumerate(lengths):
        s = replace(sampling, max_new_tokens=n)
        step = (lambda f, i=i: progress((i + f) / total)) if progress else None
        runs = interleaved_runs(lm, ids, configs, s, repeats, warmup=i == 0, progress=step)
        points += [
            LengthPoint(m, n, measure.paired(runs["ar"], ts)["speedup"].median, ts[0].new_tokens)
            for m, ts in runs.items()
        ]
    return points
