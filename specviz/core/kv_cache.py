"""The KV cache: transformers' DynamicCache whose layers append in place, and cropping it back."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Protocol

import torch

if TYPE_CHECKING:
    from transformers import DynamicCache


class GrowingLayer:
    """Mixin for transformers' DynamicLayer: keys/values live in a buffer with spare room at the end.

    The stock layer appends with torch.cat, which copies the whole cache of every layer on every
    forward: at 900 tokens of context that is about 9 ms of a 42 ms decode step on 2 CPU cores.
    Here an append writes the new slots in place; `crop` stays a view of the same buffer, and a
    tree commit (`tree.commit_path`) writes its few slots in place too. Growth is geometric.
    """

    _kbuf: torch.Tensor | None = None
    _vbuf: torch.Tensor | None = None
    if TYPE_CHECKING:  # provided by transformers' DynamicLayer
        is_initialized: bool
        keys: torch.Tensor
        values: torch.Tensor

        def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None: ...
        def get_seq_length(self) -> int: ...

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new keys and values into the buffer (grown when full); return the whole layer's."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = self.get_seq_length()
        m = n + key_states.shape[-2]
        kb, vb = self._kbuf, self._vbuf
        fits = (
            kb is not None
            and vb is not None
            and m <= kb.shape[-2]
            and kb.shape[:-2] == key_states.shape[:-2]
            and (n == 0 or self.keys.data_ptr() == kb.data_ptr())
        )
        if kb is None or vb is None or not fits:
            cap = max(m + 64, m * 3 // 2)
            # zeros, not empty: a kernel may read the spare columns under a zero weight (core.kernels)
            kb = key_states.new_zeros(*key_states.shape[:-2], cap, key_states.shape[-1])
            vb = value_states.new_zeros(*value_states.shape[:-2], cap, value_states.shape[-1])
            if n:  # keys replaced from outside (or the buffer is full): start a new buffer from them
                kb[..., :n, :], vb[..., :n, :] = self.keys, self.values
            self._kbuf, self._vbuf = kb, vb
        kb[..., n:m, :] = key_states
        vb[..., n:m, :] = value_states
        self.keys, self.values = kb[..., :m, :], vb[..., :m, :]
        return self.keys, self.values


@functools.cache
def _growing_layer_class() -> type:
    """GrowingLayer over transformers' DynamicLayer, made once (transformers is imported lazily)."""
    from transformers.cache_utils import DynamicLayer

    return type("GrowingDynamicLayer", (GrowingLayer, DynamicLayer), {})


def growing_cache(config: Any) -> DynamicCache:
    """A transformers DynamicCache whose full-attention layers append in place (see GrowingLayer)."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    cache = DynamicCache(config=config)
    grow = _growing_layer_class()
    cache.layers = [grow() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


def first_moved(path: list[int]) -> int:
    """How many leading slots of a kept path (slots after the prefix, 0 = the root) already sit in place: a tree
    commit moves only the ones from there on."""
    return next((i for i, p in enumerate(path) if p != i), len(path))


class Croppable(Protocol):
    """A KV cache that says how many tokens it holds and drops the last ones (transformers' Cache, core.lean.KV)."""

    def get_seq_length(self) -> int: ...
    def crop(self, max_length: int, /) -> None: ...


def crop_to(cache: Croppable, length: int) -> None:
    """Drop cache entries beyond `length` tokens."""
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)
