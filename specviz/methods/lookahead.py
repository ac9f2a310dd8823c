"""Lookahead decoding (Fu et al., 2024): a Jacobi window and n-gram verification in one forward pass."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from specviz.core.details import LookaheadDetail
from specviz.core.drafting import INIT_SOURCES, fit_field, initial_guesses, pad_id
from specviz.core.model import LoadedModel
from specviz.core.sampling import ConfigError, Sampling
from specviz.core.trace import Trace
from specviz.methods.base import Card, OnStep, Outcome, Run, ShouldStop, settled
from specviz.trees.ngram_pool import Layout, NgramPool, additive_mask
from specviz.trees.tree import commit_path
from specviz.trees.walk import Verdict, judge

CARD = Card(
    name="lookahead",
    label="Lookahead decoding",
    summary="A 2D Jacobi window harvests n-grams; pooled n-grams that follow the last token are verified.",
    colour="#d55e00",
    order=7,
    preset_fields=("window", "ngram", "guesses"),
)
POOL_TOP = 8  # keys of the pool recorded in the last step, for the pool chart


@dataclass(frozen=True)
class Config:
    """W, N, G; one forward feeds 1 + (N-1)·W + G·(N-1) tokens (the reference GPU setting 5/7/7 feeds 79)."""

    # W / N / G: 0 (G: -1) = fitted to the device where the run starts (specviz.tuning.fit: the acceptance the sweep in
    # models/lookahead_sweep.json measured at each setting against this device's step cost), else as given; a run
    # whose caller skips the fit takes the fallback 3 / 2 / 2
    window: int = field(default=0, metadata=fit_field(3))  # W: columns of the Jacobi window
    # N: n-gram length; the window keeps N-1 levels and verifies N-1 tokens per candidate
    ngram: int = field(default=0, metadata=fit_field(2))
    # G: n-grams verified per step (the pool's capacity per key); -1 = fitted (0 is a setting: no verify branch)
    guesses: int = field(default=-1, metadata=fit_field(2, unset=-1))
    init: str = "prompt"  # the window's first level: "pad", "random" ids, or tokens drawn from the prompt
    seed_prompt: bool = True  # put every n-gram of the prompt in the pool before decoding
    window_vocab: int = 0  # > 0: the window's next level is argmax over the first K ids only (cheaper)

    def __post_init__(self) -> None:
        for name, v, lo, hi, unset in [
            ("window", self.window, 1, 32, 0),
            ("ngram", self.ngram, 2, 8, 0),
            ("guesses", self.guesses, 0, 32, -1),
        ]:
            if not isinstance(v, int) or not (lo <= v <= hi or v == unset):  # unset: fitted where the run starts
                raise ConfigError(f"lookahead {name} must be an integer from {lo} to {hi}, got {v!r}.")
        if self.init not in INIT_SOURCES:
            raise ConfigError(f"lookahead init must be one of {', '.join(INIT_SOURCES)}, got {str(self.init)[:40]!r}.")
        if not isinstance(self.window_vocab, int) or self.window_vocab < 0:
            raise ConfigError(f"lookahead window_vocab must be 0 or positive, got {self.window_vocab!r}.")

    @property
    def forward_tokens(self) -> int:
        """Tokens per forward once the window is full and G candidates are found."""
        return 1 + (self.ngram - 1) * (self.window + self.guesses)


@dataclass
class LookaheadState:
    """The window (oldest level first) and the pool, carried from step to step."""

    cfg: Config
    levels: list[list[int]]
    pool: NgramPool
    text: Callable[[int], str]  # memoised token -> text

    def step(self, run: Run, root: int) -> Outcome:
        """propose (window + pooled n-grams) → verify (one forward) → accept the longest match → commit."""
        cfg, lm = self.cfg, run.lm
        with run.phase("propose"):
            cands = self.pool.candidates(root, cfg.guesses)
            lay = Layout(len(self.levels), cfg.window, len(cands), cfg.ngram - 1)
            ids = [root, *(t for lv in self.levels for t in lv), *(t for c in cands for t in c)]
            base = run.seq_len
            positions = torch.tensor(lay.positions(base), device=lm.device)
        with run.phase("verify"):
            _, hidden = lm.forward(ids, run.cache, positions, additive_mask(lay, lm.neg_inf()), slice(0, 0))
            root_logits, cand_rows, new_level = _project(lm, hidden, lay, cfg.window_vocab)
            new = new_level.tolist()
        with run.phase("accept"):
            verdict = judge(root_logits, cands, list(cand_rows), run.sampling, run.gen)  # the candidates as a tree
        m, best = len(verdict.accepted), verdict.best
        with run.phase("commit"):
            commit_path(run.cache, base, [0, *(lay.cand_slot(best, j) for j in range(m))])
        if m:
            self.pool.hit(root, cands[best])
        window = [list(lv) for lv in self.levels]
        grams, status = advance_window(self, new, cfg.ngram - 1)
        return Outcome(
            accepted=verdict.accepted,
            proposed=sum(map(len, cands)),
            forward_tokens=lay.size,
            logits=cand_rows[best, m - 1] if m else root_logits,
            hidden=hidden[lay.cand_slot(best, m - 1) if m else 0],
            next_root=verdict.forced,
            detail=lambda: self.record(window, new, grams, status, cands, verdict, lay),
        )

    def record(
        self,
        window: list[list[int]],
        new: list[int],
        grams: list[list[int]],
        status: list[str],
        cands: list[list[int]],
        verdict: Verdict,
        lay: Layout,
    ) -> LookaheadDetail:
        """The step as plain data, token texts included (built after the step's clock stopped)."""
        text = self.text
        return LookaheadDetail(
            window=window,
            window_texts=[[text(x) for x in lv] for lv in window],
            new_level=new,
            new_texts=[text(x) for x in new],
            harvested=grams,
            harvest_status=status,
            candidates=cands,
            candidate_texts=[[text(x) for x in c] for c in cands],
            matched=verdict.matched,
            best=verdict.best,
            accepted_tokens=verdict.accepted,
            pool_size=len(self.pool),
            pool_keys=len(self.pool.grams),
            layout={"levels": lay.levels, "width": lay.width, "cands": lay.cands, "depth": lay.depth},
        )


def _rows(lm: LoadedModel, hidden: torch.Tensor, slots: list[int], vocab: int = 0) -> torch.Tensor:
    """Logits [len(slots), V or vocab] at the given slots; vocab > 0 projects onto the first ids only."""
    with torch.inference_mode():
        h = hidden[slots]
        if vocab <= 0:
            return lm.lm_head(h).float()
        return (h @ lm.lm_head.get_parameter("weight")[:vocab].T).float()


def _project(lm: LoadedModel, hidden: torch.Tensor, lay: Layout, vocab: int) -> tuple[torch.Tensor, ...]:
    """Root logits [V], candidate logits [G', N-1, V] and the window's next level [W], streaming the LM head once.

    The LM head (49,152 × 576) is read from memory on every call, so every full-vocabulary row goes into one
    product; with `vocab` > 0 the window rows use a separate, small product over the first `vocab` ids.
    """
    cand = [lay.cand_slot(c, j) for c in range(lay.cands) for j in range(lay.depth)]
    last = [lay.slot(lay.levels - 1, i) for i in range(lay.width)]
    full = _rows(lm, hidden, [0, *cand] + ([] if vocab else last))  # [1 + G'(N-1) (+ W), V]
    split = 1 + len(cand)
    window = full[split:] if not vocab else _rows(lm, hidden, last, vocab)
    return full[0], full[1:split].view(lay.cands, lay.depth, full.shape[-1]), window.argmax(-1)


def advance_window(state: Any, new: list[int], full: int) -> tuple[list[list[int]], list[str]]:
    """Append the new level to `state.levels`; once N-1 levels exist, harvest one n-gram per column into `state.pool`
    and drop the oldest (Lookahead's window, and the one Medusa + Lookahead runs beside its tree)."""
    if len(state.levels) < full:
        state.levels.append(new)
        return [], []
    grams = [[lv[i] for lv in state.levels] + [new[i]] for i in range(len(new))]
    status = [state.pool.add(g) for g in grams]
    state.levels = [*state.levels[1:], new]
    return grams, status


def start(
    lm: LoadedModel,
    prompt_ids: list[int],
    sampling: Sampling,
    cfg: Config,
    prompt: str = "",
    on_step: OnStep | None = None,
    pool: NgramPool | None = None,
) -> tuple[Run, LookaheadState]:
    """A run and its window (W, N, G left unset for the fit: their fallback); the pool is seeded from the prompt
    unless one is given."""
    cfg = settled(cfg)
    run = Run(lm, prompt_ids, sampling, CARD.name, cfg, prompt, on_step)
    if pool is None:
        pool = NgramPool(cfg.ngram, max(1, cfg.guesses))
        if cfg.seed_prompt:
            pool.seed(prompt_ids)
    first = initial_guesses(cfg.init, cfg.window, prompt_ids, pad_id(lm), lm.hf.config.vocab_size, run.gen)
    return run, LookaheadState(cfg, [first], pool, functools.lru_cache(maxsize=None)(lm.token_text))


def finish(run: Run, state: LookaheadState) -> Trace:
    """Decode to the end; the pool as it ended goes on the last step that ran a forward (for the pool chart)."""
    trace = run.decode(state.step)
    for i in reversed(range(len(trace.steps))):
        last = trace.steps[i]
        if isinstance(last.detail, LookaheadDetail):
            top = state.pool.top(POOL_TOP, state.text)
            trace.steps[i] = replace(last, detail=replace(last.detail, pool_top=top))
            break
    return trace


def generate(
    lm: LoadedModel,
    prompt_ids: list[int],
    sampling: Sampling,
    config: Config | None = None,
    prompt: str = "",
    on_step: OnStep | None = None,
    stop: ShouldStop | None = None,
) -> Trace:
    """Decode until EOS or max_new_tokens with lookahead steps (`stop`: asked between steps, as in Run.decode)."""
    run, state = start(lm, prompt_ids, sampling, config or Config(), prompt, on_step)
    run.stop = stop
    return finish(run, state)


def accepting_resources(lm: LoadedModel) -> dict:
    """N = 3, so a verified n-gram can commit two drafted tokens in one step (the default N = 2 commits one)."""
    return {"config": Config(ngram=3)}
