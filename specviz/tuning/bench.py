"""Methods side by side on a prompt set: interleaved repeats, ratios against plain decoding.

Speedup as specviz.core.measure defines it: per prompt, the ratio of plain decoding's generation time to the
method's in the same interleaved repeat, the median of those paired ratios with their range; over the prompt set,
the median of the prompts' speedups with their range (min–max) and interquartile range.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from specviz import methods
from specviz.core import measure
from specviz.core.model import LoadedModel, stock_attention
from specviz.core.prompts import PromptItem, prepare
from specviz.core.sampling import ConfigError, Sampling
from specviz.tuning import fit

PEERS = {"hf": "transformers' own greedy generate", "hf-pld": "transformers' prompt lookup (10 tokens)"}
HF_PLD_TOKENS = 10


@dataclass(frozen=True)
class RunResult:
    """One timed generation, in specviz.core.measure's terms.

    `seconds` is the generation time (measure.generation_s: the prefill and every step; a peer has no
    trace, so its whole `generate` call). `forwards` are target passes after the prefill and `produced`
    the tokens committed by them, so A = produced / forwards (a peer's hook also counts its prefill, which
    is taken off). `decode_s` is the time in those steps (a peer's: its whole call).
    """

    output_ids: list[int]
    seconds: float
    forwards: int
    produced: int
    decode_s: float


SPEEDUP_DEFINITION = (
    "per prompt, the median over interleaved repeats of plain decoding's generation time over the method's in the "
    "same repeat; speedup: the median of those over the prompts, speedup_low/high their range, speedup_q1/q3 "
    "their quartiles"
)


@dataclass
class BenchResult:
    """Per prompt and method, the median run and the paired ratios of every repeat, plus the summary the CLI
    prints and writes."""

    model: str
    device: str
    sampling: Sampling
    repeats: int
    items: list[PromptItem]
    runs: dict[str, list[RunResult]] = field(default_factory=dict)  # method -> median run per prompt
    provenance: dict[str, Any] = field(default_factory=dict)  # measure.Provenance of the run, as a dict
    # method -> per prompt, ar's time over the method's in each interleaved repeat (paired, repeat by repeat)
    ratios: dict[str, list[list[float]]] = field(default_factory=dict)

    def prompt_speedups(self, name: str) -> list[measure.Spread]:
        """Per prompt: the median of the method's paired ratios, with their range (measure's speedup)."""
        return [measure.spread(r) for r in self.ratios[name]]

    def summary(self) -> dict[str, dict[str, float | int]]:
        """speedup (with its range and quartiles over the prompts), tokens_per_s, mean_accepted, step_cost,
        identical, total per method."""
        base = self.runs["ar"]
        ar_step = sum(r.decode_s for r in base) / max(1, sum(r.forwards for r in base))
        out = {}
        for name, runs in self.runs.items():
            tokens = sum(len(r.output_ids) for r in runs)
            forwards = sum(r.forwards for r in runs)
            step_s = sum(r.decode_s for r in runs) / max(1, forwards)
            out[name] = {
                **_over_prompts([sp.median for sp in self.prompt_speedups(name)]),
                "tokens_per_s": round(tokens / sum(r.seconds for r in runs), 3),
                "mean_accepted": round(sum(r.produced for r in runs) / forwards, 4) if forwards else 1.0,
                "step_cost": round(step_s / ar_step, 4),
                "identical": sum(b.output_ids == r.output_ids for b, r in zip(base, runs)),
                "total": len(runs),
            }
        return out

    def by_category(self) -> dict[str, dict[str, float]]:
        """Per Spec-Bench category and method, the median of its prompts' speedups."""
        cats: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for name in self.runs:
            for item, sp in zip(self.items, self.prompt_speedups(name), strict=True):
                cats[item.category][name].append(sp.median)
        return {c: {m: round(statistics.median(v), 4) for m, v in ms.items()} for c, ms in cats.items()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "device": self.device,
            "max_new_tokens": self.sampling.max_new_tokens,
            "temperature": self.sampling.temperature,
            "prompts": len(self.items),
            "repeats": self.repeats,
            "speedup_definition": SPEEDUP_DEFINITION,
            "methods": self.summary(),
            "categories": self.by_category(),
            "prompt_speedups": {  # per method and prompt: [median, low, high] of the paired ratios of its repeats
                n: [[round(sp.median, 4), round(sp.low, 4), round(sp.high, 4)] for sp in self.prompt_speedups(n)]
                for n in self.runs
            },
            **({"provenance": self.provenance} if self.provenance else {}),
        }


def _over_prompts(speedups: list[float]) -> dict[str, float]:
    """The median of the prompts' speedups, their range and quartiles (both the median where there is one)."""
    q1, q3 = statistics.quantiles(speedups, n=4, method="inclusive")[::2] if len(speedups) > 1 else speedups * 2
    low, high = min(speedups), max(speedups)
    return {
        "speedup": round(statistics.median(speedups), 4),
        **{k: round(v, 4) for k, v in (("speedup_low", low), ("speedup_high", high))},
        **{k: round(v, 4) for k, v in (("speedup_q1", q1), ("speedup_q3", q3))},
    }


def _method_runner(lm: LoadedModel, name: str, config: Any) -> Callable[[list[int], Sampling], RunResult]:
    mod = methods.get(name)

    def run(ids: list[int], s: Sampling) -> RunResult:
        trace = mod.generate(lm, ids, s, config)
        steps = [st for st in trace.steps if st.forward_tokens > 0]
        return RunResult(
            trace.output_ids,
            measure.generation_s(trace),
            len(steps),
            sum(len(st.committed) for st in steps),
            trace.decode_s,
        )

    return run


