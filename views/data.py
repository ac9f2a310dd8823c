"""What data buys: the drafts' learning curves against the positions they trained on, the target's own text
beside ShareGPT's, and the corpus that grows across machines."""

from __future__ import annotations

from statistics import median

import streamlit as st

from specviz.methods import eagle
from specviz.output.pages.data import PAGE
from specviz.tuning.learning import DATA_NAMES, KIND_NAMES, corpus_summary, curves, eagle_checkpoints, experiment_rows
from ui.common import page_header, run_method, settings
from ui.declared import draw
from ui.resources import measured_where, replaying


def where(prov) -> str:
    return measured_where({"provenance": prov.to_dict()}) if prov is not None else "where is not recorded"


page_header(
    "What data buys",
    "A draft head learns to guess the target's next token. How much does it gain from more data, and does it "
    "matter whose text that data is?",
)
found, rows = curves(), experiment_rows()
if not found and not rows:
    st.info("No learning curve under models/ and no recorded experiment under docs/experiments/ in this checkout.")
    st.stop()
kinds = list(dict.fromkeys([*(c.kind for c in found), *(r.kind for r in rows)]))
shown = (
    st.pills(
        "Heads",
        kinds,
        selection_mode="multi",
        default=kinds,
        format_func=lambda k: KIND_NAMES.get(k, k),
        key="data.kinds",
        help="Fewer kinds, fewer lines: pick one for a slide.",
    )
    or kinds
)
found, rows = [c for c in found if c.kind in shown], [r for r in rows if r.kind in shown]
depth = (
    st.segmented_control(
        "Drafted token",
        [1, 2, 3, 4],
        default=1,
        format_func=lambda d: f"depth {d}",
        key="data.depth",
        help="A head's k-th drafted token (Medusa's head k, EAGLE's k-th step); the draft model has depth 1.",
    )
    or 1
)
draw(
    PAGE,
    "learning_curves",
    {"curves": found, "rows": rows, "depth": depth},
    measured="; ".join(where(c.where) for c in found),
)
st.caption(
    "Held-out top-1: how often the head's first choice is the token the fp32 target chose, on 64 opening turns of "
    "ShareGPT conversations no head or draft trained on (7,293 positions). Depth k drafts from the head's own "
    "earlier guesses, as at decode time."
)
fresh = {r.data: r for r in rows if r.fresh and r.kind == "eagle"}
if "self-distilled" in fresh and "sharegpt" in fresh:
    own, theirs = fresh["self-distilled"], fresh["sharegpt"]
    st.markdown(
        f"**Whose text matters.** An EAGLE-2 head trained from scratch on ShareGPT's own responses reached "
        f"{theirs.top1[0]:.2f} after {theirs.positions:,} positions; trained on the target's own greedy text it "
        f"reached {own.top1[0]:.2f} after {own.positions:,}. Fine-tuning the good head on ShareGPT's text "
        f"lowered it: the head learns the target on contexts it never meets when it decodes."
    )


def longest_fresh_eagle(data: str):
    """The longest EAGLE-2 curve trained from scratch on one kind of data (None when there is none)."""
    got = [c for c in found if c.kind == "eagle" and c.data == (data,) and not c.start]
    return max(got, key=lambda c: c.points[-1][0], default=None)


g, s_, whole = (longest_fresh_eagle(d) for d in ("corpus-greedy", "corpus-sampled", "corpus"))
if g is not None and s_ is not None:
    gap = g.top1(1)[-1][1] - s_.top1(1)[-1][1]
    verdict = (
        "how the target decoded its answers made no difference to a head measured on its greedy text"
        if abs(gap) < 0.02
        else f"its {'greedy' if gap > 0 else 'sampled'} answers taught the head more"
    )
    st.markdown(
        f"**Greedy or sampled?** From the same corpus, an EAGLE-2 head trained on the target's greedy answers "
        f"reached {g.top1(1)[-1][1]:.2f} after {g.points[-1][0]:,} positions, one trained on its sampled answers "
        f"{s_.top1(1)[-1][1]:.2f} after {s_.points[-1][0]:,}: {verdict}."
        + (
            f" Yet on the whole corpus a head reached {whole.top1(1)[-1][1]:.2f} after "
            f"{whole.points[-1][0]:,} positions, below the {fresh['self-distilled'].top1[0]:.2f} of the "
            "one trained on the target's greedy continuations of opening turns, the held-out set's kind of text."
            if whole is not None and "self-distilled" in fresh
            else ""
        )
    )
