"""``main.py trace PATH... [--json] [--iterations A:B] [--store]``: a job's profiler traces read, as a table or
JSON (docs/traces.md), and with ``--store`` kept in the run store as a run of kind trace (engine/traces/as_run.py:
what the app's File › Open traces… runs). Bad input is one line, ``error: ...``, and exit status 2."""
from __future__ import annotations

import json
import os
import sys
import tempfile

from engine.traces.errors import TraceError
from engine.traces.figures import CONSECUTIVE_KERNEL_DELAY
from engine.traces.results import TraceJob
from engine.wire import codec

EXIT_OK, EXIT_INVALID = 0, 2
CATEGORY_WORDS = {"host_wait": "host wait", "kernel_wait": "kernel wait", "other": "other"}
ITERATION_LINES = 20


def add_parser(sub) -> None:
    trace = sub.add_parser("trace", help="read PyTorch profiler (Kineto) traces, one file per rank: every GPU's "
                                         "idle, compute and communication time, idle time by cause, the straggler")
    trace.add_argument("paths", nargs="*", metavar="PATH",
                       help="trace files (.json or .json.gz, one per rank) or folders of them")
    trace.add_argument("--run", default=None, metavar="RUN_ID",
                       help="instead of files: the traces a run stored (`run --profile-steps`, `watch "
                            "--profile-steps`), one per rank")
    trace.add_argument("--db", default=None, help="with --run or --store: the run store (default: SPLITSCOPE_DB or "
                                                  "the user data dir)")
    trace.add_argument("--store", action="store_true",
                       help="keep the job in the run store as a run of kind trace (each rank a device; its figures, "
                            "the last iterations' kernels by kind and idle gaps by cause; the paths, not the traces): "
                            "the history lists it, `export RUN_ID` writes it; its id is printed (--json: run_id); "
                            "with --run, named for that run, to be compared with it (its kernels beside its steps)")
    trace.add_argument("--progress", action="store_true",
                       help="a line on stderr as each rank's file is read: progress: N/TOTAL FILE")
    trace.add_argument("--json", action="store_true", help="the figures as JSON")
    trace.add_argument("--iterations", default=None, metavar="A:B",
                       help="only ProfilerStep#A to #B (both included; A: or :B leaves a side open)")
    trace.add_argument("--kernel-delay", type=float, default=CONSECUTIVE_KERNEL_DELAY, metavar="US",
                       help="gaps between a stream's kernels shorter than this are kernel wait (launch overhead), "
                            f"as HTA's consecutive_kernel_delay (default {CONSECUTIVE_KERNEL_DELAY:g} µs)")
    trace.add_argument("--workers", type=int, default=None, metavar="N",
                       help="processes reading the files side by side (default: one per core where the files "
                            "add up to 64 MB or more, else one)")


def cmd_trace(args) -> int:
    from engine.results import to_json
    from engine.traces.job import read_job_and_lanes
    from engine.traces.lanes import LaneRequest
    if args.kernel_delay < 0:
        print(f"error: --kernel-delay: must be 0 or more, got {args.kernel_delay:g}", file=sys.stderr)
        return EXIT_INVALID
    if args.workers is not None and args.workers < 1:
        print(f"error: --workers: must be at least 1, got {args.workers}", file=sys.stderr)
        return EXIT_INVALID
    if bool(args.paths) == bool(args.run):
        print("error: give trace files or folders, or --run RUN_ID (one of them)", file=sys.stderr)
        return EXIT_INVALID
    if args.store:   # said before minutes of reading, not after
        from engine.store.command import read_only_problem
        read_only = read_only_problem(args.db, "the traces cannot be stored in it")
        if read_only:
            print(f"error: {read_only}", file=sys.stderr)
            return EXIT_INVALID
    with tempfile.TemporaryDirectory(prefix="splitscope-traces-") as folder:
        try:
            paths = args.paths or [stored_traces(args.run, args.db, folder)]
            job, lanes = read_job_and_lanes(paths, iterations=args.iterations,
                                            consecutive_kernel_delay=args.kernel_delay, workers=args.workers,
                                            lanes=LaneRequest() if args.store else None,
                                            progress=_say_progress if args.progress else None)
        except TraceError as exc:
            print("error: " + " ".join(str(exc).splitlines()), file=sys.stderr)
            return EXIT_INVALID
    run_id = _store(job, lanes, paths, args.db, args.run) if args.store else None
    if args.json:
        print(codec.dumps({**to_json(job), **({"run_id": run_id} if run_id else {})}, compact=False))
    else:
        print(job_table(job) + (f"\n\nstored as run {run_id} (the app's History; main.py export {run_id})"
                                if run_id else ""))
    return EXIT_OK


