"""Fixed-dataset features: the chat template's assistant mask, windows, and the labels heads learn from."""

from __future__ import annotations

import torch

from specviz.corpus import conversations, features, shards, sharegpt
from specviz.training import hydra_train, medusa_train
from specviz.training.loop import lr_at


def test_assistant_mask_covers_the_assistants_writing_only(tokenizer):
    msgs = [
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue is one."},
        {"role": "user", "content": "Another?"},
        {"role": "assistant", "content": "Green."},
    ]
    ids, mask = conversations.template_ids(tokenizer, msgs, 4096)
    assert len(ids) == len(mask)
    written = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    assert "Blue is one." in written and "Green." in written
    assert "Name a colour" not in written and "Another?" not in written and "assistant" not in written
    # the prompt part is exactly what the app feeds the model for the first user turn
    first = tokenizer.apply_chat_template(msgs[:1], add_generation_prompt=True, tokenize=True)
    first = first["input_ids"] if hasattr(first, "keys") else first
    assert ids[: len(first)] == list(first) and not any(mask[: len(first)])


def test_conversation_messages_refuses_banned_and_malformed_records():
    rec = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}
    assert sharegpt.conversation_messages(rec, set())[1] == {"role": "assistant", "content": "hello"}
    assert sharegpt.conversation_messages(rec, {"hi"}) is None
    assert sharegpt.conversation_messages({"conversations": [{"from": "gpt", "value": "x"}]}, set()) is None


def test_windows_cut_long_conversations_and_skip_windows_without_assistant_text():
    ids = list(range(100))
    mask = [False] * 40 + [True] * 60
    got = list(features.windows(ids, mask, 32))
    # [0, 32) is all user text and [96, 100) has 4 assistant tokens: both skipped
    assert [(w[0], len(w), sum(m)) for w, m in got] == [(32, 32, 24), (64, 32, 32)]


def test_medusa_targets_are_the_targets_own_tokens_on_its_greedy_path():
    ids = torch.tensor([5, 16, 17, 8, 19])  # sampled text: 8 is not the target's argmax (18) there
    label = torch.tensor([16, 17, 18, 19, 20], dtype=torch.int32)  # label[j] predicts position j + 1
    seq = shards.Sequence(ids, torch.zeros(5, 4), torch.tensor([0, 1, 1, 1, 1]).bool(), label=label)
    assert medusa_train.target_tokens(seq).tolist() == [5, 16, 17, 18, 19]
    to_draft = torch.arange(32)
    _h, y = medusa_train.positions([seq], 2, to_draft)
    # root t+1 = 1..4; head 1 predicts the target's token at t+2, head 2 at t+3, while x_{t+1..t+k} are its own
    assert y.tolist() == [[17, 18], [18, -100], [-100, -100], [-100, -100]]  # the sampled 8 cuts the paths through it
    _h2, branch, y2 = hydra_train.positions([seq], 2, to_draft)
    assert branch.tolist() == [[16, 17], [17, 8], [8, 19], [19, 0]]  # Hydra reads the text's own tokens ...
    assert y2.tolist() == [[17, 18], [18, 19], [19, -100], [-100, -100]]  # ... and learns the argmax after them


def test_lr_schedule_warms_up_then_decays_to_five_percent():
    assert lr_at(0, 1000, 1.0, 100) < 0.02
    assert lr_at(100, 1000, 1.0, 100) == 1.0
    assert abs(lr_at(1000, 1000, 1.0, 100) - 0.05) < 1e-9
