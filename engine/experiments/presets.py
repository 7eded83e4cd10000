"""The presets: each a function from the user's base config to the points an experiment runs (label, config,
sweep value), with what it sets itself over the base, and the defaults that size them for the machine."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.config import ExperimentConfig
from engine.devices import cpu_devices, gpu_count, usable_cores
from engine.rules import effective_batch_size
from engine.strategies.pipeline.schedules import SCHEDULE_INFO, SCHEDULE_LIST


@dataclass(frozen=True)
class Point:
    label: str
    config: ExperimentConfig
    x: float | None = None   # the swept value, for line plots
    series: str | None = None   # the line of the sweep it is on (default: its strategy's)


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    points: Callable[[ExperimentConfig], list[Point]]
    sets: str = ""
    """The settings the preset chooses itself, over the base's: the app's menu says them."""
    title: str = ""
    """Its name for people ("Compare strategies"), as the app's menu and result view say it; the command
    line takes ``name``."""

    @property
    def shown_name(self) -> str:
        return self.title or self.name

    def points_for(self, base: ExperimentConfig) -> list[Point]:
        """The points, each keeping stages per device only where it runs a pipeline (a base set up for an
        interleaved schedule still compares single, model-parallel and the replicas)."""
        from engine.strategies import STRATEGIES
        return [p if STRATEGIES[p.config.strategy].uses_micro_batches
                else Point(p.label, p.config.replace(stages_per_device=None), x=p.x, series=p.series)
                for p in self.points(base)]


# ---- scale ------------------------------------------------------------------------
# GPU scale follows the model-parallel tutorial; CPU scale is sized to finish in
# about 3 minutes on 2 cores with the default 3 repeats.
GPU_DEFAULTS = dict(model="resnet50", batch_size=120, steps=10, warmup=2)
CPU_DEFAULTS = dict(model="mlp", width=512, depth=8, batch_size=1024, steps=8, warmup=2)


def default_config(explicit: dict) -> ExperimentConfig:
    """Preset defaults for the machine, overridden by what the user gave."""
    devices = explicit.get("devices", "auto")
    gpus = gpu_count() if devices == "auto" or "cuda" in devices else 0
    on_gpus = "cuda" in devices or (devices == "auto" and gpus >= 1)
    base = dict(GPU_DEFAULTS if on_gpus else CPU_DEFAULTS)
    base["devices"] = _device_list("cuda", min(2, gpus)) if on_gpus else "cpu:2"
    base.update(explicit)
    return ExperimentConfig(**base)


def _devices_of(config: ExperimentConfig) -> tuple[str, int]:
    """(kind, count) of the experiment's devices: "cpu" or "cuda"."""
    spec = config.devices
    if spec.startswith("cpu:"):
        return "cpu", int(spec[4:])
    if spec.startswith("cuda"):
        return "cuda", len(spec.split(","))
    return "cpu", 2


def _device_list(kind: str, n: int) -> str:
    return f"cpu:{n}" if kind == "cpu" else ",".join(f"cuda:{i}" for i in range(max(1, n)))


def _stage_devices(kind: str) -> str:
    """Two stages: two CPU virtual devices, two GPUs, or on a one-GPU machine two stages sharing it."""
    if kind == "cpu":
        return "cpu:2"
    return "cuda:0,cuda:1" if gpu_count() >= 2 else "cuda:0,cuda:0"


def _schedule_on(base: ExperimentConfig, devices: str) -> str:
    """The base's schedule, where its stages can run it: every schedule but gpipe needs a process per device,
    so stages that share a GPU or mix kinds of device run gpipe (``limits`` says so)."""
    if base.schedule == "gpipe":
        return base.schedule
    parts = [p.strip() for p in devices.split(",")]
    shared = len(set(parts)) < len(parts) or len({p.split(":")[0] for p in parts}) > 1
    return "gpipe" if shared else base.schedule


def _micro_batching(base: ExperimentConfig) -> dict:
    """The base's micro-batches or split size for a pipeline point; 4 micro-batches when it gives neither."""
    if base.micro_batches or base.split_size:
        return dict(micro_batches=base.micro_batches, split_size=base.split_size)
    return dict(micro_batches=4, split_size=None)


