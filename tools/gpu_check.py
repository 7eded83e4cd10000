"""The GPU check: everything a machine with an NVIDIA GPU can show that ours cannot, in one run.

    python3 tools/gpu_check.py [--out gpu-check.json]      # `make gpu-check`
    python3 tools/gpu_check.py --cpu --out cpu-check.json  # the same steps on CPU virtual devices

Needs only python3 with torch, torchvision, nvidia-ml-py, psutil and pytest: no
venv, no Qt (the engine and the CLI run without them). It runs, each as a user
would from the command line:

1. ``pytest -m gpu`` (tests/test_gpu.py);
2. headless runs: resnet50 at the tutorial's setup (batch 120, 128x128, 1000
   classes) with single, model-parallel and pipeline on cuda:0,cuda:0 (the
   tutorial's split, ``--split layer3``), seed-embedding on cpu,cuda:0,
   data-parallel and ddp on cuda:0;
3. compare-strategies on one GPU; the DataLoader's workers (0, 2, 4, 8, pageable and pinned memory) feeding
   resnet50, with the input wait each leaves; resnet50's MFU in float32 and bfloat16, its SM activity (GPM)
   beside its utilization and its energy per sample;
4. NVML sampled at 10 and at 50 Hz during a resnet50 run, each beside
   ``nvidia-smi --query-gpu=utilization.gpu,memory.used -lms 100`` over the same
   steps: the mean utilizations must agree within 10 points.

Every figure goes to one JSON file; a short table goes to stdout. Exit status 0
when every check passed. ``--cpu`` runs steps 2 and 3 on CPU virtual devices at
tiny scale (what CI can run; ``tests/test_gpu_check.py``), and skips 1 and 4.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESNET50 = ["--model", "resnet50", "--steps", "20"]          # batch 120 at 128x128: the model's defaults
TUTORIAL_SPLIT = ["--split", "layer3"]                       # conv1 .. layer2 | layer3 .. fc
SHARDED = ["--model", "mlp", "--width", "1024", "--depth", "8", "--steps", "10", "--optimizer", "adamw",
           "--dtype", "bfloat16"]
AGREEMENT_POINTS = 10.0                                     # NVML vs nvidia-smi, mean utilization
RUN_TIMEOUT_S = 240


@dataclass
class Check:
    name: str
    args: list[str]
    expect: dict = field(default_factory=dict)  # summary keys and the values they must have


def gpu_checks() -> list[Check]:
    shared = ["--devices", "cuda:0,cuda:0", *TUTORIAL_SPLIT]
    return [
        Check("resnet50 single cuda:0", [*RESNET50, "--strategy", "single", "--devices", "cuda:0"]),
        Check("resnet50 model-parallel cuda:0,cuda:0", [*RESNET50, "--strategy", "model-parallel", *shared],
              expect={"split": [8], "devices": ["cuda:0"]}),
        Check("resnet50 pipeline cuda:0,cuda:0 (split size 20)",
              [*RESNET50, "--strategy", "pipeline", *shared, "--split-size", "20"],
              expect={"split": [8], "devices": ["cuda:0"], "micro_batches": 6}),
        Check("seed-embedding model-parallel cpu,cuda:0",
              ["--model", "seed-embedding", "--strategy", "model-parallel", "--devices", "cpu,cuda:0"],
              expect={"devices": ["cpu:0", "cuda:0"]}),
        Check("resnet50 data-parallel cuda:0", [*RESNET50, "--strategy", "data-parallel", "--devices", "cuda:0"]),
        Check("resnet50 ddp cuda:0", [*RESNET50, "--strategy", "ddp", "--devices", "cuda:0"]),
        # Any module on a GPU: torchvision's own modules cut by the tracer, in one process (the stages'
        # ops moved to the GPU as build_stage does; efficientnet's stochastic depth makes tensors in forward).
        Check("torchvision:resnet50 model-parallel cuda:0,cuda:0 (traced)",
              ["--model", "torchvision:resnet50", "--image-size", "128", "--batch-size", "64", "--steps", "10",
               "--strategy", "model-parallel", *shared], expect={"split": [6], "devices": ["cuda:0"]}),
        Check("torchvision:efficientnet_b0 model-parallel cuda:0,cuda:0 (traced)",
              ["--model", "torchvision:efficientnet_b0", "--batch-size", "32", "--steps", "10",
               "--strategy", "model-parallel", "--devices", "cuda:0,cuda:0"], expect={"devices": ["cuda:0"]}),
        # FSDP2 over NCCL on one GPU (a mesh of one: its gather and scatter are copies), AdamW, bfloat16 autocast;
        # tensor-parallel and fsdp+tp need two GPUs or more.
        Check("mlp fsdp cuda:0 adamw bfloat16", [*SHARDED, "--strategy", "fsdp", "--devices", "cuda:0"],
              expect={"optimizer": "adamw", "dtype": "bfloat16"}),
    ]


def cpu_checks() -> list[Check]:
    """The same runs on CPU virtual devices, tiny: what a machine without a GPU can check of this script."""
    tiny = ["--model", "resnet18", "--batch-size", "4", "--steps", "3"]
    return [
        Check("resnet18 single cpu:1", [*tiny, "--strategy", "single", "--devices", "cpu:1"]),
        Check("resnet18 model-parallel cpu:2", [*tiny, "--strategy", "model-parallel", "--devices", "cpu:2",
                                                *TUTORIAL_SPLIT], expect={"split": [5]}),
        Check("resnet18 pipeline cpu:2", [*tiny, "--strategy", "pipeline", "--devices", "cpu:2", *TUTORIAL_SPLIT,
                                          "--split-size", "2"], expect={"split": [5], "micro_batches": 2}),
        Check("seed-embedding model-parallel cpu:2",
              ["--model", "seed-embedding", "--strategy", "model-parallel", "--devices", "cpu:2", "--steps", "3"]),
        Check("resnet18 data-parallel cpu:2", [*tiny, "--strategy", "data-parallel", "--devices", "cpu:2"]),
        Check("resnet18 ddp cpu:2", [*tiny, "--strategy", "ddp", "--devices", "cpu:2"]),
        Check("mlp fsdp cpu:2 adamw bfloat16", ["--model", "mlp", "--width", "64", "--depth", "4", "--steps", "3",
                                                "--optimizer", "adamw", "--dtype", "bfloat16", "--strategy", "fsdp",
                                                "--devices", "cpu:2"],
              expect={"optimizer": "adamw", "dtype": "bfloat16"}),
    ]


def cli(args: list[str], db: Path, timeout: float = RUN_TIMEOUT_S) -> tuple[subprocess.CompletedProcess, float]:
    """``python main.py ARGS --db DB`` (before a watched script's ``--``, whose arguments are the script's), handed
    this script's fork server (engine/forkserver/): torch and the engine are imported once for every run here, not
    once a command."""
    from engine import forkserver
    started = time.time()
    connection = forkserver.hand_over_connection()
    env = dict(os.environ, **({forkserver.CONNECTION_ENV: str(connection.fileno())} if connection else {}))
    try:
        cut = args.index("--") if "--" in args else len(args)
        proc = subprocess.run([sys.executable, str(ROOT / "main.py"), *args[:cut], "--db", str(db), *args[cut:]],
                              cwd=ROOT, env=env,
                              pass_fds=(connection.fileno(),) if connection else (), capture_output=True, text=True,
                              timeout=timeout)
    finally:
        if connection is not None:
            connection.close()
    return proc, time.time() - started


def figures(summary: dict) -> dict:
    """What the report keeps of a run's summary."""
    step, telemetry = summary.get("step_time_s") or {}, summary.get("telemetry") or {}
    return {
        "status": summary.get("status"), "devices": summary.get("devices"), "split": summary.get("split"),
        "micro_batches": summary.get("micro_batches"),
        "step_ms": round(step["mean"] * 1000, 3) if step.get("mean") is not None else None,
        "throughput": round(summary["throughput"]["mean"], 1) if summary.get("throughput") else None,
        "bubble": summary.get("bubble"), "devices_busy": summary.get("devices_busy"),
        "util_mean": telemetry.get("util_mean"), "mem_peak_bytes": telemetry.get("mem_peak_bytes"),
        "param_norm": summary.get("param_norm"), "notes": summary.get("notes"),
        "tensor_memory": summary.get("tensor_memory"), "communication": summary.get("communication"),
        **efficiency_figures(summary),
    }


