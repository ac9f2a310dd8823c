"""EAGLE-3: the fused head and its files, the training-time-test mask, training and resuming, the target's
layer inputs, greedy identity, and statistical losslessness through generate."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from specviz.core.details import Eagle3Detail, detail_for
from specviz.core.model import fused_layers
from specviz.core.sampling import ConfigError, Sampling
from specviz.core.trace import Trace
from specviz.corpus import distill
from specviz.corpus.shards import DataError
from specviz.heads.eagle import HeadError
from specviz.heads.eagle import new_head as new_eagle_head
from specviz.heads.eagle import save_head as save_eagle_head
from specviz.heads.eagle3 import EAGLE3_FORMAT, load_head, new_head, save_head
from specviz.methods import ar, eagle3
from specviz.training import eagle3_train as e3t
from specviz.training.eagle_loss import depth_mask, unrolled
from specviz.training.loop import finish
from tests.sampling_check import second_token_follows_p
from tests.train_check import whole_cut_resumed


@pytest.fixture(scope="module")
def tiny_head(tiny_lm):
    return new_head(tiny_lm.hf.config, "tiny", seed=1).to(torch.float64).eval().requires_grad_(False)


@pytest.fixture(scope="module")
def real_lm_config():
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=576,
        vocab_size=49152,
        intermediate_size=1536,
        num_attention_heads=9,
        num_key_value_heads=3,
        num_hidden_layers=30,
    )


def test_fused_layers_are_distills(real_lm_config):
    assert fused_layers(30) == (2, 15, 27)
    assert fused_layers(2) == (0, 1, 1) and fused_layers(4) == (0, 2, 3)  # tiny models: inside their depth
    assert new_head(real_lm_config).config.layers == [2, 15, 27]


def test_head_shapes_and_round_trip(tiny_lm, tmp_path):
    head = new_head(tiny_lm.hf.config, "tiny", draft_ids=torch.arange(0, 2000, 2), seed=2)
    layers = torch.randn(2, 5, 3 * 64) * torch.tensor([1.0, 1.0, 2e4]).repeat_interleave(64)  # massive activations
    g = head.fuse_layers(layers)
    assert g.shape == (2, 5, 64) and torch.isfinite(g).all() and g.abs().max() < 50  # the per-layer norms tame them
    pos = torch.arange(5).expand(2, -1)
    out = head(g, torch.randn(2, 5, 64), pos)
    assert out.shape == (2, 5, 64) and head.readout(out).shape == (2, 5, 64)
    assert head.fuse.in_features == 192 and head.fc.in_features == 128 and len(head.layer_norms) == 3
    save_head(head, tmp_path, dtype=torch.float32)
    assert {"model.safetensors", "config.json"} <= {p.name for p in tmp_path.iterdir()}
    back = load_head(tmp_path, tiny_lm.hf.config)
    assert back.config.format == EAGLE3_FORMAT and back.config.layers == list(fused_layers(2))
    assert torch.equal(back.draft_ids, head.draft_ids)
    x = torch.randn(2, 5, 64)
    torch.testing.assert_close(back(back.fuse_layers(layers), x, pos), head(head.fuse_layers(layers), x, pos))


def test_missing_corrupt_and_foreign_heads_are_refused(tiny_lm, real_lm_config, tmp_path):
    with pytest.raises(HeadError, match="train eagle3"):
        load_head(tmp_path / "nowhere")
    save_head(new_head(tiny_lm.hf.config), tmp_path)
    with pytest.raises(HeadError, match="another model"):
        load_head(tmp_path, real_lm_config)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(HeadError, match="Cannot read"):
        load_head(tmp_path)
    (tmp_path / "config.json").write_text("{broken")
    with pytest.raises(HeadError, match="corrupt"):
        load_head(tmp_path)
    save_eagle_head(new_eagle_head(tiny_lm.hf.config), tmp_path / "eagle2")  # an EAGLE-2 head is not one
    with pytest.raises(HeadError, match="not an EAGLE-3 head"):
        load_head(tmp_path / "eagle2")
    save_head(new_head(tiny_lm.hf.config, draft_ids=torch.arange(100)), tmp_path / "cut")
    cfg = (tmp_path / "cut" / "config.json").read_text().replace('"draft_vocab": 100', '"draft_vocab": 90')
    (tmp_path / "cut" / "config.json").write_text(cfg)
    with pytest.raises(HeadError, match="draft vocabulary"):
        load_head(tmp_path / "cut")
    with pytest.raises(ConfigError, match="No EAGLE-3 head"):
        eagle3.generate(tiny_lm, [1, 2, 3], Sampling(max_new_tokens=2), eagle3.Config(head=str(tmp_path / "x")))


def test_forward_layers_are_transformers_hidden_states(tiny_lm):
    ids = tiny_lm.encode_prompt("Tell me about cats and dogs")
    layers = (0, 1, 1)
    with torch.no_grad():
        ref = tiny_lm.hf(torch.tensor([ids]), output_hidden_states=True).hidden_states
    want = torch.cat([ref[i][0] for i in layers], dim=-1)
    logits, hidden, fused = tiny_lm.forward_layers(ids, tiny_lm.new_cache(), layers)
    # close, not equal: transformers' RMSNorm rounds through fp32 in this float64 model, core.lean's does not
    torch.testing.assert_close(fused, want, atol=1e-4, rtol=1e-4)
    plain_logits, plain_hidden = tiny_lm.forward(ids, tiny_lm.new_cache())
    torch.testing.assert_close(hidden, plain_hidden)
    torch.testing.assert_close(logits, plain_logits)
    cache = tiny_lm.new_cache()  # on top of a cache, as the verify pass runs it
    tiny_lm.forward_layers(ids[:4], cache, layers)
    _, _, tail = tiny_lm.forward_layers(ids[4:], cache, layers)
    torch.testing.assert_close(tail, want[4:], atol=1e-4, rtol=1e-4)


def test_training_time_test_never_sees_the_future(tiny_lm):
    """Depth-d row i reads true features at rows <= i-(d-1) and its own earlier drafts only: changing anything
    after position t leaves every depth's outputs at <= t unchanged, and rows of a batch never mix."""
    head = new_head(tiny_lm.hf.config, seed=3).double().eval()
    T, depths = 12, 3
    g, emb = torch.randn(2, T, 64, dtype=torch.float64), torch.randn(2, T, 64, dtype=torch.float64)
    base = unrolled(head, g, emb, depths)
    t = 6
    g2, emb2 = g.clone(), emb.clone()
    g2[0, t + 1 :] += 3.0
    emb2[0, t + 1 :] -= 2.0
    g2[1] += 1.0  # another row's whole sequence
    moved = unrolled(head, g2, emb2, depths)
    for d in range(depths):
        torch.testing.assert_close(moved[d][0, : t + 1], base[d][0, : t + 1], atol=1e-12, rtol=0)
        assert not torch.allclose(moved[d][0, t + 1 :], base[d][0, t + 1 :])
    g3 = g.clone()
    g3[0, t - 1] += 3.0  # depth 3 at row t sees true rows <= t-2 only
    again = unrolled(head, g3, emb, depths)
    torch.testing.assert_close(again[2][0, t], base[2][0, t], atol=1e-12, rtol=0)
    assert not torch.allclose(again[1][0, t], base[1][0, t])  # depth 2 sees row t-1
    for d in range(1, depths + 1):
        see = depth_mask(T, d)
        keys = torch.arange(d * T) % T  # each key's position, block by block
        assert not (see & (keys[None, :] > torch.arange(T)[:, None])).any()  # never a later position


