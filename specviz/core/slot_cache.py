"""A KV cache shared by B rows: one slot axis for the whole batch, and which slots each row really holds.

Row b's sequence is its held slots, in slot order; every other slot of that row (left padding of a short
prompt, a rejected draft, a pad of a narrower block, a finished answer's columns) is masked out of attention.
Keys are rotated with each row's own position ids before they are stored, so a hole between two held slots
changes nothing: attention only sees which keys are visible, not where they lie.

Its two users: batched decoding (methods.batched: a block of new slots per row under an explicit 4D mask,
accepted paths packed, finished rows dropped) and the corpus's continuous batching (corpus.stream: a finished
row's slot refilled with a new prompt placed at the right end, `held` as the model's 2D padding mask, the
columns no live row sees shifted off the left).
"""

from __future__ import annotations

import torch

from specviz.core.kv_cache import crop_to

COMPACT_MIN = 32  # slots: never compact for less
COMPACT_FRACTION = 0.25  # compact once this share of the slot axis is held by no row's longest sequence


class SlotCache:
    """A transformers cache over [B, heads, S, d] slots, plus `held` [B, S]: the slots row b's sequence uses."""

    def __init__(self, cache, batch: int, device: torch.device, dtype: torch.dtype | None = None) -> None:
        self.cache = cache
        self.held = torch.zeros(batch, 0, dtype=torch.bool, device=device)  # [B, S]
        self.dtype = dtype  # the keys' and values' dtype when `place` starts the cache (None: the placed ones')

    @property
    def slots(self) -> int:
        """S: the length of the shared slot axis."""
        return self.held.shape[1]

    def lengths(self) -> torch.Tensor:
        """[B] long: each row's real sequence length, which is also the position id of its next token."""
        return self.held.sum(dim=1)

    def open(
        self, see: torch.Tensor, live: torch.Tensor, dtype: torch.dtype, prefix: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The additive mask [B, 1, q, S+q] for a block of q new slots per row; the live ones become held.

        see [B, q, q] bool: which new slots each new slot may attend (causal for a chain, ancestry for a
        tree); live [B, q] bool: the row's real new slots (the rest pad a narrower row). A query sees the
        slots its row holds, or `prefix` [B, q, S] when given, plus itself: a pad query then has one
        visible key, so no softmax row is empty.
        """
        b, q = live.shape
        eye = torch.eye(q, dtype=torch.bool, device=live.device)
        block = (see.to(live.device) & live[:, None, :]) | eye  # [B, q, q]
        before = self.held[:, None, :].expand(b, q, self.slots) if prefix is None else prefix
        allowed = torch.cat([before, block], dim=2)  # [B, q, S+q]
        mask = torch.zeros(b, 1, q, self.slots + q, dtype=dtype, device=live.device)
        mask.masked_fill_(~allowed[:, None], torch.finfo(dtype).min)
        self.append(live)
        return mask

    def append(self, live: torch.Tensor) -> None:
        """q new slots per row (live [B, q] bool: the ones the row holds), about to be appended by the model's
        forward: each in-place layer gets the room first, in its own dtype (kv_cache.GrowingLayer would regrow in
        the new keys' dtype, and a cache kept wider than the model, fp32 under bf16, would fall back to bf16)."""
        n, q = self.slots, live.shape[1]
        for layer in self._layers():
            if not hasattr(layer, "_kbuf"):
                continue  # not an in-place layer
            kb = layer._kbuf
            if kb is not None and n + q <= kb.shape[-2] and layer.keys.data_ptr() == kb.data_ptr():
                continue  # room enough
            cap = max(n + q + 64, (n + q) * 3 // 2)
            for name, buf in (("keys", "_kbuf"), ("values", "_vbuf")):
                old = getattr(layer, name)
                fresh = old.new_zeros(*old.shape[:-2], cap, old.shape[-1])
                fresh[..., :n, :] = old
                setattr(layer, buf, fresh)
                setattr(layer, name, fresh[..., :n, :])
        self.held = torch.cat([self.held, live.to(self.held.device)], dim=1)

    def _layers(self) -> list:
        return [layer for layer in self.cache.layers if layer.is_initialized and layer.keys.numel()]

    @torch.inference_mode()
    def keep(self, start: int, paths: list[list[int]]) -> None:
        """Per row, keep the block slots on its accepted path (offsets from `start`, root first).

        Row b's path is packed into slots start.. start+len-1 (a few slots copied per layer, as
        tree.commit_path does for one row); the block is then cut to the longest path, and the slots
        beyond a shorter row's path stay behind as masked holes until a compaction.
        """
        width = max(len(p) for p in paths)
        dev = self.held.device
        lens = torch.tensor([len(p) for p in paths], device=dev)
        if any(p != list(range(len(p))) for p in paths):
            idx = torch.tensor([p + [p[-1]] * (width - len(p)) for p in paths], device=dev) + start  # [B, width]
            for layer in self._layers():  # keys/values [B, kv_heads, S, head_dim]
                k, v = layer.keys, layer.values
                g = idx[:, None, :, None].expand(k.shape[0], k.shape[1], width, k.shape[3])
                k[:, :, start : start + width] = k.gather(2, g)
                v[:, :, start : start + width] = v.gather(2, g)
        crop_to(self.cache, start + width)
        live = torch.arange(width, device=dev)[None, :] < lens[:, None]
        self.held = torch.cat([self.held[:, :start], live], dim=1)
        self.compact_if_wasteful()

    def crop(self, slots: int) -> None:
        """Forget every slot from `slots` on (the draft head's tree nodes, after a step)."""
        crop_to(self.cache, slots)
        self.held = self.held[:, :slots]

    @torch.inference_mode()
    def select(self, rows: list[int]) -> None:
        """Keep only these rows (batch positions, in the new order): finished rows leave the batch."""
        idx = torch.tensor(rows, dtype=torch.long, device=self.held.device)
        for layer in self._layers():
            layer.keys, layer.values = layer.keys.index_select(0, idx), layer.values.index_select(0, idx)
        self.held = self.held.index_select(0, idx)
        self.compact_if_wasteful()

    def waste(self) -> int:
        """Slots a compaction would free: the slot axis beyond the longest row's sequence."""
        return self.slots - int(self.lengths().max()) if self.slots else 0

    def compact_if_wasteful(self) -> bool:
        """Compact when enough slots are held by no row's longest sequence; whether it did."""
        if self.waste() < max(COMPACT_MIN, COMPACT_FRACTION * self.slots):
            return False
        self.compact()
        return True

    @torch.inference_mode()
    def compact(self) -> None:
        """Gather every row's held slots to the end of a slot axis as long as the longest row (pads before)."""
        lens = self.lengths()
        width = int(lens.max())
        # a stable sort puts the unheld slots first and the held ones after, each group in slot order
        order = torch.sort(self.held.to(torch.int8), dim=1, stable=True).indices[:, self.slots - width :]
        for layer in self._layers():
            k = layer.keys
            g = order[:, None, :, None].expand(k.shape[0], k.shape[1], width, k.shape[3])
            layer.keys, layer.values = k.gather(2, g), layer.values.gather(2, g)
        self.held = torch.arange(width, device=lens.device)[None, :] >= (width - lens)[:, None]

    def shift(self, left: int) -> None:
        """Add `left` empty slots before the others (left > 0) or drop the first -left of them (left < 0), into fresh
        buffers with room to append (kv_cache.GrowingLayer keeps appending in place). Not under inference_mode:
        a caller outside it appends to these buffers in place."""
        m, new = self.slots, self.slots + left
        for layer in self._layers():
            for name, buf in (("keys", "_kbuf"), ("values", "_vbuf")):
                old = getattr(layer, name)
                fresh = old.new_zeros(*old.shape[:-2], new + 64, old.shape[-1])
                fresh[..., max(0, left) : new, :] = old[..., max(0, -left) : m, :]
                setattr(layer, buf, fresh)
                setattr(layer, name, fresh[..., :new, :])
        pad = torch.zeros(self.held.shape[0], max(0, left), dtype=torch.bool, device=self.held.device)
        self.held = torch.cat([pad, self.held[:, max(0, -left) :]], dim=1)

    def first_held(self, rows: list[int]) -> int:
        """The first slot any of these rows holds (every slot before it is dead for them)."""
        return int(self.held[rows].to(torch.int8).argmax(dim=1).min())

    def place(self, row: int, kv: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Row `row` becomes a new sequence: per layer its keys and values [kv_heads, n, head_dim], written into the
        last n slots (the slot axis widened on the left when shorter), every other slot of the row let go."""
        n, dt = kv[0][0].shape[-2], self.dtype or kv[0][0].dtype
        for layer, (k, v) in zip(self.cache.layers, kv, strict=True):
            if not layer.is_initialized:  # the first placement gives the layers their shape and dtype
                layer.lazy_initialization(k[None], v[None])
                for name, buf, t in (("keys", "_kbuf", k), ("values", "_vbuf", v)):  # as `shift` makes them
                    fresh = t.new_zeros(self.held.shape[0], *t.shape[:-2], self.slots + 64, t.shape[-1], dtype=dt)
                    setattr(layer, buf, fresh)
                    setattr(layer, name, fresh[..., : self.slots, :])
        if n > self.slots:
            self.shift(n - self.slots)
        m = self.slots
        for layer, (k, v) in zip(self.cache.layers, kv, strict=True):
            layer.keys[row, :, m - n :] = k
            layer.values[row, :, m - n :] = v
        self.held[row] = False
        self.held[row, m - n :] = True