def efficiency_figures(summary: dict) -> dict:
    """MFU and what it is made of, per device (engine.results.DeviceEfficiency, read back from the JSON), the
    GPUs' SM activity beside their utilization, and the energy."""
    from engine.results import RunSummary, from_json
    run = from_json(RunSummary, summary) or RunSummary()
    telemetry, efficiency = run.telemetry, run.efficiency
    devices = [{"device": d.device, "flops_per_step": d.flops_per_step, "mfu": d.mfu,
                "achieved_flops_per_s": d.achieved_flops_per_s, "busy_flops_per_s": d.busy_flops_per_s,
                "measured_peak": d.measured_peak and d.measured_peak.flops_per_s,
                "measured_peak_source": d.measured_peak and d.measured_peak.source,
                "datasheet_peak": d.datasheet_peak and d.datasheet_peak.flops_per_s,
                "energy_j_per_step": d.energy_j_per_step} for d in (efficiency.devices if efficiency else [])]
    return {"mfu": efficiency.mfu if efficiency else None, "efficiency": devices,
            "samples_per_joule": efficiency.samples_per_joule if efficiency else None,
            "sm_active_mean": telemetry.sm_active_mean if telemetry else None,
            "efficiency_notes": efficiency.notes if efficiency else None}


def run_check(check: Check, db: Path) -> dict:
    try:
        proc, wall = cli(["run", *check.args, "--json"], db)
    except subprocess.TimeoutExpired:
        return {"name": check.name, "ok": False, "error": f"no result within {RUN_TIMEOUT_S} s"}
    out = {"name": check.name, "args": check.args, "wall_s": round(wall, 1), "exit": proc.returncode}
    try:
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {**out, "ok": False, "error": proc.stderr.strip()[-2000:]}
    out.update(figures(summary))
    wrong = {k: summary.get(k) for k, v in check.expect.items() if summary.get(k) != v}
    out["ok"] = proc.returncode == 0 and summary.get("status") == "finished" and not wrong
    if wrong:
        out["unexpected"] = {k: {"got": v, "want": check.expect[k]} for k, v in wrong.items()}
    if proc.returncode:
        out["error"] = summary.get("error") or proc.stderr.strip()[-2000:]
    return out


