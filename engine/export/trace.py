"""A stored run as Chrome Trace Event JSON, which Perfetto (ui.perfetto.dev) and chrome://tracing open.

One process per device (in the run's device order), its intervals as complete
slices ("X") on as few threads as keep every thread's slices nested, each slice's
step in its args, and for a compute slice of a pipeline its stage and micro-batch
(named as torch names the action, "forward 0F1": engine.figures.schedule_plan.measured_actions); the device's
telemetry as counter tracks ("C": utilization, memory); and, for a split model, flow arrows ("s"/"f") from
the stage that hands an activation or gradient on to the one that takes it.
One clock: microseconds since the run started, the store's clock for intervals
and samples alike. Only the steps whose intervals the run kept are in it (all
of them with ``--timeline all``; a sample otherwise: engine.record.timeline_keeper).
A run with ``--profile-steps`` adds each rank's torch.profiler slices to its
device's process, on threads of their own, moved onto the run's clock. An
experiment's trace holds its runs one after another, each device of each run a
process named for the run's point (``experiment_trace_document``).

The flows join a micro-batch's forward on one stage to its forward on the next (and its backward the
other way) as the schedule's plan pairs them, the plan the Plan tab draws: every schedule, several stages
per device included. The naive split has no plan: its stages take micro-batches in order, and the k-th
forward of a step on one device goes to the k-th on the next. The last stage's forward of a micro-batch and
its loss, timed as two forwards, count as one.
"""
from __future__ import annotations

import json
from collections import defaultdict

from engine.export.errors import ExportError
from engine.figures.schedule_plan import action_label, measured_actions
from engine.store import Store

US = 1e6


def _lanes(slices: list[tuple[float, float]]) -> list[int]:
    """A thread for each slice (sorted by start), so that on every thread slices nest or follow each other."""
    open_by_lane: list[list[float]] = []  # per lane, the ends of the slices still open, innermost last
    lanes = []
    for t0, t1 in slices:
        for lane, ends in enumerate(open_by_lane):
            while ends and ends[-1] <= t0:
                ends.pop()
            if not ends or t1 <= ends[-1]:
                ends.append(t1)
                lanes.append(lane)
                break
        else:
            open_by_lane.append([t1])
            lanes.append(len(open_by_lane) - 1)
    return lanes


def _work_pieces(rows: list[tuple], kind: str) -> list[tuple[float, float]]:
    """One device's slices of ``kind`` in one step, in time order."""
    return sorted((t0, t1) for _, _, k, t0, t1 in rows if k == kind)


def _in_pairs(slices: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Each two slices as one: the last stage times each micro-batch's loss as a forward of its own."""
    return [(a[0], b[1]) for a, b in zip(slices[::2], slices[1::2], strict=False)]


def trace_document(store: Store, run_id: str) -> dict:
    run = store.get_run(run_id)
    if run is None:
        raise ExportError(f"no run with id {run_id!r}")
    summary = run.summary
    rows = store.timeline(run_id)
    devices = list(summary.devices) if summary and summary.devices else []
    for _, device, _, _, _ in rows:
        if device not in devices:
            devices.append(device)
    pid = {device: i + 1 for i, device in enumerate(devices)}
    events: list[dict] = []
    for device, p in pid.items():
        events.append({"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": device}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": p, "tid": 0, "args": {"sort_index": p}})
    by_device: dict[str, list[tuple]] = defaultdict(list)
    for row in rows:
        by_device[row[1]].append(row)
    thread_of: dict[tuple[str, str, float], int] = {}  # (device, "start" or "end", time) -> its slice's thread
    # Which stage and micro-batch each compute slice ran, from the schedule's plan (engine.figures.schedule_plan).
    actions = measured_actions(summary.plan or [], devices, rows) if summary else {}
    for device, mine in by_device.items():
        mine.sort(key=lambda r: (r[3], -r[4]))
        for row, lane in zip(mine, _lanes([(r[3], r[4]) for r in mine]), strict=True):
            step, _, kind, t0, t1 = row
            thread_of[(device, "start", t0)] = thread_of[(device, "end", t1)] = lane
            args, name = {"step": step}, kind
            if tuple(row) in actions:
                stage, micro_batch = actions[tuple(row)]
                args.update(stage=stage, micro_batch=micro_batch)
                name = f"{kind} {action_label(kind, stage, micro_batch)}"
            events.append({"ph": "X", "name": name, "cat": kind, "ts": t0 * US, "dur": max(0.0, t1 - t0) * US,
                           "pid": pid[device], "tid": lane, "args": args})
    for sample in store.samples(run_id):
        if sample.device not in pid:
            continue
        if sample.util is not None:
            events.append({"ph": "C", "name": "utilization %", "pid": pid[sample.device], "ts": sample.t * US,
                           "args": {"util": sample.util}})
        if sample.mem_used is not None:
            events.append({"ph": "C", "name": "memory MiB", "pid": pid[sample.device], "ts": sample.t * US,
                           "args": {"used": sample.mem_used / 2**20}})
    events.extend(_flows(summary, by_device, actions, pid, thread_of))
    for _rank, device, t0, trace in store.profiles(run_id):
        if device in pid:
            events.extend(_profiler_events(trace, pid[device], t0))
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"run_id": run_id, "strategy": run.config.strategy, "clock": "seconds since the "
                          "run started x 1e6 (microseconds), intervals and telemetry alike"}}


