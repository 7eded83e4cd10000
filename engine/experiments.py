"""Click-to-run experiments: the tutorials' comparisons and sweeps, as sequences of stored runs.

A preset is a function from a base config to a list of points (label, config,
sweep value). The base is what the user set (the app's panel, the command line's
options); a preset keeps all of it but what it ``sets`` itself, which it says: the
pipeline points of compare-strategies, split-size and split-point run the base's
schedule and micro-batching, and only ``schedules`` chooses schedules. The runner
runs each point ``repeats`` times through RunSession,
groups the runs under one experiment id, and reduces them to the experiment
result (docs/summary.md). It can be stopped between or during runs and keeps what
finished.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import statistics
import subprocess
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from engine import forkserver
from engine.config import ExperimentConfig
from engine.devices import gpu_count, usable_cores
from engine.record.summary import stage_balance
from engine.results import Bubble, ExperimentPoint, ExperimentResult, RunSummary, mean_std
from engine.strategies.schedules import SCHEDULE_INFO, SCHEDULE_LIST

if TYPE_CHECKING:
    from engine.store import ExperimentRecord


@dataclass(frozen=True)
class Point:
    label: str
    config: ExperimentConfig
    x: float | None = None   # the swept value, for line plots


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    points: Callable[[ExperimentConfig], list[Point]]
    sets: str = ""
    """The settings the preset chooses itself, over the base's: the app's menu says them."""

    def points_for(self, base: ExperimentConfig) -> list[Point]:
        """The points, each keeping stages per device only where it runs a pipeline (a base set up for an
        interleaved schedule still compares single, model-parallel and the replicas)."""
        from engine.strategies import STRATEGIES
        return [p if STRATEGIES[p.config.strategy].uses_micro_batches
                else Point(p.label, p.config.replace(stages_per_device=None), x=p.x) for p in self.points(base)]


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
        return max(1, -(-base.effective_batch_size // base.split_size))
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
    batch = base.effective_batch_size
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
        points += [p for p, c in zip(others, checked) if not c.problems]
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
    # Tensor parallel where the model allows it (pairs of linear layers): a point it refuses would stop the
    # experiment. Any other problem is the base's, and stops it before its first run, saying so.
    from engine.run.validate import check_all
    tensor_parallel = [p for p in points if p.config.strategy in ("tensor-parallel", "fsdp+tp")]
    refused = {p.label for p, c in zip(tensor_parallel, check_all([(p.config, None) for p in tensor_parallel]))
               if c.problems}
    return [p for p in points if p.label not in refused]


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("compare-strategies", "single vs model-parallel vs pipeline (and data-parallel, ddp): step time "
           "mean and std over repeats, as in the tutorial's bar chart", compare_strategies,
           sets="the strategy, and the devices: 1 for single, 2 stages for model-parallel and pipeline, "
                "the given count for data-parallel and ddp"),
    Preset("split-size", "pipeline over micro-batch sizes: the tutorial's split-size trade-off curve", split_size,
           sets="the strategy (pipeline) and the micro-batching (it sweeps the split size); 2 stages when one "
                "device is given"),
    Preset("split-point", "pipeline over every split point, beside the automatic balanced split", split_point,
           sets="the strategy (pipeline), the split (it sweeps every point) and the devices (2 stages)"),
    Preset("dp-scaling", "single vs data-parallel vs ddp over 1..N devices, with the per-device batch split",
           dp_scaling, sets="the strategy and the devices (1 up to every core or GPU); no split or micro-batching"),
    Preset("schedules", "model-parallel vs every pipeline schedule the devices and model allow (GPipe, 1F1B, "
           "interleaved, looped BFS, zero bubble) at equal micro-batches: step time, bubble, peak memory",
           schedules, sets="the strategy, the schedule (it compares them) and the devices (2 stages)"),
    Preset("memory-scaling", "ddp vs fsdp vs tensor-parallel (and fsdp+tp from 4 devices) over 1..N devices: "
           "tensor memory per device by kind, step time, bytes moved per step", memory_scaling,
           sets="the strategy, the devices (1 up to every core or GPU) and the optimizer (adamw, whose state "
                "sharding saves most); no split or micro-batching"),
)}


# ---- running ----------------------------------------------------------------------
class ExperimentRunner:
    """Runs a preset's points; ``stop()`` ends the current run and keeps the finished ones."""

    def __init__(self, name: str, base: ExperimentConfig, *, repeats: int = 3, db_path=None,
                 telemetry_hz: float = 10.0,
                 on_progress: Callable[[int, int, str], None] | None = None,
                 on_event: Callable[[dict], None] | None = None,
                 on_samples: Callable[[list], None] | None = None):
        if name not in PRESETS:
            raise ValueError(f"unknown experiment {name!r}; choose one of: {', '.join(PRESETS)}")
        if repeats < 1:
            raise ValueError(f"--repeats must be at least 1, got {repeats}")
        if base.nodes:
            # Their points compare strategies that keep their devices in one process, which cannot span nodes.
            raise ValueError("experiments run on this machine; --nodes (the Nodes field) applies to a single run")
        self.preset = PRESETS[name]
        self.base = base
        self.repeats = repeats
        self.db_path = db_path
        self.telemetry_hz = telemetry_hz
        self.on_progress = on_progress
        self.on_event = on_event
        self.on_samples = on_samples
        self.points = self.preset.points_for(base)
        self.notes = limits(name, base)
        self._stop = threading.Event()
        self._starting = threading.Lock()
        self._session = None
        self.experiment_id: str | None = None

    @property
    def total_runs(self) -> int:
        return len(self.points) * self.repeats

    def stop(self) -> None:
        with self._starting:  # a run being launched now is either not started or stopped
            self._stop.set()
            session = self._session
        if session is not None:
            session.stop()

    def is_running_a_run(self) -> bool:
        session = self._session
        return session is not None and session.is_running()

    def kill(self) -> None:
        """Stop, and end the current run's processes at once (when a stop is not honoured)."""
        with self._starting:
            self._stop.set()
            session = self._session
        if session is not None:
            session.kill()

    def run(self) -> ExperimentResult:
        from engine.run.session import RunSession
        from engine.store import open_store
        with open_store(self.db_path) as store:
            self.experiment_id = store.create_experiment(self.preset.name, {
                "base": self.base.to_dict(), "repeats": self.repeats,
                "points": [{"label": p.label, "config": p.config.to_dict(), "x": p.x} for p in self.points]})
        results: list[ExperimentPoint] = []
        k = 0
        for point in self.points:
            runs, failures = [], []
            for _ in range(self.repeats):
                if self._stop.is_set():
                    break
                k += 1
                if self.on_progress:
                    self.on_progress(k, self.total_runs, point.label)
                # Checked and started under the lock that stop() takes: a stop that comes while
                # this run is being launched is never lost (it either prevents or stops it).
                with self._starting:
                    if self._stop.is_set():
                        break
                    session = RunSession(point.config, db_path=self.db_path, telemetry_hz=self.telemetry_hz,
                                         experiment_id=self.experiment_id, label=point.label,
                                         on_event=self.on_event, on_samples=self.on_samples)
                    self._session = session
                    session.start()
                result = session.wait()
                self._session = None
                if result.store_failed:   # every later run would fail the same way: the experiment ends here
                    raise sqlite3.OperationalError(result.error)
                if result.status == "finished" and result.summary and result.summary.step_time_s is not None:
                    runs.append(result.summary)
                elif result.status == "finished":  # every step was warm-up: nothing to compare
                    failures.append((result.run_id, "finished without a measured step (--steps not above --warmup)"))
                elif result.status == "failed":
                    failures.append((result.run_id, result.error))
            if runs:
                results.append(reduce_point(point, runs))
            elif failures:
                results.append(failed_point(point.label, point.config.strategy, point.x, failures[0][1],
                                            [r for r, _ in failures]))
            if self._stop.is_set():
                break
        results = with_predictions(results, self.db_path)
        automatic = next((p for p in results if p.x is None and p.label.startswith("balanced") and p.split), None)
        best, tied = best_and_tied(results)
        summary = ExperimentResult(experiment_id=self.experiment_id, name=self.preset.name,
                                   status="stopped" if self._stop.is_set() else "finished",
                                   best=best, tied=tied, points=results, notes=self.notes,
                                   automatic_split=automatic.split if automatic else None)
        with open_store(self.db_path) as store:
            store.finish_experiment(self.experiment_id, summary)
        return summary