def compare_strategies(db: Path, cpu: bool) -> dict:
    args = ["experiment", "compare-strategies", "--repeats", "1", "--steps", "6", "--json"]
    args += ["--devices", "cpu:2", "--model", "mlp", "--width", "64", "--depth", "4", "--batch-size", "32"] if cpu \
        else ["--devices", "cuda:0"]
    try:
        proc, wall = cli(args, db, timeout=4 * RUN_TIMEOUT_S)
        result = json.loads(proc.stdout)
    except (subprocess.TimeoutExpired, ValueError) as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    points = {p["label"]: {"devices": p.get("devices"), "error": p.get("error"),
                           "step_ms": round(p["step_time_s"]["mean"] * 1000, 3) if p.get("step_time_s") else None,
                           "bubble": (p.get("bubble") or {}).get("measured")}
              for p in result.get("points", [])}
    return {"ok": proc.returncode == 0 and all(p["error"] is None for p in points.values()), "wall_s": round(wall, 1),
            "best": result.get("best"), "notes": result.get("notes"), "points": points}


def efficiency(db: Path, cpu: bool) -> dict:
    """MFU in float32 and bfloat16: resnet50 at the tutorial's setup on cuda:0 (its SM activity beside its
    utilization, its energy per sample); on CPU, the mlp on cpu:1."""
    base = (["--model", "mlp", "--width", "256", "--depth", "4", "--steps", "4", "--devices", "cpu:1"] if cpu
            else [*RESNET50, "--devices", "cuda:0"])
    runs = []
    for dtype in ("float32", "bfloat16"):
        check = Check(f"{base[1]} single {base[-1]} {dtype}", [*base, "--strategy", "single", "--dtype", dtype])
        result = run_check(check, db)
        result["ok"] = result["ok"] and result.get("mfu") is not None and 0 < result["mfu"] <= 1
        runs.append(result)
    return {"ok": all(r["ok"] for r in runs), "runs": runs}