opening = longest_fresh_eagle("corpus-opening")
if opening is not None:
    n, top = opening.points[-1][0], opening.top1(1)[-1][1]
    near = {  # the greedy- and sampled-answer runs' depth-1 top-1 at about as many positions (within a tenth)
        name: min(c.top1(1), key=lambda p: abs(p[0] - n))
        for name, c in (("greedy answers", g), ("sampled answers", s_))
        if c is not None
    }
    near = {name: p for name, p in near.items() if abs(p[0] - n) <= n / 10}
    if near:
        lead = top - max(p[1] for p in near.values())
        st.markdown(
            f"**Which positions?** Trained only on the openings of the target's answers (each conversation's first "
            f"answer, its first 128 tokens: the held-out set's kind of text), an EAGLE-2 head reached {top:.2f} "
            f"after {n:,} positions, against "
            + " and ".join(f"{p[1]:.2f} on all its {name}" for name, p in near.items())
            + " after about as many: "
            + (
                f"where a head learns mattered more than how its text was decoded (+{lead:.2f})."
                if lead >= 0.02
                else "the openings taught it no more than the rest of the corpus."
            )
        )
heads = eagle_checkpoints(found, rows)
if heads and not replaying():
    st.subheader("What it buys on this prompt")
    runs = [run_method("eagle", eagle.Config(head=h.folder), settings()) for h in heads]
    if all(runs):
        draw(PAGE, "a_by_head", {"heads": heads, "runs": runs})
        st.caption(
            "EAGLE-2 with its default tree on the sidebar's prompt and settings, once per shipped head. At T = 0 the "
            "output is the same whichever head drafts; what changes is how many drafted tokens the target keeps."
        )
st.subheader("The curves")
st.table(
    [
        {
            "draft": KIND_NAMES.get(c.kind, c.kind)
            + (f", fine-tuned from {c.start}" if c.start else "")
            + (f" ({c.variant})" if c.variant else ""),
            "trained on": " + ".join(DATA_NAMES.get(d, d) for d in c.data),
            "positions": f"{c.points[-1][0]:,}",
            "held-out top-1 (depth 1)": f"{c.top1(1)[0][1]:.3f} → {c.top1(1)[-1][1]:.3f}",
            "folder": c.folder,
            "measured": where(c.where),
            "command": c.command,
        }
        for c in found
    ],
    hide_index=True,
)
if rows:
    st.subheader("Recorded runs")
    st.table(
        [
            {
                "head": KIND_NAMES.get(r.kind, r.kind),
                "trained on": DATA_NAMES.get(r.data, r.data),
                "start": "fresh" if r.fresh else "a trained head",
                "positions": f"{r.positions:,}",
                "top-1 by depth": " / ".join(f"{x:.2f}" for x in r.top1),
                "run": r.label,
            }
            for r in rows
        ],
        hide_index=True,
    )
    st.caption("; ".join(sorted({f"{r.source}: {where(r.where)}" for r in rows})))
corpus = corpus_summary()
if corpus is not None:
    st.subheader("The corpus")
    a, b, c = st.columns(3)
    a.metric("Answer tokens", f"{corpus.answer_tokens:,}", help="The target's own answers, kept as token ids.")
    b.metric("Conversations", f"{corpus.conversations:,}", help=f"{corpus.shards} shards in data/corpus/")
    c.metric(  # a median of every shard, not the fastest one beside the newest shard's provenance
        "Median rate",
        f"{median(corpus.rates):.0f} tokens/s",
        help=f"The generator's answer tokens per second, the median of its {len(corpus.rates)} shards (fastest "
        f"{max(corpus.rates):.0f}, slowest {min(corpus.rates):.0f}; shards share a loop from 20, each made where "
        "data/corpus/manifest.json records).",
    )
    st.caption(
        f"Made with `python -m specviz corpus answer --shards N-M` in {', '.join(corpus.dtypes)}; the newest "
        f"shard {where(corpus.last)}. Features are recomputed from the token ids at training time."
    )
