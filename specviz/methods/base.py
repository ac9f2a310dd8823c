"""What every decoding method shares: the run state, the one decode loop, the commit rule and the trace.

Every method follows one rhythm, owned here. After the prefill the run holds `pending`, the target's
logits for the next position. Each step takes the root (a token forced by the last acceptance, else the
target's own pick from `pending`), stops early when the root alone ends the run, and otherwise calls the
method's `step(run, root)`: propose → verify (one target forward) → accept → commit. The step times its
phases with `run.phase(...)` and returns an `Outcome`; the run clips, commits, and builds the step record
(softmax, entropy, top-5, token texts, the method's detail) after the clock has stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

import torch

from specviz.core.decoding import clip, is_final, synced_now
from specviz.core.details import Detail
from specviz.core.model import LoadedModel
from specviz.core.prompts import check_context
from specviz.core.sampling import Sampling, choose, summary, target_probs
from specviz.core.trace import StepTrace, Trace

OnStep = Callable[[StepTrace], None]
ShouldStop = Callable[[], bool]  # asked between steps, never inside one: True ends the run there (`Stopped`)
PHASES = ("propose", "verify", "accept", "commit")  # the step's timed phases, as the papers name them


@dataclass(frozen=True)
class Card:
    """What a method declares about itself, once, as its module's CARD: the registry (specviz.methods), the colours,
    the training kinds, the learning curves and the calibration are derived from these records (its
    step record, a core.details.Detail with its METHOD, registers itself)."""

    name: str  # code name: a trace's method, the CLI's --method, widget keys, file names
    label: str  # display name
    summary: str  # one line: what it does
    colour: str  # its colour in every figure (colour-blind-safe; no two methods share one)
    order: int  # where it stands in every list of methods: plain decoding 0, then by when it joined
    head: str = ""  # the training kind of its head or draft (python -m specviz train KIND), "" when it has none
    head_label: str = ""  # what the learning curves call that kind ("Hydra heads")
    models: Path | None = None  # where its trained files live, None when it has none
    held_out: bool = False  # `calibrate KIND` measures its heads' held-out rank table (a heads tree's calibration)
    confidence: bool = False  # `calibrate KIND --confidence|--budget` fits its head's confidence table and budget
    batched: str = ""  # its batched step (specviz.methods.batched): "chain" or "eagle"; "" when it has none
    preset_fields: tuple[str, ...] = ()  # the Config fields its named presets set (specviz.tuning.presets)
    short: str = ""  # what a sentence calls it ("plain decoding"), where that is not the label
    # a composition's parts: the methods it is built from (and imports, from the layer above theirs); its shape
    # fields take the first one's fitted shape
    composes: tuple[str, ...] = ()
    # the method whose file this one extends (its Config and proposer: Hydra Medusa's, EAGLE-3 and the hybrid
    # EAGLE-2's), imported from the layer above the methods; its shape is fitted on its own
    builds_on: str = ""


class Stopped(Exception):
    """A run ended between two steps because its caller asked (Run.stop: a Stop pressed, a visitor gone), or before
    its turn came (tuning.turns): not a failure of the run, so nothing of it is kept or cached."""

    def __init__(self, words: str, tokens: int = 0) -> None:
        super().__init__(words)
        self.tokens = tokens  # tokens committed before it stopped


@dataclass
class Outcome:
    """What one method step hands back to the run after propose → verify → accept → commit."""

    accepted: list[int]  # drafted tokens accepted after the root
    proposed: int  # drafted tokens proposed after the root
    forward_tokens: int  # tokens the target's forward pass verified
    logits: torch.Tensor  # [V] the target's logits for the position after the last accepted token
    hidden: torch.Tensor  # [H] the hidden state that produced them
    next_root: int | None = None  # the next root, when the acceptance rule already drew it (T > 0)
    next_from: str = "residual"  # where it came from: residual or bonus
    detail: Callable[[], Detail] | None = None  # the step's record, built once the clock has stopped


Step = Callable[["Run", int], Outcome]


def unmeasured(config: Any) -> list[str]:
    """The fields of `config` holding evidence of the device (core.drafting.MEASURED) still empty where it steers by
    them (`adaptive`): what the latency probe must fill before it runs (today prompt lookup's verify cost). [] for
    every other Config (and None, plain decoding's), so where runs start (tuning.compare.steered) a Config with
    nothing to measure is told apart here, on the path it takes anyway, and never goes through the probe."""
    if not is_dataclass(config) or isinstance(config, type) or not getattr(config, "adaptive", True):
        return []
    return [
        f.name
        for f in fields(config)
        if (f.metadata.get("measured") and getattr(config, f.name) is None) or f.name in unfitted(config)
    ]


def unfitted(config: Any) -> list[str]:
    """The fields of `config` the device's fit chooses (core.drafting.fit_field) still unset: what the fit fills where
    the run starts (specviz.tuning.fit.measured). [] for a Config with none."""
    if not is_dataclass(config) or isinstance(config, type):
        return []
    return [
        f.name for f in fields(config) if f.metadata.get("fitted") and getattr(config, f.name) == f.metadata["unset"]
    ]


def settled(config: Any) -> Any:
    """`config` with every fitted field still unset given its declared fallback: what a run takes when its caller
    skipped the fit (the app, the benches, the lesson and the command line never do)."""
    empty = unfitted(config)
    if not empty:
        return config
    spec = {f.name: f.metadata for f in fields(config)}
    return replace(config, **{n: spec[n]["fallback"] for n in empty})


def plain_config(config: Any) -> dict[str, Any]:
    """A method's config as plain data: a dataclass instance's fields, a mapping's items, {} for None."""
    if config is None or isinstance(config, Mapping):
        return dict(config or {})
    if is_dataclass(config) and not isinstance(config, type):
        return asdict(config)
    raise TypeError(f"A method config is a dataclass or a mapping, not {type(config).__name__}.")


class Run:
    """One generation in progress: cache, generator, committed tokens and step records."""

    def __init__(
        self,
        lm: LoadedModel,
        prompt_ids: list[int],
        sampling: Sampling,
        method: str,
        config: Any = None,
        prompt: str = "",
        on_step: OnStep | None = None,
    ) -> None:
        if not prompt_ids:
            raise ValueError("The prompt is empty.")
        check_context(lm, len(prompt_ids), sampling.max_new_tokens)
        self.lm, self.sampling, self.method = lm, sampling, method
        self.prompt, self.prompt_ids = prompt, list(prompt_ids)
        self.config = plain_config(config)
        self.gen = torch.Generator().manual_seed(sampling.seed)
        self.cache = lm.run_cache()
        self.output: list[int] = []
        self.steps: list[StepTrace] = []
        self.stopped = ""
        self.on_step = on_step
        self.stop: ShouldStop | None = None  # asked before the prefill and between steps (`check`)
        self._pending: torch.Tensor | None = None  # logits [V] for the next position (set by the prefill)
        self._pending_hidden: torch.Tensor | None = None  # hidden [H] that produced them
        self.forced: int | None = None  # the next root, drawn by the last step's acceptance rule
        self.forced_from = "target"
        self.prefill_s = 0.0
        self.times: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self._t0 = time.perf_counter()

    @property
    def pending(self) -> torch.Tensor:
        """The target's logits [V] for the next position."""
        if self._pending is None:
            raise RuntimeError("The run has not been prefilled yet.")
        return self._pending

    @property
    def pending_hidden(self) -> torch.Tensor:
        """The hidden state [H] that produced `pending`: what heads and drafters read."""
        if self._pending_hidden is None:
            raise RuntimeError("The run has not been prefilled yet.")
        return self._pending_hidden

    @property
    def done(self) -> bool:
        return bool(self.stopped)

    @property
    def remaining(self) -> int:
        return self.sampling.max_new_tokens - len(self.output)

    @property
    def seq_len(self) -> int:
        """Tokens held in the KV cache (prompt + committed, minus the pending root)."""
        return self.cache.get_seq_length()

    @property
    def context(self) -> list[int]:
        """The prompt and every committed token."""
        return self.prompt_ids + self.output

    def now(self) -> float:
        """The clock every decode loop keeps (core.decoding.synced_now)."""
        return synced_now(self.lm.device)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the wall time of the block to this step's `name` phase (one of PHASES), synchronised."""
        t = self.now()
        try:
            yield
        finally:
            self.times[name] += self.now() - t

    def prefill(self, layers: tuple[int, ...] = ()) -> torch.Tensor:
        """Run the prompt; keep the last position's logits as `pending`; return what a proposer reads of the
        prompt: its final hidden states [n, H], or with `layers` the inputs of those target layers [n, k·H]."""
        t, last = self.now(), slice(-1, None)
        if layers:
            logits, hidden, feats = self.lm.forward_layers(self.prompt_ids, self.cache, layers, logits_for=last)
        else:
            logits, hidden = self.lm.forward(self.prompt_ids, self.cache, logits_for=last)
            feats = hidden
        self._pending, self._pending_hidden = logits[-1], hidden[-1]
        self.prefill_s = self.now() - t
        return feats

    def decode(self, step: Step) -> Trace:
        """The one decode loop: prefill if needed, then step until EOS or max_new_tokens, asking `stop` before each
        step (`check`)."""
        self.check()
        if self._pending is None:
            self.prefill()
        while not self.done:
            self.check()
            self._step(step)
        return self.trace()

    def check(self) -> None:
        """Raise Stopped when the caller's `stop` says so: a plain call between steps, no tensor read, so an
        abandoned or stopped run frees the model within one step."""
        if self.stop is not None and self.stop():
            n, of = len(self.output), self.sampling.max_new_tokens
            raise Stopped(f"{self.method} stopped after {n} of {of} tokens", n)

    def _step(self, step: Step) -> None:
        self.times = dict.fromkeys(PHASES, 0.0)
        started = self.now()
        dist = self.pending  # the distribution the root comes from, for the record
        if self.forced is not None:
            root, root_from, self.forced = self.forced, self.forced_from, None
        else:
            root, root_from = choose(self.pending, self.sampling, self.gen), "target"
        if self.is_final(root):  # the last token needs no forward pass
            self._record([root], None, self.now() - started, dist, root_from)
            return
        out = step(self, root)
        self._pending, self._pending_hidden = out.logits, out.hidden
        self.forced, self.forced_from = out.next_root, out.next_from
        self._record([root, *out.accepted], out, self.now() - started, dist, root_from)

    def is_final(self, token: int) -> bool:
        """Whether committing `token` ends the run (core.decoding.is_final)."""
        return is_final(token, self.remaining, self.lm.eos_ids)

    def clip(self, tokens: list[int]) -> list[int]:
        """Cut a proposed commit at the first EOS and at the token budget (core.decoding.clip); set `stopped`."""
        out, why = clip(tokens, self.remaining, self.lm.eos_ids)
        self.stopped = why or self.stopped
        return out

    def _record(
        self, tokens: list[int], out: Outcome | None, wall_s: float, dist_logits: torch.Tensor, root_from: str
    ) -> None:
        """Commit tokens and record the step; everything here runs after the step's clock stopped."""
        tokens = self.clip(tokens)
        dist = target_probs(dist_logits, self.sampling)
        prob, ent, top = summary(dist, tokens[0], self.lm.token_text)  # the record's one host read
        step = StepTrace(
            index=len(self.steps),
            committed=tokens,
            texts=[self.lm.token_text(t) for t in tokens],
            proposed=out.proposed if out else 0,
            forward_tokens=out.forward_tokens if out else 0,
            propose_s=self.times["propose"],
            verify_s=self.times["verify"],
            accept_s=self.times["accept"],
            commit_s=self.times["commit"],
            wall_s=wall_s,
            prob=round(prob, 6),
            entropy=round(ent, 6),
            root_from=root_from,
            top=top,
            detail=out.detail() if out and out.detail else None,
        )
        self.output.extend(tokens)
        self.steps.append(step)
        if self.on_step is not None:
            self.on_step(step)

    def trace(self) -> Trace:
        """The finished run as plain data."""
        cfg = {"sampling": asdict(self.sampling), "method": self.config}
        return Trace(
            method=self.method,
            model=self.lm.name,
            device=self.lm.describe(),
            prompt=self.prompt,
            prompt_ids=self.prompt_ids,
            config=cfg,
            steps=self.steps,
            output_ids=self.output,
            text=self.lm.decode(self.output),
            total_s=time.perf_counter() - self._t0,
            prefill_s=self.prefill_s,
            stopped=self.stopped or "length",
        )


Generate = Callable[..., Trace]  # (lm, prompt_ids, sampling, config=None, prompt="", on_step=None, stop=None, **res.)


def generator(
    name: str,
    default: Callable[[], Any],
    begin: Callable[..., Step],
    doc: str,
    settle: Callable[[LoadedModel, Any], Any] | None = None,
) -> Generate:
    """A method's generate, written once: its Config (default() when none; settle(lm, cfg) when it reads the
    model), one Run, and Run.decode over the step that `begin(run, cfg, **resources)` returns (resources: trained
    parts passed in, such as heads; else begin loads them; a Speculator's start prefills the run itself); `stop`,
    asked between steps, ends the run with Stopped."""

    def generate(
        lm: LoadedModel,
        prompt_ids: list[int],
        sampling: Sampling,
        config: Any = None,
        prompt: str = "",
        on_step: OnStep | None = None,
        stop: ShouldStop | None = None,
        **resources: Any,
    ) -> Trace:
        cfg = settled(config if config is not None else default())
        cfg = settle(lm, cfg) if settle is not None else cfg
        run = Run(lm, prompt_ids, sampling, name, cfg, prompt, on_step)
        run.stop = stop
        return run.decode(begin(run, cfg, **resources))

    generate.__doc__ = doc
    return generate
