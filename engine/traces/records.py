"""One rank's trace kept compact while it is read: a few numbers per GPU event and per CUDA launch in typed
arrays, counts for the CPU ops, never the events' dicts (``RankRecords.add`` takes each event and drops it).

What is kept is what HTA 0.5.0 keeps of a trace (``hta/common/trace_parser.py``): an event without ``cat`` or
``dur`` is passed over (its ``dropna``), so is the profiler's own span (``cat`` "Trace"); ``args.stream`` and
``args.correlation`` are read as integers, -1 where missing or not a number. An event on a stream (``stream``
not -1) is a GPU event; one on a stream with a correlation (>= 0) is a kernel, memcpy, memset or sync, which the
CPU launched; any other event is the CPU's, and one with a correlation is a CUDA runtime (or driver) call, the
launch of the GPU event with that correlation."""
from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field

from engine.traces.kernels import KERNEL_CATEGORIES, SYNC_NAMES

STEP_NAME = re.compile(r"ProfilerStep\s*#\s*(\d+)")
# Kineto's NCCL metadata (on the collective's kernel in recent PyTorch, else on its record_param_comms CPU op)
COLLECTIVE_KEYS = ("Collective name", "In msg nelems", "Out msg nelems", "dtype", "Group size")


def _int_arg(value) -> int:
    """HTA's reading of an integer arg: int(value), -1 where it is no number."""
    if type(value) is int:
        return value
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return -1


@dataclass
class RankRecords:
    path: str
    # GPU events (on a stream), in file order
    stream: array = field(default_factory=lambda: array("q"))
    ts: array = field(default_factory=lambda: array("d"))
    dur: array = field(default_factory=lambda: array("d"))
    name: array = field(default_factory=lambda: array("l"))          # index into ``names``
    correlation: array = field(default_factory=lambda: array("q"))
    launched: bytearray = field(default_factory=bytearray)           # 1: a kernel (stream and correlation >= 0)
    kernel_category: bytearray = field(default_factory=bytearray)    # 1: one of HTA's idle-breakdown categories
    # CPU events with a correlation (the launches), in file order
    launch_correlation: array = field(default_factory=lambda: array("q"))
    launch_ts: array = field(default_factory=lambda: array("d"))
    # ProfilerStep#N annotations: (N, ts, dur)
    steps: list[tuple[int, float, float]] = field(default_factory=list)
    step_names: set[str] = field(default_factory=set)
    names: list[str] = field(default_factory=list)
    name_index: dict[str, int] = field(default_factory=dict)
    cpu_ops: dict[str, list[float]] = field(default_factory=dict)     # name -> [count, total µs]
    events_by_category: dict[str, int] = field(default_factory=dict)
    # collective metadata: by GPU event position, and by the External id of the CPU op that carried it
    collective_at: dict[int, dict] = field(default_factory=dict)
    collective_by_external_id: dict[int, dict] = field(default_factory=dict)
    external_id_at: dict[int, int] = field(default_factory=dict)      # NCCL kernel position -> its External id
    # HTA rounds ns-resolution times (ts to the next µs, ends down) when any event's ts is fractional or missing
    fractional_times: bool = False
    passed_over: int = 0                                               # events without cat or dur

    def add(self, event: dict) -> None:
        ts = event.get("ts")
        if type(ts) is not int:
            self.fractional_times = True
        category = event.get("cat")
        duration = event.get("dur")
        if category is None or duration is None or category == "Trace" or ts is None:
            self.passed_over += 1
            return
        counts = self.events_by_category
        counts[category] = counts.get(category, 0) + 1
        args = event.get("args")
        if type(args) is not dict:
            args = {}
        name = event.get("name")
        if type(name) is not str:
            name = str(name)
        stream = _int_arg(args["stream"]) if "stream" in args else -1
        correlation = _int_arg(args["correlation"]) if "correlation" in args else -1
        launched = stream >= 0 and correlation >= 0
        if stream != -1:
            self._add_gpu_event(name, category, stream, correlation, launched, float(ts), float(duration), args)
            if launched:
                return
        elif name in SYNC_NAMES:
            return      # a GPU event to HTA, on no stream: in no figure
        if correlation != -1:
            self.launch_correlation.append(correlation)
            self.launch_ts.append(float(ts))
        if category == "cpu_op":
            op = self.cpu_ops.get(name)
            if op is None:
                self.cpu_ops[name] = [1, float(duration)]
            else:
                op[0] += 1
                op[1] += duration
            if "Collective name" in args and "External id" in args:
                self.collective_by_external_id[_int_arg(args["External id"])] = _collective(args)
        if "ProfilerStep" in name:
            self.step_names.add(name)
            found = STEP_NAME.match(name)
            if found:
                self.steps.append((int(found.group(1)), float(ts), float(duration)))

    def _add_gpu_event(self, name: str, category: str, stream: int, correlation: int, launched: bool,
                       ts: float, duration: float, args: dict) -> None:
        index = self.name_index.get(name)
        if index is None:
            index = self.name_index[name] = len(self.names)
            self.names.append(name)
        position = len(self.ts)
        self.stream.append(stream)
        self.ts.append(ts)
        self.dur.append(duration)
        self.name.append(index)
        self.correlation.append(correlation)
        self.launched.append(launched)
        self.kernel_category.append(category in KERNEL_CATEGORIES)
        if name.startswith("nccl"):
            if "Collective name" in args:
                self.collective_at[position] = _collective(args)
            elif "External id" in args:
                self.external_id_at[position] = _int_arg(args["External id"])

    def collective(self, position: int) -> dict | None:
        """The collective metadata Kineto recorded for the GPU event at ``position``, if any."""
        found = self.collective_at.get(position)
        if found is None and position in self.external_id_at:
            found = self.collective_by_external_id.get(self.external_id_at[position])
        return found


def _collective(args: dict) -> dict:
    return {key: args[key] for key in COLLECTIVE_KEYS if key in args}
