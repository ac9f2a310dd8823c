"""The lineage: a well-formed graph of works, and a figure that shows measurements only where they exist."""

from __future__ import annotations

import itertools
import re

from specviz import methods
from specviz.output.lineage import WORKS, by_key, edges
from specviz.output.viz.lineage import _name, _route, lineage_figure, measured_values, node_caption

BENCH = {"methods": {"eagle": {"mean_accepted": 1.75, "speedup": 1.26}, "pld": {"mean_accepted": 1.5, "speedup": 1.3}}}


def test_the_graph_is_well_formed():
    keys = by_key()
    assert len(keys) == len(WORKS)
    for parent, child, _why in edges():
        assert parent.key in keys and parent.year <= child.year, (parent.key, child.key)
        assert parent.place[0] < child.place[0], "an arrow runs left to right"
    assert len({w.place for w in WORKS}) == len(WORKS), "two works drawn on one spot"
    for w in WORKS:
        assert not w.runs or w.runs in methods.available(), w.runs
    roots = {w.key for w in WORKS if not w.parents}
    assert {"stern", "sps", "jacobi"} <= roots and "dflash" not in roots


def test_measured_only_where_run_and_stored():
    measured = measured_values(BENCH)
    works = by_key()
    assert node_caption(works["eagle2"], measured) == "A 1.75 · 1.26×"
    assert node_caption(works["eagle"], measured) == "no stored bench"  # the static tree was not benched
    assert node_caption(works["medusa"], measured) == "no stored bench"
    assert node_caption(works["hydra"], measured) == "no stored bench"  # run by the app, not in BENCH
    assert node_caption(works["dflash"], measured) == "no stored bench"  # run by the app since its drafter exists
    assert node_caption(works["specinfer"], measured) == ""  # hollow: the subtitle says not measured
    assert "hollow: not measured" in lineage_figure(BENCH).layout.title.text.replace("<br>", " ")
    assert measured_values(None) == {} and measured_values({"methods": {"x": {"speedup": "?"}}}) == {}


def test_the_figure_draws_every_work_and_arrow():
    fig = lineage_figure(BENCH, "on a test machine")
    texts = [d.text[0] for d in fig.data]
    assert len(texts) == len(WORKS)
    assert any("EAGLE-2" in t and "1.26×" in t for t in texts)
    arrows = [a for a in fig.layout.annotations if a.showarrow]
    assert len(arrows) == len(edges())
    assert "on a test machine" in fig.layout.title.text


def test_each_method_comes_from_the_newest_file_that_measured_it(tmp_path, monkeypatch):
    import json

    from specviz.core import paths
    from specviz.output.viz.stored import merged_spec_bench

    row = {"mean_accepted": 1.5, "speedup": 1.2}
    old = {"methods": {"ar": row, "sps": row, "eagle": {**row, "speedup": 0.9}}, "prompts": 26}
    new = {"methods": {"ar": row, "eagle": row, "hydra": row}, "prompts": 26}
    (tmp_path / "specbench-2026-01-01.json").write_text(json.dumps(old))
    (tmp_path / "specbench-lineage-2026-02-01.json").write_text(json.dumps(new))
    monkeypatch.setattr(paths, "BENCH_DIR", tmp_path)
    merged, used = merged_spec_bench()
    assert merged["methods"]["eagle"]["speedup"] == 1.2 and set(merged["methods"]) == {"eagle", "hydra", "sps"}
    assert [(p.name, names) for p, _, names in used] == [
        ("specbench-lineage-2026-02-01.json", ["eagle", "hydra"]),
        ("specbench-2026-01-01.json", ["sps"]),
    ]
    # newest by the measurement date its provenance records, whatever the file is called
    later = {"methods": {"ar": row, "eagle": {**row, "speedup": 1.4}}, "provenance": {"date": "2026-03-01T10:00:00"}}
    (tmp_path / "specbench-a-2026-03-01.json").write_text(json.dumps(later))
    merged, used = merged_spec_bench()
    assert merged["methods"]["eagle"]["speedup"] == 1.4 and used[0][0].name == "specbench-a-2026-03-01.json"


def _off_segment(
    p: tuple[float, float], a: tuple[float, float], b: tuple[float, float], col: float = 150
) -> float:  # fmt: skip
    """Distance from p to the segment a-b, in the figure's pixels (`col` per column, 71 per row)."""
    (px, py), (ax, ay), (bx, by) = [(x * col, y * 71) for x, y in (p, a, b)]
    dx, dy = bx - ax, by - ay
    t = max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)))
    return ((px - ax - t * dx) ** 2 + (py - ay - t * dy) ** 2) ** 0.5


def test_no_arrow_runs_through_another_work_or_its_caption():
    """A node's name and caption sit under it (above it on the top row): no arrow may cross that block (its own
    node's included), at a 1280 px window (about 100 px a column) or at 1600 (150)."""
    for parent, child, _why in edges():
        route = _route(*parent.place, *child.place)
        for w in WORKS:
            x, y = w.place
            below = 1 if y >= 0.5 else -1
            name = [re.sub("<[^>]+>", "", line) for line in _name(w).split("<br>")]  # its lines
            for col in (100, 150):
                half = max(len(line) for line in name) * 6.2 / 2 / col  # half the name (11 px type)
                for dx, dy in ((0, 0), (-half, 0.25 * below), (half, 0.25 * below), (0, 0.45 * below)):
                    if w.key in (parent.key, child.key) and (dx, dy) == (0, 0):
                        continue  # an arrow meets its own nodes
                    for a, b in itertools.pairwise(route):
                        gap = _off_segment((x + dx, y + dy), a, b, col)
                        assert gap > 9, (parent.key, child.key, w.key, col, dx, dy)  # 11 px type: ±7


def test_edge_labels_keep_apart_and_the_figure_leaves_room_at_its_edges():
    """No label over another or cut, estimated from the labels' type and length (tests/layout.py): as the lesson
    shows it in a 1600 and a 1280 px window, and as a slide."""
    from specviz.output.viz.theme import legible
    from tests.layout import problems
    from ui.lesson import tallest

    fig = lineage_figure(BENCH, slide=True)
    for width, height in ((1460, tallest("lineage")), (1140, tallest("lineage")), (1600, 900)):
        shown = legible(fig, height=height).update_layout(width=width, height=height)
        assert not problems(shown, width, height), (width, problems(shown, width, height))
    lo, hi = fig.layout.xaxis.range
    xs = [w.place[0] for w in WORKS]
    assert min(xs) - lo >= 0.7 and hi - max(xs) >= 0.45  # half a wrapped caption on either side


def test_arrows_meet_their_nodes_clear_of_the_captions_below_them():
    fig = lineage_figure(BENCH)
    arrows = [a for a in fig.layout.annotations if a.showarrow]
    for (parent, child, _why), a in zip(edges(), arrows):
        for y, node_y in ((a.ay, parent.place[1]), (a.y, child.place[1])):
            if node_y >= 0.5:  # its caption is below it: the arrow may not leave or arrive from below
                assert y <= node_y + 1e-9, (parent.key, child.key)