def input_pipeline(db: Path, cpu: bool) -> dict:
    """Throughput and the input wait against DataLoader workers (--input-prep loader: JPEG decode and augment per
    sample): resnet50 at the tutorial's setup on cuda:0 with 0, 2, 4 and 8 workers, pageable and pinned memory;
    on CPU, resnet18 on cpu:1 with 0 and 1."""
    if cpu:
        base, settings = ["--model", "resnet18", "--batch-size", "8", "--steps", "3", "--devices", "cpu:1"], \
            [(0, False), (1, False)]
    else:
        base = ["--model", "resnet50", "--steps", "10", "--devices", "cuda:0"]
        settings = [(w, pinned) for pinned in (False, True) for w in (0, 2, 4, 8)]
    points = []
    for workers, pinned in settings:
        args = ["run", *base, "--input-prep", "loader", "--loader-workers", str(workers),
                *(["--pin-memory"] if pinned else []), "--json"]
        proc, wall = cli(args, db)
        try:
            summary = json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            summary = {"error": proc.stderr.strip()[-2000:]}
        kinds = summary.get("time_by_kind") or []
        # engine/record/time_by_kind.py input_share, read from the JSON (this tool imports nothing of the engine): decoding the batch
        # in the rank ("data", no workers) or waiting for its workers ("data-wait")
        waits = [(d["by_kind"].get("data", 0.0) + d["by_kind"].get("data-wait", 0.0)) / d["step_s"] for d in kinds
                 if d.get("step_s")]
        points.append({"workers": workers, "pin_memory": pinned, "status": summary.get("status"),
                       "error": summary.get("error"), "wall_s": round(wall, 1),
                       "throughput": (summary.get("throughput") or {}).get("mean"),
                       "input_wait": round(max(waits), 4) if waits else None,
                       "transfer_ms": round(1000 * max((d["by_kind"].get("transfer", 0.0) for d in kinds),
                                                       default=0.0), 3)})
    return {"ok": all(p["status"] == "finished" for p in points), "points": points}


# ---- NVML against nvidia-smi ------------------------------------------------------------------
def watched_profile(db: Path, cpu: bool) -> dict:
    """``watch --profile-steps 2:3`` of the DDP example, its stored traces read back by ``trace --run`` (engine/traces):
    on a GPU every rank's kernels seen, idle + compute + non-compute making its span, compute above 0 and the
    all-reduce's communication kernels found; on CPU virtual devices, each rank's CPU ops."""
    devices = ["--devices", "cpu:2"] if cpu else ["--devices", "cuda:0"]
    script = ["examples/ddp_train.py", "--steps", "6", "--batch-size", "32"] + ([] if cpu else ["--device", "cuda"])
    try:
        proc, wall = cli(["watch", *devices, "--profile-steps", "2:3", "--json", "--", *script], db)
        run_id = json.loads(proc.stdout.strip().splitlines()[-1])["run_id"]
        read, _ = cli(["trace", "--run", run_id, "--json"], db)
        job = json.loads(read.stdout)
    except (subprocess.TimeoutExpired, ValueError, IndexError, KeyError) as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    ranks = [{"rank": r["rank"], "gpu_events": r["gpu_events_read"], "cpu_ops": r["cpu_ops"], "idle_pct": r["idle_pct"],
              "compute_pct": r["compute_pct"], "non_compute_pct": r["non_compute_pct"]} for r in job["ranks"]]
    if cpu:
        whole = bool(ranks) and all(r["cpu_ops"] > 0 for r in ranks)
    else:
        whole = bool(ranks) and all(
            r["gpu_events"] > 0 and r["compute_pct"] > 0
            and abs(r["idle_pct"] + r["compute_pct"] + r["non_compute_pct"] - 100) <= 0.5 for r in ranks) \
            and any("COMMUNICATION" in kind and share > 0 for kind, share in (job.get("kernel_type_pct") or {}).items())
    return {"ok": proc.returncode == 0 and read.returncode == 0 and whole, "wall_s": round(wall, 1), "ranks": ranks,
            "kernel_type_pct": job.get("kernel_type_pct"), "error": None if whole else read.stderr[-2000:]}


