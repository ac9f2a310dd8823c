"""Lookahead decoding (Fu et al., 2024): a Jacobi window and n-gram verification in one forward pass."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import torch

from specviz.methods.base import OnStep, Run
from specviz.methods.jacobi import INIT_SOURCES, initial_guesses, pad_id
from specviz.model import LoadedModel, keep_cache
from specviz.ngram_pool import Layout, NgramPool, additive_mask, verify
from specviz.sampling import ConfigError, Sampling
from specviz.trace import Trace

NAME = "lookahead"
LABEL = "Lookahead decoding"
SUMMARY = "A 2D Jacobi window harvests n-grams; pooled n-grams that follow the last token are verified."
POOL_TOP = 8  # keys of the pool recorded in the last step, for the pool chart


@dataclass(frozen=True)
class Config:
    """W, N, G; one forward feeds 1 + (N-1)·W + G·(N-1) tokens (the reference GPU setting 5/7/7 feeds 79)."""

    window: int = 4  # W: columns of the Jacobi window
    ngram: int = 3  # N: n-gram length; the window keeps N-1 levels and verifies N-1 tokens per candidate
    guesses: int = 3  # G: n-grams verified per step (also the pool's capacity per key)
    init: str = "prompt"  # the window's first level: "pad", "random" ids, or tokens drawn from the prompt
    seed_prompt: bool = True  # put every n-gram of the prompt in the pool before decoding
    window_vocab: int = 0  # > 0: the window's next level is argmax over the first K ids only (cheaper)

    def __post_init__(self) -> None:
        for name, v, lo, hi in [("window", self.window, 1, 32), ("ngram", self.ngram, 2, 8),
                                ("guesses", self.guesses, 0, 32)]:
            if not isinstance(v, int) or not lo <= v <= hi:
                raise ConfigError(f"lookahead {name} must be an integer from {lo} to {hi}, got {v!r}.")
        if self.init not in INIT_SOURCES:
            raise ConfigError(f"lookahead init must be one of {', '.join(INIT_SOURCES)}, got {self.init!r}.")
        if not isinstance(self.window_vocab, int) or self.window_vocab < 0:
            raise ConfigError(f"lookahead window_vocab must be 0 or positive, got {self.window_vocab!r}.")

    @property
    def forward_tokens(self) -> int:
        """Tokens per forward once the window is full and G candidates are found."""
        return 1 + (self.ngram - 1) * (self.window + self.guesses)


@dataclass
class LookaheadState:
    """The window (oldest level first), the pool, and a root already drawn from a residual."""

    levels: list[list[int]]
    pool: NgramPool
    forced: int | None = None
    text: object = None  # memoised token -> text


def _rows(lm: LoadedModel, hidden: torch.Tensor, slots: list[int], vocab: int = 0) -> torch.Tensor:
    """Logits [len(slots), V or vocab] at the given slots; vocab > 0 projects onto the first ids only."""
    with torch.inference_mode():
        h = hidden[slots]
        if vocab <= 0:
            return lm.lm_head(h).float()
        return (h @ lm.lm_head.weight[:vocab].T).float()


def _candidate_rows(run: Run, hidden: torch.Tensor, lay: Layout, cands: list[list[int]],
                    first: int) -> list[torch.Tensor]:
    """Logits [N-1, V] at each candidate's tokens; greedy skips candidates whose first token already fails."""
    need = [c for c, cand in enumerate(cands) if not run.sampling.greedy or cand[0] == first]
    out = [hidden.new_zeros(0) for _ in cands]  # never read: verify stops those at 0 matched
    if need:
        rows = _rows(run.lm, hidden, [lay.cand_slot(c, j) for c in need for j in range(lay.depth)])
        for i, c in enumerate(need):
            out[c] = rows[i * lay.depth : (i + 1) * lay.depth]
    return out


def _advance_window(state: LookaheadState, new: list[int], full: int) -> tuple[list[list[int]], list[str]]:
    """Append the new level; once N-1 levels exist, harvest one n-gram per column and drop the oldest."""
    if len(state.levels) < full:
        state.levels.append(new)
        return [], []
    grams = [[lv[i] for lv in state.levels] + [new[i]] for i in range(len(new))]
    status = [state.pool.add(g) for g in grams]
    state.levels = [*state.levels[1:], new]
    return grams, status


