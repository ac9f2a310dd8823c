"""Head folders as untrusted input: a bad config.json, weights or id map is the head's own error, in one sentence,
and a Config's folder field is bounded before any file is looked at."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from specviz.core.paths import MODELS, inside
from specviz.core.sampling import ConfigError
from specviz.heads import eagle3 as eagle3_heads
from specviz.heads import hydra as hydra_heads
from specviz.heads import medusa as medusa_heads
from specviz.heads.eagle import HeadError, load_head, new_head, save_head
from specviz.heads.files import MAX_CONFIG_BYTES
from specviz.heads.medusa import HeadsConfig, HeadsError
from specviz.methods import eagle, eagle3, hybrid, hydra, medusa


def patch_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, **changes}))


def patch_tensor(path: Path, key: str, value: torch.Tensor | None) -> None:
    state = load_file(str(path))
    if value is None:
        state.pop(key)
    else:
        state[key] = value
    save_file(state, str(path))


@pytest.fixture
def eagle_dir(tiny_lm, tmp_path) -> Path:
    return save_head(new_head(tiny_lm.hf.config, draft_ids=torch.arange(100, 200)), tmp_path / "eagle")


@pytest.mark.parametrize(
    "changes, reason",
    [
        ({"hidden_size": "64"}, "hidden_size should be an integer"),
        ({"intermediate_size": 10**9}, "intermediate_size should be between"),
        ({"num_attention_heads": 3}, "multiple of num_key_value_heads"),
        ({"head_dim": 4096}, "head_dim should be between"),
        ({"rope_theta": -1.0}, "rope_theta"),
        ({"calibration": [["x"]]}, "calibration"),
        ({"draft_vocab": 10**7}, "draft_vocab"),
    ],
)
def test_eagle_config_fields_are_checked(tiny_lm, eagle_dir, changes, reason):
    patch_json(eagle_dir / "config.json", **changes)
    with pytest.raises(HeadError, match=reason) as err:
        load_head(eagle_dir, tiny_lm.hf.config)
    assert "corrupt" in str(err.value) and "\n" not in str(err.value)


def test_eagle_draft_ids_must_be_ids_of_the_vocabulary(tiny_lm, eagle_dir):
    weights = eagle_dir / "model.safetensors"
    vocab = tiny_lm.hf.config.vocab_size
    for bad in (torch.arange(vocab - 50, vocab + 50, dtype=torch.int32), torch.arange(100).float(), -torch.ones(100)):
        patch_tensor(weights, "draft_ids", bad)
        with pytest.raises(HeadError, match="draft vocabulary"):
            load_head(eagle_dir, tiny_lm.hf.config)
    patch_tensor(weights, "draft_ids", None)  # draft_vocab says 100, the file holds none
    with pytest.raises(HeadError, match="draft vocabulary"):
        load_head(eagle_dir, tiny_lm.hf.config)


def test_eagle_files_of_the_wrong_size_or_kind(tiny_lm, eagle_dir):
    (eagle_dir / "config.json").write_text(json.dumps([1, 2]))
    with pytest.raises(HeadError, match="not an EAGLE head"):
        load_head(eagle_dir)
    (eagle_dir / "config.json").write_text(" " * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(HeadError, match="at most"):
        load_head(eagle_dir)
    (eagle_dir / "config.json").write_text("[" * 100_000)
    with pytest.raises(HeadError, match="corrupt"):
        eagle3_heads.load_head(eagle_dir)


@pytest.fixture
def medusa_dir(tiny_lm, tmp_path) -> Path:
    cfg = HeadsConfig(num_heads=2, hidden_size=64, draft_vocab=50, model="tiny")
    return medusa_heads.save_heads(medusa_heads.new_heads(tiny_lm, cfg, torch.arange(50)), tmp_path / "medusa")


@pytest.fixture
def hydra_dir(tiny_lm, tmp_path) -> Path:
    cfg = hydra_heads.HydraConfig(num_heads=2, hidden_size=64, draft_vocab=50, model="tiny")
    return hydra_heads.save_heads(hydra_heads.new_heads(tiny_lm, cfg, torch.arange(50)), tmp_path / "hydra")


@pytest.mark.parametrize("kind", ["medusa", "hydra"])
def test_heads_files_are_checked(tiny_lm, medusa_dir, hydra_dir, kind):
    mod, folder = (medusa_heads, medusa_dir) if kind == "medusa" else (hydra_heads, hydra_dir)
    assert mod.load_heads(tiny_lm, folder) is not None
    weights, vocab = folder / "heads.safetensors", tiny_lm.hf.config.vocab_size
    for bad in (torch.arange(vocab - 25, vocab + 25), torch.arange(49), torch.arange(50).float()):
        patch_tensor(weights, "vocab", bad)  # ids past the vocabulary were an IndexError
        with pytest.raises(HeadsError, match="vocabulary map"):
            mod.load_heads(tiny_lm, folder)
    patch_tensor(weights, "vocab", None)  # no map at all was a KeyError
    with pytest.raises(HeadsError, match="vocabulary map"):
        mod.load_heads(tiny_lm, folder)
    for changes in ({"num_heads": "2"}, {"num_heads": 10**9}, {"layers": 0}, {"hidden_size": None}):
        patch_json(folder / "config.json", **changes)
        with pytest.raises(HeadsError, match="corrupt"):
            mod.load_heads(tiny_lm, folder)
    (folder / "calibration.json").write_text(json.dumps({"accuracy": [["x"]]}))  # was a ValueError
    with pytest.raises(HeadsError, match="corrupt"):
        mod.load_calibration(folder)


@pytest.mark.parametrize("make", [eagle.Config, eagle3.Config, hybrid.Config])
@pytest.mark.parametrize("value", ["a" * 2000, "x/" + "a" * 300, "models\x00/eagle", 5])
def test_head_folder_fields_are_bounded(make, value):
    with pytest.raises(ConfigError, match="head must be a folder name"):
        make(head=value)


@pytest.mark.parametrize("make", [medusa.Config, hydra.Config])
def test_heads_dir_fields_are_bounded(make):
    with pytest.raises(ConfigError, match="heads_dir must be a folder name"):
        make(heads_dir="x/" + "a" * 300)


def test_a_folder_that_cannot_be_looked_at_is_the_heads_error(tiny_lm):
    """A folder name the OS refuses to look up (a part over 255 characters) was an OSError out of the loaders."""
    with pytest.raises(HeadsError, match="No Medusa heads"):
        medusa_heads.load_heads(tiny_lm, Path("a" * 300))
    with pytest.raises(HeadError, match="No EAGLE-3 head"):
        eagle3_heads.cached_head(tiny_lm, Path("a" * 300))


def test_served_folders_stay_inside_models(tmp_path):
    assert inside(MODELS / "eagle") and inside(str(MODELS)) and inside(MODELS / "nope")
    assert not inside("/etc") and not inside(MODELS / ".." / "app.py") and not inside(tmp_path)
    link = tmp_path / "into"
    link.symlink_to("/etc")
    assert not inside(link)