def _say_progress(done: int, total: int, path) -> None:
    print(f"progress: {done}/{total} {path}", file=sys.stderr, flush=True)


def _store(job: TraceJob, lanes, paths, db: str | None, of_run: str | None) -> str:
    """The job stored as a run of kind trace (engine/traces/as_run.py); its id. ``of_run``: the run whose stored
    traces were read (``--run``), which the new run is named for. A store that fails raises sqlite3.Error, which
    engine/cli/ says in one line."""
    from engine.store import open_store
    from engine.traces.as_run import store_trace_run, trace_run
    with open_store(db) as store:
        return store_trace_run(store, trace_run(job, lanes, paths, of_run))


def stored_traces(run_id: str, db: str | None, folder: str) -> str:
    """The run's stored torch.profiler traces written into ``folder`` as rank-N.json (the reader takes a rank from
    the name where the trace does not say it); TraceError where the run has none."""
    from engine.store.command import open_for_reading
    with open_for_reading(db) as store:
        if store.get_run(run_id) is None:
            raise TraceError(f"--run: no run {run_id!r} in the store")
        profiles = store.profiles(run_id)
    if not profiles:
        raise TraceError(f"--run: run {run_id} stored no profiler traces (give it --profile-steps)")
    for rank, _device, _t0, trace in profiles:
        with open(os.path.join(folder, f"rank-{rank}.json"), "w") as f:
            json.dump(trace, f)
    return folder


def job_table(job: TraceJob) -> str:
    lines = []
    world = f" of {job.world_size}" if job.world_size else ""
    chosen = f"ProfilerStep#{job.iterations_chosen}" if job.iterations_chosen else "all"
    lines.append(f"{len(job.ranks)}{world} rank{'' if len(job.ranks) == 1 and not world else 's'} read; "
                 f"iterations: {chosen}")
    lines.append("")
    header = (f"{'rank':>5} {'idle %':>7} {'compute %':>10} {'non-compute %':>14} {'overlap %':>10}  "
              f"{'most idle time (of streams idle)':<34} {'wait at collectives':>20}")
    lines.append(header)
    for r in job.ranks:
        if r.gpu_events_read == 0:
            steps = (f", ProfilerStep#{r.profiler_steps[0]} to #{r.profiler_steps[-1]}" if r.profiler_steps
                     else "")
            lines.append(f"{r.rank:>5}  no GPU kernels: CPU ops only ({r.cpu_ops} ops{steps})")
            continue
        overlap = f"{r.comm_comp_overlap_pct:.1f}" if r.comm_comp_overlap_pct is not None else "-"
        top = (f"{CATEGORY_WORDS.get(r.top_idle_category, r.top_idle_category)} {r.top_idle_category_pct:.0f} %"
               if r.top_idle_category else "-")
        lines.append(f"{r.rank:>5} {r.idle_pct:>7.1f} {r.compute_pct:>10.1f} {r.non_compute_pct:>14.1f} "
                     f"{overlap:>10}  {top:<34} {r.wait_at_collectives_us / 1e3:>17.1f} ms")
    if job.kernel_type_pct:
        kinds = sorted(job.kernel_type_pct.items(), key=lambda item: -item[1])
        lines += ["", "kernel time by type, all ranks: " + ", ".join(f"{k} {v:.1f} %" for k, v in kinds if v >= 0.05)]
    if job.iterations:
        lines += ["", "iterations:"]
        for it in job.iterations[:ITERATION_LINES]:
            idle = f"{it.job_idle_pct:.1f} %" if it.job_idle_pct is not None else "-"
            straggler = (f"; straggler rank {it.straggler} (set {it.wait_set_us / 1e3:.1f} ms of wait)"
                         if it.straggler is not None else "")
            lines.append(f"  #{it.iteration}: {it.span_us / 1e3:.1f} ms, every GPU idle at once {idle}{straggler}")
        if len(job.iterations) > ITERATION_LINES:
            lines.append(f"  ... {len(job.iterations) - ITERATION_LINES} more (--json has them all)")
    if job.straggler is not None:
        lines += ["", f"straggler: {job.straggler.text}"]
    elif len(job.ranks) > 1:
        lines += ["", f"straggler: none found ({job.collectives_matched} collectives matched across ranks)"]
    if job.findings:
        lines += ["", "findings:"] + [f"  {f.severity:<8} {f.text}" for f in job.findings]
    if job.notes:
        lines += ["", "notes:"] + [f"  {note}" for note in job.notes]
    return "\n".join(lines)
