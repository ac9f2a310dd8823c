"""Hostile traces: real traces with only their sizes changed, refused by the loader in one sentence before any
figure allocates from them (issue 41's high findings), within 5 s and 300 MB; and the figure builders' own caps."""

from __future__ import annotations

import copy
import json
import math
import time
import tracemalloc

import pytest

from specviz import methods
from specviz.core.sampling import Sampling
from specviz.core.trace import Trace, TraceError, load_traces
from tests.ui.test_pages_fast import tiny_kwargs

SECONDS, BYTES = 5.0, 300 << 20


@pytest.fixture(scope="module")
def real(tiny_lm) -> dict[str, dict]:
    """One real trace per method with a tree, a layout or a grid, as JSON data to change sizes in."""
    ids = tiny_lm.encode_prompt("the cat the cat the cat")
    out = {}
    for name in ("eagle", "hybrid", "medusa", "jacobi", "lookahead"):
        trace = methods.get(name).generate(tiny_lm, ids, Sampling(max_new_tokens=6), **tiny_kwargs(name, tiny_lm))
        out[name] = json.loads(trace.to_json())
    return out


def first_detail(data: dict) -> tuple[dict, dict]:
    """A copy of the trace and the detail of its first step that has one (to edit in place)."""
    data = copy.deepcopy(data)
    return data, next(s["detail"] for s in data["steps"] if s["detail"] is not None)


def refused(data: dict) -> str:
    """The loader's one sentence for `data`, checked to come within SECONDS and BYTES of allocations."""
    raw = json.dumps(data)
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(TraceError) as err:
            load_traces(raw)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert time.perf_counter() - start < SECONDS and peak < BYTES, (time.perf_counter() - start, peak)
    message = str(err.value)
    assert message.endswith(".") and "\n" not in message and "Traceback" not in message
    return message


def test_a_verified_tree_beyond_any_config_is_refused(real):
    """A 30,000-node verified chain loaded (the schema allowed 65,536) and its n² mask took the server past 3 GB."""
    data, d = first_detail(real["eagle"])
    n = 2000  # the 30,000 took 3 GB; any size past MAX_VERIFIED (288) is refused the same way
    star = {"parents": [-1] + [0] * (n - 1), "depth": [0] + [1] * (n - 1), "score": [0.0] + [-1.0] * (n - 1)}
    d["tree"] = {**d["tree"], **star, "kept": [True] * n, "expanded": [-1] * n, "conf": [0.5] * n}
    d["tree"] |= {"tokens": [1] * n, "texts": ["a"] * n}
    d["verify_nodes"], d["verify_parents"] = list(range(n)), list(range(-1, n - 1))
    assert "verify_nodes" in refused(data)


def test_a_medusa_tree_beyond_any_config_is_refused(real):
    """Medusa's and Hydra's pages draw the same n² mask from `parents`, which nothing bounded either."""
    data, d = first_detail(real["medusa"])
    n = 5000
    d["parents"], d["nodes"] = [-1] + [0] * (n - 1), [d["nodes"][-1]] * n
    assert "parents" in refused(data)


def test_a_lookahead_layout_beyond_its_ranges_is_refused(real):
    """A 12 KB trace with layout width 100,000 built a size x size mask (3 GB in 11 s); LookaheadDetail had no
    problem() at all."""
    data, d = first_detail(real["lookahead"])
    d["layout"] = {**d["layout"], "width": 100_000}
    assert "layout.width" in refused(data)
    data, d = first_detail(real["lookahead"])
    d["layout"] = {**d["layout"], "extra": 1}  # Layout(**layout) was a TypeError
    assert "layout" in refused(data)


def test_a_tree_deeper_than_any_config_is_refused(real):
    """A drafted root at depth 10^15 loaded, and the EAGLE page's stage slider ranged over every depth."""
    data, d = first_detail(real["eagle"])
    d["tree"]["depth"] = [10**15, *d["tree"]["depth"][1:]]
    assert "depth" in refused(data)
    data, d = first_detail(real["eagle"])
    d["tree"]["depth"] = [0] + [9] * (len(d["tree"]["depth"]) - 1)  # in range, but not its parents' + 1
    assert "depths" in refused(data)


