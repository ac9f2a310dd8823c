"""EAGLE / EAGLE-2: a feature-level draft head grows a token tree; one target forward verifies it."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from specviz.heads.eagle import DEFAULT_DIR, Drafter, EagleHead, HeadError, load_head, new_head
from specviz.methods.base import OnStep, Run
from specviz.model import LoadedModel
from specviz.sampling import ConfigError, Sampling, target_probs
from specviz.trace import Trace
from specviz.tree import TreeSpec, commit_path, sparse_tree, verify_tree
from specviz.tree_sampling import greedy_path, sample_path

NAME = "eagle"
LABEL = "EAGLE-2"
SUMMARY = "A one-layer head drafts features, not just tokens; a dynamic tree is verified in one pass."
TREES = ("dynamic", "static")


@dataclass(frozen=True)
class Config:
    """Tree shape and the head; defaults tuned on this 2-core CPU (GPU reference: 5 / 10 / 60)."""

    # CPU defaults from `python -m specviz calibrate eagle --live` (models/eagle/live_sweep.json: 8 unseen
    # ShareGPT prompts x 48 tokens, each shape interleaved with plain decoding, 2 repeats, median ratios):
    # 2/4/6 ran 1.66x (A 1.84); 2/2/4 1.66x (A 1.74); 3/4/6 1.60x (A 1.86); 3/4/8 1.49x (A 1.97); 4/4/10
    # 1.46x (A 2.05); 5/6/16 1.37x (A 2.17); 6/6/20 1.18x (A 2.19). A draft round costs ~1.2 ms and a
    # verify pass jumps from ~34 to ~38 ms between 6 and 7 nodes, so a shallow, narrow tree wins on this
    # CPU; deeper trees raise A but not speed.
    depth: int = 2  # draft rounds = deepest drafted token
    top_k: int = 4  # dynamic: nodes expanded per round and children per node; static: max rank
    total_tokens: int = 6  # nodes verified in one target forward, root included
    tree: str = "dynamic"  # "dynamic" = EAGLE-2 (expand by confidence, rerank); "static" = EAGLE-1
    head: str = ""  # folder of a trained head; "" = models/eagle; "random" = untrained (tests)
    head_dtype: str = "bf16"  # the draft runs in bf16 on the CPU: half the bytes, same acceptance

    def __post_init__(self) -> None:
        if not 1 <= self.depth <= 12:
            raise ConfigError(f"depth must be between 1 and 12, got {self.depth}.")
        if not 1 <= self.top_k <= 32:
            raise ConfigError(f"top_k must be between 1 and 32, got {self.top_k}.")
        if not 2 <= self.total_tokens <= 256:
            raise ConfigError(f"total_tokens must be between 2 and 256, got {self.total_tokens}.")
        if self.tree not in TREES:
            raise ConfigError(f"tree must be 'dynamic' or 'static', got {self.tree!r}.")
        if self.head_dtype not in ("bf16", "fp32", "model"):
            raise ConfigError(f"head_dtype must be bf16, fp32 or model, got {self.head_dtype!r}.")


@dataclass
class DraftTree:
    """Every drafted node (node 0 = the root), how it was drafted, and which nodes survive the rerank."""

    tokens: list[int]
    parents: list[int] = field(default_factory=lambda: [-1])
    depth: list[int] = field(default_factory=lambda: [0])
    score: list[float] = field(default_factory=lambda: [0.0])  # cumulative draft log-prob of the path
    conf: list[float] = field(default_factory=lambda: [1.0])  # draft probability given the parent
    expanded: list[int] = field(default_factory=lambda: [1])  # round it ran through the head, -1 never
    kept: list[bool] = field(default_factory=lambda: [True])
    feats: dict[int, torch.Tensor] = field(default_factory=dict)  # feature predicted by each expanded node
    logps: dict[int, torch.Tensor] = field(default_factory=dict)  # its draft log-probs [Vd]

    def add(self, parent: int, token: int, logp: float) -> int:
        self.tokens.append(token)
        self.parents.append(parent)
        self.depth.append(self.depth[parent] + 1)
        self.score.append(self.score[parent] + logp)
        self.conf.append(math.exp(logp))
        self.expanded.append(-1)
        self.kept.append(False)
        return len(self.tokens) - 1

    def keep_best(self, total: int) -> None:
        """EAGLE-2's rerank: keep the root plus the total-1 nodes of highest cumulative score."""
        order = sorted(range(1, len(self.tokens)), key=lambda i: (-self.score[i], i))
        for i in order[: total - 1]:  # a child never outscores its parent, so the kept set is a tree
            self.kept[i] = True

    def verified(self) -> tuple[list[int], TreeSpec]:
        """The kept nodes (drafted indices, in order) and the tree they form for verification."""
        nodes = [i for i, k in enumerate(self.kept) if k]
        where = {n: j for j, n in enumerate(nodes)}
        return nodes, TreeSpec(parents=[-1] + [where[self.parents[n]] for n in nodes[1:]])


