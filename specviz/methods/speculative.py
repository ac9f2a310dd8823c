"""Classic speculative decoding with a self-speculative draft: the target's own first layers."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from specviz.acceptance import RULES, decide_chain, greedy_match, rejection_view
from specviz.methods.base import OnStep, Run
from specviz.model import LoadedModel, crop_to, growing_cache
from specviz.sampling import ConfigError, Sampling, entropy, target_probs
from specviz.trace import Trace

NAME = "sps"
LABEL = "Speculative sampling"
SUMMARY = "A shallow copy of the model (its first layers) drafts γ tokens; the full model verifies them at once."


@dataclass(frozen=True)
class Config:
    """Draft length, which target layers make the draft, and the acceptance rule used when sampling."""

    gamma: int = 3  # tokens drafted per step
    layers: str = "0-3"  # target layers the draft runs, e.g. "0-3" or "0,1,2,29"; then final norm + LM head
    draft_vocab: int = 8192  # the draft's LM head covers token ids below this (0 = the whole vocabulary)
    rule: str = "speculative"  # at T > 0: speculative (lossless), typical or flawed (lossy, for teaching)
    eps: float = 0.09  # typical acceptance: hard threshold ε
    delta: float = 0.3  # typical acceptance: entropy-scaled threshold δ

    def __post_init__(self) -> None:
        if not 1 <= self.gamma <= 16:
            raise ConfigError(f"gamma must be between 1 and 16, got {self.gamma!r}.")
        parse_layers(self.layers, None)
        if self.draft_vocab < 0:
            raise ConfigError(f"draft_vocab must be 0 (all) or a positive size, got {self.draft_vocab!r}.")
        if self.rule not in RULES:
            raise ConfigError(f"rule must be one of {', '.join(RULES)}, got {self.rule!r}.")
        if not (0 < self.eps <= 1 and 0 < self.delta <= 10):
            raise ConfigError(f"eps must be in (0, 1] and delta in (0, 10], got {self.eps!r}, {self.delta!r}.")


def parse_layers(spec: str, n_layers: int | None) -> list[int]:
    """'0-3' or '0,1,2,29' -> sorted layer indices; checked against n_layers when given."""
    try:
        out: set[int] = set()
        for part in str(spec).replace(" ", "").split(","):
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise ConfigError(f"layers must look like '0-3' or '0,1,2,29', got {spec!r}.") from None
    layers = sorted(out)
    if not layers or layers[0] < 0 or (n_layers is not None and layers[-1] >= n_layers):
        limit = f" (the model has {n_layers})" if n_layers is not None else ""
        raise ConfigError(f"layers {spec!r} names no valid layer{limit}.")
    return layers


class LayerDraft:
    """The target's chosen layers, final norm and (part of the) LM head, with its own KV cache."""

    def __init__(self, lm: LoadedModel, layers: list[int], vocab: int) -> None:
        self.lm, self.model = lm, lm.hf.model
        self.blocks = [self.model.layers[i] for i in layers]
        vocab = vocab or lm.lm_head.weight.shape[0]
        self.head = lm.lm_head.weight[:vocab]  # [Vd, H]; a view, no copy
        self.cache = growing_cache(lm.hf.config)
        self.length = 0  # tokens held in the draft cache

    @torch.inference_mode()
    def forward(self, ids: list[int]) -> torch.Tensor:
        """Feed new tokens; return the draft logits [Vd] for the position after the last one."""
        k, past, dev = len(ids), self.length, self.lm.device
        x = self.model.embed_tokens(torch.tensor([ids], device=dev))  # [1, k, H]
        pos = torch.arange(past, past + k, device=dev).view(1, -1)
        rope = self.model.rotary_emb(x, position_ids=pos)
        mask = None
        if k > 1:  # causal over the new tokens; the cached prefix stays visible
            mask = torch.zeros(1, 1, k, past + k, dtype=x.dtype, device=dev)
            mask[0, 0, :, past:] = torch.full((k, k), self.lm.neg_inf(), dtype=x.dtype).triu(1)
        for block in self.blocks:
            x = block(x, attention_mask=mask, position_ids=pos, cache=self.cache, use_cache=True,
                      position_embeddings=rope)
        self.length += k
        return (self.model.norm(x[0, -1]) @ self.head.T).float()

    def rollback(self, length: int) -> None:
        """Forget cached tokens beyond `length`."""
        if self.length > length:
            self.cache.crop(length - self.length)
            self.length = length


def as_full(probs: torch.Tensor, vocab: int) -> torch.Tensor:
    """A draft distribution over the first Vd ids, zero-padded to the whole vocabulary [V]."""
    if probs.shape[0] == vocab:
        return probs
    return torch.cat([probs, probs.new_zeros(vocab - probs.shape[0])])


