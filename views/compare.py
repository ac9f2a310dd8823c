"""Compare methods: live speedups with toggles, prompt sets, output length, batch size and hardware."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import streamlit as st

from specviz import methods
from specviz.core.measure import method_shape, provenance
from specviz.core.paths import BENCH_DIR, PROMPT_KINDS_BENCH, PROMPT_PRESETS, REPO
from specviz.core.prompts import MAX_SET, PromptError, parse_prompt_lines, prepare, prompt_kinds, select
from specviz.output.pages.compare import ON, PAGE
from specviz.output.viz import scaling
from specviz.output.viz.categories import winners
from specviz.output.viz.stored import category_bench, category_labels, kind_of, scaling_results
from specviz.tuning import bench, compare, fit, hardware
from specviz.tuning.probe import cached_curve
from ui.common import config_controls, download_traces, page_header, settings
from ui.declared import draw, widget
from ui.resources import get_model, measured_where, repeats_control, replayed, replaying, run_paired

SPEC_BENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "spec_bench_question.jsonl"


def method_toggles() -> dict[str, object]:
    """A toggle and a settings expander per method; returns the chosen configs."""
    names = [n for n in methods.available() if n != "ar"]
    if replaying():
        names = [n for n in names if replayed(n) is not None]
    per_row = 5  # ten labels in one row cut "EAGLE-2", "EAGLE-3" and the hybrid to the same "EAG…"
    cols = [c for start in range(0, len(names), per_row) for c in st.columns(per_row)][: len(names)]
    chosen = {}
    on = [n for n in names if n in ON] or names[:1]  # replaying other methods: the first of them
    for col, name in zip(cols, names):
        mod = methods.get(name)
        if widget(col, PAGE, f"compare.on.{name}", mod.CARD.label, value=name in on, help=mod.CARD.summary):
            with col.expander("settings"):
                chosen[name] = config_controls(name)
    return {n: c for n, c in chosen.items() if c is not None}


def live_section(configs: dict[str, object]) -> dict:
    s = settings()
    repeats = repeats_control("compare")
    runs = run_paired(configs, s, repeats) if configs else {}
    traces = {n: ts[0] for n, ts in runs.items()}
    if "ar" not in traces or len(traces) < 2:
        st.info("Toggle at least one method above.")
        return traces
    rows = compare.summarize(runs)
    st.caption(
        "Speedup = plain decoding's generation time (prefill + steps) over the method's; every method and "
        "plain decoding ran in turn after a warm-up, "
        + ("once: one run each." if repeats == 1 else f"{repeats} times each: the median ratio and its range.")
    )
    draw(PAGE, "speedup", runs)  # the median of the repeats, with their range
    draw(PAGE, "a_and_r", runs)
    left, right = st.columns(2)
    with left:
        draw(PAGE, "accepted_histogram", traces)
    with right:
        draw(PAGE, "acceptance_rate", traces)
    draw(PAGE, "throughput", runs)
    st.dataframe(
        [
            {
                "method": r.method,
                "speedup": r.label,
                "A": round(r.mean_accepted, 3),
                "r": round(r.step_cost, 3),
                "A/r": round(r.predicted, 3),
                "tok/s": round(r.tokens_per_s, 1),
                "TTFT ms": round(r.ttft_ms),
                "same tokens as ar": r.same_tokens,
            }
            for r in rows
        ],
        hide_index=True,
    )
    download_traces(list(traces.values()), "compare_runs")
    return traces


def prompt_set_section(configs: dict[str, object]) -> None:
    up = st.file_uploader(
        "Prompt set (JSONL: {'prompt': …} or {'turns': […]} per line)", type=["jsonl", "json"], key="compare.set_file"
    )
    c1, c2 = st.columns(2)
    per_cat = c1.number_input("Prompts per category", 1, 40, 1, key="compare.per_category")
    tokens = c2.number_input("Max new tokens", 8, 512, 64, step=8, key="compare.set_tokens")
    source = (
        up.getvalue().decode("utf-8", "replace") if up else (SPEC_BENCH.read_text() if SPEC_BENCH.is_file() else "")
    )
    st.caption(f"Using {'the uploaded file' if up else SPEC_BENCH.name if source else 'no file'}.")
    if st.button("Run the set", key="compare.run_set") and (lm := get_model(note=True)) is not None:
        s = settings()
        try:
            items = select(parse_prompt_lines(source, MAX_SET if up else None), MAX_SET, int(per_cat))
            bar = st.progress(0.0, "running…")
            sampling = replace(s.sampling, max_new_tokens=int(tokens))
            result = bench.run_bench(
                lm,
                list(configs),
                items,
                sampling,
                1,
                configs,
                lambda done, total, name: bar.progress(done / total, f"{done}/{total} ({name})"),
            )
            st.session_state["compare.set_result"] = result.to_dict()
        except PromptError as exc:
            st.warning(str(exc))
    res = st.session_state.get("compare.set_result")
    if res:
        hot = float(res.get("temperature", 0.0)) > 0  # token identity is a check at T = 0 only
        st.dataframe(
            [{"method": m, **v, **({"identical": "n/a at T > 0"} if hot else {})} for m, v in res["methods"].items()],
            hide_index=True,
        )
        draw(PAGE, "speedup_by_category", {"bench": res, "where": measured_where(res)})  # its load flagged


def kinds_section() -> None:
    """Where each method wins: speedup by kind of prompt, every method, from a stored (measured) bench result."""
    found = category_bench()
    if found is None:
        st.info(f"No bench result with categories is stored in {BENCH_DIR.relative_to(REPO)}.")
        return
    path, data = found
    try:
        kinds = prompt_kinds()
        labels = category_labels(data, {k: v.label for k, v in kinds.items()})
        where = measured_where(data)
        draw(PAGE, "where_methods_win", {"bench": data, "where": where, "labels": labels}, measured=where)
    except (ValueError, KeyError, TypeError, PromptError) as exc:
        st.warning(f"{path.name} could not be read ({exc}).")
        return
    best = winners(data)
    rows = []
    for cat, label in labels.items():
        kind = kinds.get(kind_of(cat, list(kinds)))
        why = kind.hint if kind else ""
        speed = f"{best[cat][1]:.2f}×"
        rows.append({"kind": label, "fastest": best[cat][0], "speedup": speed, "tends to win, and why": why})
    st.dataframe(rows, hide_index=True)
    source = "the sidebar's prompt presets" if path == PROMPT_KINDS_BENCH else "Spec-Bench's questions"
    st.caption(
        f"Measured on {source}, every method at the defaults of its day (constants from a 2-core CPU's sweeps, since "
        "replaced by each device's fit), stored in "
        f"{path.relative_to(REPO)}. {data.get('note', '')} Re-measure with `{data.get('command', '')}`; the presets "
        f"by kind: `python -m specviz bench --prompts {PROMPT_PRESETS.relative_to(REPO)} --json "
        f"{PROMPT_KINDS_BENCH.relative_to(REPO)}`."
    )


def length_section(configs: dict[str, object]) -> None:
    st.caption("Runs every toggled method at 128, 256 and 512 new tokens on the sidebar prompt (minutes on a CPU).")
    if st.button("Measure speedup against output length", key="compare.run_lengths") and (lm := get_model(note=True)):
        s = settings()
        try:
            ids = prepare(lm, s.prompt)
        except PromptError as exc:
            st.warning(str(exc))
            return
        bar = st.progress(0.0)
        steered = fit.prepare(lm, configs)  # prompt lookup steers by this device's latency curve, as everywhere
        st.session_state["compare.lengths"] = compare.length_sweep(lm, ids, steered, s.sampling, progress=bar.progress)
    if pts := st.session_state.get("compare.lengths"):
        draw(PAGE, "speedup_vs_length", {"points": pts})


def shapes(traces: dict) -> dict[str, tuple[float, float, float]]:
    return {n: method_shape(t) for n, t in traces.items() if n != "ar"}


def scaling_section() -> None:
    """Measured batch and context curves and the region where speculation pays, from the stored batched benches."""
    found = scaling_results()
    if not found:
        st.info(
            f"No batched bench result is stored in {BENCH_DIR.relative_to(REPO)} "
            "(`python -m specviz bench --batch 1,4,16 --methods ar,pld,eagle …`)."
        )
        return
    points = scaling.merge(d for _, d in found)
    where = "; ".join(f"{path.name} {measured_where(data)}" for path, data in found)
    try:
        for name in ("speedup_vs_batch", "speedup_vs_context", "speculation_region"):
            draw(PAGE, name, {"points": points}, measured=where)
        stops = scaling.where_it_stops(points, "batch", {"context": None})
    except (KeyError, TypeError, ValueError) as exc:
        st.warning(f"A stored batched bench could not be read ({exc}).")
        return
    said = [f"{m} from batch {b}" if b else f"{m} at no batch measured" for m, b in stops.items()]
    st.caption(
        "Each point: every method decoding the same B prompts together, interleaved with batched plain decoding "
        "at the same B, the median over repeats and its range (error bars); A and r as defined on the Home page. "
        f"Speculation stops paying (median below 1×): {'; '.join(said) or 'not measured'}."
    )
    for path, data in found:
        st.caption(f"{path.name}: {measured_where(data)}. `{data.get('command', '')}`")


def batch_section(traces: dict) -> None:
    scaling_section()
    with st.expander("MODEL, not a measurement: the speedup the latency surface predicts per batch size"):
        st.caption(
            "Measured: forward latency for batch 1–16 × 1–64 new tokens on the loaded model (where and when: "
            "under the figure). MODEL: the speedup that each method's measured A and forward width would give at "
            "each batch size."
        )
        if not st.button("Measure the latency surface (once, about a minute)", key="compare.surface") and (
            not st.session_state.get("compare.surface_on")
        ):
            return
        st.session_state["compare.surface_on"] = True
        lm = get_model(note=True)
        if lm is None:
            return
        with st.spinner("Measuring…"):
            surface = hardware.cached_surface(lm)
        modeled = {n: hardware.modeled_batch_speedup(surface, a, w, d) for n, (a, w, d) in shapes(traces).items()}
        where = surface.measured(provenance(lm.describe()))
        draw(PAGE, "batch_surface", {"surface": surface, "modeled": modeled}, measured=where)
        st.caption(f"The latency surface was {where}.")


def whatif_section(traces: dict) -> None:
    if len(traces) < 2:
        return
    big = st.radio(
        "Model size for the what-if", ["this model (135M)", "7B (Vicuna-7B class)"], horizontal=True, key="compare.size"
    ).startswith("7B")
    context = st.select_slider("Context (tokens in the KV cache)", [128, 512, 2048, 8192], 512, key="compare.context")
    lm = None if replaying() else get_model()
    here, model, nbytes = None, hardware.SMALL, 4.0
    if lm is not None:
        curve = cached_curve(lm)
        model, nbytes = hardware.model_shape(lm), hardware.bytes_per_value(lm)
        here = hardware.fit_device(curve, model, nbytes)
    target = hardware.BIG if big else model
    speedups = hardware.whatif(shapes(traces), here, target, context)
    draw(PAGE, "hardware_whatif", {"speedups": speedups})
    st.caption(hardware.whatif_caption(here, target, context))
    if lm is not None and lm.device.type == "cuda":
        st.caption("A GPU is present: the live runs above are measured on it, not modeled.")


page_header(
    "Compare methods",
    "Which method wins here, by how much, and why: A (tokens per pass) against r "
    "(cost per pass), on the computer running this app and, as a model, on others.",
)
configs = method_toggles()
TABS = ["Live on the prompt", "Where each method wins", "Prompt set", "Output length", "Batch and context", "What-if"]
tab_live, tab_kinds, tab_set, tab_len, tab_batch, tab_hw = st.tabs(TABS)
with tab_live:
    live = live_section(configs)
with tab_kinds:
    kinds_section()
with tab_set:
    prompt_set_section(configs)
with tab_len:
    length_section(configs)
with tab_batch:
    batch_section(live)
with tab_hw:
    whatif_section(live)
