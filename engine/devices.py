"""Devices: CUDA GPUs, CPU virtual devices (one pinned core each), mixes, and auto.

Torch-free: the app lists devices at start-up, so GPUs are counted through NVML
(engine.telemetry.nvml) rather than torch.cuda.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.cores import usable_cores  # noqa: F401 (part of this module's interface)

if TYPE_CHECKING:
    from engine.telemetry.gpu_inventory import GpuInfo


@dataclass(frozen=True)
class Device:
    """One device a run places work on."""
    name: str               # "cpu:0" (virtual device 0) or "cuda:1"
    kind: str               # "cpu" or "cuda"
    index: int              # virtual-device index or CUDA ordinal
    core: int | None = None  # the core a CPU virtual device is pinned to
    node: str | None = None  # the machine it is on, in a run over several ("node1"); None: this one

    @property
    def torch_device(self) -> str:
        return "cpu" if self.kind == "cpu" else f"cuda:{self.index}"

    @property
    def local_name(self) -> str:
        """Its name on its own machine ("cpu:0"), without the node's ("node1/cpu:0")."""
        return self.name.rpartition("/")[2]

    def to_dict(self) -> dict:
        d = {"name": self.name, "kind": self.kind, "index": self.index, "core": self.core}
        if self.node is not None:
            d["node"] = self.node
        return d


class DeviceError(ValueError):
    pass


def node_of(name: str) -> str | None:
    """The machine a device's name says it is on: "node1" of "node1/cpu:0"; None for this machine's."""
    node, sep, _ = name.rpartition("/")
    return node if sep else None


def node_groups(names: list[str]) -> list[tuple[str | None, list[str]]]:
    """Device names grouped by node, nodes in the order they first appear, each node's devices in theirs:
    [("node0", ["node0/cpu:0", ...]), ("node1", [...])] (ranks listed node0, node1, node0, ... too)."""
    groups: dict[str | None, list[str]] = {}
    for name in names:
        groups.setdefault(node_of(name), []).append(name)
    return list(groups.items())


def gpu_count() -> int:
    """GPUs torch will number cuda:0.. (NVML's, narrowed by CUDA_VISIBLE_DEVICES); 0 without a driver."""
    from engine.telemetry.cuda_visible import visible_gpus
    return len(visible_gpus())


def gpu_label(gpu: GpuInfo) -> str:
    """How a run names a GPU of ``gpu_inventory.inventory()``: "cuda:K", or its NVML index when CUDA does not see it."""
    if gpu.cuda_index is None:
        return f"GPU {gpu.index} (hidden by CUDA_VISIBLE_DEVICES)"
    return f"cuda:{gpu.cuda_index}"


def cuda_visible(gpus: list[GpuInfo]) -> list[GpuInfo]:
    """The inventory's GPUs a run can use, in the order of their names cuda:0, cuda:1, ..."""
    return sorted((g for g in gpus if g.cuda_index is not None), key=lambda g: g.cuda_index)


RANKS_A_CORE = 8           # CPU virtual devices sharing one core, at most: beyond, a run is all start-up and swapping
RANK_MEMORY = 512 << 20    # what one rank process holds, about (torch itself): the machine's memory bounds them too