def propose(run: Run, draft: LayerDraft, root: int, gamma: int) -> tuple[list[int], list[torch.Tensor]]:
    """Draft up to γ tokens after root; return them and the draft distributions q [V] they came from."""
    seq = run.prompt_ids + run.output
    feed = [*seq[draft.length:], root]
    vocab = run.lm.lm_head.weight.shape[0]
    drafts: list[int] = []
    qs: list[torch.Tensor] = []
    for _ in range(gamma):
        logits = draft.forward(feed)
        q = as_full(target_probs(logits, run.sampling), vocab)  # softmax when greedy (for display)
        x = int(q.argmax()) if run.sampling.greedy else int(torch.multinomial(q, 1, generator=run.gen))
        drafts.append(x)
        qs.append(q)
        if x in run.lm.eos_ids:
            break
        feed = [x]
    return drafts, qs


def greedy_decision(p: torch.Tensor, q: torch.Tensor, drafts: list[int]) -> tuple[int, list[dict[str, Any]]]:
    """Temperature 0: accept while the draft equals the target's argmax; records as for sampling."""
    target = p.argmax(-1).tolist()
    n = greedy_match(drafts, target)
    records = []
    for i, x in enumerate(drafts[: n + 1]):
        p_x, q_x = float(p[i, x]), float(q[i, x])
        records.append({"pos": i, "token": x, "p": round(p_x, 6), "q": round(q_x, 6),
                        "ratio": round(min(p_x / max(q_x, 1e-12), 1e6), 6), "u": None, "accepted": i < n})
    if n < len(drafts):
        onehot = torch.zeros_like(p[n]).index_fill_(0, torch.tensor([target[n]]), 1.0)
        records[-1]["dists"] = rejection_view(p[n], q[n], onehot)
    return n, records


def annotate(lm: LoadedModel, records: list[dict[str, Any]], p: torch.Tensor) -> list[dict[str, Any]]:
    """Attach token texts and the target entropy H(p) at each position to decision records."""
    for rec in records:
        rec["text"] = lm.token_text(rec["token"])
        rec["entropy"] = round(entropy(p[rec["pos"]]), 4)
        if "dists" in rec:
            rec["dists"]["texts"] = [lm.token_text(t) for t in rec["dists"]["tokens"]]
    return records


class Speculator:
    """One sps generation: the run, its draft and the token forced by the last rejection."""

    def __init__(self, run: Run, cfg: Config) -> None:
        n_layers = len(run.lm.hf.model.layers)
        self.run, self.cfg = run, cfg
        self.draft = LayerDraft(run.lm, parse_layers(cfg.layers, n_layers), cfg.draft_vocab)
        self.forced: int | None = None  # next root, drawn by the rule at the last step (T > 0)
        self.forced_from = "target"

    def step(self) -> None:
        """propose → verify → accept → commit."""
        run, started = self.run, time.perf_counter()
        root, root_from = (self.forced, self.forced_from) if self.forced is not None else (run.pick_root(), "target")
        self.forced = None
        if run.is_final(root):
            run.commit([root], forward_tokens=0, draft_s=0.0, verify_s=0.0, started=started,
                       detail={"root_from": root_from, "gamma": 0, "records": []})
            return
        base = run.seq_len
        drafts, qs = propose(run, self.draft, root, min(self.cfg.gamma, run.remaining - 1))
        t = time.perf_counter()
        logits, hidden = run.lm.forward([root, *drafts], run.cache)  # [γ+1, V]
        verify_s = time.perf_counter() - t
        n, records = self.accept(logits, torch.stack(qs), drafts)
        crop_to(run.cache, base + 1 + n)
        self.draft.rollback(base + 1 + n)
        detail = {"rule": "greedy" if run.sampling.greedy else self.cfg.rule, "root_from": root_from,
                  "gamma": len(drafts), "drafts": drafts, "accepted": n, "records": records,
                  "next": self.forced, "next_from": self.forced_from if self.forced is not None else None}
        run.commit([root, *drafts[:n]], forward_tokens=1 + len(drafts), draft_s=t - started,
                   verify_s=verify_s, started=started, detail=detail)
        run.pending, run.pending_hidden = logits[n], hidden[n]

    def accept(self, logits: torch.Tensor, q: torch.Tensor, drafts: list[int]) -> tuple[int, list[dict]]:
        """Judge the drafts; at T > 0 the rule also draws the next root (residual or bonus)."""
        s = self.run.sampling
        p = target_probs(logits, s)
        if s.greedy:
            n, records = greedy_decision(p, q, drafts)
        else:
            n, nxt, records = decide_chain(self.cfg.rule, p, q, drafts, self.run.gen, self.cfg.eps, self.cfg.delta)
            self.forced, self.forced_from = nxt, ("bonus" if n == len(drafts) else "residual")
        return n, annotate(self.run.lm, records, p)


def generate(lm: LoadedModel, prompt_ids: list[int], sampling: Sampling, config: Config | None = None,
             prompt: str = "", on_step: OnStep | None = None) -> Trace:
    """Decode with draft-then-verify steps until EOS or max_new_tokens."""
    cfg = config or Config()
    run = Run(lm, prompt_ids, sampling, NAME, cfg, prompt, on_step)
    spec = Speculator(run, cfg)
    run.prefill()
    while not run.done:
        spec.step()
    return run.trace()