def _micro_batch_count(base: ExperimentConfig) -> int:
    if base.split_size:
        return max(1, -(-effective_batch_size(base) // base.split_size))
    return base.micro_batches or 4


def _replica_count(kind: str, n: int) -> int:
    """Replicas for data-parallel and ddp: the devices given, but at most the GPUs there are."""
    return max(1, min(n, gpu_count())) if kind == "cuda" else max(2, n)


def limits(name: str, base: ExperimentConfig) -> list[str]:
    """What the preset leaves out or runs differently on this machine, said with the result."""
    kind, _ = _devices_of(base)
    if kind != "cuda" or gpu_count() >= 2:
        return []
    gpipe = (f"; {base.schedule} needs a process per device, so the pipeline runs gpipe"
             if base.schedule != "gpipe" else "")
    notes = {
        "compare-strategies": "one GPU: model-parallel and pipeline run two stages sharing cuda:0, data-parallel "
                              "and ddp one replica; a second GPU is needed for stages or replicas on two GPUs" + gpipe,
        "split-size": "one GPU: the pipeline's two stages share cuda:0; a second GPU is needed for a stage per GPU"
                      + gpipe,
        "split-point": "one GPU: both stages share cuda:0, so the split point moves little; a second GPU is "
                       "needed for a stage per GPU" + gpipe,
        "dp-scaling": "one GPU: data-parallel and ddp over 1 device only; scaling needs a second GPU or more",
        "memory-scaling": "one GPU: ddp and fsdp over 1 device only (nothing to shard); sharding needs a second "
                          "GPU or more",
        "schedules": "one GPU: every schedule but gpipe needs a process per device on its own GPU, so they "
                     "need a second GPU; model-parallel and gpipe run two stages sharing cuda:0",
    }
    return [notes[name]] if name in notes else []


# ---- presets ----------------------------------------------------------------------
def compare_strategies(base: ExperimentConfig) -> list[Point]:
    kind, n = _devices_of(base)
    staged = dict(devices=_stage_devices(kind), split=base.split if base.split and len(base.split) == 1 else None)
    replicas = _device_list(kind, _replica_count(kind, n))
    return [
        Point("single", base.replace(strategy="single", devices=_device_list(kind, 1), split=None,
                                     micro_batches=None, split_size=None)),
        Point("model-parallel", base.replace(strategy="model-parallel", micro_batches=None, split_size=None,
                                             **staged)),
        Point("pipeline", base.replace(strategy="pipeline", schedule=_schedule_on(base, staged["devices"]),
                                       **_micro_batching(base), **staged)),
        *(Point(strategy, base.replace(strategy=strategy, devices=replicas, split=None, micro_batches=None,
                                       split_size=None))
          for strategy in ("data-parallel", "ddp")),
    ]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def split_size(base: ExperimentConfig) -> list[Point]:
    batch = effective_batch_size(base)
    if batch == 120:  # the tutorial's sweep (only the sizes that divide the batch)
        sizes = [s for s in (1, 3, 5, 8, 10, 12, 20, 40, 60, 120) if batch % s == 0]
    else:             # about eight sizes spread over the divisors
        divisors = [d for d in _divisors(batch) if batch // d <= 64]
        step = max(1, len(divisors) // 8)
        sizes = sorted(set(divisors[::step] + [divisors[-1]]))
    kind, n = _devices_of(base)
    devices = base.devices if n >= 2 else _stage_devices(kind)
    schedule = _schedule_on(base, devices)
    if schedule == "1f1b":  # at least a micro-batch per stage, or 1f1b cannot run
        sizes = [s for s in sizes if batch // s >= max(2, n)] or sizes[:1]
    return [Point(f"split size {s}", base.replace(strategy="pipeline", split_size=s, micro_batches=None,
                                                  schedule=schedule, devices=devices), x=s)
            for s in sizes]


def split_point(base: ExperimentConfig) -> list[Point]:
    from engine.run.validate import check_all
    devices = _stage_devices(_devices_of(base)[0])
    schedule = _schedule_on(base, devices)
    # One split point between two stages: a schedule that places several stages on a device has more.
    schedule = "gpipe" if SCHEDULE_INFO[schedule].multi_stage else schedule
    pipeline = base.replace(strategy="pipeline", schedule=schedule, devices=devices, stages_per_device=None,
                            **_micro_batching(base))
    (probe,) = check_all([(pipeline.replace(split=None), None)])
    if probe.problems:
        raise ValueError("; ".join(str(p) for p in probe.problems))
    points = [Point(f"split {k}", pipeline.replace(split=(k,)), x=k) for k in range(1, probe.plan.n_blocks)]
    points.append(Point("balanced (automatic)", pipeline.replace(split=None)))
    return points


def dp_scaling(base: ExperimentConfig) -> list[Point]:
    kind, n = _devices_of(base)
    # Up to every core, or every GPU there is (a list naming cuda:0 twice is still one GPU).
    n = max(n, len(usable_cores())) if kind == "cpu" else max(1, gpu_count())
    plain = base.replace(split=None, micro_batches=None, split_size=None)
    points = [Point("single x1", plain.replace(strategy="single", devices=_device_list(kind, 1)), x=1)]
    for strategy in ("data-parallel", "ddp"):
        for k in range(1, n + 1):
            points.append(Point(f"{strategy} x{k}", plain.replace(strategy=strategy, devices=_device_list(kind, k)),
                                x=k))
    return points


def schedules(base: ExperimentConfig) -> list[Point]:
    kind, _ = _devices_of(base)
    m = _micro_batch_count(base)
    staged = base.replace(devices=_stage_devices(kind), split_size=None, stages_per_device=None)
    points = [
        Point("model-parallel", staged.replace(strategy="model-parallel", micro_batches=None)),
        Point("gpipe", staged.replace(strategy="pipeline", schedule="gpipe", micro_batches=m)),
    ]
    if kind == "cpu" or gpu_count() >= 2:  # every other schedule needs a process per device
        # Each at its own stages per device: one that places several on a device gets the split balanced for
        # its stages, the others the base's.
        others = [Point(s.name, staged.replace(strategy="pipeline", schedule=s.name, micro_batches=m,
                                               split=None if s.multi_stage else staged.split))
                  for s in SCHEDULE_LIST if s.name != "gpipe"]
        # Those the model and micro-batches allow (a V of stages needs blocks for them; DualPipeV needs a
        # micro-batch per stage): the rest would stop the experiment before its first run.
        from engine.run.validate import check_all
        checked = check_all([(p.config, None) for p in others])
        points += [p for p, c in zip(others, checked, strict=True) if not c.problems]
    return points


def memory_scaling(base: ExperimentConfig) -> list[Point]:
    """ddp against the strategies that shard, over 1..N devices, with AdamW (whose state sharding saves most)."""
    kind, n = _devices_of(base)
    n = max(n, len(usable_cores())) if kind == "cpu" else max(1, gpu_count())
    plain = base.replace(split=None, micro_batches=None, split_size=None, optimizer="adamw")
    points = []
    for k in range(1, n + 1):
        devices = _device_list(kind, k)
        points.append(Point(f"ddp x{k}", plain.replace(strategy="ddp", devices=devices), x=k))
        points.append(Point(f"fsdp x{k}", plain.replace(strategy="fsdp", devices=devices), x=k))
        if k >= 2:
            points.append(Point(f"tensor-parallel x{k}", plain.replace(strategy="tensor-parallel", devices=devices),
                                x=k))
        if k >= 4 and k % 2 == 0:
            points.append(Point(f"fsdp+tp x{k}", plain.replace(strategy="fsdp+tp", devices=devices), x=k))
            points.append(Point(f"hsdp x{k}", plain.replace(strategy="hsdp", devices=devices), x=k))
    # Tensor parallel where the model allows it (pairs of linear layers): a point it refuses would stop the
    # experiment. Any other problem is the base's, and stops it before its first run, saying so.
    from engine.run.validate import check_all
    tensor_parallel = [p for p in points if p.config.strategy in ("tensor-parallel", "fsdp+tp")]
    checked = check_all([(p.config, None) for p in tensor_parallel])
    refused = {p.label for p, c in zip(tensor_parallel, checked, strict=True) if c.problems}
    return [p for p in points if p.label not in refused]


LOADER_WORKERS = (0, 1, 2, 4)
DEFAULT_DECODE_COST_MS = 1.0   # a sample's further CPU work where the base gives none: a wait worth a sweep


def input_pipeline(base: ExperimentConfig) -> list[Point]:
    """The base's model, strategy and devices fed by a DataLoader with 0, 1, 2 and 4 workers, as far as the
    cores no device holds allow (on GPUs: with pageable and with pinned memory)."""
    from engine.run.loader_placement import worker_cores
    kind, n = _devices_of(base)
    loader = base.replace(input_prep="loader", decode_cost_ms=base.decode_cost_ms or DEFAULT_DECODE_COST_MS,
                          loader_cores=None, prefetch_factor=None, pin_memory=False)
    cores = usable_cores()
    # CPU devices hold the first cores (engine.devices.cpu_devices): the rest are the workers'; GPUs hold none
    spare = len(worker_cores(loader, cpu_devices(n, cores) if kind == "cpu" else [], cores))
    workers = [w for w in LOADER_WORKERS if w <= max(1, spare)]
    memories = (False, True) if kind == "cuda" else (False,)
    return [Point(f"{w} worker{'s' if w != 1 else ''}" + (", pinned" if pinned else ""),
                  loader.replace(loader_workers=w, pin_memory=pinned,
                                 persistent_workers=base.persistent_workers and w > 0), x=w,
                  series=("pinned" if pinned else "pageable") if kind == "cuda" else None)
            for pinned in memories for w in workers]


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("compare-strategies", "single vs model-parallel vs pipeline (and data-parallel, ddp): step time "
           "mean and std over repeats, as in the tutorial's bar chart", compare_strategies,
           sets="the strategy, and the devices: 1 for single, 2 stages for model-parallel and pipeline, "
                "the given count for data-parallel and ddp", title="Compare strategies"),
    Preset("split-size", "pipeline over micro-batch sizes: the tutorial's split-size trade-off curve", split_size,
           sets="the strategy (pipeline) and the micro-batching (it sweeps the split size); 2 stages when one "
                "device is given", title="Micro-batch size sweep"),
    Preset("split-point", "pipeline over every split point, beside the automatic balanced split", split_point,
           sets="the strategy (pipeline), the split (it sweeps every point) and the devices (2 stages)",
           title="Split point sweep"),
    Preset("dp-scaling", "single vs data-parallel vs ddp over 1..N devices, with the per-device batch split",
           dp_scaling, sets="the strategy and the devices (1 up to every core or GPU); no split or micro-batching",
           title="Data-parallel scaling"),
    Preset("schedules", "model-parallel vs every pipeline schedule the devices and model allow (GPipe, 1F1B, "
           "interleaved, looped BFS, zero bubble) at equal micro-batches: step time, bubble, peak memory",
           schedules, sets="the strategy, the schedule (it compares them) and the devices (2 stages)",
           title="Compare pipeline schedules"),
    Preset("memory-scaling", "ddp vs fsdp vs tensor-parallel (and fsdp+tp and hsdp from 4 devices) over 1..N devices: "
           "tensor memory per device by kind, step time, bytes moved per step", memory_scaling,
           sets="the strategy, the devices (1 up to every core or GPU) and the optimizer (adamw, whose state "
                "sharding saves most); no split or micro-batching", title="Memory scaling"),
    Preset("input-pipeline", "the base fed by a DataLoader with 0, 1, 2 and 4 workers (as the cores no device "
           "holds allow; on GPUs, pageable and pinned memory): throughput and the input wait against workers",
           input_pipeline,
           sets=f"the input (--input-prep loader), its workers and pinned memory (it sweeps them); a "
                f"--decode-cost of {DEFAULT_DECODE_COST_MS:g} ms a sample where the base gives none",
           title="Input pipeline workers"),
)}


def preset_title(name: str) -> str:
    """The preset's name for people ("compare-strategies": "Compare strategies"); an unknown name as it is."""
    preset = PRESETS.get(name)
    return preset.shown_name if preset else name