def _peer_runner(lm: LoadedModel, name: str) -> Callable[[list[int], Sampling], RunResult]:
    def run(ids: list[int], s: Sampling) -> RunResult:
        kw: dict[str, Any] = (
            {"do_sample": False}
            if s.greedy
            else {"do_sample": True, "temperature": s.temperature, "top_p": s.top_p, "top_k": 0}
        )
        if name == "hf-pld":
            kw["prompt_lookup_num_tokens"] = HF_PLD_TOKENS
        x = torch.tensor([ids], device=lm.device)
        calls = [0]  # target forward passes, counted by a hook for as long as this run lasts
        hook = lm.hf.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
        t = time.perf_counter()
        try:
            # generate samples from the global RNG: seed it inside fork_rng, which restores it afterwards
            gpus = [lm.device.index or 0] if lm.device.type == "cuda" else []
            with torch.random.fork_rng(devices=gpus), stock_attention(lm), torch.inference_mode():
                torch.manual_seed(s.seed)
                out = lm.hf.generate(
                    x,
                    attention_mask=torch.ones_like(x),
                    max_new_tokens=s.max_new_tokens,
                    pad_token_id=lm.tokenizer.pad_token_id,
                    **kw,
                )
        finally:
            hook.remove()
        seconds = time.perf_counter() - t
        new = out[0, len(ids) :].tolist()
        # the hook counts the prefill too; each later pass produced one token (prompt lookup: its accepted run)
        return RunResult(new, seconds, max(1, calls[0] - 1), max(1, len(new) - 1), seconds)

    return run


def runners(lm: LoadedModel, names: list[str], configs: dict[str, Any]) -> dict[str, Callable]:
    """A callable per method name; `ar` is always first because every ratio is against it."""
    if not names:
        raise ConfigError("No methods given.")
    order = ["ar"] + [n for n in dict.fromkeys(names) if n != "ar"]
    out = {}
    for name in order:
        if name in PEERS:
            out[name] = _peer_runner(lm, name)
        else:
            out[name] = _method_runner(lm, name, configs.get(name) or methods.make_config(name))
    return out


def run_bench(
    lm: LoadedModel,
    names: list[str],
    items: list[PromptItem],
    sampling: Sampling,
    repeats: int = 1,
    configs: dict[str, Any] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> BenchResult:
    """Each prompt: every method `repeats` times, interleaved with plain decoding; keep each method's paired ratios
    (ar's time over the method's in the same repeat) and its median-time run (for tokens, A, r and identity)."""
    if repeats < 1:
        raise ConfigError("repeats must be at least 1.")
    table = runners(lm, names, fit.prepare(lm, configs or {}, names))  # PLD steers by this device's curve
    encoded = [prepare(lm, it.text) for it in items]
    where = measure.provenance(lm.describe()).to_dict()  # before the runs: the load average is other work's
    warm = Sampling(max_new_tokens=4, temperature=sampling.temperature, seed=sampling.seed)
    for fn in table.values():  # first calls pay one-off allocation costs; keep them out of the timings
        with lm.lock:  # the model is shared (the app's sessions): a warm-up is a run like any other
            fn(encoded[0], warm)
    result = BenchResult(lm.name, lm.describe(), sampling, repeats, items, {n: [] for n in table}, where)
    result.ratios.update({n: [] for n in table})
    total, done = len(items) * repeats * len(table), 0
    for ids in encoded:
        samples: dict[str, list[RunResult]] = defaultdict(list)
        for _ in range(repeats):
            for name, fn in table.items():
                with lm.lock:
                    samples[name].append(fn(ids, sampling))
                done += 1
                if progress:
                    progress(done, total, name)
        for name, runs in samples.items():
            paired = zip(samples["ar"], runs, strict=True)  # repeat i of ar ran right next to repeat i of the method
            result.ratios[name].append([b.seconds / max(r.seconds, 1e-12) for b, r in paired])
            result.runs[name].append(sorted(runs, key=lambda r: r.seconds)[len(runs) // 2])
    return result


def format_table(result: BenchResult) -> str:
    """The summary as an aligned text table."""
    head = f"{'method':<10} {'speedup':>8} {'range':>13} {'tok/s':>8} {'A':>6} {'r':>6} {'identical':>12}"
    lines = [
        f"{result.device}; {len(result.items)} prompts x {result.repeats} repeats, "
        f"{result.sampling.max_new_tokens} new tokens, T={result.sampling.temperature}",
        head,
        "-" * len(head),
    ]
    for name, m in result.summary().items():
        same = f"{m['identical']}/{m['total']}" if result.sampling.greedy else "n/a at T > 0"  # identity: T = 0 only
        spread = f"{m['speedup_low']:.2f}–{m['speedup_high']:.2f}x"
        lines.append(
            f"{name:<10} {m['speedup']:>7.3f}x {spread:>13} {m['tokens_per_s']:>8.2f} {m['mean_accepted']:>6.2f} "
            f"{m['step_cost']:>6.2f} {same:>12}"
        )
    cats = result.by_category()
    if len(cats) > 1:
        names = list(result.runs)
        lines += ["", "speedup by category", f"{'category':<16}" + "".join(f"{n:>10}" for n in names)]
        for cat, vals in cats.items():
            lines.append(f"{cat:<16}" + "".join(f"{vals[n]:>9.3f}x" for n in names))
    return "\n".join(lines)
