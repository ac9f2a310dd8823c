"""EAGLE / EAGLE-2: a feature-level draft head grows a token tree; one target forward verifies it."""

from __future__ import annotations

from dataclasses import dataclass

from specviz.core.details import EagleDetail
from specviz.core.model import LoadedModel
from specviz.heads.eagle import DEFAULT_DIR, EagleHead
from specviz.heads.eagle_drafter import head_for, load_head, start, tiny_head
from specviz.methods.base import Card, Outcome, Run, Step, generator, tree_outcome
from specviz.trees.eagle_tree import BudgetFields, TreeResult, TreeStepper, check_shape
from specviz.trees.walk import walk

CARD = Card(
    name="eagle",
    label="EAGLE-2",
    summary="A one-layer head drafts features, not just tokens; a dynamic tree is verified in one pass.",
    colour="#009e73",
    order=5,
    figures="specviz.output.viz.eagle:gallery",
    head="eagle",
    head_label="EAGLE-2 head",
    models=DEFAULT_DIR,
)
NAME, LABEL, SUMMARY = CARD.name, CARD.label, CARD.summary


@dataclass(frozen=True)
class Config(BudgetFields):
    """Tree shape and the head; defaults tuned on this 2-core CPU (GPU reference: 5 / 10 / 60)."""

    # CPU defaults from `python -m specviz calibrate eagle --live` (models/eagle/live_sweep.json: 8 unseen
    # ShareGPT prompts x 48 tokens, each shape interleaved with plain decoding, 2 repeats, median ratios):
    # 2/4/6 ran 1.66x (A 1.84); 2/2/4 1.66x (A 1.74); 3/4/6 1.60x (A 1.86); 3/4/8 1.49x (A 1.97); 4/4/10
    # 1.46x (A 2.05); 5/6/16 1.37x (A 2.17); 6/6/20 1.18x (A 2.19). A draft round costs ~1.2 ms and a
    # verify pass jumps from ~34 to ~38 ms between 6 and 7 nodes, so a shallow, narrow tree wins on this
    # CPU; deeper trees raise A but not speed.
    depth: int = 2  # draft rounds = deepest drafted token
    top_k: int = 4  # dynamic: nodes expanded per round and children per node; static: max rank
    total_tokens: int = 6  # nodes verified in one target forward, ROOT INCLUDED (total_tokens - 1 drafted;
    # every tree method's Config counts the same way, Medusa's and Hydra's too)
    tree: str = "dynamic"  # "dynamic" = EAGLE-2 (expand by confidence, rerank); "static" = EAGLE-1
    head: str = ""  # folder of a trained head; "" = models/eagle; "random" = untrained (tests)
    head_dtype: str = "bf16"  # the draft runs in bf16 on the CPU: half the bytes, same acceptance

    def __post_init__(self) -> None:
        check_shape(self)


def get_head(lm: LoadedModel, cfg: Config) -> EagleHead:
    """The head named by the config, loaded once per (model, folder, file time)."""
    return load_head(lm, cfg)


class State:
    """Per-generation EAGLE state next to the shared Run: the tree stepper (the head's drafter and cache)."""

    def __init__(self, tree: TreeStepper) -> None:
        self.tree = tree

    def step(self, run: Run, root: int) -> Outcome:
        """propose (the head drafts a tree) → verify (one target forward) → accept → commit (target and head)."""
        stepper, prefix = self.tree, run.seq_len
        f_t = stepper.root_feature(run)  # the last committed token's final hidden state
        with run.phase("propose"):
            tree = stepper.draft(f_t, root)  # grown by confidence, reranked to total_tokens
            nodes, spec = tree.verified()
            tokens = [tree.tokens[n] for n in nodes]
        with run.phase("verify"):
            logits, hidden, feats = stepper.verify(run, tokens, spec)
        with run.phase("accept"):  # greedy match at T = 0, tree speculative sampling at T > 0
            w = walk(run.sampling, run.gen, tokens, spec, logits, None, run.lm.token_text)
        with run.phase("commit"):
            stepper.commit(run, prefix, tokens, feats, w.path)
        res = TreeResult(tree, nodes, spec, tokens, logits, hidden, w, f_t)
        return tree_outcome(res, lambda: EagleDetail(**stepper.record(res, run.lm.token_text)))


def begin(run: Run, cfg: Config, head: EagleHead | None = None) -> Step:
    """The head (given, else found; ConfigError when none is) drafting from the run's state."""
    return State(start(run, head_for(run.lm, cfg, head), cfg)).step


generate = generator(NAME, Config, begin, "Decode with an EAGLE head until EOS or max_new_tokens.")


def tiny_resources(lm: LoadedModel, seed: int = 1, accepting: bool = False) -> dict:
    """An untrained head (heads.eagle_drafter.tiny_head) and a small tree, for any model."""
    return {
        "config": Config(depth=3, top_k=3, total_tokens=8, head_dtype="model"),
        "head": tiny_head(lm, seed, accepting),
    }


def accepting_resources(lm: LoadedModel) -> dict:
    """tiny_resources with a head whose every draft is right on a model whose next token ignores its input."""
    return tiny_resources(lm, accepting=True)