def step(run: Run, cfg: Config, state: LookaheadState) -> None:
    """One forward over [root][window levels][candidate n-grams]; accept the longest verified match."""
    started = time.perf_counter()
    lm, text = run.lm, state.text
    root = state.forced if state.forced is not None else run.pick_root()
    if run.is_final(root):
        run.commit([root], forward_tokens=0, draft_s=0.0, verify_s=0.0, started=started)
        return
    cands = state.pool.candidates(root, cfg.guesses)
    lay = Layout(len(state.levels), cfg.window, len(cands), cfg.ngram - 1)
    ids = [root, *(t for lv in state.levels for t in lv), *(t for c in cands for t in c)]
    base = run.seq_len
    positions = torch.tensor(lay.positions(base))
    draft_s = time.perf_counter() - started
    t = time.perf_counter()
    logits, hidden = lm.forward(ids, run.cache, positions, additive_mask(lay, lm.neg_inf()), slice(0, 1))
    cand_rows = _candidate_rows(run, hidden, lay, cands, int(torch.argmax(logits[0])))
    last = [lay.slot(lay.levels - 1, i) for i in range(cfg.window)]
    new = _rows(lm, hidden, last, cfg.window_vocab).argmax(-1).tolist()
    verify_s = time.perf_counter() - t
    verdict = verify(logits[0], cands, cand_rows, run.sampling, run.gen)
    m, best = len(verdict.accepted), verdict.best
    keep_cache(run.cache, base, [0, *(lay.cand_slot(best, j) for j in range(m))])
    if m:
        state.pool.hit(root, cands[best])
    window = [list(lv) for lv in state.levels]
    grams, status = _advance_window(state, new, cfg.ngram - 1)
    detail = {
        "window": window, "window_texts": [[text(x) for x in lv] for lv in window],
        "new_level": new, "new_texts": [text(x) for x in new], "harvested": grams, "harvest_status": status,
        "candidates": cands, "candidate_texts": [[text(x) for x in c] for c in cands],
        "matched": verdict.matched, "best": best, "accepted": verdict.accepted,
        "pool_size": len(state.pool), "pool_keys": len(state.pool.grams),
        "layout": {"levels": lay.levels, "width": lay.width, "cands": lay.cands, "depth": lay.depth},
    }
    state.forced = verdict.forced
    run.commit([root, *verdict.accepted], forward_tokens=lay.size, draft_s=draft_s, verify_s=verify_s,
               started=started, detail=detail)
    slot = lay.cand_slot(best, m - 1) if m else 0
    run.pending = cand_rows[best][m - 1] if m else logits[0]
    run.pending_hidden = hidden[slot]


def start(lm: LoadedModel, prompt_ids: list[int], sampling: Sampling, cfg: Config, prompt: str = "",
          on_step: OnStep | None = None, pool: NgramPool | None = None) -> tuple[Run, LookaheadState]:
    """A prefilled run and its window; the pool is seeded from the prompt unless one is given."""
    run = Run(lm, prompt_ids, sampling, NAME, cfg, prompt, on_step)
    if pool is None:
        pool = NgramPool(cfg.ngram, max(1, cfg.guesses))
        if cfg.seed_prompt:
            pool.seed(prompt_ids)
    first = initial_guesses(cfg.init, cfg.window, prompt_ids, pad_id(lm), lm.hf.config.vocab_size, run.gen)
    state = LookaheadState([first], pool, text=functools.lru_cache(maxsize=None)(lm.token_text))
    run.prefill()
    return run, state


def generate(lm: LoadedModel, prompt_ids: list[int], sampling: Sampling, config: Config | None = None,
             prompt: str = "", on_step: OnStep | None = None) -> Trace:
    """Decode until EOS or max_new_tokens with lookahead steps."""
    cfg = config or Config()
    run, state = start(lm, prompt_ids, sampling, cfg, prompt, on_step)
    while not run.done:
        step(run, cfg, state)
    if run.steps:  # the pool as it ended, for the pool chart (kept out of the per-step records)
        run.steps[-1].detail["pool_top"] = state.pool.top(POOL_TOP, state.text)
    return run.trace()


