"""Classic speculative decoding with a self-speculative draft: the target's own first layers."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specviz.core.acceptance import RULES, annotate, judge_chain
from specviz.core.details import SpsStep
from specviz.core.drafting import LayerDraft, as_full, parse_layers
from specviz.core.model import LoadedModel, crop_to
from specviz.core.paths import DRAFT_DIR
from specviz.core.sampling import ConfigError, Sampling, target_probs
from specviz.core.trace import Trace
from specviz.heads.draft import DraftError, cached_draft, parts
from specviz.methods.base import Card, OnStep, Outcome, Run, chain_outcome

DRAFTS = ("layers", "trained")
CARD = Card(
    name="sps",
    label="Speculative sampling",
    summary="A shallow copy of the model (its first layers) drafts γ tokens; the full model verifies them at once.",
    colour="#e69f00",
    order=1,
    figures="specviz.output.viz.acceptance:gallery",
    head="draft",
    head_label="sps draft model",
    models=DRAFT_DIR,
)
NAME, LABEL, SUMMARY = CARD.name, CARD.label, CARD.summary


@dataclass(frozen=True)
class Config:
    """Draft length, which target layers make the draft, and the acceptance rule used when sampling."""

    gamma: int = 3  # tokens drafted per step
    draft: str = "layers"  # "layers": the target's own first layers, untrained; "trained": models/draft
    layers: str = "0-3"  # target layers the draft runs, e.g. "0-3" or "0,1,2,29"; then final norm + LM head
    draft_vocab: int = 8192  # the draft's LM head covers token ids below this (0 = the whole vocabulary)
    rule: str = "speculative"  # at T > 0: speculative (lossless), typical or flawed (lossy, for teaching)
    eps: float = 0.09  # typical acceptance: hard threshold ε
    delta: float = 0.3  # typical acceptance: entropy-scaled threshold δ

    def __post_init__(self) -> None:
        if not 1 <= self.gamma <= 16:
            raise ConfigError(f"gamma must be between 1 and 16, got {self.gamma!r}.")
        if self.draft not in DRAFTS:
            raise ConfigError(f"draft must be one of {', '.join(DRAFTS)}, got {str(self.draft)[:40]!r}.")
        parse_layers(self.layers, None)
        if self.draft_vocab < 0:
            raise ConfigError(f"draft_vocab must be 0 (all) or a positive size, got {self.draft_vocab!r}.")
        if self.rule not in RULES:
            raise ConfigError(f"rule must be one of {', '.join(RULES)}, got {str(self.rule)[:40]!r}.")
        if not (0 < self.eps <= 1 and 0 < self.delta <= 10):
            raise ConfigError(f"eps must be in (0, 1] and delta in (0, 10], got {self.eps!r}, {self.delta!r}.")


def propose(run: Run, draft: LayerDraft, root: int, gamma: int) -> tuple[list[int], list[torch.Tensor]]:
    """Draft up to γ tokens after root; return them and the draft distributions q [V] they came from."""
    feed = [*run.context[draft.length :], root]
    vocab = run.lm.lm_head.get_parameter("weight").shape[0]
    drafts: list[int] = []
    qs: list[torch.Tensor] = []
    for _ in range(gamma):
        logits = draft.forward(feed)
        q = as_full(target_probs(logits, run.sampling), vocab, draft.ids)  # softmax when greedy (for display)
        # run.gen is a CPU generator: the draw happens on the CPU, whatever device q lives on
        x = int(q.argmax()) if run.sampling.greedy else int(torch.multinomial(q.cpu(), 1, generator=run.gen))
        drafts.append(x)
        qs.append(q)
        if x in run.lm.eos_ids:
            break
        feed = [x]
    return drafts, qs


class Speculator:
    """One sps generation: the run's layer-prefix draft and the acceptance rule."""

    def __init__(self, run: Run, cfg: Config) -> None:
        self.cfg = cfg
        if cfg.draft == "trained":  # a draft model trained on the target's own answers (heads.draft)
            try:
                self.draft = LayerDraft(run.lm, [], 0, parts(cached_draft(run.lm)))
            except DraftError as exc:  # missing, corrupt, or made for another model: a setting the user can change
                raise ConfigError(str(exc)) from None
        else:
            self.draft = LayerDraft(run.lm, parse_layers(cfg.layers, len(run.lm.hf.model.layers)), cfg.draft_vocab)

    def step(self, run: Run, root: int) -> Outcome:
        """propose → verify → accept → commit."""
        base, rule = run.seq_len, "greedy" if run.sampling.greedy else self.cfg.rule
        with run.phase("propose"):
            drafts, qs = propose(run, self.draft, root, min(self.cfg.gamma, run.remaining - 1))
        with run.phase("verify"):
            logits, hidden = run.lm.forward([root, *drafts], run.cache)  # [γ+1, V]
        with run.phase("accept"):
            p = target_probs(logits, run.sampling)
            n, nxt, records = judge_chain(rule, p, torch.stack(qs), drafts, run.gen, self.cfg.eps, self.cfg.delta)
        with run.phase("commit"):
            crop_to(run.cache, base + 1 + n)
            self.draft.rollback(base + 1 + n)
        return chain_outcome(
            drafts, n, logits, hidden, nxt, lambda: SpsStep(rule, drafts, n, annotate(records, p, run.lm.token_text))
        )


def generate(
    lm: LoadedModel,
    prompt_ids: list[int],
    sampling: Sampling,
    config: Config | None = None,
    prompt: str = "",
    on_step: OnStep | None = None,
) -> Trace:
    """Decode with draft-then-verify steps until EOS or max_new_tokens."""
    cfg = config or Config()
    run = Run(lm, prompt_ids, sampling, NAME, cfg, prompt, on_step)
    return run.decode(Speculator(run, cfg).step)


def tiny_resources(lm: LoadedModel) -> dict:
    """A draft of the first layer only, so the method runs on a model of any depth (the contract test's)."""
    return {"config": Config(layers="0")}
