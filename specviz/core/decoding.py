"""The rules every decode loop keeps, one row or a batch of them: the clock, when a root ends its request, how a
commit is cut, and the target's forward over a block of new slots per row through the loaded model.

The one-row loop (methods.base.Run) and the batched one (methods.batched.loop.BatchRun) read these, so a
request decoded in a batch stops, counts its time and picks its tokens as it would alone.
"""

from __future__ import annotations

import time

import torch

from specviz.core.model import LoadedModel


def synced_now(device: torch.device) -> float:
    """perf_counter after the device has finished its queued work (a GPU runs asynchronously)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def is_final(token: int, remaining: int, eos: set[int]) -> bool:
    """Whether committing `token` ends the request (EOS, or the last token of its budget)."""
    return token in eos or remaining <= 1


def clip(tokens: list[int], remaining: int, eos: set[int]) -> tuple[list[int], str]:
    """A proposed commit cut at the first EOS and at the token budget, and why it stops there ('eos', 'length',
    or '' while it goes on)."""
    out: list[int] = []
    for tok in tokens[:remaining]:
        out.append(tok)
        if tok in eos:
            return out, "eos"
    return out, "length" if len(out) >= remaining else ""


@torch.inference_mode()
def forward_rows(
    lm: LoadedModel, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, cache: object
) -> torch.Tensor:
    """The target over q new slots per row: ids and positions [B, q], an additive mask [B, 1, q, S + q] over the
    rows' cache and the block → the final hidden states [B, q, H] (post-norm), the keys appended to `cache`."""
    dev = lm.device
    out = lm.hf.model(
        input_ids=ids.to(dev), position_ids=positions.to(dev), attention_mask=mask, cache=cache, use_cache=True
    )
    return out.last_hidden_state


def greedy_picks(lm: LoadedModel, hidden: torch.Tensor) -> torch.Tensor:
    """The target's greedy pick at each hidden state [..., H] → [...] (float logits, as the one-row loop picks)."""
    return lm.lm_head(hidden).float().argmax(dim=-1)