def smi_rows(path: Path) -> list[tuple[float, float, float]]:
    """(wall-clock s, utilization %, memory MiB) rows of nvidia-smi's CSV log."""
    rows = []
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            stamp = time.mktime(time.strptime(parts[0].split(".")[0], "%Y/%m/%d %H:%M:%S"))
            fraction = float("0." + parts[0].split(".")[1]) if "." in parts[0] else 0.0
            rows.append((stamp + fraction, float(parts[1]), float(parts[2])))
        except (ValueError, IndexError):
            continue
    return rows


def nvml_against_smi(db: Path, hz: int) -> dict:
    """A resnet50 run sampled at ``hz`` while nvidia-smi logs beside it; both means over the measured steps."""
    from engine.store import Store
    log = db.parent / f"smi-{hz}.csv"
    # -f: nvidia-smi writes the file itself, a line a sample; SIGINT ends it as Ctrl-C would.
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,utilization.gpu,memory.used",
                            "--format=csv,noheader,nounits", "-i", "0", "-lms", "100", "-f", str(log)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        proc, _ = cli(["run", "--model", "resnet50", "--devices", "cuda:0", "--steps", "150", "--warmup", "10",
                       "--telemetry-hz", str(hz), "--json"], db)
        time.sleep(0.5)
    finally:
        smi.send_signal(signal.SIGINT)
        try:
            smi.wait(5)
        except subprocess.TimeoutExpired:
            smi.kill()
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    with Store(db) as store:
        run = store.get_run(summary["run_id"])
        steps = store.steps(run.id)
    measured = [s for s in steps if s.step >= 10]
    if not measured:
        return {"hz": hz, "ok": False, "error": f"no measured steps: {summary.get('status')} {summary.get('error')}"}
    # The run's clock starts when its record is made (run.started, wall clock): steps' t count from there.
    window = (run.started + measured[0].t - measured[0].time_s, run.started + measured[-1].t)
    rows = smi_rows(log) if log.exists() else []
    smi_util = [u for t, u, _ in rows if window[0] <= t <= window[1]]
    covered = bool(rows) and rows[0][0] <= window[0] and rows[-1][0] >= window[1]
    ours = (summary.get("telemetry") or {}).get("util_mean") or [None]
    theirs = statistics.fmean(smi_util) if smi_util else None
    gap = abs(ours[0] - theirs) if ours[0] is not None and theirs is not None else None
    return {"hz": hz, "ok": covered and gap is not None and gap <= AGREEMENT_POINTS, "nvml_util_mean": ours[0],
            "nvidia_smi_util_mean": theirs, "gap_points": gap, "nvidia_smi_rows": len(smi_util),
            "nvidia_smi_covers_the_steps": covered, "nvml_samples": (summary.get("telemetry") or {}).get("samples"),
            "step_ms": figures(summary)["step_ms"], "window_s": round(window[1] - window[0], 2)}


def run_pytest() -> dict:
    started = time.time()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests/test_gpu.py",
                           "-p", "no:cacheprovider", "-o", "addopts="], cwd=ROOT, capture_output=True, text=True,
                          timeout=420)
    tail = proc.stdout.strip().splitlines()[-1:] or [""]
    return {"ok": proc.returncode == 0, "exit": proc.returncode, "result": tail[0], "wall_s": round(time.time() -
            started, 1), "output": proc.stdout[-6000:] if proc.returncode else None}


def environment() -> dict:
    import torch
    env = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0]}
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
        env["gpus"] = torch.cuda.device_count()
    if shutil.which("nvidia-smi"):
        env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True).stdout.strip()
    return env


