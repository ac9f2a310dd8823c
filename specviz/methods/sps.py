"""Speculative sampling: a small draft model proposes γ tokens, the target verifies them in one pass.

1. Propose: the draft samples γ tokens one after another, each x_i ~ q_i (at T = 0, its argmax) (`propose`).
2. Verify: one target forward over the root and the γ drafts gives p_0 … p_γ (the chain is a one-branch tree).
3. Accept: token i is kept with probability min(1, p_i(x_i) / q_i(x_i)); at the first rejection the next token is
   drawn from norm(max(p_i − q_i, 0)), and when all are kept the bonus comes from p_γ. The committed tokens are then
   distributed exactly as the target's (the one acceptance walk, specviz.trees.walk, with the draft's q). Typical
   acceptance (lossy by design) and a flawed tutorial rule (biased, to teach) can be chosen instead at T > 0.
4. Commit: the target's cache and the draft's keep what was accepted.

The draft is, by default, the one trained on the target's own answers (models/draft) at the γ its sweep found
best; the target's own first layers, untrained, stay as the contrast (`draft=layers`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from specviz.core.acceptance import RULES
from specviz.core.details import SpsDetail
from specviz.core.drafting import LayerDraft, as_full, parse_layers
from specviz.core.host import fetch
from specviz.core.model import LoadedModel
from specviz.core.paths import DRAFT_DIR
from specviz.core.sampling import ConfigError, target_probs
from specviz.heads.draft import DraftError, cached_draft, parts
from specviz.methods.base import Card, Outcome, Run, generator
from specviz.methods.speculator import TreeSpeculator, path_outcome
from specviz.trees.tree import TreeSpec
from specviz.trees.verifier import RunView, TreeVerifier, Verified
from specviz.trees.walk import Rule, Walk, chain_records, walk

DRAFTS = ("auto", "layers", "trained")
PREFIX, PREFIX_GAMMA = "0-3", 3  # the untrained contrast: the target's first four layers, drafting 3 tokens
CARD = Card(
    name="sps",
    label="Speculative sampling",
    summary="A small draft model trained on the target's own answers drafts γ tokens; the target checks them at once.",
    colour="#e69f00",
    order=1,
    head="draft",
    head_label="sps draft model",
    models=DRAFT_DIR,
    short="speculative sampling",
)


@dataclass(frozen=True)
class Config:
    """Draft length, which target layers make the draft, and the acceptance rule used when sampling."""

    gamma: int = 0  # tokens drafted per step (0: the draft's own: its sweep's best when trained, 3 for layers)
    draft: str = "auto"  # "trained": models/draft; "layers": the target's first layers, untrained; "auto": trained
    # where a trained draft fits the model and `layers` is not set, else layers
    layers: str = ""  # target layers the draft runs, e.g. "0-3" or "0,1,2,29" ("": 0-3); then final norm + LM head
    draft_vocab: int = 8192  # the draft's LM head covers token ids below this (0 = the whole vocabulary)
    rule: str = "speculative"  # at T > 0: speculative (lossless), typical or flawed (lossy, for teaching)
    eps: float = 0.09  # typical acceptance: hard threshold ε
    delta: float = 0.3  # typical acceptance: entropy-scaled threshold δ

    def __post_init__(self) -> None:
        if not 0 <= self.gamma <= 16:
            raise ConfigError(f"gamma must be between 1 and 16 (0: the draft's own), got {self.gamma!r}.")
        if self.draft not in DRAFTS:
            raise ConfigError(f"draft must be one of {', '.join(DRAFTS)}, got {str(self.draft)[:40]!r}.")
        parse_layers(self.layers or PREFIX, None)
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
    if run.sampling.greedy:  # the chain stays on the device: each argmax feeds the next draft step unread
        picks: list[torch.Tensor] = []
        for _ in range(gamma):
            q = as_full(target_probs(draft.forward(feed), run.sampling), vocab, draft.ids)  # softmax, for display
            picks.append(q.argmax().view(1))
            qs.append(q)
            feed = picks[-1]
        drafts = [int(x) for x in fetch(torch.cat(picks))[0]]  # the chain's one host read
        ends = next((i for i, x in enumerate(drafts) if x in run.lm.eos_ids), len(drafts))
        return drafts[: ends + 1], qs[: ends + 1]  # drafted past an EOS: cut there (the draft cache rolls back)
    for _ in range(gamma):
        q = as_full(target_probs(draft.forward(feed), run.sampling), vocab, draft.ids)
        # run.gen is a CPU generator: the draw happens on the CPU, whatever device q lives on (a read per draw)
        x = int(torch.multinomial(q.cpu(), 1, generator=run.gen))
        drafts.append(x)
        qs.append(q)
        if x in run.lm.eos_ids:
            break
        feed = [x]
    return drafts, qs


def swept_gamma(path: Path | str = DRAFT_DIR / "gamma_sweep.json") -> int | None:
    """The γ at which the trained draft was fastest in its sweep (`calibrate draft`); None without a readable one."""
    try:
        gamma = json.loads(Path(path).read_text(encoding="utf-8"))["best"]["gamma"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return gamma if isinstance(gamma, int) and 1 <= gamma <= 16 else None


def trained_fits(lm: LoadedModel) -> bool:
    """Whether models/draft holds a draft made for this model."""
    try:
        cached_draft(lm)
    except DraftError:
        return False
    return True


def resolve(lm: LoadedModel, cfg: Config) -> Config:
    """The draft and γ a run uses, as its trace records them: `auto` is the trained draft where one fits the model
    and no `layers` are named, else the first layers; γ 0 is the draft's own (the sweep's best, or 3 for layers)."""
    kind = cfg.draft
    if kind == "auto":
        kind = "layers" if cfg.layers or not trained_fits(lm) else "trained"
    if kind == "trained":
        return replace(cfg, draft="trained", layers="", gamma=cfg.gamma or swept_gamma() or 1)
    return replace(cfg, draft="layers", layers=cfg.layers or PREFIX, gamma=cfg.gamma or PREFIX_GAMMA)


@dataclass
class Drafted:
    """A step's draft as a one-branch tree (root first) and the distributions q [γ, V] its tokens were drawn from."""

    tokens: list[int]
    spec: TreeSpec
    q: torch.Tensor | None


