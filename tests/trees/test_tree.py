"""The tree as data, the sparse-tree builder, and tree verification against chains."""

from __future__ import annotations

import pytest
import torch

from specviz.trees.tree import (
    TreeSpec,
    commit_path,
    greedy_accept_path,
    longest_path,
    sparse_tree,
    verify_tree,
)

NEG = -1e9


def test_three_node_fork() -> None:
    spec = TreeSpec(parents=[-1, 0, 0])
    assert spec.depths == [0, 1, 1]
    assert spec.children(0) == [1, 2] and spec.children(1) == []
    assert spec.leaves() == [1, 2]
    assert spec.retrieve_indices() == [[0, 1], [0, 2]]
    m = spec.mask(NEG)
    expected = [[0, NEG, NEG], [0, 0, NEG], [0, NEG, 0]]  # siblings never see each other
    for i in range(3):
        for j in range(3):
            assert m[i, j].item() == expected[i][j], (i, j)
    assert spec.positions(10).tolist() == [10, 11, 11]


def test_three_node_chain() -> None:
    spec = TreeSpec(parents=[-1, 0, 1])
    assert spec.depths == [0, 1, 2] and spec.is_chain()
    assert spec.path_to(2) == [0, 1, 2]
    assert spec.leaves() == [2] and spec.retrieve_indices() == [[0, 1, 2]]
    m = spec.mask(NEG, torch.float64)
    assert m.dtype == torch.float64
    assert (m == torch.tensor([[0, NEG, NEG], [0, 0, NEG], [0, 0, 0]], dtype=torch.float64)).all()
    assert spec.positions(0).tolist() == [0, 1, 2]


def test_bad_parents_rejected() -> None:
    with pytest.raises(ValueError):
        TreeSpec(parents=[0, 0])
    with pytest.raises(ValueError):
        TreeSpec(parents=[-1, 1])
    with pytest.raises(ValueError):
        TreeSpec.from_paths([(0, 1)])  # (0,) missing


def test_from_paths_sorts_by_depth() -> None:
    spec = TreeSpec.from_paths([(0, 0), (1,), (0,), (0, 1), (1, 0)])
    assert spec.ranks == [(), (0,), (1,), (0, 0), (0, 1), (1, 0)]
    assert spec.parents == [-1, 0, 0, 1, 1, 2]
    assert spec.depths == [0, 1, 1, 2, 2, 2]
    assert spec.retrieve_indices() == [[0, 1, 3], [0, 1, 4], [0, 2, 5]]


def test_seed_002_worked_example() -> None:
    acc = [[0.75, 0.20], [0.60, 0.25], [0.50, 0.20]]
    paths, expected_len = sparse_tree(acc, 7)  # 6 drafted nodes and the root
    one_based = [tuple(i + 1 for i in p) for p in paths]
    assert one_based == [(1,), (1, 1), (1, 1, 1), (2,), (1, 2), (2, 1)]
    # E[L] counts drafted nodes only (not the root): 0.75+0.45+0.225+0.20+0.1875+0.12
    assert expected_len == pytest.approx(1.9325, abs=1e-12)
    assert sparse_tree(acc, 1) == ([], 0.0)
    full, _ = sparse_tree(acc, 100)  # a size beyond the whole tree: every node once
    assert len(full) == 2 + 4 + 8


def test_greedy_accept_path() -> None:
    spec = TreeSpec.from_paths([(0,), (1,), (0, 0), (1, 0)])  # nodes: root, a, b, a.a, b.a
    tokens = [5, 7, 8, 9, 4]
    argmax = [8, 1, 4, 0, 0]  # root wants 8 (node 2), node 2 wants 4 (node 4)
    assert greedy_accept_path(tokens, spec, argmax) == [0, 2, 4]
    assert greedy_accept_path(tokens, spec, [3, 0, 0, 0, 0]) == [0]
    assert longest_path(spec, lambda _c: True) == [0, 1, 3]


def _tree_vs_chains(lm, prompt: list[int], tokens: list[int], spec: TreeSpec, atol: float) -> None:
    cache = lm.new_cache()
    lm.forward(prompt, cache)
    tree_logits, tree_hidden = verify_tree(lm, cache, tokens, spec)
    assert cache.get_seq_length() == len(prompt) + len(spec)
    for path in spec.retrieve_indices():
        ref = lm.new_cache()
        lm.forward(prompt, ref)
        logits, hidden = lm.forward([tokens[i] for i in path], ref)
        torch.testing.assert_close(tree_logits[path], logits, atol=atol, rtol=0)
        torch.testing.assert_close(tree_hidden[path].float(), hidden.float(), atol=atol, rtol=0)


SPEC = TreeSpec.from_paths([(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0), (0, 1, 0)])


def test_tree_logits_equal_chains_tiny(tiny_lm) -> None:
    prompt = tiny_lm.encode_prompt("Name a colour.")
    gen = torch.Generator().manual_seed(1)
    tokens = [int(t) for t in torch.randint(0, 49152, (len(SPEC),), generator=gen)]
    _tree_vs_chains(tiny_lm, prompt, tokens, SPEC, atol=1e-9)


@pytest.mark.real_model
def test_tree_logits_equal_chains_real(real_lm) -> None:
    prompt = real_lm.encode_prompt("Name a colour.")
    words = real_lm.tokenizer.encode(" The sky is blue and the grass green")
    tokens = [words[i % len(words)] for i in range(len(SPEC))]
    _tree_vs_chains(real_lm, prompt, tokens, SPEC, atol=1e-4)


def test_commit_path_equals_chain_cache(tiny_lm) -> None:
    prompt = tiny_lm.encode_prompt("Count to three.")
    tokens = list(range(100, 100 + len(SPEC)))
    path = SPEC.path_to(7)  # root → (0,) → (0,1) → (0,1,0): not a chain prefix
    assert path != list(range(len(path)))
    cache = tiny_lm.new_cache()
    tiny_lm.forward(prompt, cache)
    verify_tree(tiny_lm, cache, tokens, SPEC)
    commit_path(cache, len(prompt), path)
    ref = tiny_lm.new_cache()
    tiny_lm.forward(prompt + [tokens[i] for i in path], ref)
    n = cache.get_seq_length()
    assert n == ref.get_seq_length()
    torch.testing.assert_close(cache.k[:, :, :, :n], ref.k[:, :, :, :n], atol=1e-10, rtol=0)  # every layer at once
    torch.testing.assert_close(cache.v[:, :, :, :n], ref.v[:, :, :, :n], atol=1e-10, rtol=0)
    # the committed cache decodes on exactly as the chain cache does
    a, _ = tiny_lm.forward([42], cache)
    b, _ = tiny_lm.forward([42], ref)
    torch.testing.assert_close(a, b, atol=1e-9, rtol=0)