def reduce_point(point: Point, runs: list[RunSummary]) -> ExperimentPoint:
    """A point over its repeats (docs/summary.md): the one reduction of runs that every view reads."""
    first = runs[0]
    per_run = [r.stage_busy for r in runs if r.stage_busy]
    stage_busy = [statistics.fmean(v) for v in zip(*per_run)] if per_run else None
    return ExperimentPoint(
        label=point.label,
        strategy=point.config.strategy,
        x=point.x,
        devices=first.devices,
        split=first.split,
        micro_batches=first.micro_batches,
        schedule=first.schedule,
        step_time_s=mean_std([r.step_time_s.mean for r in runs], [r.step_time_s.std for r in runs]),
        step_time_range=[min(r.step_time_s.mean for r in runs), max(r.step_time_s.mean for r in runs)],
        throughput=mean_std([r.throughput.mean for r in runs], [r.throughput.std for r in runs]),
        bubble=Bubble(measured=_mean_of([r.bubble.measured for r in runs]), theory=first.bubble.theory,
                      formula=first.bubble.formula),
        devices_busy=[statistics.fmean(v) for v in zip(*(r.devices_busy or [] for r in runs))],
        # Balance of the mean busy shares, so the figure and the shares shown beside it agree.
        stage_busy=stage_busy,
        stage_balance=stage_balance(point.config.strategy, first.devices, stage_busy),
        util_mean=first.telemetry.util_mean if first.telemetry else None,
        peak_mem_bytes=first.telemetry.mem_peak_bytes if first.telemetry else None,
        batch_split=first.common_batch_split,
        run_ids=[r.run_id for r in runs],
        tensor_memory=first.tensor_memory,
        communication=first.communication,
        disturbed=_disturbed(runs),
    )