def expand(dr: Drafter, tree: DraftTree, nodes: list[int], base: int, fed: list[int], rnd: int) -> None:
    """Run `nodes` through the head at once (tree-masked), storing each one's predicted feature.

    The cache holds the prefix, then the `fed` tree nodes (its last entries); only the first `base`
    prefix pairs are visible (base < start only when replaying a stored sequence offline).
    """
    q, past = len(nodes), dr.length
    start = past - len(fed)
    see = torch.zeros(q, past + q, dtype=torch.bool)
    see[:, :base] = True  # the committed prefix, the root pair included
    for r, n in enumerate(nodes):
        anc, a = set(), tree.parents[n]
        while a > 0:
            anc.add(a)
            a = tree.parents[a]
        see[r, start:past] = torch.tensor([f in anc for f in fed], dtype=torch.bool)
        see[r, past + r] = True
    feats = torch.stack([tree.feats[tree.parents[n]] for n in nodes])
    pos = torch.tensor([base - 1 + tree.depth[n] for n in nodes])
    out, logp = dr.run(feats, [tree.tokens[n] for n in nodes], pos, see)
    for r, n in enumerate(nodes):
        tree.feats[n], tree.logps[n], tree.expanded[n] = out[r], logp[r], rnd
    fed.extend(nodes)


def add_children(dr: Drafter, tree: DraftTree, node: int, k: int) -> list[int]:
    """Attach the draft's top-k tokens under an expanded node."""
    vals, idx = tree.logps[node].topk(k)
    return [tree.add(node, t, float(v)) for v, t in zip(vals, dr.to_token(idx), strict=True)]


def grow_dynamic(dr: Drafter, tree: DraftTree, cfg: Config, base: int | None = None) -> None:
    """EAGLE-2: each round expands the top_k newest nodes by cumulative log-prob; then rerank all."""
    base = dr.length if base is None else base
    fed: list[int] = []
    layer = add_children(dr, tree, 0, cfg.top_k)
    for rnd in range(2, cfg.depth + 1):
        frontier = sorted(layer, key=lambda i: (-tree.score[i], i))[: cfg.top_k]
        expand(dr, tree, sorted(frontier), base, fed, rnd)
        layer = [c for n in sorted(frontier) for c in add_children(dr, tree, n, cfg.top_k)]
    tree.keep_best(cfg.total_tokens)


def grow_static(dr: Drafter, tree: DraftTree, paths: list[tuple[int, ...]], base: int | None = None) -> None:
    """EAGLE-1: a fixed tree of rank paths; each round expands every node that has children."""
    base = dr.length if base is None else base
    fed: list[int] = []
    index: dict[tuple[int, ...], int] = {(): 0}
    for d in range(1, max((len(p) for p in paths), default=0) + 1):
        parents = sorted({index[p[:-1]] for p in paths if len(p) == d})
        if d > 1:
            expand(dr, tree, parents, base, fed, d)
        for n in parents:
            key = next(k for k, v in index.items() if v == n)
            ranks = sorted(p[-1] for p in paths if len(p) == d and p[:-1] == key)
            top = tree.logps[n].topk(ranks[-1] + 1)
            tokens = dr.to_token(top.indices)
            for r in ranks:
                index[(*key, r)] = tree.add(n, tokens[r], float(top.values[r]))
                tree.kept[-1] = True


