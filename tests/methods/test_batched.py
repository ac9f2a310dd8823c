"""Batched decoding: every row's greedy output is that prompt decoded alone by plain decoding, token for token."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
import torch

from specviz.core import slot_cache as slots
from specviz.core.details import EagleDetail
from specviz.core.draft_length import best_width as shared_width
from specviz.core.draft_length import forward_cost
from specviz.core.drafting import VerifyLatency
from specviz.core.kv_cache import growing_cache
from specviz.core.sampling import ConfigError, Sampling
from specviz.methods import ar, eagle, pld
from specviz.methods.batched.eagle import BatchEagle
from specviz.methods.batched.methods import generate
from specviz.tuning.batched_bench import format_table, parse_batches
from specviz.tuning.batched_bench import run as run_bench
from tests.conftest import PROMPTS

LONG = (
    "Summarise this passage. The river rises in the hills, runs through the old town, and meets the sea at the "
    "harbour, where the fishing boats come in at dawn. The river rises in the hills, runs through the old town, "
    "and meets the sea at the harbour. In spring the water is high and brown; in autumn it is low and clear."
)
TEXTS = ["Hi", LONG, PROMPTS[0], "1 2 3 4 1 2 3 4 1 2"]  # about 10 to 90 tokens of prompt, chat template included
TOKENS = 16
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny tensors gain nothing from threads, and on a shared 2-core box threads spin-wait for each other."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def solo(lm, prompts: list[list[int]], tokens: int = TOKENS) -> list[list[int]]:
    return [ar.generate(lm, ids, Sampling(max_new_tokens=tokens)).output_ids for ids in prompts]


@pytest.fixture(scope="module")
def eos_lm(tiny_lm):
    """The tiny model with a token the 'Hi' row emits early added to its EOS set (undone after): it ends first."""
    ids = tiny_lm.encode_prompt("Hi")
    out = ar.generate(tiny_lm, ids, Sampling(max_new_tokens=TOKENS)).output_ids
    stop = next(t for i, t in enumerate(out) if i >= 3 and t not in out[:i])
    config = tiny_lm.hf.generation_config
    before = config.eos_token_id
    config.eos_token_id = [2, stop]
    yield tiny_lm
    config.eos_token_id = before


@pytest.fixture(scope="module")
def case(eos_lm):
    prompts = [eos_lm.encode_prompt(t) for t in TEXTS]
    return eos_lm, prompts, solo(eos_lm, prompts)


def test_the_case_has_very_different_lengths_and_a_row_that_ends_first(case):
    lm, prompts, alone = case
    lens = [len(p) for p in prompts]
    assert max(lens) > 3 * min(lens)
    assert len(alone[0]) < TOKENS and alone[0][-1] in lm.eos_ids  # the 'Hi' row stops at EOS early
    assert any(len(o) == TOKENS for o in alone)  # and others run to the budget


@pytest.mark.parametrize("name", ["ar", "pld", "eagle"])
def test_every_row_equals_its_prompt_decoded_alone(case, name):
    lm, prompts, alone = case
    extra = eagle.tiny_resources(lm) if name == "eagle" else {}
    trace = generate(lm, prompts, Sampling(max_new_tokens=TOKENS), name, **extra)
    assert trace.outputs == alone
    assert trace.stopped[0] == "eos" and "length" in trace.stopped
    last = max(i for i, s in enumerate(trace.steps) if 0 in s.rows)
    assert last < len(trace.steps) - 1  # the row that ended first ran in no later forward: it left the batch
    widths = [len(s.rows) for s in trace.steps if s.width]
    assert widths[0] == len(prompts) and widths[-1] < len(prompts)


def test_each_pld_row_steps_exactly_as_the_one_row_method(case):
    """Same drafts, same acceptance: each request's tokens per step equal its one-row run's (float64 model)."""
    lm, prompts, _ = case
    sampling = Sampling(max_new_tokens=TOKENS)
    trace = generate(lm, prompts, sampling, "pld")
    for i, ids in enumerate(prompts):
        one = pld.generate(lm, ids, sampling)
        mine = [len(s.committed) for s in trace.row(i).steps if s.committed]  # not the steps it only waited in
        assert mine == [len(s.committed) for s in one.steps]
    assert trace.mean_accepted > 1.0  # the counting row accepts a copied draft (the tiny model, seed 0)


def test_each_eagle_row_drafts_the_one_row_trees(case, monkeypatch):
    """The batched head (catch-up with pads, expansion masks by slot, positions) grows every row's one-row trees."""
    lm, prompts, _ = case
    res = eagle.tiny_resources(lm)
    grown: dict[int, list[tuple[list[int], list[bool]]]] = {}
    draft = BatchEagle.draft

    def spy(self, rows):
        trees = draft(self, rows)
        for row, t in zip(rows, trees):
            grown.setdefault(row.index, []).append((list(t.tokens), list(t.kept)))
        return trees

    monkeypatch.setattr(BatchEagle, "draft", spy)
    sampling = Sampling(max_new_tokens=TOKENS)
    generate(lm, prompts, sampling, "eagle", **res)
    for i in (0, 1):  # the shortest prompt (it ends first, at EOS) and the longest
        one = eagle.generate(lm, prompts[i], sampling, res["config"], head=res["head"])
        trees = [(d.tree["tokens"], d.tree["kept"]) for _, d in one.detailed(EagleDetail)]
        assert grown[i] == trees