@pytest.fixture(scope="module")
def tiny_data(tokenizer):
    """A fp32 tiny model, its greedy continuations of four prompts, and their layer inputs (teacher-forced)."""
    from tests.conftest import make_tiny

    lm = make_tiny(tokenizer, seed=3)
    lm.hf.float()
    lm.dtype = torch.float32
    prompts = ["Hello there", "What is a cat?", "Tell me a joke", "Write some code"]
    seqs = distill.distill_batch(lm, prompts, 20)
    for s in seqs:
        s.layers = lm.forward_layers(s.ids.tolist(), lm.new_cache(), fused_layers(2))[2].half()
    return lm, prompts, seqs


@pytest.mark.full  # trains twice (whole, then cut and resumed)
def test_training_learns_and_resumes_exactly(tiny_data, tmp_path):
    lm, prompts, seqs = tiny_data
    trainer = e3t.Eagle3Trainer(batch_tokens=256, draft_vocab=512, unroll=2, layers="0,1,1")
    cfg = replace(e3t.Eagle3Trainer.recipe, epochs=30, warmup=0.1, lr=3e-3)
    run, cut, resumed = whole_cut_resumed(lm, trainer, cfg, seqs, tmp_path)
    full, stats = run.head, run.record
    assert cut["steps"] == 1 < cut["planned_steps"] == stats["steps"]
    for (name, a), (_, b) in zip(full.named_parameters(), resumed.named_parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0, msg=name)
    first, last = stats["history"][0], stats["history"][-1]
    assert last["loss"] < first["loss"] - 3 and last["acc1"] > 0.6 and last["acc2"] > 0.6
    final = finish(lm, trainer, run, seqs, tmp_path / "head")
    assert len(final["heldout_top1_by_depth"]) == e3t.EVAL_DEPTHS and final["heldout_top1_by_depth"][0] > 0.6
    head = load_head(tmp_path / "head", lm.hf.config)
    assert head.config.calibration[0][0] == final["heldout_top1_by_depth"][0] and head.config.train["unroll"] == 2
    s = Sampling(max_new_tokens=16)
    for p in prompts[:2]:
        t = eagle3.generate(lm, lm.encode_prompt(p), s, eagle3.Config(head=str(tmp_path / "head")))
        assert t.output_ids == ar.generate(lm, lm.encode_prompt(p), s).output_ids
        assert t.mean_accepted > 1.5  # an untrained head accepts about nothing


