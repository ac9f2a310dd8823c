"""The heads tree's shared scaffolding (specviz.trees.head_tree): Medusa and Hydra read their Configs, build their
trees and check their heads the same way."""

from __future__ import annotations

import pytest

from specviz.core.sampling import ConfigError
from specviz.methods import hydra, medusa
from specviz.trees.head_tree import build_tree, tiny_calibration, tree_for


@pytest.mark.parametrize("method", [medusa, hydra])
def test_both_heads_methods_refuse_a_rule_they_do_not_have(method) -> None:
    for bad in ("greedy", "speculative"):  # "greedy", the exact rule's first name, is refused like any other
        with pytest.raises(ConfigError):
            method.Config(rule=bad)


@pytest.mark.parametrize("method", [medusa, hydra])
def test_a_tree_asking_for_more_heads_than_there_are_is_one_clear_error(method) -> None:
    acc = tiny_calibration(3)
    spec, expected = tree_for(method.Config(heads=3, total_tokens=6), 3, acc)
    assert len(spec) == 6 and (spec, expected) == build_tree(acc, 3, 6)
    with pytest.raises(ConfigError, match="at most 2"):
        tree_for(method.Config(heads=3), 2, acc)
    with pytest.raises(ConfigError, match="at most 3"):
        tree_for(method.Config(heads=4), 8, acc)