def guarded(name: str, work) -> dict:
    """A section's result, or what went wrong in it: one broken section must not lose the others' figures."""
    try:
        return work()
    except Exception as exc:  # noqa: BLE001  (a timeout, a crash, a missing nvidia-smi: all reported)
        return {"ok": False, "error": f"{name}: {type(exc).__name__}: {exc}"}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu-check.json", help="where the figures go (JSON)")
    parser.add_argument("--cpu", action="store_true", help="the runs on CPU virtual devices, tiny (no GPU needed)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    report: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "mode": "cpu" if args.cpu else "gpu",
                    "environment": guarded("environment", environment)}
    began = time.time()

    def save() -> None:  # after every section: a check cut short still leaves its figures so far
        report["wall_s"] = round(time.time() - began, 1)
        out.write_text(json.dumps(report, indent=2))

    with tempfile.TemporaryDirectory(prefix="splitscope-gpu-check-") as tmp:
        db = Path(tmp) / "runs.sqlite3"
        os.environ["SPLITSCOPE_DB"] = str(db)
        if not args.cpu:
            report["pytest"] = guarded("pytest", run_pytest)
            save()
        report["runs"] = []
        for check in cpu_checks() if args.cpu else gpu_checks():
            report["runs"].append(guarded(check.name, lambda check=check: run_check(check, db)) | {"name": check.name})
            save()
        report["compare_strategies"] = guarded("compare-strategies", lambda: compare_strategies(db, args.cpu))
        save()
        report["input_pipeline"] = guarded("input-pipeline", lambda: input_pipeline(db, args.cpu))
        save()
        report["efficiency"] = guarded("efficiency", lambda: efficiency(db, args.cpu))
        save()
        report["watched_profile"] = guarded("watched profile", lambda: watched_profile(db, args.cpu))
        save()
        if not args.cpu:
            report["nvml_vs_nvidia_smi"] = [
                guarded(f"NVML at {hz} Hz", lambda hz=hz: nvml_against_smi(db, hz)) | {"hz": hz} for hz in (10, 50)]
    parts = [report.get("pytest"), *report["runs"], report["compare_strategies"], report["input_pipeline"],
             report["efficiency"], report["watched_profile"], *report.get("nvml_vs_nvidia_smi", [])]
    report["ok"] = all(p["ok"] for p in parts if p is not None)
    save()
    for run in report["runs"]:
        print(f"{'ok  ' if run['ok'] else 'FAIL'} {run['name']:<48} {run.get('step_ms')} ms/step "
              f"bubble {(run.get('bubble') or {}).get('measured')} {run.get('error') or ''}")
    for point in report["input_pipeline"].get("points", []):
        print(f"{'ok  ' if point['status'] == 'finished' else 'FAIL'} loader {point['workers']} workers"
              f"{', pinned' if point['pin_memory'] else ''}: {point['throughput']} samples/s, input wait "
              f"{point['input_wait']} of the step {point.get('error') or ''}")
    for run in report["efficiency"].get("runs", []):
        print(f"{'ok  ' if run['ok'] else 'FAIL'} {run['name']:<48} MFU {run.get('mfu')}, SM activity "
              f"{run.get('sm_active_mean')} % at utilization {run.get('util_mean')} %, "
              f"{run.get('samples_per_joule')} samples/J {run.get('error') or ''}")
    watched = report["watched_profile"]
    print(f"{'ok  ' if watched['ok'] else 'FAIL'} watch --profile-steps read back: {watched.get('ranks')} "
          f"{watched.get('kernel_type_pct')} {watched.get('error') or ''}")
    for line in report.get("nvml_vs_nvidia_smi", []):
        print(f"{'ok  ' if line['ok'] else 'FAIL'} NVML at {line['hz']} Hz {line.get('nvml_util_mean')} % vs "
              f"nvidia-smi {line.get('nvidia_smi_util_mean')} % {line.get('error') or ''}")
    print(f"{'ok' if report['ok'] else 'FAILED'} in {report['wall_s']} s; figures in {out}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