SWEEP_PATH = "models/lookahead_sweep.json"
SWEEP_COMMAND = ("python -c 'from specviz.methods.lookahead import write_sweep; write_sweep()'  "
                 "# ~20 min on 2 cores")


def measure_sweep(lm: LoadedModel, prompts: list[str], windows: tuple[int, ...] = (1, 2, 3, 4, 6, 8),
                  shapes: tuple[tuple[int, int], ...] = ((3, 3), (4, 2), (2, 3)), max_new_tokens: int = 64,
                  repeats: int = 1, progress=print) -> dict:
    """Greedy speedup over `ar` and A for every W × (N, G): per prompt, ar and every setting interleaved.

    Speedup is the median over prompts of (median ar wall time / median lookahead wall time).
    """
    import statistics

    from specviz.methods import autoregressive

    s = Sampling(max_new_tokens=max_new_tokens)
    cfgs = [Config(window=w, ngram=n, guesses=g) for n, g in shapes for w in windows]
    encoded = [lm.encode_prompt(p) for p in prompts]
    secs = [[[] for _ in encoded] for _ in range(len(cfgs) + 1)]  # [setting][prompt] -> seconds; 0 = ar
    toks, steps, same = [0] * len(cfgs), [0] * len(cfgs), [0] * len(cfgs)
    for rep in range(repeats):
        for p, ids in enumerate(encoded):
            progress(f"repeat {rep + 1}/{repeats}, prompt {p + 1}/{len(encoded)}")
            t = time.perf_counter()
            want = autoregressive.generate(lm, ids, s).output_ids
            secs[0][p].append(time.perf_counter() - t)
            for i, cfg in enumerate(cfgs):
                t = time.perf_counter()
                trace = generate(lm, ids, s, cfg)
                secs[i + 1][p].append(time.perf_counter() - t)
                toks[i], steps[i] = toks[i] + trace.new_tokens, steps[i] + len(trace.steps)
                same[i] += trace.output_ids == want and rep == 0
    med = [[statistics.median(x) for x in row] for row in secs]
    rows = [{"window": c.window, "ngram": c.ngram, "guesses": c.guesses, "forward_tokens": c.forward_tokens,
             "speedup": round(statistics.median(a / b for a, b in zip(med[0], med[i + 1])), 4),
             "A": round(toks[i] / max(1, steps[i]), 4), "identical": same[i], "prompts": len(encoded)}
            for i, c in enumerate(cfgs)]
    best = max(rows, key=lambda r: r["speedup"])
    return {"command": SWEEP_COMMAND, "function": "specviz.methods.lookahead.measure_sweep",
            "device": lm.describe(), "max_new_tokens": max_new_tokens, "repeats": repeats,
            "prompts": prompts, "rows": rows, "best": best,
            "chosen": {"window": Config().window, "ngram": Config().ngram, "guesses": Config().guesses}}


SWEEP_CATEGORIES = ("coding", "math_reasoning", "qa", "rag", "summarization", "translation", "writing")


def write_sweep(path: str = SWEEP_PATH, categories: tuple[str, ...] = SWEEP_CATEGORIES, **kw) -> dict:
    """Re-measure the sweep on Spec-Bench questions (first turns) and write it where the page reads it."""
    import json
    from pathlib import Path

    from specviz.model import load_model
    from specviz.prompts import read_prompts, select

    data = Path(__file__).resolve().parents[3] / "shared/data/spec_bench_question.jsonl"
    picked = [it for it in select(read_prompts(data), per_category=1) if it.category in categories]
    lm = load_model("default", device="cpu", dtype="fp32", progress=lambda _m: None)
    out = measure_sweep(lm, [it.text for it in picked], **kw)
    out["categories"] = [it.category for it in picked]
    Path(path).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return out
