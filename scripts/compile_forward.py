"""torch.compile (inductor) on the CPU forward: the written-out forward (core/lean.py) compiled for fixed widths
against itself eager, interleaved, on the real model; greedy argmax compared position by position.

    python scripts/compile_forward.py [--widths 1,4,8] [--repeats 15] [--out FILE.json]

Prints and (with --out) writes, per width: eager and compiled median ms, the compile time, and whether the
compiled forward's logits keep every argmax of the eager one (and their largest difference).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from specviz.core.measure import provenance
from specviz.core.model import crop_to, load_model


def timed(fn, cache, ids, prefix: int) -> float:
    t = time.perf_counter()
    fn(ids, cache)
    ms = (time.perf_counter() - t) * 1000
    crop_to(cache, prefix)
    return ms


def forward_of(lm, wrap):
    """The decoder's forward and the LM head over new ids on a lean cache, as LoadedModel._lean runs them, with the
    decoder and head wrapped by `wrap` (identity: eager; torch.compile: compiled)."""

    def body(x, cache, past, pos):
        hidden, _ = lm.lean_forward()(x, cache, past, pos, None, ())
        return lm.lm_head(hidden).float()

    fn = wrap(body)

    def run(ids, cache):
        past, q = cache.get_seq_length(), len(ids)
        cache.reserve(past + q)
        x = torch.tensor(ids, dtype=torch.long)
        out = fn(x, cache, past, torch.arange(past, past + q))
        cache.length = past + q
        return out, None

    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="1,4,8")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--out")
    ap.add_argument(
        "--kernels",
        default="auto",
        help="the compiled model's kernels: oneDNN's packed weights (auto)"
        " cannot be lowered by inductor (they are not graph constants); aten's F.linear can",
    )
    a = ap.parse_args()
    lm = load_model(progress=lambda _m: None)  # the forward every run uses: the eager baseline
    clm = lm if a.kernels == "auto" else load_model(progress=lambda _m: None, kernels=a.kernels)
    where = provenance(lm.describe()).to_dict()
    gen = torch.Generator().manual_seed(0)
    prefix = torch.randint(100, 40000, (128,), generator=gen).tolist()
    extra = torch.randint(100, 40000, (64,), generator=gen).tolist()
    rows = []
    with torch.no_grad():  # dynamo cannot write into inference-mode tensors (the KV cache)
        for k in (int(w) for w in a.widths.split(",")):
            cache, ccache = lm.run_cache(), clm.run_cache()
            forward_of(lm, lambda f: f)(prefix, cache)
            forward_of(clm, lambda f: f)(prefix, ccache)
            ids = extra[:k]
            eager = forward_of(lm, lambda f: f)
            # the written-out forward (decoder and LM head) compiled for this width; the cache's bookkeeping stays
            # outside (LoadedModel.forward runs under inference_mode, whose tensors dynamo cannot write into)
            compiled_fn = forward_of(clm, lambda f: torch.compile(f, dynamic=False))
            t = time.perf_counter()
            ref, _ = eager(ids, cache)
            crop_to(cache, 128)
            got, _ = compiled_fn(ids, ccache)
            crop_to(ccache, 128)
            compile_s = time.perf_counter() - t
            same = bool((ref.argmax(-1) == got.argmax(-1)).all())
            diff = float((ref - got).abs().max())
            e, c = [], []
            for _ in range(3):
                timed(eager, cache, ids, 128), timed(compiled_fn, ccache, ids, 128)
            for _ in range(a.repeats):
                e.append(timed(eager, cache, ids, 128))
                c.append(timed(compiled_fn, ccache, ids, 128))
            row = {
                "width": k,
                "eager_ms": round(statistics.median(e), 2),
                "compiled_ms": round(statistics.median(c), 2),
                "compile_s": round(compile_s, 1),
                "argmax_same": same,
                "max_abs_diff": diff,
            }
            print(row, flush=True)
            rows.append(row)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            cmd = f"python scripts/compile_forward.py --widths {a.widths} --kernels {a.kernels}"
            json.dump({"provenance": where, "command": cmd, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