def test_shards_without_layer_inputs_are_one_clear_error(tiny_data, tmp_path, capsys):
    lm, _, seqs = tiny_data
    bare = [replace(s, layers=None) for s in seqs]
    with pytest.raises(DataError, match="--layers"):
        e3t.data_layers(tmp_path, bare, lm)
    assert e3t.data_layers(tmp_path, seqs, lm) == (0, 1, 1)
    from specviz.training import cli

    assert cli.train("eagle3", ["--data", str(tmp_path / "none")]) == 2
    assert "No train shards" in capsys.readouterr().err
    assert cli.train("eagle3", ["--unroll", "0"]) == 2


def test_trace_detail_is_typed_plain_data(tiny_lm, tiny_head):
    s = Sampling(max_new_tokens=8, temperature=0.9, seed=3)
    t = eagle3.generate(tiny_lm, tiny_lm.encode_prompt("Hi"), s, eagle3.Config(head_dtype="model"), head=tiny_head)
    assert Trace.from_json(t.to_json()) == t and detail_for("eagle3") is Eagle3Detail
    d = t.steps[0].detail
    assert isinstance(d, Eagle3Detail) and d.decisions is not None and d.layers == [0, 1, 1]
    assert d.path[0] == 0 and len(d.verify_parents) == t.steps[0].forward_tokens
    assert -1 <= d.features["cos_pred_true"] <= 1


@pytest.mark.parametrize(
    "bad", [{"depth": -1}, {"top_k": 33}, {"total_tokens": 1}, {"tree": "bushy"}, {"head_dtype": "x"}]
)
def test_bad_config_is_refused(bad):
    with pytest.raises(ConfigError):
        eagle3.Config(**bad)


@pytest.mark.soak  # the fast tier: tests/methods/test_generate_lossless.py
def test_sampling_through_generate_keeps_the_target_distribution(peaked):
    """T = 0.8: the token after the first, drawn through EAGLE-3's tree (a draft or the residual), is distributed
    as the target's p (tests/sampling_check)."""
    kw = eagle3.tiny_resources(peaked)
    second_token_follows_p(peaked, lambda ids, s: eagle3.generate(peaked, ids, s, **kw))


def test_warm_start_copies_the_eagle2_layer_and_keeps_its_own_fusion(tiny_lm, tmp_path):
    from specviz.heads.eagle3 import warm_start

    old = new_eagle_head(tiny_lm.hf.config, tiny_lm.name, seed=5)
    save_eagle_head(old, tmp_path / "e2", dtype=torch.float32)
    head = new_head(tiny_lm.hf.config, tiny_lm.name, None, fused_layers(2), 0)
    fuse_before = {k: v.clone() for k, v in head.state_dict().items() if not k.startswith(("fc.", "layer."))}
    copied = warm_start(head, tmp_path / "e2")
    assert "fc.weight" in copied and any(k.startswith("layer.self_attn") for k in copied)
    torch.testing.assert_close(head.fc.weight, old.fc.weight)
    for k, v in fuse_before.items():
        torch.testing.assert_close(head.state_dict()[k], v)
    with pytest.raises(HeadError, match="Cannot read"):
        warm_start(head, tmp_path / "none")


def test_fusion_diagram_marks_the_read_layers_with_the_steps_numbers(tiny_lm):
    from specviz.output.viz.eagle3 import fusion_figure

    ids = tiny_lm.encode_prompt("Tell me a story")
    trace = eagle3.generate(tiny_lm, ids, Sampling(max_new_tokens=8), **eagle3.tiny_resources(tiny_lm))
    step, detail = trace.detailed(Eagle3Detail)[0]
    assert len(detail.features["layer_rms"]) == len(detail.layers) == 3
    fig = fusion_figure(step, len(tiny_lm.hf.model.layers))
    texts = [a.text for a in fig.layout.annotations if a.text]
    assert sum("input of layer" in t and "RMS" in t for t in texts) == len(set(detail.layers))
    assert "EAGLE-3 reads layers" in fig.layout.title.text


def test_batches_without_a_labelled_row_move_nothing(tiny_data, tmp_path):
    """A batch whose answers all lie past max_len (long prompts sorted together) has no loss to follow: the run
    steps past it instead of failing on a loss without a gradient (it stopped a real run at step 204)."""
    from specviz.training.loop import fit
    from tests.train_check import in_memory

    lm, _, seqs = tiny_data
    trainer = e3t.Eagle3Trainer(batch_tokens=256, draft_vocab=512, unroll=2, layers="0,1,1", max_len=4)
    start = min(int(s.mask.float().argmax()) for s in seqs)
    assert start >= 4  # every answer begins past the cut: no batch holds a labelled row
    cfg = replace(e3t.Eagle3Trainer.recipe, epochs=2, eval_every=0)
    run = fit(lm, trainer, in_memory(seqs), cfg, tmp_path / "ckpt")
    assert run.record["steps"] == run.record["planned_steps"] > 0
    assert all("ce1" not in h for h in run.record["history"])  # no depth was scored
    fresh = trainer.new_head(lm, in_memory(seqs), cfg.seed)  # the weights the run started from
    for (name, a), (_, b) in zip(fresh.named_parameters(), run.head.named_parameters(), strict=True):
        torch.testing.assert_close(a.float(), b.float(), atol=0, rtol=0, msg=name)