def _disturbed(runs: list[RunSummary]) -> str | None:
    """The point's "disturbed" mark: its first disturbed run's, with how many of its runs were."""
    marks = [r.telemetry.disturbed for r in runs if r.telemetry and r.telemetry.disturbed]
    if not marks:
        return None
    return marks[0] if len(runs) == 1 else f"{len(marks)} of {len(runs)} runs disturbed; {marks[0]}"


def with_predictions(points: list[ExperimentPoint], db_path) -> list[ExperimentPoint]:
    """Each point's step time as engine.plan.what_if predicts it from the first run of the first measured pipeline
    point with micro-batches (else the naive split's: GPipe with one, whose per-call costs say less about
    smaller micro-batches), so a sweep shows measured beside predicted. Only for points on the reference's
    devices, with its split, or a split of their own for another number of stages per device (a what-if
    keeps the model's cut per device): a split-point sweep's other splits, or other device counts, get none.
    Computed by ``main.py what-if`` in a child (the multi-stage schedules' lists need torch, which neither
    the command line's process nor the app's imports); an experiment whose prediction fails keeps its points."""
    from engine.run.session import ROOT
    staged = [p for p in points if p.step_time_s is not None and p.split and p.run_ids]
    reference = next((p for p in staged if (p.micro_batches or 1) > 1), staged[0] if staged else None)
    if reference is None:
        return points
    argv = ["what-if", reference.run_ids[0], "--json", *(["--db", str(db_path)] if db_path is not None else [])]
    try:
        # Forked by the fork server the runs used (torch already imported there): a fresh interpreter's imports
        # took 3.5 s at every experiment's end.
        done = forkserver.run_module("main", input="", argv=argv, env=dict(os.environ), cwd=ROOT, timeout=120)
        rows = json.loads(done.stdout) if done.returncode == 0 else []
    except (OSError, ValueError, subprocess.TimeoutExpired, forkserver.ForkServerError):
        rows = []
    predicted = {(r["schedule"], r["stages_per_device"], r["micro_batches"]): r["step_time_s"] for r in rows}

    def comparable(point: ExperimentPoint) -> bool:
        return (point.split is not None and point.devices == reference.devices
                and (point.split == reference.split or point.stages_per_device != reference.stages_per_device))
    return [dataclasses.replace(p, predicted_step_s=predicted.get(
                (p.schedule or "gpipe", p.stages_per_device, p.micro_batches or 1))) if comparable(p) else p
            for p in points]


