"""The KV caches against transformers' own DynamicCache: the in-place GrowingLayer (transformers' forward) and
core.lean's KV under the written-out forward (same logits, crops, regrowth, tree masks and kept paths)."""

from __future__ import annotations

import threading
from dataclasses import replace

import torch
from transformers import DynamicCache

from specviz.core.lean import KV
from specviz.core.model import Resources, crop_to, growing_cache
from specviz.core.sampling import Sampling
from specviz.trees.tree import TreeSpec, commit_path, verify_tree


def _same(a, b) -> None:
    assert a.get_seq_length() == b.get_seq_length()
    for mine, theirs in zip(a.layers, b.layers, strict=True):
        torch.testing.assert_close(mine.keys, theirs.keys, atol=0, rtol=0)
        torch.testing.assert_close(mine.values, theirs.values, atol=0, rtol=0)


def test_appends_crops_and_regrowth_match_dynamic_cache(tiny_lm) -> None:
    cache, ref = growing_cache(tiny_lm.hf.config), DynamicCache(config=tiny_lm.hf.config)
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
    cache, ref = growing_cache(tiny_lm.hf.config), DynamicCache(config=tiny_lm.hf.config)
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


CLOSE = {"atol": 1e-4, "rtol": 1e-4}  # a wrong mask, position or slot moves logits by whole units


def test_lean_forward_on_its_kv_matches_transformers(tiny_lm) -> None:
    """The written-out forward (a KV cache) against transformers' decoder (a DynamicCache): the same logits and
    hidden states through appends, regrowth past the first buffer, crops, a tree mask and a kept path. Close, not
    equal: transformers' RMSNorm rounds through fp32 even in a float64 model, torch's rms_norm stays in float64."""
    cache, ref = tiny_lm.new_cache(), DynamicCache(config=tiny_lm.hf.config)
    assert isinstance(cache, KV) and cache.capacity == 256
    prompt = tiny_lm.encode_prompt("Count to three.")
    for c in (cache, ref):
        tiny_lm.forward(prompt, c)
    spec = TreeSpec(parents=[-1, 0, 0, 1, 1, 2])
    for step in range(240):  # past the first buffer's 256 slots
        ids = [100 + step, 7, 9][: 1 + step % 3]
        a, ha = tiny_lm.forward(ids, cache)
        b, hb = tiny_lm.forward(ids, ref)
        torch.testing.assert_close(a, b, **CLOSE)
        torch.testing.assert_close(ha, hb, **CLOSE)
        if step % 3 == 2:  # a rejected draft: drop the tail, then overwrite those slots
            crop_to(cache, cache.get_seq_length() - 2)
            crop_to(ref, ref.get_seq_length() - 2)
        if step % 10 == 9:  # a verified tree, its path kept
            prefix = cache.get_seq_length()
            tree = [30, 31, 32, 33, 34, 35]
            a, _ = verify_tree(tiny_lm, cache, tree, spec)
            b, _ = verify_tree(tiny_lm, ref, tree, spec)
            torch.testing.assert_close(a, b, **CLOSE)
            commit_path(cache, prefix, [0, 2, 5])
            commit_path(ref, prefix, [0, 2, 5])
        assert cache.get_seq_length() == ref.get_seq_length()
    assert cache.capacity > 256
    n = cache.length
    torch.testing.assert_close(cache.k[0, :, :, :n], ref.layers[0].keys, **CLOSE)
    torch.testing.assert_close(cache.v[-1, :, :, :n], ref.layers[-1].values, **CLOSE)


def test_the_captured_forwards_arithmetic_equals_the_eager_forward(sticky, sticky_prompt):
    """core.graphs' padded forward (ids, positions and length as tensors, the mask built inside, keys written by
    slot, a block padded to its width bucket), run eagerly here since capturing needs a GPU: every method's greedy
    output through it equals plain decoding's through the eager forward, and so do the logits of a padded tree."""
    from specviz import methods
    from specviz.core.graphs import Graphs
    from tests.conftest import method_kwargs

    lm = replace(sticky, lock=threading.Lock(), resources=Resources(), graphs=None)
    want = methods.get("ar").generate(lm, sticky_prompt, Sampling(max_new_tokens=24)).output_ids
    lm.graphs = Graphs(lm, capture=False)
    for name in methods.available():
        got = methods.get(name).generate(lm, sticky_prompt, Sampling(max_new_tokens=24), **method_kwargs(name, lm))
        assert got.output_ids == want, name
    assert {b for b, _cols, _layers in lm.graphs.captured} >= {1, 2, 4, 8}  # one token, chains and trees, padded
    spec, tree = TreeSpec(parents=[-1, 0, 0, 1, 1, 2]), [30, 31, 32, 33, 34, 35]
    cache, ref = lm.run_cache(), lm.new_cache()
    assert cache is lm.graphs.kv
    for c in (cache, ref):
        lm.forward(sticky_prompt, c)
    a, _ = verify_tree(lm, cache, tree, spec)  # padded to 8 rows
    b, _ = verify_tree(lm, ref, tree, spec)
    torch.testing.assert_close(a, b, **CLOSE)
    assert not lm.graphs.failed
