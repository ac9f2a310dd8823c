"""The target's forward captured once on a GPU (CUDA graphs) and replayed: one launch a forward instead of ~850.

A small model's forward on a GPU is bound by launching kernels, not by the GPU (30 ms for SmolLM2-135M through
transformers on an H200, ~270 times its memory floor). Here core.lean's forward is captured per verify width in
buckets (1, 2, 4, …, 64 new tokens) and per attended width (512, 1024, … columns of the cache), over one static KV
cache of the model's whole context that a run takes over (`claim`) and rolls back by length. A call copies its
token ids, positions, cache length and tree mask into the graph's input buffers (from pinned memory, without
blocking), replays, and copies out the rows it asked for. A narrower call pads its block: a pad row sees only the
prefix and itself, writes its keys past the cache's length (never read), and its outputs are dropped.

Greedy identity between methods holds as on the CPU: every method's forward is this one. Graphs are captured
lazily, the first time a (width, columns, layers) key is needed (tens of milliseconds each), with their scratch
writes aimed at the cache's last slots, so a capture in the middle of a run disturbs nothing it holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from specviz.core.lean import KV

WIDTHS = (1, 2, 4, 8, 16, 32, 64)  # new tokens a captured forward takes; a call pads up to the next one
COLUMNS = (512, 1024, 2048, 4096, 8192, 16384, 32768)  # cache columns a captured forward attends


@dataclass
class Captured:
    """One captured forward and its static inputs and outputs (`replay` runs it again on whatever the inputs hold)."""

    replay: Callable[[], None]
    host_ints: torch.Tensor  # the same on the host (pinned on a GPU): filled in place, then copied without blocking
    host_tree: torch.Tensor
    copied: Any  # a CUDA event after the last copy from the host buffers (None on the CPU)
    constants: tuple[torch.Tensor, ...]  # tensors made before capture that the graph reads: kept alive with it
    ints: torch.Tensor  # [2b + 1] long: token ids, position ids, the cache length
    tree: torch.Tensor  # [b, b] additive mask among the new tokens
    logits: torch.Tensor  # [b, V]
    hidden: torch.Tensor  # [b, H]
    fused: torch.Tensor  # [b, len(layers)·H]


def bucket(n: int, sizes: tuple[int, ...]) -> int:
    """The smallest size that holds n."""
    return next(s for s in sizes if s >= n)


class Graphs:
    """A model's captured forwards and the static cache they run on."""

    def __init__(self, lm: Any, capture: bool = True) -> None:
        """lm: the core.model.LoadedModel these forwards are its (on a GPU; core.model builds them). capture=False
        runs the same padded forwards eagerly on any device (a test holds their arithmetic on the CPU)."""
        self.lm, self.capture = lm, capture
        self.lean = lm.lean_forward()
        self.capacity = int(lm.hf.config.max_position_embeddings)
        self.kv = self.lean.new_cache(self.capacity, fixed=True)
        self.pool = torch.cuda.graph_pool_handle() if capture else None
        self.captured: dict[tuple[int, int, tuple[int, ...]], Captured] = {}
        self.neg = torch.finfo(lm.dtype).min
        self.failed = ""  # why capturing failed, if it did: every forward then runs eagerly, and says so here

    def claim(self) -> KV:
        """The static cache, emptied, for a new run (the run before it on this model has finished: runs take the
        model's lock)."""
        self.kv.length = 0
        return self.kv

    def fits(self, cache: KV, q: int, layers: tuple[int, ...]) -> bool:
        """Whether a forward of q new tokens on `cache` can replay a captured graph."""
        return (
            not self.failed
            and cache is self.kv
            and q <= WIDTHS[-1]
            and cache.length + bucket(q, WIDTHS) <= self.capacity - WIDTHS[-1]
        )

    def forward(
        self,
        ids: list[int] | torch.Tensor,
        past: int,
        positions: torch.Tensor | None,
        mask: torch.Tensor | None,
        layers: tuple[int, ...],
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """(logits [q, V], hidden [q, H], fused [q, ·]) of q new tokens after `past` cached ones, replayed; None when
        the graph could not be captured (`failed` says why; the caller runs the forward eagerly)."""
        q = len(ids)
        b = bucket(q, WIDTHS)
        cols = bucket(min(past + b, self.capacity), (*[c for c in COLUMNS if c < self.capacity], self.capacity))
        g = self.captured.get((b, cols, layers))
        if g is None:
            try:
                g = self._capture(b, cols, layers)
            except RuntimeError as exc:  # a driver or build that cannot capture: decode eagerly, say why once
                self.failed = f"capture failed ({str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__})"
                return None
        tokens = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)  # ids come from the host here
        pos = list(range(past, past + q)) if positions is None else positions.tolist()
        if g.copied is not None:  # the last copy out of these host buffers has finished (long ago: a step read since)
            g.copied.synchronize()
        ints, tree = g.host_ints, g.host_tree
        ints.copy_(torch.tensor([*tokens, *[0] * (b - q), *pos, *[pos[-1]] * (b - q), past], dtype=torch.long))
        tree.fill_(self.neg)
        tree[:q, :q] = torch.full((q, q), self.neg, dtype=tree.dtype).triu_(1) if mask is None else mask
        tree.diagonal().zero_()  # every row sees itself (a pad row sees nothing else of the block)
        g.ints.copy_(ints, non_blocking=True)
        g.tree.copy_(tree, non_blocking=True)
        if g.copied is not None:
            g.copied.record()
        g.replay()
        return g.logits[:q].clone(), g.hidden[:q].clone(), g.fused[:q].clone()

    def _host(self, like: torch.Tensor) -> torch.Tensor:
        """A host buffer shaped like a static input (pinned on a GPU, so its copy does not wait for the queue; kept
        for the graph's life, so no copy still in flight can read a buffer reused for something else)."""
        cuda = self.lm.device.type == "cuda"
        return torch.empty(like.shape, dtype=like.dtype, pin_memory=cuda)

    def _capture(self, b: int, cols: int, layers: tuple[int, ...]) -> Captured:
        """Capture the forward of b new tokens attending `cols` columns (scratch writes go to the cache's end)."""
        dev, dtype = self.lm.device, self.lm.dtype
        ints = torch.zeros(2 * b + 1, dtype=torch.long, device=dev)
        ints[-1] = self.capacity - b  # the capture's own writes land in the last slots, never held by a run
        tree = torch.zeros(b, b, dtype=dtype, device=dev)
        columns = torch.arange(cols, device=dev)
        steps = torch.arange(b, device=dev)
        pad = torch.full((b, 1), self.neg, dtype=dtype, device=dev)

        def run() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            past = ints[-1]
            rel = columns - past  # [cols]: < 0 the prefix, 0..b-1 this block, beyond it unused
            block = torch.cat([tree, pad], dim=1).gather(1, rel.clamp(0, b).expand(b, cols))
            mask = block.masked_fill(rel < 0, 0.0)
            hidden, fused = self.lean(
                ints[:b], self.kv, 0, ints[b : 2 * b], mask, layers, width=cols, slots=past + steps
            )
            return self.lm.lm_head(hidden).float(), hidden, fused

        if not self.capture:  # the same forward, run at each call (no graph): its outputs rebound each time
            g = Captured(lambda: None, self._host(ints), self._host(tree), None, (), ints, tree, *run())

            def again() -> None:
                g.logits, g.hidden, g.fused = run()

            g.replay = again
            self.captured[(b, cols, layers)] = g
            return g
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # warm-up: kernels chosen and workspaces allocated before capture
                run()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            out = run()
        # columns, steps and pad live outside the graph's pool: freed with this frame, their memory would be handed
        # to the next eager tensor and the graph would read that (the H200 run's out-of-bounds slots on replay 2)
        constants = (columns, steps, pad)
        g = Captured(graph.replay, self._host(ints), self._host(tree), torch.cuda.Event(), constants, ints, tree, *out)
        self.captured[(b, cols, layers)] = g
        return g