def _mean_of(values: list) -> float | None:
    """The mean of the values measured (a run of another version may lack one), None if none was."""
    measured = [v for v in values if v is not None]
    return statistics.fmean(measured) if measured else None


def failed_point(label: str, strategy: str | None, x: float | None, error: str, run_ids: list[str]) -> ExperimentPoint:
    """A point none of whose runs could be measured: shown, so a sweep never hides a point that could not run."""
    return ExperimentPoint(label=label, strategy=strategy, x=x, error=error, run_ids=run_ids)


def stored_result(store, experiment: ExperimentRecord) -> ExperimentResult:
    """An experiment as stored: its result, or for one that never finished (the app closed, the machine
    went down), the result rebuilt from the runs it kept, by the same reduction (status "incomplete")."""
    if experiment.result is not None:
        return experiment.result
    planned = {p["label"]: p for p in experiment.params.get("points", []) if isinstance(p, dict) and "label" in p}
    groups: dict[str, list] = {}
    for run in reversed(store.list_runs(experiment_id=experiment.id)):  # oldest first: the preset's order
        if run.status == "finished" and run.summary:
            groups.setdefault(run.label or run.id, []).append(run)
    points = []
    for label, runs in groups.items():
        x = planned.get(label, {}).get("x")
        measured = [r.summary for r in runs if r.summary.step_time_s and r.summary.throughput]
        if not measured:
            points.append(failed_point(label, runs[0].summary.strategy, x, "its runs have no measured step",
                                       [r.id for r in runs]))
            continue
        try:
            point = Point(label, ExperimentConfig.from_dict(planned.get(label, {}).get("config") or runs[0].config), x)
            points.append(reduce_point(point, measured))
        except (AttributeError, KeyError, TypeError, ValueError, statistics.StatisticsError) as exc:
            # Runs stored by another version: shown as a point that could not be read, not a broken history.
            points.append(failed_point(label, runs[0].summary.strategy, x,
                                       f"could not be rebuilt from its runs: {type(exc).__name__}: {exc}",
                                       [r.id for r in runs]))
    best, tied = best_and_tied(points)
    return ExperimentResult(experiment_id=experiment.id, name=experiment.name, status="incomplete",
                            best=best, tied=tied, points=points)


def best_and_tied(points: list[ExperimentPoint]) -> tuple[str | None, list[str]]:
    """The fastest of every point measured (a sweep's automatic split too, so "best" means the same in the
    bars, the table and the sweep that show them all), and the points whose spread reaches into its
    (ExperimentPoint.spread): where there are any, no point is best, they are tied."""
    measured = [p for p in points if p.step_time_s is not None]
    if not measured:
        return None, []
    fastest = min(measured, key=lambda p: p.step_time_s.mean)
    reach = fastest.spread()[1]
    tied = [p.label for p in sorted(measured, key=lambda p: p.step_time_s.mean)
            if p is not fastest and p.spread()[0] <= reach]
    return fastest.label, tied