def test_the_batch_draft_width_is_the_one_row_length_at_one_row_and_shrinks_with_the_batch():
    curve = VerifyLatency((1, 2, 4, 8, 16, 32, 64), (40.0, 41.0, 42.0, 45.0, 52.0, 70.0, 110.0))
    cost = partial(forward_cost, curve)
    assert cost(128) == pytest.approx(2 * cost(64))  # past the last measured point: proportional to tokens
    for a, avail in [(0.3, 10), (0.7, 10), (0.9, 3), (0.95, 16)]:
        assert shared_width([a], [avail], 10, cost) == pld.best_length(a, avail, 10, curve.relative)
    one = shared_width([0.8], [10], 10, cost)
    assert 0 < shared_width([0.8] * 16, [10] * 16, 10, cost) < one  # sixteen rows pay 16 slots per draft token
    assert shared_width([0.8] + [0.0] * 15, [10] + [0] * 15, 10, cost) < one  # and one match makes everyone pay


def test_the_slot_cache_packs_accepted_paths_and_compacts(tiny_lm):
    cache = growing_cache(tiny_lm.hf.config)  # batched decoding runs transformers' forward on in-place layers
    held = slots.SlotCache(cache, 2, tiny_lm.device)
    hd = tiny_lm.hf.config.hidden_size // tiny_lm.hf.config.num_attention_heads
    kv = tiny_lm.hf.config.num_key_value_heads

    def append(live: list[list[bool]]) -> None:
        q, start = len(live[0]), held.slots
        held.open(torch.ones(2, q, q, dtype=torch.bool), torch.tensor(live), torch.float64)
        ids = torch.arange(start, start + q, dtype=torch.float64)  # a slot's keys hold 100 * row + slot
        k = (ids[None, :] + 100 * torch.arange(2.0)[:, None])[:, None, :, None].expand(2, kv, q, hd)
        for i in range(len(cache.layers)):
            cache.update(k.clone(), k.clone(), i)

    def slot_ids(b: int) -> list[int]:
        keys = cache.layers[0].keys[b, 0, :, 0]
        return [int(x) - 100 * b for x, h in zip(keys.tolist(), held.held[b].tolist()) if h]

    append([[False, True, True], [True, True, True]])  # row 0 left-padded
    append([[True, True, True, True], [True, True, True, False]])  # a block; row 1 one slot narrower
    held.keep(3, [[0, 2], [0, 1, 2]])  # row 0 accepts its root and the sibling at offset 2
    assert held.slots == 6 and slot_ids(0) == [1, 2, 3, 5] and slot_ids(1) == [0, 1, 2, 3, 4, 5]
    assert held.lengths().tolist() == [4, 6] and held.waste() == 0
    held.select([0])
    held.compact()
    assert held.slots == 4 and slot_ids(0) == [1, 2, 3, 5] and held.held.all()


@pytest.mark.parametrize("name", ["pld", "eagle"])
def test_identity_holds_when_the_cache_is_compacted_every_step(case, name, monkeypatch):
    lm, prompts, alone = case
    monkeypatch.setattr(slots, "COMPACT_MIN", 0)
    monkeypatch.setattr(slots, "COMPACT_FRACTION", 0.0)
    extra = eagle.tiny_resources(lm) if name == "eagle" else {}
    trace = generate(lm, prompts, Sampling(max_new_tokens=TOKENS), name, **extra)
    assert trace.outputs == alone


def test_a_batch_of_one_is_plain_decoding(tiny_lm):
    ids = tiny_lm.encode_prompt(PROMPTS[0])
    trace = generate(tiny_lm, [ids], Sampling(max_new_tokens=12), "ar")
    assert trace.outputs == solo(tiny_lm, [ids], 12)
    assert trace.mean_accepted == 1.0 and trace.forwards == len(trace.outputs[0]) - 1
    assert all(s.slots == len(ids) + 1 + i for i, s in enumerate(trace.steps[:-1]))  # ar leaves no hole


def test_numbers_follow_measure(case):
    lm, prompts, _ = case
    trace = generate(lm, prompts, Sampling(max_new_tokens=8), "ar")
    lat = trace.latencies()
    assert max(lat) == pytest.approx(trace.generation_s) and min(lat) > trace.prefill_s
    assert trace.tokens_per_s == pytest.approx(trace.new_tokens / trace.generation_s)
    assert trace.step_s > 0 and trace.row(1).total_s == pytest.approx(lat[1])


