"""What a decoding step asks of the host: torch calls and host reads of tensor values, per step and per target forward.

On a GPU every torch call dispatches work (most of them a kernel launch, microseconds each) and every host read
(`item`, `tolist`, `int()`/`float()`/`bool()` of a tensor, `nonzero`, `numpy`, `cpu`, `equal`) waits until every
queued kernel has run. A 135M-parameter forward is then bound by launching ops, not by the GPU, and a draft loop
that reads a score back per node drains the queue again and again. Both can be counted on the CPU: a
`torch.overrides.TorchFunctionMode` sees every call, so this runs anywhere and a test can hold budgets.

`python -m specviz doctor --overhead` prints the table for every method (see `table`).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from torch.overrides import TorchFunctionMode

from specviz import methods
from specviz.core.model import LoadedModel
from specviz.core.sampling import Sampling

# the calls that hand a tensor's value to Python: on a GPU each one waits for the queue to drain
READS = {
    "item",
    "tolist",
    "__bool__",
    "__int__",
    "__float__",
    "__index__",
    "nonzero",
    "numpy",
    "cpu",
    "equal",
    "allclose",
    "is_nonzero",
    "__array__",
}


@dataclass
class Tally:
    """Calls and host reads seen in one scope (a whole run, or inside the target's forwards)."""

    calls: int = 0
    reads: Counter = field(default_factory=Counter)

    @property
    def read_count(self) -> int:
        return sum(self.reads.values())


class Counting(TorchFunctionMode):
    """Counts every torch call and every host read; those inside the target's forward also count apart."""

    def __init__(self) -> None:
        super().__init__()
        self.all, self.forward = Tally(), Tally()
        self.forwards = 0
        self.depth = 0  # > 0 while a target forward runs

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = getattr(func, "__name__", "")
        for t in (self.all, self.forward) if self.depth else (self.all,):
            t.calls += 1
            if name in READS:
                t.reads[name.strip("_")] += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def counting(lm: LoadedModel) -> Iterator[Counting]:
    """Count torch calls and host reads in the block; the target's forwards are seen through this LoadedModel
    (its `forward_layers`, which `forward` and every verify pass go through), wrapped on the instance for the block
    only."""
    mode = Counting()
    inner = lm.forward_layers

    def forward_layers(*args: Any, **kwargs: Any) -> Any:
        mode.forwards += 1
        mode.depth += 1
        try:
            return inner(*args, **kwargs)
        finally:
            mode.depth -= 1

    lm.forward_layers = forward_layers  # type: ignore[method-assign]
    try:
        with mode:
            yield mode
    finally:
        del lm.forward_layers  # the class's method again


@dataclass(frozen=True)
class Overhead:
    """One method's run, counted: per decode step and per target forward (the prefill's forward excluded)."""

    method: str
    steps: int
    forwards: int
    calls_per_step: float
    reads_per_step: float
    calls_per_forward: float
    reads_per_forward: float  # host reads inside the target's forward: 0 is the goal
    reads_by_kind: dict[str, float]  # per step

    def row(self) -> str:
        kinds = ", ".join(f"{k} {v:g}" for k, v in sorted(self.reads_by_kind.items(), key=lambda kv: -kv[1]))
        return (
            f"{self.method:<10} {self.calls_per_step:>8.0f} {self.reads_per_step:>7.1f} {self.calls_per_forward:>8.0f}"
            f" {self.reads_per_forward:>8.1f}   {kinds}"
        )


HEADER = f"{'method':<10} {'calls/step':>8} {'reads/step':>7} {'calls/fwd':>8} {'reads/fwd':>8}   reads a step by kind"


def _snapshot(mode: Counting) -> tuple[int, int, Counter, int, Counter]:
    """(calls, forwards, reads, calls inside forwards, reads inside forwards) so far."""
    return mode.all.calls, mode.forwards, Counter(mode.all.reads), mode.forward.calls, Counter(mode.forward.reads)


def measure(lm: LoadedModel, name: str, prompt_ids: list[int], max_new_tokens: int = 24, **resources: Any) -> Overhead:
    """Count one greedy generation of `name` (its default Config, or resources' `config`), after a warm-up run. The
    figures run from the end of the first step to the end of the last: whole decode steps, with the prefill, the
    head's setup and the first step's one-off work left out."""
    mod = methods.get(name)
    config = resources.pop("config", None)
    config = config if config is not None else methods.make_config(name)
    sampling = Sampling(max_new_tokens=max_new_tokens)
    mod.generate(lm, prompt_ids, sampling, config, **resources)  # warm: heads loaded, buffers grown
    marks: list[tuple[int, int, Counter, int, Counter]] = []
    with counting(lm) as mode:
        mod.generate(lm, prompt_ids, sampling, config, on_step=lambda _s: marks.append(_snapshot(mode)), **resources)
    if len(marks) < 2:
        raise ValueError(f"{name} finished in {len(marks)} step(s); count over a longer generation.")
    (c0, f0, r0, fc0, fr0), (c1, f1, r1, fc1, fr1) = marks[0], marks[-1]
    steps, forwards = len(marks) - 1, max(1, f1 - f0)
    reads, freads = r1 - r0, fr1 - fr0
    return Overhead(
        method=name,
        steps=steps,
        forwards=f1 - f0,
        calls_per_step=(c1 - c0) / steps,
        reads_per_step=sum(reads.values()) / steps,
        calls_per_forward=(fc1 - fc0) / forwards,
        reads_per_forward=sum(freads.values()) / forwards,
        reads_by_kind={k: round(v / steps, 1) for k, v in reads.items()},
    )


def table(lm: LoadedModel, names: list[str], prompt: str, max_new_tokens: int = 24) -> list[Overhead]:
    """Every named method counted on one prompt (greedy)."""
    ids = lm.encode_prompt(prompt)
    return [measure(lm, name, ids, max_new_tokens) for name in names]


def report(rows: list[Overhead], where: str) -> str:
    """The table as text, with where it was counted."""
    lines = [f"torch calls and host reads per decode step and per target forward ({where})", HEADER]
    lines += [r.row() for r in rows]
    return "\n".join(lines)


# What a step may ask of the host (issue 49's budget): nothing inside a target forward; plain decoding reads the next
# token and its record's numbers (2); a method at most 4 more, each a decision its algorithm must make on the host
# (which drafts the target accepted, which nodes a round expands, where a chain ends) and named where it is made.
FORWARD_READS = 0
PLAIN_READS = 2
EXTRA_READS = 4
CALLS_PER_LAYER = 32  # the written-out forward makes about 28 torch calls a decoder layer, and ~20 more a forward


def over_budget(rows: list[Overhead], layers: int) -> list[str]:
    """Every way the counted rows break the budget, one line each ([] when they keep it)."""
    plain = next((r.reads_per_step for r in rows if r.method == "ar"), PLAIN_READS)
    out = []
    for r in rows:
        if r.reads_per_forward > FORWARD_READS:
            out.append(f"{r.method}: {r.reads_per_forward:g} host reads inside a target forward")
        limit = PLAIN_READS if r.method == "ar" else plain + EXTRA_READS
        if r.reads_per_step > limit:
            out.append(f"{r.method}: {r.reads_per_step:.1f} host reads a step, over {limit:g} ({r.reads_by_kind})")
        if r.calls_per_forward > CALLS_PER_LAYER * layers + 40:
            out.append(f"{r.method}: {r.calls_per_forward:.0f} torch calls a forward for {layers} layers")
    return out