def static_paths(head: EagleHead, cfg: Config) -> list[tuple[int, ...]]:
    """EAGLE-1's static tree: Medusa's greedy sparse tree over the head's calibrated rank accuracies."""
    acc = head.config.calibration or [[0.5 ** (i + 1) * 0.8**d for i in range(8)] for d in range(8)]
    acc = [row[: cfg.top_k] for row in acc[: cfg.depth]]  # untrained heads: a generic decaying prior
    return sparse_tree(acc, cfg.total_tokens - 1)[0]


_HEADS: dict[tuple, EagleHead] = {}


def get_head(lm: LoadedModel, cfg: Config) -> EagleHead:
    """The head named by the config, loaded once per (model, folder, file time)."""
    if cfg.head == "random":
        return new_head(lm.hf.config, lm.name, seed=0).eval()
    folder = Path(cfg.head) if cfg.head else DEFAULT_DIR
    weights = folder / "model.safetensors"
    key = (id(lm.hf), str(folder.resolve()), weights.stat().st_mtime if weights.exists() else 0)
    if key not in _HEADS:
        _HEADS[key] = load_head(folder, lm.hf.config)
    return _HEADS[key]


def head_dtype(lm: LoadedModel, cfg: Config) -> torch.dtype:
    """bf16 only where the target runs fp32 or bf16 (the float64 test model keeps its own dtype)."""
    if cfg.head_dtype == "model" or lm.dtype == torch.float64:
        return lm.dtype
    return torch.bfloat16 if cfg.head_dtype == "bf16" else torch.float32


def feature_view(f_t: torch.Tensor, emb: torch.Tensor, f_pred: torch.Tensor, f_true: torch.Tensor,
                 dims: int = 16) -> dict:
    """What the head consumed and produced this step, as small plain numbers for the diagram."""
    f_t, emb, f_pred, f_true = (v.double().flatten() for v in (f_t, emb, f_pred, f_true))
    idx = f_true.abs().topk(min(dims, f_true.numel())).indices.sort().values

    def cos(a: torch.Tensor, b: torch.Tensor) -> float:
        return round(float(torch.nn.functional.cosine_similarity(a, b, dim=0)), 4)

    def pick(v: torch.Tensor) -> list[float]:
        return [round(float(x), 3) for x in v[idx]]

    return {"dims": idx.tolist(), "f_t": pick(f_t), "embed": pick(emb * (f_t.norm() / emb.norm())),
            "f_pred": pick(f_pred), "f_true": pick(f_true),
            "norm": {"f_t": round(float(f_t.norm()), 3), "embed": round(float(emb.norm()), 4),
                     "f_pred": round(float(f_pred.norm()), 3), "f_true": round(float(f_true.norm()), 3)},
            "cos_pred_true": cos(f_pred, f_true), "cos_prev_true": cos(f_t, f_true)}


def tree_detail(tree: DraftTree, lm: LoadedModel, kind: str) -> dict:
    """The drafted tree as plain data (every node, kept or pruned)."""
    return {"kind": kind, "tokens": list(tree.tokens), "texts": [lm.token_text(t) for t in tree.tokens],
            "parents": list(tree.parents), "depth": list(tree.depth),
            "score": [round(s, 4) for s in tree.score], "conf": [round(c, 4) for c in tree.conf],
            "expanded": list(tree.expanded), "kept": list(tree.kept)}


class State:
    """Per-generation EAGLE state next to the shared Run."""

    def __init__(self, run: Run, head: EagleHead, cfg: Config) -> None:
        self.run, self.cfg = run, cfg
        self.drafter = Drafter(head, run.lm, head_dtype(run.lm, cfg))
        self.paths = static_paths(head, cfg) if cfg.tree == "static" else []
        self.forced: int | None = None  # a token drawn from a residual, to be the next root

    def draft(self, root: int) -> DraftTree:
        """Catch the head up with the verified features, then grow this step's tree from the root."""
        dr = self.drafter
        tree = DraftTree(tokens=[root])
        tree.feats[0], tree.logps[0] = dr.catch_up(self.run.pending_hidden, root)
        grow_static(dr, tree, self.paths) if self.cfg.tree == "static" else grow_dynamic(dr, tree, self.cfg)
        return tree


