"""The in-place KV cache (GrowingLayer) against transformers' own DynamicCache."""

from __future__ import annotations

import torch
from transformers import DynamicCache

from specviz.core.model import crop_to, growing_cache
from specviz.trees.tree import commit_path


def _same(a, b) -> None:
    assert a.get_seq_length() == b.get_seq_length()
    for mine, theirs in zip(a.layers, b.layers, strict=True):
        torch.testing.assert_close(mine.keys, theirs.keys, atol=0, rtol=0)
        torch.testing.assert_close(mine.values, theirs.values, atol=0, rtol=0)


def test_appends_crops_and_regrowth_match_dynamic_cache(tiny_lm) -> None:
    cache, ref = tiny_lm.new_cache(), DynamicCache(config=tiny_lm.hf.config)
    assert type(cache.layers[0]).__name__ == "GrowingDynamicLayer"
    prompt = tiny_lm.encode_prompt("Count to three.")
    for c in (cache, ref):
        tiny_lm.forward(prompt, c)
    _same(cache, ref)
    buffer = cache.layers[0]._kbuf
    for step in range(90):  # past the first buffer's spare room: it must grow and keep every slot
        ids = [100 + step, 7, 9][: 1 + step % 3]
        a, _ = tiny_lm.forward(ids, cache)
        b, _ = tiny_lm.forward(ids, ref)
        torch.testing.assert_close(a, b, atol=0, rtol=0)
        if step % 3 == 2:  # a rejected draft: drop the tail, then overwrite those slots
            crop_to(cache, cache.get_seq_length() - 2)
            crop_to(ref, ref.get_seq_length() - 2)
        _same(cache, ref)
    assert cache.layers[0]._kbuf is not buffer
    assert cache.layers[0].keys.data_ptr() == cache.layers[0]._kbuf.data_ptr()


def test_keys_replaced_from_outside_start_a_new_buffer(tiny_lm) -> None:
    cache, ref = tiny_lm.new_cache(), DynamicCache(config=tiny_lm.hf.config)
    for c in (cache, ref):
        tiny_lm.forward([5, 6, 7, 8], c)
    for layer in cache.layers:  # e.g. a caller that rebuilds the tensors with torch.cat
        layer.keys, layer.values = layer.keys.clone(), layer.values.clone()
    for c in (cache, ref):
        tiny_lm.forward([9], c)
    _same(cache, ref)


def test_commit_path_writes_into_the_buffer(tiny_lm) -> None:
    cache = growing_cache(tiny_lm.hf.config)
    tiny_lm.forward([5, 6, 7], cache)
    tiny_lm.forward([20, 21, 22, 23], cache)  # four drafted slots after a 3-token prefix
    kept = cache.layers[0].keys[:, :, [3, 5]].clone()
    commit_path(cache, 3, [0, 2])
    assert cache.get_seq_length() == 5
    torch.testing.assert_close(cache.layers[0].keys[:, :, 3:5], kept, atol=0, rtol=0)
    assert cache.layers[0].keys.data_ptr() == cache.layers[0]._kbuf.data_ptr()