def most_cpu_devices(cores: list[int]) -> tuple[int, str]:
    """How many CPU virtual devices this machine can run at once, and why that many: ``RANKS_A_CORE`` a core, and
    no more than its memory holds at ``RANK_MEMORY`` each."""
    import psutil
    by_cores = RANKS_A_CORE * len(cores)
    by_memory = max(1, psutil.virtual_memory().total // RANK_MEMORY)
    if by_memory < by_cores:
        return by_memory, f"each is a process holding about {RANK_MEMORY >> 20} MB, and this machine has " \
                          f"{psutil.virtual_memory().total / 2**30:.0f} GiB"
    return by_cores, (f"{RANKS_A_CORE} a core on its {len(cores)} cores: each is a process pinned to a core, and "
                      "more than a few a core leave the figures nothing to say")


def cpu_devices(n: int, cores: list[int] | None = None) -> list[Device]:
    cores = cores if cores is not None else usable_cores()
    return [Device(f"cpu:{i}", "cpu", i, cores[i % len(cores)]) for i in range(n)]


def parse(spec: str, needed: int, *, gpus: int | None = None, cores: list[int] | None = None) -> list[Device]:
    """Resolve a --devices spec into devices, or raise DeviceError saying what is allowed.

    ``needed`` is how many devices the strategy wants when the spec leaves it open
    ("auto", "cuda"). Forms: "auto", "cpu:N", "cpu", "cuda", "cuda:0,cuda:1",
    "cpu,cuda:0".
    """
    cores = cores if cores is not None else usable_cores()
    spec = spec.strip().lower()
    if gpus is not None:  # noqa: SIM108  (a conditional expression in one would read worse, and lose the comment)
        n_gpus = gpus
    else:  # ask NVML once, and only when the spec can mean a GPU
        n_gpus = gpu_count() if spec == "auto" or "cuda" in spec else 0
    allowed = 'allowed: "auto", "cpu:N" (N virtual devices), "cuda", "cuda:0,cuda:1", or a mix like "cpu,cuda:0"'
    if not spec:
        raise DeviceError(f"empty device list; {allowed}")
    if spec == "auto":
        if n_gpus >= needed:
            return [Device(f"cuda:{i}", "cuda", i) for i in range(needed)]
        return cpu_devices(needed, cores)
    parts = [p.strip() for p in spec.split(",")]
    if len(parts) == 1 and parts[0].startswith("cpu:"):
        count = parts[0][4:]
        if not count.isdigit() or int(count) < 1:
            raise DeviceError(f"{parts[0]!r}: N in cpu:N must be a whole number of at least 1")
        most, why = most_cpu_devices(cores)
        if int(count) > most:
            raise DeviceError(f"{parts[0]!r}: at most cpu:{most} here ({why}); a few more devices than cores are "
                              "allowed, their figures then shared")
        return cpu_devices(int(count), cores)
    devices: list[Device] = []
    n_cpu = 0
    for part in parts:
        if part == "cpu":
            devices.append(Device(f"cpu:{n_cpu}", "cpu", n_cpu, cores[n_cpu % len(cores)]))
            n_cpu += 1
        elif part == "cuda":
            if n_gpus == 0:
                raise DeviceError("'cuda': no CUDA GPU is visible on this machine")
            devices.extend(Device(f"cuda:{i}", "cuda", i) for i in range(min(needed, n_gpus)))
        elif part.startswith("cuda:") and part[5:].isdigit():
            index = int(part[5:])
            if index >= n_gpus:
                have = f"GPUs 0..{n_gpus - 1}" if n_gpus else "no CUDA GPU"
                raise DeviceError(f"{part!r} does not exist: this machine has {have}")
            devices.append(Device(part, "cuda", index))
        else:
            raise DeviceError(f"{part!r} is not a device; {allowed}")
    return devices


def oversubscribed(devices: list[Device], cores: list[int] | None = None) -> bool:
    """More CPU virtual devices than cores: allowed, but the figures then read differently (``sharing_note``)."""
    cores = cores if cores is not None else usable_cores()
    return sum(d.kind == "cpu" for d in devices) > len(cores)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def describe(devices: list[Device]) -> str:
    """A run's devices as the app and its checks name them: "2 CPU devices (cpu:0, cpu:1)", "1 GPU (cuda:0)".

    The count is of devices the run has, and the names are those its plots and summary use:
    ``--devices cpu:1`` is one device, named cpu:0.
    """
    if not devices:
        return "no device"
    distinct = list({d.name: d for d in devices}.values())
    if len(distinct) < len(devices):  # stages sharing a device ("cuda:0,cuda:0")
        return f"{_plural(len(devices), 'stage')} on {describe(distinct)}"
    kinds = {d.kind for d in devices}
    noun = "CPU device" if kinds == {"cpu"} else "GPU" if kinds == {"cuda"} else "device"
    names = [d.name for d in devices]
    shown = ", ".join(names) if len(names) <= 3 else f"{names[0]} … {names[-1]}"
    return f"{_plural(len(devices), noun)} ({shown})"


def sharing_note(devices: list[Device], cores: list[int] | None = None) -> str | None:
    """What more CPU virtual devices than cores do to the figures, or None when each device has a core."""
    cores = cores if cores is not None else usable_cores()
    if not oversubscribed(devices, cores):
        return None
    n_cpu = sum(d.kind == "cpu" for d in devices)
    return (f"{n_cpu} CPU devices on {_plural(len(cores), 'core')}: devices share cores, so utilization reads "
            "per core (the devices on a core read its load together), and busy shares and step times are not "
            f"those of {n_cpu} separate devices.")
