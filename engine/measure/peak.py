"""A device's peak FLOP/s in a run's compute dtype: measured by a matrix multiply, and for known GPUs the
datasheet's figure beside it.

MFU (engine.results.DeviceEfficiency) divides achieved FLOP/s by a peak, and a peak is
only as honest as its source, so each comes with one:

- **measured**: the best of repeated square matrix multiplies on the device itself, in the
  forms a model's work takes, the size doubled from 128 while a multiply is quick (so a slow
  dtype, bfloat16 on a CPU without its instructions, costs a tenth of a second, not
  seconds), the best repeated for ``BUDGET_S``. A CPU device's multiply is timed in its
  thread's CPU time, so another program taking the core meanwhile does not lower the
  peak; a GPU's with CUDA events.
  Cached per device model, dtype and torch version (``cache_path``): measured once a machine.
- **datasheet**: NVIDIA's dense (no sparsity) figure for the GPUs in ``DATASHEET``.
"""
from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from engine.environment import variable
from engine.results.efficiency import Peak
from engine.wire import codec

BUDGET_S = 0.2         # the best size's multiply repeated this long, its fastest kept
SLOW_REPEAT_S = 0.02   # a form slower than this is not tried at the next (8 times the work) size
LARGEST = {"cpu": 2048, "cuda": 8192}


@dataclass(frozen=True)
class DatasheetEntry:
    pattern: str                    # a regular expression on the name NVML and torch give the GPU
    tflops: dict[str, float]        # "float32", "tf32", "bfloat16" -> dense TFLOP/s
    source: str


# Dense figures: NVIDIA's datasheets print the tensor cores' with sparsity (marked *), halved here.
DATASHEET = (
    DatasheetEntry(r"GH200", {"float32": 67.0, "tf32": 494.5, "bfloat16": 989.5},
                   "NVIDIA GH200 Grace Hopper datasheet (its H100/H200 GPU; tensor figures with sparsity halved)"),
    DatasheetEntry(r"H200 NVL", {"float32": 60.0, "tf32": 417.5, "bfloat16": 835.5},
                   "NVIDIA H200 NVL datasheet (tensor figures with sparsity halved)"),
    DatasheetEntry(r"\bH200\b", {"float32": 67.0, "tf32": 494.5, "bfloat16": 989.5},
                   "NVIDIA H200 SXM datasheet (tensor figures with sparsity halved)"),
    DatasheetEntry(r"H100 NVL", {"float32": 60.0, "tf32": 417.5, "bfloat16": 835.5},
                   "NVIDIA H100 NVL datasheet (tensor figures with sparsity halved)"),
    DatasheetEntry(r"H100 PCIe", {"float32": 51.0, "tf32": 378.0, "bfloat16": 756.5},
                   "NVIDIA H100 PCIe datasheet (tensor figures with sparsity halved)"),
    DatasheetEntry(r"\bH100\b", {"float32": 67.0, "tf32": 494.5, "bfloat16": 989.5},
                   "NVIDIA H100 SXM datasheet (tensor figures with sparsity halved)"),
    DatasheetEntry(r"\bA100\b", {"float32": 19.5, "tf32": 156.0, "bfloat16": 312.0},
                   "NVIDIA A100 datasheet (dense)"),
    DatasheetEntry(r"L40S", {"float32": 91.6, "tf32": 183.0, "bfloat16": 366.5},
                   "NVIDIA L40S datasheet (tensor figures with sparsity halved)"),
    DatasheetEntry(r"\bL4\b", {"float32": 30.3, "tf32": 60.0, "bfloat16": 121.0},
                   "NVIDIA L4 datasheet (tensor figures with sparsity halved)"),
)


def datasheet_peak(gpu_name: str, dtype: str, tf32: bool = False) -> Peak | None:
    """The datasheet's dense peak of ``gpu_name`` in ``dtype`` (float32 matmuls on TF32 tensor cores when
    ``tf32``: torch.backends.cuda.matmul.allow_tf32), or None for a GPU the table does not know."""
    if "MIG" in gpu_name:   # a slice of a GPU: the whole GPU's figure would not be its own
        return None
    entry = next((e for e in DATASHEET if re.search(e.pattern, gpu_name)), None)
    if entry is None:
        return None
    key = "tf32" if dtype == "float32" and tf32 else dtype
    if key not in entry.tflops:
        return None
    return Peak(entry.tflops[key] * 1e12, f"datasheet: {entry.tflops[key]:g} TFLOP/s {key} dense, "
                                                f"{entry.source}")


def device_model(device) -> str:
    """What the cache knows a device by: the GPU's name, or the CPU's model (/proc/cpuinfo)."""
    if device.kind == "cuda":
        import torch
        return torch.cuda.get_device_name(device.index)
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine() or "cpu"


def cache_path() -> Path:
    """SPLITSCOPE_CACHE_DIR, else the XDG cache directory (~/.cache/splitscope), as platformdirs would say."""
    base = variable("SPLITSCOPE_CACHE_DIR")
    if base:
        return Path(base) / "peaks.json"
    return Path(variable("XDG_CACHE_HOME") or Path.home() / ".cache") / "splitscope" / "peaks.json"


