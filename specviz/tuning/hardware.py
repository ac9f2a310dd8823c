"""Why the gain depends on the machine: a measured batch × tokens latency surface, and a roofline model."""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from specviz.core.kv_cache import growing_cache
from specviz.core.measure import Provenance, provenance
from specviz.core.model import LoadedModel, crop_to
from specviz.core.paths import cache_root
from specviz.tuning.probe import LatencyCurve


@dataclass(frozen=True)
class Surface:
    """Median forward latency (ms) for a batch of b sequences each adding k new tokens."""

    device: str
    batches: list[int]
    ks: list[int]
    ms: list[list[float]]  # [batch index][k index]
    prefix_len: int
    provenance: dict = field(default_factory=dict)  # measure.Provenance as a dict ({} in cache files from before)

    def measured(self, here: Provenance | None = None) -> str:
        """Where and when, for a caption ('… the computer running specviz …' only when it was)."""
        if not self.provenance:
            return "measured before surfaces recorded where and when"
        return Provenance.from_dict(self.provenance).describe(here)

    def at(self, b: int, k: float) -> float:
        """Latency at batch b (measured row), interpolated in k."""
        return float(np.interp(k, self.ks, self.ms[self.batches.index(b)]))


@torch.inference_mode()
def probe_surface(
    lm: LoadedModel,
    batches: tuple[int, ...] = (1, 2, 4, 8, 16),
    ks: tuple[int, ...] = (1, 4, 16, 64),
    prefix_len: int = 64,
    repeats: int = 3,
) -> Surface:
    """Time forwards of b × k new tokens over a b × prefix cache; k interleaved within each repeat."""
    gen = torch.Generator().manual_seed(0)
    vocab = lm.hf.config.vocab_size
    where = provenance(lm.describe()).to_dict()  # before the runs: the load average is other work's
    rows = []
    with lm.lock:  # the model is shared (the app's sessions): nothing else runs on it while this measures
        for b in batches:
            prefix = torch.randint(100, vocab, (b, prefix_len), generator=gen).to(lm.device)
            extra = torch.randint(100, vocab, (b, max(ks)), generator=gen).to(lm.device)
            cache = growing_cache(lm.hf.config)  # batched rows: transformers' own forward
            lm.hf(input_ids=prefix, cache=cache, use_cache=True, logits_to_keep=1)
            samples: dict[int, list[float]] = {k: [] for k in ks}
            for _ in range(repeats):
                for k in ks:
                    pos = torch.arange(prefix_len, prefix_len + k, device=lm.device).expand(b, k)
                    t = time.perf_counter()
                    lm.hf(input_ids=extra[:, :k], position_ids=pos, cache=cache, use_cache=True)
                    if lm.device.type == "cuda":
                        torch.cuda.synchronize()
                    samples[k].append((time.perf_counter() - t) * 1000)
                    crop_to(cache, prefix_len)
            rows.append([round(statistics.median(samples[k]), 2) for k in ks])
    return Surface(lm.describe(), list(batches), list(ks), rows, prefix_len, where)


def cached_surface(lm: LoadedModel, refresh: bool = False) -> Surface:
    """The stored surface for this device, measured first if absent or stored without provenance."""
    path = cache_root() / "probe" / (lm.describe().replace(" · ", "_").replace("/", "_") + ".surface.json")
    if path.is_file() and not refresh:
        try:
            stored = Surface(**json.loads(path.read_text()))
            if stored.provenance:
                return stored
        except (ValueError, TypeError):
            pass
    surface = probe_surface(lm)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(surface)))
    return surface


def modeled_batch_speedup(surface: Surface, mean_accepted: float, width: float, draft_share: float) -> list[float]:
    """MODEL: speedup at each batch = A · L(b, 1) / (L(b, w) · (1 + draft share)), from the measured surface."""
    return [mean_accepted * surface.at(b, 1) / (surface.at(b, width) * (1 + draft_share)) for b in surface.batches]


@dataclass(frozen=True)
class ModelShape:
    """What the roofline needs of a model: its weights, its depth and its KV cache per token."""

    name: str
    params: float
    layers: int
    kv_values_per_token: int  # 2 (K and V) · layers · KV heads · head dim

    def weight_bytes(self, bytes_per_value: float) -> float:
        return self.params * bytes_per_value

    def kv_bytes(self, bytes_per_value: float, context: int, batch: int = 1) -> float:
        """KV-cache bytes one forward reads: every layer's keys and values for `context` tokens per row."""
        return self.kv_values_per_token * bytes_per_value * context * batch


# SmolLM2-135M: 30 layers, 3 KV heads of 64; used when no model is loaded (replay)
SMALL = ModelShape("SmolLM2-135M", 134.5e6, 30, 2 * 30 * 3 * 64)
# a Vicuna-7B-class model (Llama-2-7B shape: 32 layers, 32 KV heads of 128), the size the papers report on
BIG = ModelShape("7B (Vicuna-7B class)", 6.7e9, 32, 2 * 32 * 32 * 128)


def model_shape(lm: LoadedModel) -> ModelShape:
    """The loaded model's shape, read from its config (a Llama's weights counted from it: the CPU's packed
    linears keep their weights in buffers, which `parameters()` leaves out)."""
    c = lm.hf.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    kv_heads = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
    h, q = c.hidden_size, c.num_attention_heads * head_dim
    layer = h * q + 2 * h * kv_heads * head_dim + q * h + 3 * h * c.intermediate_size + 2 * h
    embed = c.vocab_size * h * (1 if getattr(c, "tie_word_embeddings", False) else 2)
    params = embed + c.num_hidden_layers * layer + h
    return ModelShape(lm.name, float(params), c.num_hidden_layers, 2 * c.num_hidden_layers * kv_heads * head_dim)


