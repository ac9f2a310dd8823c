"""Batched decoding measured: throughput, per-request latency and speedup against batched plain decoding.

At each batch size B the same B prompts (the prompt set's first B, cycled when it has fewer) are decoded
together by every method, after a short warm-up at that B, `repeats` times, interleaved (ar, then each
method, then ar again…). In specviz.core.measure's terms, per repeat: speedup = batched ar's generation time
over the method's (the prefill and every step, the whole batch); A = tokens committed per row-forward
after the prefill, pooled over the rows; r = the method's mean step time over ar's at the same B;
throughput = every request's new tokens over the batch's generation time; latency = each request's own
end-to-end time (the prefill to its last token). Each is reported as the median over repeats with its
range; every run is kept as plain numbers beside it, so a figure can be drawn from the file later.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from specviz.core import measure
from specviz.core.model import LoadedModel
from specviz.core.prompts import PromptItem, prepare
from specviz.core.sampling import ConfigError, Sampling
from specviz.methods.batched.methods import generate, names
from specviz.methods.batched.record import BatchTrace
from specviz.tuning import contexts, fit

Progress = Callable[[int, int, str], None]
WARM_PROMPT = 128  # tokens of each prompt (its end) that the warm-up decodes from


def parse_batches(text: str) -> list[int]:
    """'1,4,16' -> [1, 4, 16]; ConfigError unless every size is a positive integer."""
    try:
        sizes = [int(p) for p in str(text).split(",") if p.strip()]
    except ValueError:
        raise ConfigError(f"--batch takes sizes like 1,4,16, got {text!r}.") from None
    if not sizes or min(sizes) < 1:
        raise ConfigError(f"--batch takes positive sizes like 1,4,16, got {text!r}.")
    return sizes


def order(asked: list[str]) -> list[str]:
    """ar first (every ratio is against it), then the other batched methods asked for."""
    unknown = [n for n in asked if n not in names()]
    if unknown:
        raise ConfigError(f"No batched {', '.join(unknown)}; batched decoding has {', '.join(names())}.")
    return ["ar"] + [n for n in dict.fromkeys(asked) if n != "ar"]


def run_summary(trace: BatchTrace, base: BatchTrace, cpu_s: float, base_cpu_s: float) -> dict[str, Any]:
    """One repeat of one method at one batch size, as plain numbers.

    Beside the wall-time figures, the run's process CPU time: with one thread, the work it did, which other
    processes on the cores do not stretch the way they stretch wall time; `cpu_ratio` is ar's over the
    method's. It is a check on a contended measurement, not a second speedup.
    """
    lat = trace.latencies()
    return {
        "cpu_s": round(cpu_s, 4),
        "cpu_ratio": round(base_cpu_s / max(cpu_s, 1e-12), 4),
        "generation_s": round(trace.generation_s, 5),
        "prefill_s": round(trace.prefill_s, 5),
        "new_tokens": trace.new_tokens,
        "tokens_per_s": round(trace.tokens_per_s, 3),
        "forwards": trace.forwards,
        "step_s": round(trace.step_s, 6),
        "A": round(trace.mean_accepted, 4),
        "speedup": round(base.generation_s / max(trace.generation_s, 1e-12), 4),
        "r": round(trace.step_s / max(base.step_s, 1e-12), 4),
        "latency_median_s": round(statistics.median(lat), 5),
        "latency_max_s": round(max(lat), 5),
        "identical": sum(a == b for a, b in zip(trace.outputs, base.outputs, strict=True)),
        "stopped_eos": trace.stopped.count("eos"),
    }


def point(name: str, batch: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The medians with their range over repeats, for one method at one batch size, and the runs behind them."""
    keys = ("speedup", "tokens_per_s", "latency_median_s", "latency_max_s", "A", "r", "step_s", "cpu_ratio")
    out: dict[str, Any] = {"method": name, "batch": batch, "repeats": len(runs)}
    for key in keys:
        out[key] = asdict(measure.spread([float(r[key]) for r in runs]))
    out["identical"] = min(r["identical"] for r in runs)
    out["runs"] = runs
    return out


def measure_batch(
    lm: LoadedModel, names: list[str], prompts: list[list[int]], sampling: Sampling, repeats: int, configs: dict
) -> list[dict[str, Any]]:
    """Every method at one batch size (len(prompts)), interleaved with ar, `repeats` times."""
    warm = Sampling(max_new_tokens=4)
    short = [p[-WARM_PROMPT:] for p in prompts]  # a long context's prefill would warm nothing more, for minutes
    for name in names:  # first calls at a new batch size pay one-off allocation costs
        generate(lm, short, warm, name, configs.get(name))
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for _ in range(repeats):
        traces, cpu = {}, {}
        for name in names:
            with lm.lock:
                t = time.process_time()
                traces[name] = generate(lm, prompts, sampling, name, configs.get(name))
                cpu[name] = time.process_time() - t
        for name in names:
            runs[name].append(run_summary(traces[name], traces["ar"], cpu[name], cpu["ar"]))
    return [point(n, len(prompts), runs[n]) for n in names]