class DraftProposer:
    """The draft model's chain: γ tokens, each sampled (or, at T = 0, the argmax) from the draft's q; the draft's own
    cache rolls back to what the target kept."""

    layers: tuple[int, ...] = ()  # the draft reads tokens, not the target's features

    def __init__(self, run: Run, cfg: Config) -> None:
        self.cfg, self.q = cfg, None
        if cfg.draft == "trained":  # a draft model trained on the target's own answers (heads.draft)
            try:
                self.draft = LayerDraft(run.lm, [], 0, parts(cached_draft(run.lm)))
            except DraftError as exc:  # missing, corrupt, or made for another model: a setting the user can change
                raise ConfigError(str(exc)) from None
        else:
            self.draft = LayerDraft(run.lm, parse_layers(cfg.layers, len(run.lm.hf.model.layers)), cfg.draft_vocab)

    def start(self, run: Run, prompt_feats: torch.Tensor) -> None:
        """The draft catches up with the prompt on its first step (its cache holds what it has read)."""

    def propose(self, run: Run, root: int) -> Drafted:
        drafts, qs = propose(run, self.draft, root, min(self.cfg.gamma, run.remaining - 1))
        self.q = torch.stack(qs) if qs else None
        return Drafted([root, *drafts], TreeSpec.chain(1 + len(drafts)), self.q)

    def commit(self, v: Verified, path: list[int]) -> None:
        self.draft.rollback(v.prefix + len(path))


class DraftVerifier(TreeVerifier):
    """The tree verifier, judging each drafted token against the distribution q the draft drew it from."""

    def __init__(self, proposer: DraftProposer, rule: Rule) -> None:
        super().__init__(rule=rule)
        self.proposer = proposer

    def verify(self, run: RunView, tokens: list[int], spec: TreeSpec) -> Verified:
        """The tree verifier's forward, with the target's p at every node: the walk and the step's record read it."""
        v = super().verify(run, tokens, spec)
        v.probs = target_probs(v.logits, run.sampling)
        return v

    def accept(self, run: RunView, v: Verified) -> Walk:
        return walk(
            run.sampling, run.gen, v.tokens, v.spec, v.logits, v.probs, run.lm.token_text, self.rule, self.proposer.q
        )


class SpS(TreeSpeculator):
    """One sps generation: the draft's chain verified as a one-branch tree in the tree methods' one step
    (methods.speculator.TreeSpeculator.step: propose → verify → accept → commit), judged by the one acceptance walk:
    greedy at T = 0, else min(1, p(x)/q(x)) and the residual (lossless), typical acceptance or the flawed rule."""

    DETAIL = SpsDetail
    proposer: DraftProposer

    def __init__(self, run: Run, cfg: Config) -> None:
        drafting = DraftProposer(run, cfg)
        rule = Rule({"speculative": "exact"}.get(cfg.rule, cfg.rule), cfg.eps, cfg.delta)
        super().__init__(drafting, DraftVerifier(drafting, rule))
        self.cfg = cfg

    def outcome(self, run: Run, draft: Any, v: Verified, w: Walk) -> Outcome:
        def detail() -> SpsDetail:  # built after the step's clock stopped
            rule = "greedy" if run.sampling.greedy else self.cfg.rule
            p, drafts = v.probs if v.probs is not None else target_probs(v.logits, run.sampling), draft.tokens[1:]
            eps, delta = self.cfg.eps, self.cfg.delta
            recs = chain_records(w, drafts, p, rule, run.lm.token_text, draft.q, eps=eps, delta=delta)
            return SpsDetail(rule, drafts, len(w.path) - 1, recs)

        return path_outcome(v, w, detail)


# the draft is resolved against the loaded model (resolve) before the run records its Config
DOC = "Decode with draft-then-verify steps until EOS or max_new_tokens."
generate = generator(CARD.name, Config, lambda run, cfg: SpS(run, cfg).start(run), DOC, settle=resolve)


def tiny_resources(lm: LoadedModel) -> dict:
    """A draft of the first layer only, so the method runs on a model of any depth (the contract test's)."""
    return {"config": Config(layers="0")}