def accept(run: Run, state: State, tokens: list[int], spec: TreeSpec,
           logits: torch.Tensor) -> tuple[list[int], dict]:
    """Greedy matching at T = 0, tree speculative sampling at T > 0; returns (path, decision detail)."""
    if run.sampling.greedy:
        return greedy_path(tokens, spec, logits), {}
    probs = target_probs(logits, run.sampling)
    path, nxt, records = sample_path(tokens, spec, probs, run.gen)
    state.forced = nxt
    return path, {"decisions": records, "residual_token": nxt}


def step(run: Run, state: State) -> None:
    """propose (draft tree) → verify (one target forward) → accept → commit (target and head caches)."""
    started = time.perf_counter()
    root, state.forced = (state.forced, None) if state.forced is not None else (run.pick_root(), None)
    if run.is_final(root):
        run.commit([root], forward_tokens=0, draft_s=0.0, verify_s=0.0, started=started)
        return
    tree = state.draft(root)
    nodes, spec = tree.verified()
    tokens = [tree.tokens[n] for n in nodes]
    prefix = run.seq_len
    t = time.perf_counter()
    draft_s = t - started
    logits, hidden = verify_tree(run.lm, run.cache, tokens, spec)
    verify_s = time.perf_counter() - t
    path, decided = accept(run, state, tokens, spec, logits)
    commit_path(run.cache, prefix, path)
    dr = state.drafter
    dr.rollback(prefix)  # the head keeps pairs 0..N-1, all built from true features
    dr.push(hidden[path], [tokens[i] for i in path[1:]])
    emb = dr.embed(torch.tensor([root])).detach()[0]
    detail = {"tree": tree_detail(tree, run.lm, state.cfg.tree), "verify_nodes": nodes,
              "verify_parents": spec.parents, "accepted": [nodes[i] for i in path],
              "features": feature_view(run.pending_hidden, emb, tree.feats[0], hidden[0]), **decided}
    run.commit([tokens[i] for i in path], forward_tokens=len(spec), draft_s=draft_s, verify_s=verify_s,
               started=started, detail=detail)
    run.pending, run.pending_hidden = logits[path[-1]], hidden[path[-1]]


def generate(lm: LoadedModel, prompt_ids: list[int], sampling: Sampling, config: Config | None = None,
             prompt: str = "", on_step: OnStep | None = None, head: EagleHead | None = None) -> Trace:
    """Decode with an EAGLE head until EOS or max_new_tokens; raise ConfigError when no head is found."""
    cfg = config or Config()
    try:
        head = head or get_head(lm, cfg)
    except HeadError as exc:
        raise ConfigError(str(exc)) from None
    run = Run(lm, prompt_ids, sampling, NAME, cfg, prompt, on_step)
    _, hidden = run.prefill()
    state = State(run, head, cfg)
    t = time.perf_counter()
    state.drafter.reset(run.prompt_ids, hidden)  # the head's own prefill over the prompt's pairs
    run.prefill_s += time.perf_counter() - t
    while not run.done:
        step(run, state)
    return run.trace()


def matched_path(tree: DraftTree, continuation: list[int]) -> list[int]:
    """Kept nodes along the realised continuation: exactly greedy verification's path at T = 0."""
    path = [0]
    for tok in continuation:
        nxt = [c for c in range(len(tree.tokens)) if tree.parents[c] == path[-1] and tree.kept[c]
               and tree.tokens[c] == tok]
        if not nxt:
            break
        path.append(nxt[0])
    return path


@torch.inference_mode()
def replay_trees(lm: LoadedModel, trace: Trace, step_index: int, config: Config | None = None,
                 head: EagleHead | None = None) -> dict[str, dict]:
    """Re-grow one step's tree both ways (static and dynamic) from the same context, as plain data.

    The context is the prompt plus the tokens committed before the step; both trees are matched
    against the continuation the run produced (their greedy acceptance at T = 0).
    """
    cfg = config or Config()
    head = head or get_head(lm, cfg)
    done = sum(len(s.committed) for s in trace.steps[:step_index])
    ids = list(trace.prompt_ids) + list(trace.output_ids[:done])
    root, cont = trace.output_ids[done], list(trace.output_ids[done + 1: done + 1 + cfg.depth])
    _, hidden = lm.forward(ids, lm.new_cache(), logits_for=slice(-1, None))
    out = {}
    for kind in TREES:
        kcfg = Config(**{**cfg.__dict__, "tree": kind})
        dr = Drafter(head, lm, head_dtype(lm, kcfg))
        dr.reset(ids, hidden)
        tree = DraftTree(tokens=[root])
        tree.feats[0], tree.logps[0] = dr.catch_up(hidden[-1], root)
        grow_static(dr, tree, static_paths(head, kcfg)) if kind == "static" else grow_dynamic(dr, tree, kcfg)
        out[kind] = {**tree_detail(tree, lm, kind), "accepted": matched_path(tree, cont)}
    return out