def test_a_jacobi_offset_past_the_output_is_refused(real):
    """An offset of 10^9 loaded, and the grid built range(lo, offset) before any index check."""
    data, d = first_detail(real["jacobi"])
    d["offset"] = 10**9
    assert "offset" in refused(data)


@pytest.mark.parametrize(
    "method, edit, reason",
    [
        (
            "eagle",
            lambda d: d.update(path=[0, min(set(range(len(d["tree"]["parents"]))) - set(d["verify_nodes"]))]),
            "path",
        ),
        ("eagle", lambda d: d["tree"].update({k: [] for k in d["tree"] if k != "kind"}), "empty"),
        ("eagle", lambda d: d["tree"]["score"].__setitem__(0, 800.0), "score"),
        ("lookahead", lambda d: d.update(candidates=[[1]], candidate_texts=[["a"]], matched=[]), "differ"),
        ("lookahead", lambda d: d.update(harvest_status=["stolen"] * len(d["harvest_status"])), "harvest_status"),
        ("medusa", lambda d: d["nodes"][1].update(rank=None), "rank"),
        ("hybrid", lambda d: d.update(sources=["alien"] * len(d["sources"])), "sources"),
    ],
)
def test_details_that_loaded_and_then_crashed_a_page_are_refused(real, method, edit, reason):
    """Each loaded before and crashed a page or `export --traces`: a path node missing from verify_nodes, an empty
    tree, a score ≥ 710 (math.exp overflowed), matched shorter than candidates, an unknown harvest status, a drafted
    Medusa node without a rank (rank + 1 was a TypeError), an unknown hybrid source (a KeyError in its colours)."""
    data, d = first_detail(real[method])
    edit(d)
    assert reason in refused(data)


def test_step_indices_are_positions(real):
    """A step whose index is not its position loaded, and the pages look steps up by index."""
    data = copy.deepcopy(real["jacobi"])
    data["steps"][0]["index"] = 5
    assert "index" in refused(data)


@pytest.mark.parametrize("value", ["hot", [], None, math.nan, math.inf, {"temperature": -1}, {"top_p": 0}])
def test_the_sampling_settings_are_validated(real, value):
    """config.sampling was never checked: "hot", [], None or NaN crashed Compare, every method page and the
    Timeline in replay (the schema checked top-level keys no trace has)."""
    data = copy.deepcopy(real["jacobi"])
    data["config"]["sampling"] = value if isinstance(value, dict) else {"temperature": value}
    with pytest.raises(TraceError, match="sampling"):
        Trace.from_dict(data)


def test_the_figure_builders_cap_their_inputs():
    """A Trace built in Python (not loaded) still cannot make a mask builder allocate n² cells."""
    from specviz.output.viz.lookahead import mask_figure as lookahead_mask
    from specviz.output.viz.tree import MAX_MASK, mask_figure

    start = time.perf_counter()
    n = 100_000
    fig = mask_figure(list(range(-1, n - 1)), ["a"] * n, [0], "mask")
    assert "too many" in fig.layout.title.text and not fig.data
    fig = lookahead_mask({"levels": 7, "width": 100_000, "cands": 32, "depth": 7})
    assert "too many" in fig.layout.title.text and not fig.data
    assert time.perf_counter() - start < 1 and MAX_MASK >= 129


