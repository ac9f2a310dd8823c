"""Every method stays on the model's device: no tensor factory without a device, no draw whose generator
lives elsewhere than the tensor it samples from (an ast lint over the inference code)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "specviz"
FACTORIES = {
    "zeros",
    "ones",
    "full",
    "arange",
    "tensor",
    "as_tensor",
    "empty",
    "rand",
    "randn",
    "randint",
    "randperm",
    "linspace",
}
# (file, function, factory): why a device-less factory is right there
ALLOWED = {
    ("core/acceptance.py", "uniform", "rand"): "the one uniform draw comes from the run's CPU generator, as a float",
    ("core/drafting.py", "initial_guesses", "randint"): "CPU generator; the guesses become a Python list",
    ("trees/tree.py", "ancestry", "zeros"): "TreeSpec is plain data built once per shape; lm.forward moves it",
    ("trees/tree.py", "mask", "zeros"): "TreeSpec is plain data built once per shape; lm.forward moves it",
    ("trees/tree.py", "positions", "tensor"): "TreeSpec is plain data built once per shape; lm.forward moves it",
    ("trees/ngram_pool.py", "additive_mask", "tensor"): "Lookahead's mask is plain data; lm.forward moves it",
    ("trees/ngram_pool.py", "additive_mask", "full"): "Lookahead's mask is plain data; lm.forward moves it",
    ("methods/medusa_lookahead.py", "layout", "zeros"): "the tree-and-window mask is plain data; lm.forward moves it",
    ("methods/medusa_lookahead.py", "verify", "full"): "the tree-and-window mask is plain data; lm.forward moves it",
    ("heads/eagle.py", "__init__", "arange"): "a module buffer: it moves with the head's .to(device)",
    ("heads/dflash.py", "__init__", "arange"): "a module buffer: it moves with the drafter's .to(device)",
    ("heads/dflash.py", "__init__", "zeros"): "a module parameter (the mask embedding): it moves with the drafter",
    ("heads/dflash.py", "new_head", "randn"): "a fresh drafter is built on the CPU, then moved",
    ("heads/medusa.py", "frequent_tokens", "tensor"): "indexes `counts`, built on the CPU from training ids",
    ("methods/hydra.py", "tiny_resources", "randn"): "CPU noise added to CPU-built heads before .to(lm.device)",
    ("methods/hydra.py", "tiny_resources", "arange"): "the vocabulary map of CPU-built heads, moved with them",
    ("tuning/probe.py", "probe_latency", "randint"): "CPU generator; the prompt becomes a Python list",
    ("tuning/hardware.py", "probe_surface", "randint"): "CPU generator (the same ids anywhere), then .to(lm.device)",
    (
        "core/model.py",
        "to_device",
        "tensor",
    ): "a list staged on the host (pinned on a GPU), then copied",
}
# Batched decoding keeps each row's bookkeeping (sizes, liveness, positions, ancestry) on the CPU as plain data;
# BatchRun.verify and BatchEagle.run_head move all of it to the model's device in one place, per forward.
BATCHED = "per-row bookkeeping built on the CPU; BatchRun.verify / BatchEagle.run_head move it to the device"
ALLOWED |= {
    (f"methods/batched/{file}", fn, name): BATCHED
    for file, fn, names in (
        ("chain.py", "step", ("tensor", "arange", "ones")),
        ("eagle.py", "tree_block", ("zeros",)),
        ("eagle.py", "start", ("arange", "ones")),
        ("eagle.py", "catch_up", ("tensor", "arange", "ones")),
        ("eagle.py", "expand", ("zeros", "arange", "tensor")),
        ("loop.py", "prefill", ("tensor", "empty", "arange", "ones")),
    )
    for name in names
}


def files() -> list[Path]:
    """The code that runs on the model's device: methods (batched ones too), trees, heads and their drafters, the
    core's model, sampling, acceptance, drafting, the slot cache and the decode loops' rules, and the tuning code
    that runs the model (the losslessness lab, the latency probe and surface, the offline tree replay); training
    (specviz/training) runs on the CPU over stored features, never inside a decode step."""
    return [
        *ROOT.glob("methods/*.py"),
        *ROOT.glob("methods/batched/*.py"),
        ROOT / "core" / "model.py",
        ROOT / "core" / "drafting.py",
        ROOT / "core" / "acceptance.py",
        ROOT / "core" / "sampling.py",
        ROOT / "core" / "slot_cache.py",
        ROOT / "core" / "decoding.py",
        *ROOT.glob("trees/*.py"),
        *ROOT.glob("heads/*.py"),
        ROOT / "tuning" / "eagle_replay.py",
        ROOT / "tuning" / "lossless.py",
        ROOT / "tuning" / "probe.py",
        ROOT / "tuning" / "hardware.py",
    ]


def test_the_lint_reads_every_module_that_runs_on_the_device():
    names = {str(p.relative_to(ROOT)) for p in files()}
    want = {"tuning/lossless.py", "methods/eagle.py", "trees/ngram_pool.py", "core/model.py", "tuning/probe.py"}
    assert want | {"tuning/hardware.py", "methods/batched/loop.py", "methods/batched/eagle.py"} <= names


def calls(path: Path):
    """(function name, call node) for every call in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                yield fn.name, node


def torch_attr(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "torch" else ""


def problems(path: Path, root: Path = ROOT) -> list[str]:
    rel, out = str(path.relative_to(root)), []
    for fn, node in calls(path):
        name = torch_attr(node)
        kw = {k.arg for k in node.keywords}
        where = f"{rel}:{node.lineno} {fn}()"
        if name in FACTORIES and "device" not in kw and (rel, fn, name) not in ALLOWED:
            out.append(f"{where}: torch.{name} without device=")
        if name == "multinomial" or (isinstance(node.func, ast.Attribute) and node.func.attr == "multinomial"):
            src = ast.unparse(node.args[0]) if node.args else ""
            if "generator" in kw and not src.endswith(".cpu()"):  # run generators live on the CPU
                out.append(f"{where}: multinomial with a generator on a tensor not moved to the CPU ({src})")
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("index_fill_", "index_fill", "index_select"):
            index = node.args[1] if len(node.args) > 1 else None
            if (
                isinstance(index, ast.Call)
                and torch_attr(index) in FACTORIES
                and "device" not in {k.arg for k in index.keywords}
            ):
                out.append(f"{where}: {node.func.attr} with an index made off the tensor's device")
    return out


def test_no_tensor_is_made_off_the_model_device():
    found = [p for path in files() for p in problems(path)]
    assert not found, "\n".join(found)


def test_the_lint_catches_what_it_should(tmp_path):
    bad = tmp_path / "methods" / "_lint_probe.py"  # never in the source tree: other workers lint it
    bad.parent.mkdir()
    code = (
        "import torch\n"
        "def f(p, gen):\n"
        "    a = torch.zeros(3)\n"
        "    b = torch.multinomial(p, 1, generator=gen)\n"
        "    c = p.index_fill_(0, torch.tensor([1]), 1.0)\n"
        "    d = torch.zeros(3, device=p.device)\n"
        "    e = torch.multinomial(p.cpu(), 1, generator=gen)\n"
    )
    bad.write_text(code)
    found = problems(bad, root=tmp_path)
    assert len(found) == 4, found  # zeros, multinomial, index_fill_ and the index's own tensor(); not d, e


def test_allow_list_entries_still_exist():
    """An allow-list entry whose call is gone is stale: drop it."""
    seen = {(str(p.relative_to(ROOT)), fn, torch_attr(n)) for p in files() for fn, n in calls(p)}
    assert set(ALLOWED) <= seen, set(ALLOWED) - seen