def test_sampling_and_unknown_methods_are_refused(tiny_lm):
    ids = tiny_lm.encode_prompt("Hi")
    with pytest.raises(ConfigError):
        generate(tiny_lm, [ids], Sampling(max_new_tokens=4, temperature=0.7), "ar")
    with pytest.raises(ConfigError):
        generate(tiny_lm, [ids], Sampling(max_new_tokens=4), "medusa")
    with pytest.raises(ConfigError):
        parse_batches("4,x")


def test_the_bench_reports_a_point_per_method_and_batch(tiny_lm):
    lm = tiny_lm  # run() installs no latency curve (the CLI does), so the session model stays as it was
    prompts = [lm.encode_prompt(t) for t in TEXTS[:3]]
    res = run_bench(lm, ["pld", "ar"], prompts, [1, 4], Sampling(max_new_tokens=6), repeats=2)
    assert [(p["batch"], p["method"]) for p in res["points"]] == [(1, "ar"), (1, "pld"), (4, "ar"), (4, "pld")]
    for p in res["points"]:
        assert p["identical"] == p["batch"] and len(p["runs"]) == 2 and p["speedup"]["n"] == 2
    assert res["points"][0]["speedup"]["median"] == 1.0 and res["provenance"]["cores"] > 0
    assert "pld" in format_table(res)


REAL_TEXTS = [
    "Hi!",
    "Write a short poem about autumn leaves.",
    "Explain what a hash table is in two sentences.",
    "List three tips for learning a new language.",
    "What is the capital of France? Answer in one word.",
    "Rewrite this sentence in the passive voice: The cat chased the mouse across the garden.",
    LONG,
    LONG + " " + LONG + " Now list every place the river passes, in order.",
]


# EAGLE in the README's test command (the batched tree, drafts and verification); plain decoding and prompt lookup in
# the soak command (the tiny model's batched tests above cover their rules)
@pytest.mark.real_model
@pytest.mark.parametrize(
    "name", [pytest.param("ar", marks=pytest.mark.soak), pytest.param("pld", marks=pytest.mark.soak), "eagle"]
)
def test_real_model_batch_of_eight_equals_each_prompt_alone(real_lm, name):
    prompts = [real_lm.encode_prompt(t) for t in REAL_TEXTS]
    assert max(len(p) for p in prompts) > 5 * min(len(p) for p in prompts)
    alone = _real_alone(real_lm, prompts)
    trace = generate(real_lm, prompts, Sampling(max_new_tokens=64), name)
    same = [i for i, (a, b) in enumerate(zip(trace.outputs, alone)) if a == b]
    assert len(same) == len(prompts), f"rows {sorted(set(range(len(prompts))) - set(same))} differ"


_ALONE: dict[tuple, list[list[int]]] = {}


def _real_alone(lm, prompts: list[list[int]]) -> list[list[int]]:
    """The one-row plain decodes, once per test session."""
    key = tuple(map(tuple, prompts))
    if key not in _ALONE:
        _ALONE[key] = solo(lm, prompts, 64)
    return _ALONE[key]


def test_bench_refuses_a_bad_batch_size_before_loading_the_model(tmp_path, capsys, monkeypatch):
    import specviz.__main__ as cli_main

    monkeypatch.setattr(cli_main, "_load", lambda a: pytest.fail("the model was loaded"))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "Say hello."}\n')
    assert cli_main.main(["bench", "--batch", "4,0", "--methods", "ar", "--prompts", str(prompts)]) == 2
    assert "positive sizes" in capsys.readouterr().err


@pytest.mark.real_model
def test_bench_batch_json(tmp_path, real_lm, monkeypatch, capsys):
    """In process on the session's real model (a subprocess would load it again)."""
    import specviz.__main__ as cli_main

    monkeypatch.setattr(cli_main, "_load", lambda _a: real_lm)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "Say hello."}\n{"prompt": "Name two fruits, then two more fruits."}\n')
    res = tmp_path / "r.json"
    code = cli_main.main(
        [
            "bench",
            "--batch",
            "1,2",
            "--methods",
            "pld",
            "--prompts",
            str(prompts),
            "--max-new-tokens",
            "8",
            "--json",
            str(res),
        ]
    )
    assert code == 0, capsys.readouterr().err
    data = json.loads(res.read_text())
    assert [(p["batch"], p["method"]) for p in data["points"]] == [(1, "ar"), (1, "pld"), (2, "ar"), (2, "pld")]
    assert all(p["identical"] == p["batch"] for p in data["points"])
    assert data["provenance"]["commit"] and data["command"].startswith("python -m specviz bench --batch 1,2")


def test_a_commit_is_cut_as_the_one_row_loop_cuts_it():
    """core.decoding's rules, which both loops read: a commit stops at the first EOS (kept) and at the budget."""
    from specviz.core.decoding import clip, is_final

    assert clip([5, 2, 7], 10, {2}) == ([5, 2], "eos")
    assert clip([5, 6, 7], 2, {2}) == ([5, 6], "length")
    assert clip([5, 6], 5, {2}) == ([5, 6], "")
    assert is_final(2, 9, {2}) and is_final(5, 1, {2}) and not is_final(5, 2, {2})