def parse_contexts(text: str | None) -> list[int | None]:
    """'128,2048' -> [128, 2048]; None -> [None] (the prompt set's own prompts). ConfigError on bad lengths."""
    if not text:
        return [None]
    try:
        lengths = [int(p) for p in str(text).split(",") if p.strip()]
    except ValueError:
        raise ConfigError(f"--context takes lengths like 128,512,2048, got {text!r}.") from None
    contexts.check(lengths)
    return list(lengths)


def batch_prompts(lm: LoadedModel, prompts: list[list[int]], batch: int, context: int | None) -> list[list[int]]:
    """The batch's prompts: the set's first `batch` (cycled), or `batch` different `context`-token prompts."""
    if context is None:
        return [prompts[j % len(prompts)] for j in range(batch)]
    return contexts.context_prompts(lm, context, batch)


@dataclass(frozen=True)
class Grid:
    """What to measure: every batch size at every context length in tokens (long-document prompts,
    specviz.tuning.contexts); None as a context means the prompt set's own prompts."""

    batches: tuple[int, ...]
    contexts: tuple[int | None, ...] = (None,)


def run(
    lm: LoadedModel,
    names: list[str],
    prompts: list[list[int]],
    grid: Grid | list[int],
    sampling: Sampling,
    repeats: int = 3,
    configs: dict | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Every (context, batch size) in turn: the points, with the provenance taken when the first one started.
    Each point records its `context` and its prompts' median length."""
    if repeats < 1 or not prompts:
        raise ConfigError("The batched bench needs at least one prompt and one repeat.")
    grid = grid if isinstance(grid, Grid) else Grid(tuple(grid))
    names, batches, lengths = order(names), list(grid.batches), list(grid.contexts)
    if real := [n for n in lengths if n is not None]:
        contexts.check(real, lm, sampling.max_new_tokens)
    prov = measure.provenance(lm.describe())
    points, cells = [], [(n, b) for n in lengths for b in batches]
    for i, (n, b) in enumerate(cells):
        batch = batch_prompts(lm, prompts, b, n)
        measured = measure_batch(lm, names, batch, sampling, repeats, configs or {})
        extra = {"context": n, "prompt_tokens": int(statistics.median(len(p) for p in batch))}
        points += [p | extra | {"load_after": measure.load_average()} for p in measured]  # contention shows here
        if progress:
            progress(i + 1, len(cells), f"batch {b}" + (f", context {n}" if n else ""))
    return {
        "what": "batched greedy decoding: speedup against batched ar at the same batch, throughput, latency",
        "contexts": lengths,
        "model": lm.name,
        "device": lm.describe(),
        "threads": torch.get_num_threads(),
        "max_new_tokens": sampling.max_new_tokens,
        "prompts": len(prompts),
        "prompt_tokens": [len(p) for p in prompts],
        "batches": batches,
        "repeats": repeats,
        "provenance": prov.to_dict(),
        "load_after": measure.load_average(),
        "points": points,
    }


def format_table(result: dict[str, Any]) -> str:
    """The points as an aligned text table: medians, with the speedup's range."""
    cols = f"{'speedup':>20} {'tok/s':>8} {'lat med s':>9} {'lat max s':>9} {'A':>5} {'r':>5} {'cpu':>5} {'same':>6}"
    head = f"{'B':>3} {'ctx':>5} {'method':<7} {cols}"
    lines = [
        f"{result['device']}, {result['threads']} threads; {result['max_new_tokens']} new tokens, "
        f"{result['repeats']} repeats, load "
        f"{result['provenance']['load']} before, {result['load_after']} after",
        head,
        "-" * len(head),
    ]
    for p in result["points"]:
        s = p["speedup"]
        sp = f"{s['median']:.3f}x ({s['low']:.2f}-{s['high']:.2f})"
        lines.append(
            f"{p['batch']:>3} {p.get('context') or 'set':>5} {p['method']:<7} {sp:>20} "
            f"{p['tokens_per_s']['median']:>8.1f} "
            f"{p['latency_median_s']['median']:>9.2f} {p['latency_max_s']['median']:>9.2f} {p['A']['median']:>5.2f} "
            f"{p['r']['median']:>5.2f} {p['cpu_ratio']['median']:>5.2f} {p['identical']:>3}/{p['batch']:<2}"
        )
    return "\n".join(lines)


def cli_bench(
    load: Callable[[], LoadedModel], names: list[str], configs: dict, items: list[PromptItem], sampling: Sampling, a
) -> int:
    """`python -m specviz bench --batch 1,4,16`: print the table, write the JSON when --json is given."""
    import sys

    batches, names = parse_batches(a.batch or "1"), order(names)  # bad input fails before the model loads
    lengths = parse_contexts(getattr(a, "context", None))
    lm = load()
    configs = fit.prepare(lm, configs, names)  # prompt lookup's draft width follows this device's latency curve
    prompts = [prepare(lm, it.text) for it in items]

    def tick(done: int, total: int, what: str) -> None:
        print(f"{what} done ({done}/{total})", file=sys.stderr)

    result = run(lm, names, prompts, Grid(tuple(batches), tuple(lengths)), sampling, a.repeats, configs, tick)
    result["command"] = getattr(a, "invoked", "python -m specviz bench")  # main's own argv, as typed
    print(format_table(result))
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1) + "\n")
        print(f"results written to {a.json}", file=sys.stderr)
    return 0