SWEEP_PATH = DEFAULT_DIR / "live_sweep.json"
SWEEP_COMMAND = "python -m specviz calibrate eagle --live  # about 5 min on an idle 2-core machine"
SWEEP_SHAPES = ((1, 4, 4), (2, 2, 4), (2, 4, 6), (2, 4, 8), (3, 4, 6), (3, 4, 8), (4, 4, 10), (5, 6, 16), (6, 6, 20))


def measure_sweep(lm: LoadedModel, prompts: list[str], shapes: tuple[tuple[int, int, int], ...] = SWEEP_SHAPES,
                  max_new_tokens: int = 48, repeats: int = 2, head: str = "", progress=print) -> dict:
    """Greedy speedup over `ar`, A, and draft / verify ms per step for each depth/top_k/total_tokens.

    Per prompt, plain decoding and every shape run interleaved, `repeats` times; speedup is the median
    over prompts of (median ar wall time / median EAGLE wall time), so a busy machine slows both sides.
    """
    import statistics

    from specviz import sweep

    cfgs = [Config(depth=d, top_k=k, total_tokens=n, head=head) for d, k, n in shapes]
    measured, plain = sweep.interleaved(lm, prompts, cfgs, generate, max_new_tokens, repeats, progress,
                                        lambda c: f"{c.depth}/{c.top_k}/{c.total_tokens}")

    def mid(xs: list[float]) -> float:
        return round(statistics.median(xs), 2) if xs else 0.0

    def per_step(m, key: str) -> float:  # median over drafting steps of the first repeat, in ms
        return mid([1000 * getattr(x, key) for t in m.traces for x in t.steps if x.forward_tokens > 1])

    rows = [{"depth": c.depth, "top_k": c.top_k, "total_tokens": c.total_tokens, "speedup": m.speedup, "A": m.A,
             "draft_ms": per_step(m, "draft_s"), "verify_ms": per_step(m, "verify_s"),
             "identical": m.identical, "prompts": len(prompts)} for c, m in zip(cfgs, measured, strict=True)]
    d = Config()
    return {**sweep.header(lm, SWEEP_COMMAND, "specviz.methods.eagle.measure_sweep", max_new_tokens, repeats,
                           prompts),
            "ar_ms_per_token": mid([1000 * t.s_per_token for t in plain]),
            "rows": rows, "best": max(rows, key=lambda r: r["speedup"]),
            "chosen": {"depth": d.depth, "top_k": d.top_k, "total_tokens": d.total_tokens}}


def write_sweep(path: Path | str = SWEEP_PATH, n_prompts: int = 8, progress=print, **kw) -> dict:
    """Re-measure the sweep on unseen ShareGPT prompts and write it where the EAGLE page reads it.

    The defaults are tuned here, never on the Spec-Bench questions the bench evaluates with.
    """
    import json

    from specviz.heads.distill import training_prompts
    from specviz.model import load_model

    prompts = training_prompts(8000)[-n_prompts:]  # far beyond any prompt the head was distilled on
    lm = load_model("default", device="cpu", dtype="fp32", progress=lambda _m: None)
    out = measure_sweep(lm, prompts, progress=progress, **kw)
    out["source"] = f"the last {n_prompts} of 8000 shuffled ShareGPT first turns (never used in training)"
    out["note"] = (f"Measured on {n_prompts} unseen ShareGPT prompts × {out['max_new_tokens']} tokens at T = 0 "
                   f"on {out['device']}; each shape interleaved with plain decoding, {out['repeats']} repeats, "
                   "median ratios. Draft and verify are medians per drafting step.")
    Path(path).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return out
