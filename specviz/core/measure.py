"""One definition of every reported number, and where and when it was measured.

- speedup: end-to-end generation wall time (the prefill and every step, each step from its root to its
  commit; the trace's own bookkeeping, which runs after each step's clock stops, is not part of it) of
  plain decoding over the method's, on the same prompt and settings; over repeated, interleaved pairs
  it is the median of the ratios.
- A: tokens committed per target forward pass after the prefill. A step's root was produced by the
  forward before it (the prefill, for the first step), and its forward produces the accepted drafts
  plus the next root; so A is the tokens committed by steps that ran a forward over those steps: exactly
  1 for plain decoding, γ + 1 for a chain whose γ drafts are always accepted. A last step that only
  commits a root runs no forward and does not count.
- r: the method's mean time per target step over plain decoding's mean time per step.
- TTFT: prefill plus the first step, reported beside the speedup, never folded into it.

Every stored figure carries a `Provenance`: the machine (CPU model, its speed-relevant flags, cores, memory, a
hash of this boot's id), the device (dtype, kernels, the GPU's name), the date, the commit and the load average
when it was measured, so a page can say "measured on <that machine> on <date>", flag a figure measured under
load, and reserve "the computer running specviz" for figures whose machine id is this one's (never where there is
none): a visitor's screen is not the machine a figure was measured on, so no caption says "this machine".
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import platform
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol


class TraceLike(Protocol):
    """What a measurement reads from a trace (specviz.core.trace.Trace satisfies it); read-only."""

    @property
    def total_s(self) -> float: ...

    @property
    def prefill_s(self) -> float: ...

    @property
    def output_ids(self) -> list[int]: ...

    @property
    def steps(self) -> Sequence[Any]: ...


def forward_steps(trace: TraceLike) -> int:
    """Target forward passes after the prefill (steps with a non-empty forward)."""
    return sum(1 for s in trace.steps if getattr(s, "forward_tokens", 1) > 0)


def mean_accepted(trace: TraceLike) -> float:
    """A: tokens committed per target forward pass after the prefill (1.0 for plain decoding)."""
    return pooled_accepted([trace])


def pooled_accepted(traces: Sequence[TraceLike]) -> float:
    """A over several runs: tokens committed by the steps that ran a forward, over those steps."""
    steps = [s for t in traces for s in t.steps if getattr(s, "forward_tokens", 1) > 0]
    return sum(len(s.committed) for s in steps) / len(steps) if steps else 1.0


def decode_s(trace: TraceLike) -> float:
    """Wall time of the steps (prefill excluded)."""
    return sum(s.wall_s for s in trace.steps)


def step_s(trace: TraceLike) -> float:
    """Mean wall time of one target step."""
    return decode_s(trace) / max(1, forward_steps(trace))


def ttft_s(trace: TraceLike) -> float:
    """Time to first token: the prefill plus the first step."""
    return trace.prefill_s + (trace.steps[0].wall_s if trace.steps else 0.0)


def generation_s(trace: TraceLike) -> float:
    """End-to-end generation wall time: the prefill plus every step."""
    return trace.prefill_s + decode_s(trace)


def speedup(baseline: TraceLike, method: TraceLike) -> float:
    """Plain decoding's end-to-end generation wall time per token over the method's, for one pair of runs (the
    same as their wall times' ratio where both wrote the same tokens, as greedy runs do; sampled runs may write
    answers of different lengths)."""
    per = lambda t: generation_s(t) / max(len(t.output_ids), 1)  # noqa: E731
    return per(baseline) / max(per(method), 1e-12)


def step_cost(baseline: TraceLike, method: TraceLike) -> float:
    """r: the method's mean step time over plain decoding's."""
    return step_s(method) / max(step_s(baseline), 1e-12)


def running_speedup(baseline: TraceLike, trace: TraceLike, upto: int | None = None) -> list[float]:
    """Per step, plain decoding's time for the same share of the output over the method's time so far.

    The method's elapsed time is its prefill plus its steps; plain decoding's is its prefill plus its decode time
    pro rata to the share of the method's tokens committed. The last point is exactly `speedup(baseline, trace)`.
    """
    total = max(1, len(trace.output_ids))
    done, spent, out = 0, trace.prefill_s, []
    for s in trace.steps[: None if upto is None else upto + 1]:
        done, spent = done + len(s.committed), spent + s.wall_s
        out.append((baseline.prefill_s + decode_s(baseline) * done / total) / max(spent, 1e-12))
    return out


def acceptance_series(trace: TraceLike) -> tuple[list[float], list[float]]:
    """Per step, accepted drafts over the drafts in its forward pass (all but the root); and the running rate."""
    per, cum, acc_sum, draft_sum = [], [], 0, 0
    for s in trace.steps:
        acc, d = max(0, len(s.committed) - 1), max(0, s.forward_tokens - 1)
        acc_sum, draft_sum = acc_sum + acc, draft_sum + d
        per.append(acc / d if d else 0.0)
        cum.append(acc_sum / draft_sum if draft_sum else 0.0)
    return per, cum


def method_shape(trace: TraceLike) -> tuple[float, float, float]:
    """A, mean forward width (tokens per target pass), and propose time as a share of verify time."""
    fwd = [s for s in trace.steps if s.forward_tokens]
    width = sum(s.forward_tokens for s in fwd) / max(1, len(fwd))
    draft = sum(s.propose_s for s in trace.steps) / max(1e-9, sum(s.verify_s for s in trace.steps))
    return mean_accepted(trace), width, draft


@dataclass(frozen=True)
class Spread:
    """The median of repeated measurements with their range."""

    median: float
    low: float
    high: float
    n: int

    def short(self, unit: str = "×", digits: int = 2) -> str:
        """'1.31× · 3 runs' or '1.31× · one run': what fits a metric on a page column (the range goes beside)."""
        return f"{self.median:.{digits}f}{unit} · " + ("one run" if self.n <= 1 else f"{self.n} runs")

    def label(self, unit: str = "×", digits: int = 2) -> str:
        """'1.31× (1.24–1.38), 3 runs', or '1.31× (one run)'."""
        head = f"{self.median:.{digits}f}{unit}"
        if self.n <= 1:
            return f"{head} (one run)"
        return f"{head} ({self.low:.{digits}f}–{self.high:.{digits}f}), {self.n} runs"


def spread(values: list[float]) -> Spread:
    if not values:
        raise ValueError("No measurements to summarise.")
    return Spread(statistics.median(values), min(values), max(values), len(values))


def paired(baselines: Sequence[TraceLike], methods: Sequence[TraceLike]) -> dict[str, Spread]:
    """Speedup, A and r over interleaved pairs (baseline i ran next to method i)."""
    if len(baselines) != len(methods) or not methods:
        raise ValueError("paired() needs as many baseline runs as method runs, at least one.")
    pairs = list(zip(baselines, methods, strict=True))
    return {
        "speedup": spread([speedup(b, m) for b, m in pairs]),
        "A": spread([mean_accepted(m) for m in methods]),
        "r": spread([step_cost(b, m) for b, m in pairs]),
        "ttft_s": spread([ttft_s(m) for m in methods]),
    }


@dataclass(frozen=True)
class Provenance:
    """Where and when a figure was measured."""

    cpu: str
    cores: int
    device: str  # e.g. "cpu · float32 · onednn" or "cuda:0 · NVIDIA H200 · bfloat16"
    date: str  # ISO date-time, UTC
    commit: str
    load: float  # 1-minute load average at the time (-1 where unknown)
    torch: str
    cpu_flags: str = ""  # the CPU's speed-relevant extensions, e.g. "avx2 avx512f avx512_bf16 amx_bf16" ("" unknown)
    memory_gb: float = 0.0  # total memory in GiB (0 where unknown)
    machine_id: str = ""  # a hash of this boot's id (machine_id()); "" where there is none (older records too)

    @property
    def machine(self) -> str:
        """'Intel(R) Xeon(R) Processor (2 cores, 23.5 GiB, avx512_bf16)'; with no model recorded, 'a 2-core CPU'."""
        extra = [f"{self.memory_gb:g} GiB"] if self.memory_gb > 0 else []
        extra += [self.cpu_flags] if self.cpu_flags else []
        if self.cpu.strip().lower() in ("", "unknown cpu", "unrecorded cpu"):  # older records, backfilled
            torch = f" with torch {self.torch}" if self.torch else ""  # what else is known
            return f"a {self.cores}-core CPU{torch}" + (f" ({', '.join(extra)})" if extra else "")
        return f"{self.cpu} ({', '.join([f'{self.cores} cores', *extra])})"

    def same_machine(self, other: Provenance) -> bool:
        """Whether two measurements come from this very machine and device setting: the same machine id (none
        matches nothing; a cloned image shares one, so the CPU, its flags, the cores and the memory must match)."""
        if not self.machine_id or not other.machine_id:
            return False
        keys = ("machine_id", "cpu", "cpu_flags", "cores", "memory_gb", "device")
        return all(getattr(self, k) == getattr(other, k) for k in keys)

    def describe(self, here: Provenance | None = None, flag_load: bool = True) -> str:
        """'measured on the computer running specviz, <machine>, on 2026-12-01' where `here` is that machine, else
        'measured on <machine>, <device>, on <date>'; then ', under load (load average 4.65 on 2 cores)' when other
        work competed for the cores (unless `flag_load` is off)."""
        day = self.date[:10]
        if here is not None and self.same_machine(here):
            text = f"measured on the computer running specviz, {self.machine}, on {day}"
        else:
            text = f"measured on {self.machine}, {self.device}, on {day}"
        if flag_load and contended(self):
            text += f", under load (load average {self.load:g} on {self.cores} cores)"
        return text

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Provenance:
        """Rebuild from JSON; ValueError with one sentence when fields are missing."""
        if not isinstance(data, dict):
            raise ValueError("The provenance record is not a JSON object.")
        try:
            return cls(
                cpu=str(data["cpu"]),
                cores=int(data["cores"]),
                device=str(data["device"]),
                date=str(data["date"]),
                commit=str(data["commit"]),
                load=float(data["load"]),
                torch=str(data.get("torch", "")),
                cpu_flags=str(data.get("cpu_flags", "")),
                memory_gb=float(data.get("memory_gb", 0.0)),
                machine_id=str(data.get("machine_id", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"The provenance record is incomplete ({exc}).") from None


# extensions that change how fast the CPU kernels run (x86: AVX2, AVX-512, its bf16 and VNNI, AMX; Arm: SVE, bf16)
SPEED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8", "sve", "sve2")


def _cpuinfo(key: str) -> str:
    """The first value of `key` in /proc/cpuinfo ('' where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() == key:
                return " ".join(value.split())
    except OSError:
        pass
    return ""


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else what the platform says."""
    return _cpuinfo("model name") or platform.processor() or platform.machine() or "unknown CPU"


def cpu_flags() -> str:
    """The CPU's speed-relevant extensions (SPEED_FLAGS it has, in that order), '' where unknown."""
    have = set((_cpuinfo("flags") or _cpuinfo("Features")).split())
    return " ".join(f for f in SPEED_FLAGS if f in have)


def memory_gb() -> float:
    """Total memory in GiB (one decimal), 0 where unknown."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return 0.0
    return round(pages * size / 2**30, 1) if pages > 0 and size > 0 else 0.0


def machine_id(paths: tuple[str, ...] = ("/proc/sys/kernel/random/boot_id",)) -> str:
    """A hash of this boot's kernel id, '' where none: never /etc/machine-id, which every machine of an image shares."""
    for path in paths:
        try:
            raw = Path(path).read_text().strip()
        except OSError:
            continue
        if raw:
            return hashlib.sha256(f"specviz:{raw}".encode()).hexdigest()[:16]
    return ""


def git_commit(root: Path | None = None) -> str:
    """The checkout's short commit, 'unknown' outside a git checkout."""
    root = root or Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def load_average() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return -1.0


def provenance(device: str, now: dt.datetime | None = None) -> Provenance:
    """A record of this machine, now, for a figure measured on `device` (LoadedModel.describe())."""
    import torch

    when = (now or dt.datetime.now(dt.timezone.utc)).replace(microsecond=0).isoformat()
    return Provenance(
        cpu=cpu_model(),
        cores=os.cpu_count() or 0,
        device=device,
        date=when,
        commit=git_commit(),
        load=load_average(),
        torch=torch.__version__,
        cpu_flags=cpu_flags(),
        memory_gb=memory_gb(),
        machine_id=machine_id(),
    )


def contended(p: Provenance) -> bool:
    """Whether the load average at measurement time shows other work competing for the cores: it reached their
    number, or three quarters of them plus half a core."""
    return p.load >= 0 and p.cores > 0 and (p.load >= p.cores or p.load > 0.75 * p.cores + 0.5)