PROFILER_THREADS = 100   # a device's torch.profiler threads come after its own lanes


def _profiler_events(trace: dict, pid: int, t0: float) -> list[dict]:
    """A rank's torch.profiler slices in the device's process, on the run's clock: the first profiled step's
    mark (engine.measure.profiling.STEP_MARK) placed where that step began."""
    from engine.measure.profiling import STEP_MARK
    slices = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and "ts" in e]
    marks = [e for e in slices if str(e.get("name", "")).startswith(STEP_MARK)]
    if not marks:
        return []
    offset = t0 * US - min(e["ts"] for e in marks)
    by_thread: dict = defaultdict(list)
    for e in slices:
        by_thread[e.get("tid")].append(e)
    events, tid = [], PROFILER_THREADS
    for original, mine in by_thread.items():
        # The profiler's slices on a thread mostly nest; the few that overlap (asynchronous ops) go on a
        # thread of their own beside it, as the run's own slices do.
        mine.sort(key=lambda e: (e["ts"], -e.get("dur", 0.0)))
        lanes = _lanes([(e["ts"], e["ts"] + max(0.0, e.get("dur", 0.0))) for e in mine])
        for e, lane in zip(mine, lanes, strict=True):
            events.append({**e, "pid": pid, "tid": tid + lane, "ts": e["ts"] + offset,
                           "dur": max(0.0, e.get("dur", 0.0))})
        for lane in range(max(lanes) + 1):
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid + lane,
                           "args": {"name": f"torch.profiler {original}" + (f" ({lane + 1})" if lane else "")}})
        tid += max(lanes) + 1
    return events


def _flows(summary, by_device, actions, pid, thread_of) -> list[dict]:
    """Arrows from each stage's forward of a micro-batch to the next stage's, and back for the backwards: by
    the plan's pairing where the run has one (every schedule, several stages per device too), else in order."""
    if actions:
        return _plan_flows(actions, pid, thread_of)
    return _ordered_flows(summary, by_device, pid, thread_of)


# Which slices hand a micro-batch on: a forward to the next stage, a full or input backward to the one before
# (a weight backward stays on its stage).
DIRECTION = {"forward": 1, "backward": -1, "backward-input": -1}


def _plan_flows(actions: dict, pid, thread_of) -> list[dict]:
    """From each compute slice the plan names (engine.figures.schedule_plan.measured_actions: stage and micro-batch) to
    the slice of the same micro-batch on the neighbouring stage, on whichever device it runs (a V's two stages
    on one device hand over locally: the arrow stays in its process). The last stage's loss, timed as a second
    forward of its micro-batch, is neither end."""
    slots: dict[tuple, list[tuple]] = defaultdict(list)   # (step, direction, stage, micro-batch) -> its slices
    for row, (stage, micro_batch) in actions.items():
        step, _, kind, _, _ = row
        if kind in DIRECTION:
            slots[(step, DIRECTION[kind], stage, micro_batch)].append(row)
    events, flow_id = [], 0
    for (step, direction, stage, micro_batch), rows in sorted(slots.items(), key=lambda item: str(item[0])):
        takes = slots.get((step, direction, stage + direction, micro_batch))
        if not takes:
            continue
        (_, src, kind, _, s1), (_, dst, kind_to, d0, _) = min(rows, key=lambda r: r[3]), min(takes, key=lambda r: r[3])
        if d0 < s1:   # the measured slices contradict the plan's order: no arrow rather than a wrong one
            continue
        flow_id += 1
        name = "forward hand-over" if direction > 0 else "backward hand-over"
        args = {"step": step, "from": action_label(kind, stage, micro_batch),
                "to": action_label(kind_to, stage + direction, micro_batch)}
        events.append({"ph": "s", "id": flow_id, "name": name, "cat": "flow", "pid": pid[src],
                       "tid": thread_of.get((src, "end", s1), 0), "ts": s1 * US - 1, "args": args})
        events.append({"ph": "f", "bp": "e", "id": flow_id, "name": name, "cat": "flow", "pid": pid[dst],
                       "tid": thread_of.get((dst, "start", d0), 0), "ts": d0 * US + 1, "args": args})
    return events