@dataclass(frozen=True)
class Device:
    """A roofline with a floor: weights and KV stream at `bandwidth`, arithmetic at `tflops`, plus a fixed cost
    per decoder layer per forward (kernel launches and Python), which no bandwidth removes."""

    name: str
    bandwidth_gbs: float  # memory bandwidth, GB/s
    tflops: float  # dense matmul throughput at the device's dtype, TFLOP/s
    bytes_per_value: float = 2.0  # the dtype it runs the model in (bf16 on the GPUs)
    layer_floor_ms: float = 0.0  # fixed cost per decoder layer per forward
    floor_source: str = ""


# The GPU floors are derived, not measured here: PyTorch's "GPT, Fast" blog (Nov 2023) ran Llama-2-7B on an A100
# at 25.5 tokens/s in eager mode (39.2 ms a step, where streaming 13.5 GB of bf16 weights takes 6.6 ms: about
# 1.0 ms of launches and Python per layer) and at 107 tokens/s compiled with CUDA graphs (9.3 ms: ~0.09 ms per
# layer). The floor depends on the host CPU and the framework far more than on the GPU, so H100 gets the same.
EAGER_FLOOR = "eager PyTorch, ~1.0 ms per layer (derived from the GPT, Fast blog's eager A100 baseline)"
GRAPH_FLOOR = "CUDA graphs, ~0.09 ms per layer (derived from the GPT, Fast blog's compiled A100 run)"
A100 = Device("A100 80GB, eager (bf16)", 2039.0, 312.0, 2.0, 1.0, EAGER_FLOOR)
H100 = Device("H100 SXM, eager (bf16)", 3350.0, 989.0, 2.0, 1.0, EAGER_FLOOR)
H100_GRAPHS = Device("H100 SXM, CUDA graphs (bf16)", 3350.0, 989.0, 2.0, 0.09, GRAPH_FLOOR)
GPUS = (A100, H100, H100_GRAPHS)


def fit_device(curve: LatencyCurve, model: ModelShape, bytes_per_value: float) -> Device:
    """This device's effective roofline, fitted to the measured latency curve (its floor is folded in).

    The 1-token pass sets the effective bandwidth; the widest pass, taken as compute-bound, sets FLOP/s.
    """
    t1, tk, k = curve.ms[0] / 1000, curve.ms[-1] / 1000, curve.ks[-1]
    tflops = 2 * model.params * k / tk / 1e12
    streamed = model.weight_bytes(bytes_per_value) + model.kv_bytes(bytes_per_value, curve.prefix_len)
    bandwidth = streamed / t1 / 1e9
    return Device(
        f"this device, fitted ({curve.device})",
        round(bandwidth, 1),
        round(tflops, 3),
        bytes_per_value,
        0.0,
        "folded into the fitted bandwidth (measured curve)",
    )


def step_ms(dev: Device, model: ModelShape, tokens: float, batch: int = 1, context: int = 0) -> float:
    """MODEL: one forward over `tokens` new tokens per row, `batch` rows, each over a `context`-token KV cache."""
    memory = (model.weight_bytes(dev.bytes_per_value) + model.kv_bytes(dev.bytes_per_value, context, batch)) / (
        dev.bandwidth_gbs * 1e9
    )
    compute = 2 * model.params * tokens * batch / (dev.tflops * 1e12)
    return 1000 * max(memory, compute) + dev.layer_floor_ms * model.layers


def modeled_speedup(
    dev: Device, model: ModelShape, mean_accepted: float, width: float, draft_share: float = 0.0, context: int = 512
) -> float:
    """MODEL: A · t(1) / (t(width) · (1 + draft share)) on a roofline device."""
    t1 = step_ms(dev, model, 1, context=context)
    return mean_accepted * t1 / (step_ms(dev, model, width, context=context) * (1 + draft_share))


def whatif(
    shapes: dict[str, tuple[float, float, float]], here: Device | None, model: ModelShape, context: int = 512
) -> dict[str, dict[str, float]]:
    """MODEL: speedup[device][method] from each method's measured (A, width, draft share)."""
    devices = ([here] if here else []) + list(GPUS)
    return {
        d.name: {n: modeled_speedup(d, model, a, w, dr, context) for n, (a, w, dr) in shapes.items()} for d in devices
    }


def whatif_caption(here: Device | None, model: ModelShape, context: int) -> str:
    """What the what-if assumes and what it leaves out, in one paragraph."""
    fitted = (
        f"This device, fitted from its measured latency curve: {here.bandwidth_gbs:.0f} GB/s effective, "
        f"{here.tflops:.2f} TFLOP/s (its per-step floor is inside that bandwidth). "
        if here
        else ""
    )
    kv = model.kv_bytes(2.0, context) / 1e6
    return (
        "Roofline MODEL, not a measurement: time = max((weights + KV cache) / bandwidth, 2·params·tokens / FLOP/s)"
        f" + a per-layer floor. {model.name}: {model.layers} layers, {kv:.0f} MB of bf16 KV read per step at "
        f"{context} tokens of context. "
        + fitted
        + f"A100 2.0 TB/s, 312 TFLOP/s; H100 3.35 TB/s, 989 TFLOP/s (bf16). GPU floors: {EAGER_FLOOR}; {GRAPH_FLOOR}. "
        "Left out: the draft's own cost on the other device (carried over as the share of verify time measured "
        "here), attention FLOPs, tree-attention kernels, sampling, batching and the prefill."
    )


def bytes_per_value(lm: LoadedModel) -> int:
    return lm.dtype.itemsize
