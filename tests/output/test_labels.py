"""Point labels keep apart: no label covers another or a marker, and each stays inside its plot."""

from __future__ import annotations

from specviz.output.viz import labels
from specviz.output.viz.compare import a_r_figure
from specviz.tuning.compare import Row

# Compare with every method on: the hybrid and prompt lookup nearly coincide, five methods crowd around 1×
CROWD = {
    "ar": (1.0, 1.0), "sps": (0.8, 0.69), "pld": (2.1, 1.92), "medusa": (1.1, 0.98), "hydra": (1.3, 1.22),
    "eagle": (1.1, 1.03), "jacobi": (1.0, 0.97), "lookahead": (0.95, 0.98), "hybrid": (2.188, 1.93),
    "eagle3": (1.35, 1.3),
}  # fmt: skip


def test_crowded_labels_overlap_nothing_and_stay_inside():
    names, points = list(CROWD), list(CROWD.values())
    spots = labels.place(points, names, (0, 2.5), (0, 2.5), diagonal=True)
    w, h = labels.PLOT_PX
    at = [(x / 2.5 * w, y / 2.5 * h) for x, y in points]
    boxes = [labels.box(p, n, s) for p, n, s in zip(at, names, spots, strict=True)]
    r = labels.MARKER_PX
    for i, b in enumerate(boxes):
        assert b[0] >= 0 and b[1] >= 0 and b[2] <= w and b[3] <= h, names[i]
        assert all(labels._overlap(b, c) == 0 for c in boxes[:i] + boxes[i + 1 :]), names[i]
        assert all(labels._overlap(b, (x - r, y - r, x + r, y + r)) == 0 for x, y in at), names[i]


def test_a_r_labels_every_method_once():
    rows = [Row(n, 64, 30, 1.0, s, a, 1.0, 10.0, 600.0, True) for n, (a, s) in CROWD.items()]
    fig = a_r_figure(rows)
    texts = [a["text"] for a in fig.to_dict()["layout"]["annotations"] if a.get("yref") == "y2"]
    assert sorted(texts) == sorted(CROWD)