def measured_peak(device, dtype: str, tf32: bool = False) -> Peak:
    """The device's measured peak in ``dtype`` (``tf32``: a GPU's float32 work on TF32 tensor cores, as
    ``run_tf32`` decides): from the cache, else measured now on the calling thread (pinned to a core, or with
    the GPU current; a process's other CPU devices are cores of the same model) and cached. The run's random
    numbers are not touched: the measurement draws from generators of its own."""
    import torch
    tf32 = device.kind == "cuda" and dtype == "float32" and tf32
    model = device_model(device)
    key = f"{device.kind}|{model}|{dtype}{'|tf32' if tf32 else ''}|torch {torch.__version__}"
    cached = _read_cache().get(key)
    if isinstance(cached, dict) and isinstance(cached.get("flops_per_s"), (int, float)):
        return Peak(float(cached["flops_per_s"]), cached.get("source") or "measured")
    with torch.random.fork_rng(devices=[device.index] if device.kind == "cuda" else []), \
            _matmul_tf32(device, tf32):
        flops, size, form = _measure(device, getattr(torch, dtype))
    if device.kind == "cuda":   # the multiplies' memory back to the GPU, not held in this process's cache
        torch.cuda.empty_cache()
    unit = "thread CPU time" if device.kind == "cpu" else "CUDA events"
    figure = Peak(flops, f"measured: {size}x{size} {'tf32' if tf32 else dtype} matrix multiply ({form}), "
                               f"best over {BUDGET_S:g} s ({unit}), {model}")
    _write_cache(key, {"flops_per_s": flops, "source": figure.source,
                       "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S")})
    return figure


def run_tf32(dtype: str, module) -> bool:
    """Whether a float32 run's work is on a GPU's TF32 tensor cores: its matrix multiplies where torch allows
    TF32 there (torch.backends.cuda.matmul.allow_tf32, off by default), its convolutions where cuDNN does
    (torch.backends.cudnn.allow_tf32, on by default) and the model has any."""
    import torch
    if dtype != "float32":
        return False
    convolutions = any(isinstance(m, torch.nn.modules.conv._ConvNd) for m in module.modules())
    return torch.backends.cuda.matmul.allow_tf32 or (convolutions and torch.backends.cudnn.allow_tf32)


@contextlib.contextmanager
def _matmul_tf32(device, tf32: bool):
    """A GPU's float32 multiplies on TF32 while measuring a TF32 peak, as the run's work is."""
    import torch
    if device.kind != "cuda":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _measure(device, dtype) -> tuple[float, int, str]:
    """(FLOP/s, matrix size, form): the best repeat of the fastest multiply found. Both forms a model's work takes
    are tried, ``a @ b`` (an input's gradient), ``a @ b.T`` (nn.Linear's forward) and ``a.T @ b`` (a weight's
    gradient): on a CPU they run different
    kernels (bfloat16: 1.3 against 9.8 GFLOP/s at 512 on a core here). The size doubles until every form's
    multiply takes over ``SLOW_REPEAT_S`` (it is not tried larger) or ``LARGEST``."""
    import torch
    timed = _gpu_seconds if device.kind == "cuda" else _cpu_seconds
    forms = {"a @ b": lambda a, b: a @ b, "a @ b.T": lambda a, b: torch.nn.functional.linear(a, b),
             "a.T @ b": lambda a, b: a.T @ b}
    best_rate, best = 0.0, None
    n, slow = 128, set()
    while len(slow) < len(forms):
        a = torch.randn(n, n, dtype=dtype, device=device.torch_device)
        b = torch.randn(n, n, dtype=dtype, device=device.torch_device)
        for name, form in forms.items():
            if name in slow:
                continue
            timed(form, a, b)   # the first call's set-up (a GPU's handle, a CPU's packing buffers) left out
            seconds = max(min(timed(form, a, b) for _ in range(2)), 1e-9)
            if 2.0 * n ** 3 / seconds > best_rate:
                best_rate, best = 2.0 * n ** 3 / seconds, (name, a, b, n)
            if seconds > SLOW_REPEAT_S:
                slow.add(name)
        if n >= LARGEST[device.kind]:
            break
        n *= 2
    name, a, b, n = best
    fastest, spent = 2.0 * n ** 3 / best_rate, 0.0
    while spent < BUDGET_S:
        seconds = timed(forms[name], a, b)
        fastest, spent = min(fastest, seconds), spent + max(seconds, 1e-6)
    return 2.0 * n ** 3 / fastest, n, name


def _cpu_seconds(form, a, b) -> float:
    start = time.thread_time()
    form(a, b)
    return time.thread_time() - start


def _gpu_seconds(form, a, b) -> float:
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    form(a, b)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def _read_cache() -> dict:
    try:
        data = codec.loads(cache_path().read_text(encoding="utf-8"), "the peak cache")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(key: str, entry: dict) -> None:
    """Added to the cache file by an atomic replace: ranks measuring at once each leave a whole file."""
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = _read_cache()
        data[key] = entry
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(codec.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        pass   # a read-only home: measured again next time