def test_export_refuses_a_hostile_trace_in_one_line(real, tmp_path, capsys):
    """`python -m specviz export --traces` on the 30,000-node tree went past 3 GB in about a minute."""
    from specviz.__main__ import main

    data, d = first_detail(real["eagle"])
    d["verify_nodes"] = list(range(30_000))
    (tmp_path / "t.json").write_text(json.dumps(data))
    assert main(["export", "--traces", str(tmp_path / "t.json"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("specviz: error:") and "verify_nodes" in err


def largest(real: dict[str, dict]) -> list[dict]:
    """Real traces grown to the largest sizes a Config allows: what the bounds let through must still draw."""
    eagle, d = first_detail(real["eagle"])
    n = 288  # MAX_VERIFIED: a star, every node verified
    d["tree"] = {"kind": d["tree"]["kind"], "tokens": [1] * n, "texts": ["a"] * n, "parents": [-1] + [0] * (n - 1)}
    d["tree"] |= {"depth": [0] + [1] * (n - 1), "score": [0.0] * n, "conf": [0.5] * n, "expanded": [-1] * n}
    d["tree"] |= {"kept": [True] * n}
    d["verify_nodes"], d["verify_parents"], d["decisions"] = list(range(n)), [-1] + [0] * (n - 1), None
    look, d = first_detail(real["lookahead"])
    d["layout"] = {"levels": 7, "width": 32, "cands": 32, "depth": 7}
    return [eagle, look, longest(real["jacobi"])]


def longest(data: dict, n: int = 8192) -> dict:
    """A trace of n steps (MAX_TRACE_IDS, one token each), its own steps repeated in order, offsets kept right."""
    data = copy.deepcopy(data)
    steps, out = [], []
    for i in range(n):
        step = copy.deepcopy(data["steps"][i % len(data["steps"])])
        step["index"], step["committed"], step["texts"] = i, step["committed"][:1], step["texts"][:1]
        if step["detail"] is not None:
            step["detail"]["offset"] = len(out)
        steps.append(step)
        out += step["committed"]
    return data | {"steps": steps, "output_ids": out}


@pytest.mark.soak
def test_the_largest_traces_the_bounds_allow_draw_quickly(real):
    """The bounds sit at each Config's maximum; a trace at them draws every figure within 20 s (a mask past 129 nodes
    is one sentence), not the minutes and gigabytes of the unbounded sizes (a bound set too high fails here)."""
    from tests.project.test_fuzz import draw_every_figure

    for data in largest(real):
        start = time.perf_counter()
        assert draw_every_figure(Trace.from_dict(data)) > 2
        assert time.perf_counter() - start < 20


@pytest.mark.soak
def test_export_draws_or_refuses_every_hostile_class(real, tmp_path):
    """`python -m specviz export --traces` on each class of hostile trace (and the largest legal ones): drawn or
    refused, no traceback, under 120 s and 3 GB."""
    import resource
    import subprocess
    import sys

    hostile = [*largest(real)]
    for name in ("eagle", "lookahead", "jacobi", "medusa"):
        data, d = first_detail(real[name])
        key = {"eagle": "verify_nodes", "lookahead": "harvest_status", "jacobi": "row", "medusa": "parents"}[name]
        d[key] = [d[key][0]] * 30_000
        hostile.append(data)
    for i, data in enumerate(hostile):
        (tmp_path / f"{i}.json").write_text(json.dumps(data))
        cmd = [sys.executable, "-m", "specviz", "export", "--traces", str(tmp_path / f"{i}.json")]
        cmd += ["--out", str(tmp_path / f"o{i}"), "--formats", "svg"]  # (ulimit -v stops chromium from starting)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert done.returncode in (0, 2) and "Traceback" not in done.stderr, done.stderr[-2000:]
        assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 3 << 20  # KiB: the largest child's peak


def test_export_refuses_a_trace_of_an_unknown_method(real, tmp_path, capsys):
    """A trace's method name becomes export's file names: '../../x' wrote images outside --out."""
    from specviz.__main__ import main

    data = copy.deepcopy(real["jacobi"])
    data["method"] = "../../escaped"
    for step in data["steps"]:
        step["detail"] = None  # a method without details loads: only its name is wrong
    (tmp_path / "t.json").write_text(json.dumps(data))
    assert main(["export", "--traces", str(tmp_path / "t.json"), "--out", str(tmp_path / "a" / "b")]) == 2
    assert "not a method specviz runs" in capsys.readouterr().err
    assert not list(tmp_path.glob("escaped*"))