def _ordered_flows(summary, by_device, pid, thread_of) -> list[dict]:
    """Without a plan (the naive split): each stage's k-th forward of a step to the next stage's k-th, and back
    for the backwards; one stage per device, which take micro-batches in order."""
    stages = list(summary.devices) if summary and summary.split and summary.devices else []
    if len(stages) < 2 or len(summary.split) + 1 != len(stages) or len(set(stages)) != len(stages):
        return []
    steps: dict[str, dict[int, list]] = {d: defaultdict(list) for d in stages}
    for device in stages:
        for row in by_device.get(device, []):
            steps[device][row[0]].append(row)
    events, flow_id = [], 0
    for a, b in zip(stages, stages[1:], strict=False):
        for step in sorted(set(steps[a]) & set(steps[b])):
            for kind, src, dst in (("forward", a, b), ("backward", b, a)):
                sends = _work_pieces(steps[src][step], kind)
                takes = _work_pieces(steps[dst][step], kind)
                if kind == "forward" and dst == stages[-1] and len(takes) == 2 * len(sends):
                    takes = _in_pairs(takes)
                for (_s0, s1), (d0, _d1) in zip(sends, takes, strict=False):  # counts may differ: the unpaired left out
                    if d0 < s1:  # not after the piece it would come from: not this pairing
                        continue
                    flow_id += 1
                    events.append({"ph": "s", "id": flow_id, "name": f"{kind} hand-over", "cat": "flow",
                                   "pid": pid[src], "tid": thread_of.get((src, "end", s1), 0), "ts": s1 * US - 1})
                    events.append({"ph": "f", "bp": "e", "id": flow_id, "name": f"{kind} hand-over", "cat": "flow",
                                   "pid": pid[dst], "tid": thread_of.get((dst, "start", d0), 0), "ts": d0 * US + 1})
    return events


RUN_PIDS = 1000   # an experiment's run k has processes k * RUN_PIDS + 1, ...: its devices, in order


def experiment_trace_document(store: Store, experiment_id: str) -> dict:
    """An experiment's runs in one trace, one after another as they ran: each run's devices are processes
    named for its point ("pipeline m=4 · cpu:0"), its clock moved by when it started after the first."""
    runs = sorted(store.list_runs(experiment_id=experiment_id), key=lambda r: r.started)
    if not runs:
        raise ExportError(f"experiment {experiment_id!r} has no runs to trace")
    events: list[dict] = []
    for k, run in enumerate(runs):
        shift_us = (run.started - runs[0].started) * US
        name = run.label or run.id
        for event in trace_document(store, run.id)["traceEvents"]:
            event = {**event, "pid": (k + 1) * RUN_PIDS + event["pid"]}
            if "ts" in event:
                event["ts"] += shift_us
            if event.get("name") == "process_name":
                event["args"] = {"name": f"{name} · {event['args']['name']}"}
            elif event.get("name") == "process_sort_index":
                event["args"] = {"sort_index": event["pid"]}
            elif event.get("cat") == "flow":
                event["id"] += (k + 1) * 10 ** 7   # flow ids are global in a trace
            events.append(event)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"experiment_id": experiment_id, "runs": [r.id for r in runs],
                          "clock": "seconds since the experiment's first run started x 1e6 (microseconds)"}}


def write_trace(store: Store, item_id: str, path, kind: str = "run") -> None:
    document = trace_document(store, item_id) if kind == "run" else experiment_trace_document(store, item_id)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(document, f)
