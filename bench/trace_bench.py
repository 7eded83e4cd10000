"""Reading profiler traces: ours (engine/traces) against HTA 0.5.0's ``TraceAnalysis(trace_dir=...)`` plus
``get_temporal_breakdown()`` on the same folders, side by side in one run (``python -m bench.trace_bench``;
``make bench`` runs it). Goal (issue 53): at least 2x faster than HTA, peak memory at most HTA's.

Each reader runs in a child process of its own; its time is the read's (after its imports), its peak memory the
most resident memory its whole process tree held at once (sampled every 20 ms with psutil: HTA and ours both read
ranks in worker processes), beside the largest single process's (the kernel's ru_maxrss, from wait4).
HTA is installed by this benchmark into a venv of its own under the cache folder (never a dependency of the app;
with pandas 2, which HTA 0.5.0 was made for);
where that fails its column is skipped, with the reason. The folders: the real two-rank trace in tests/data, a
synthetic 8-rank job, and a synthetic 64-rank job of about 1 GB (Kineto's layout and argument set, ns-resolution
times, an all-reduce per iteration), generated once into the cache folder.

    python -m bench.trace_bench [--ranks 64] [--mb-per-rank 16] [--hta-timeout 900] [--no-hta]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "data" / "traces" / "hta_trace_filter"
HTA_VERSION = "0.5.0"
# HTA 0.5.0 predates pandas 3, which refuses its int16 correlation column a row index past 32767 (a trace of more
# than about 10,000 kernels): "Invalid value ... for dtype 'int16'"
HTA_PACKAGES = [f"holistictraceanalysis=={HTA_VERSION}", "pandas<3"]
BYTES_PER_KERNEL = 1480          # a kernel's four events (CPU op, launch, kernel, flow) in the layout below

OURS = """
import json, sys, time
started = time.perf_counter()
from engine.traces import read_job
imported = time.perf_counter()
job = read_job(sys.argv[1:])
done = time.perf_counter()
print(json.dumps({"import_s": imported - started, "read_s": done - imported,
                  "idle_pct": {str(r.rank): r.idle_pct for r in job.ranks}}))
"""
HTA = """
import json, logging, sys, time
started = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
logging.getLogger("hta").setLevel(logging.ERROR)
imported = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
breakdown = analysis.get_temporal_breakdown(visualize=False)
done = time.perf_counter()
print(json.dumps({"import_s": imported - started, "read_s": done - imported,
                  "idle_pct": {str(r): float(p) for r, p in zip(breakdown["rank"], breakdown["idle_time_pctg"])}}))
"""


def cache_folder() -> Path:
    """SPLITSCOPE_CACHE_DIR, else ~/.cache/splitscope (engine/measure/peak.py's), then bench/."""
    base = os.environ.get("SPLITSCOPE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "splitscope")
    folder = Path(base) / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# ---- HTA in a venv of its own -----------------------------------------------------------------------------------
def hta_python() -> tuple[Path | None, str]:
    """The python of a venv holding HTA 0.5.0 (made on first use), or None and why not."""
    venv = cache_folder() / f"hta-{HTA_VERSION}"
    python = venv / "bin" / "python"
    check = [str(python), "-c", "import hta.trace_analysis, pandas; assert int(pandas.__version__.split('.')[0]) < 3"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python, "cached"
    print(f"  installing HTA {HTA_VERSION} into {venv} (once) ...", flush=True)
    steps = [[sys.executable, "-m", "venv", str(venv)],
             [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *HTA_PACKAGES]]
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=1200)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"{' '.join(step[:3])}: {exc}"
        if done.returncode:
            return None, f"{' '.join(step[:3])} failed: {(done.stderr or done.stdout).strip()[-300:]}"
    if subprocess.run(check, capture_output=True).returncode:
        return None, "HTA installed but does not import"
    return python, "installed"


# ---- a synthetic job ----------------------------------------------------------------------------------------------
def _slot_us(rank: int) -> float:
    """One compute kernel's launch-to-launch time on a rank: 6 to 7.75 µs, so ranks finish computing apart."""
    return 6.0 + 0.25 * ((rank * 5) % 8)


def write_rank(path: Path, rank: int, world: int, kernels: int, steps: int = 6) -> None:
    """A Kineto-style trace of one rank: per iteration, compute kernels each launched by a CPU op, then an
    all-reduce whose kernels end together on every rank (each starts when its rank's compute is done)."""
    per_step = max(1, kernels // steps)
    slowest = max(_slot_us(r) for r in range(world))
    step_us = per_step * slowest + 400.0
    base = 1_700_000_000_000_000.0
    with open(path, "w") as out:
        out.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {"id": 0, "name": "NVIDIA H100 80GB HBM3", '
                  '"totalGlobalMem": 85031714816, "computeMajor": 9, "computeMinor": 0}\n  ],\n'
                  f'  "distributedInfo": {{"backend": "nccl", "rank": {rank}, "world_size": {world}, '
                  '"pg_count": 1},\n  "traceEvents": [')
        correlation = external = 1
        separator = "\n"
        for step in range(steps + 1):          # one more: the last step, cut off, which HTA's default leaves out
            start = base + step * step_us + 0.137 * rank
            t = start + 1.0
            for k in range(per_step):
                kernel_ts = t + 20.0 + 0.3 * (k % 7)
                out.write(
                    f'{separator}  {{\n    "ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": {1000 + rank}, '
                    f'"tid": {1000 + rank},\n    "ts": {t:.3f}, "dur": 3.411,\n    "args": {{\n      "External id": '
                    f'{external}, "Record function id": 0, "Concrete Inputs": ["", ""], "Input type": ["float", '
                    '"float"], "Input Strides": [[1024, 1], [1024, 1]], "Input Dims": [[64, 1024], [1024, 1024]], '
                    f'"Ev Idx": {external}\n    }}\n  }},\n  {{\n    "ph": "X", "cat": "cuda_runtime", "name": '
                    f'"cudaLaunchKernel", "pid": {1000 + rank}, "tid": {1000 + rank},\n    "ts": {t + 0.9:.3f}, '
                    f'"dur": 2.154,\n    "args": {{\n      "External id": {external}, "cbid": 211, "correlation": '
                    f'{correlation}\n    }}\n  }},\n  {{\n    "ph": "X", "cat": "kernel", "name": "void cutlass::Kernel'
                    '<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(cutlass_80_tensorop_s1688gemm_128x128_'
                    f'32x3_nn_align4::Params)", "pid": 0, "tid": 7,\n    "ts": {kernel_ts:.3f}, "dur": '
                    f'{0.8 * _slot_us(rank):.3f},\n    "args": {{\n      "External id": {external}, "queued": 0, '
                    '"device": 0, "context": 1, "stream": 7, "correlation": '
                    f'{correlation}, "registers per thread": 96, "shared memory": 41744, "blocks per SM": 0.5, '
                    '"warps per SM": 2.96, "grid": [16, 1, 1], "block": [640, 1, 1], "est. achieved occupancy %": 5'
                    f'\n    }}\n  }},\n  {{\n    "ph": "f", "id": {correlation}, "pid": 0, "tid": 7, "ts": '
                    f'{kernel_ts:.3f}, "cat": "ac2g", "name": "ac2g", "bp": "e"\n  }}')
                separator = ",\n"
                t += _slot_us(rank)
                correlation += 1
                external += 1
            reduce_ts = t + 20.0
            reduce_end = start + per_step * slowest + 320.0
            out.write(
                f',\n  {{\n    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": {1000 + rank}, '
                f'"tid": {1000 + rank},\n    "ts": {t:.3f}, "dur": 3.0,\n    "args": {{\n      "External id": '
                f'{external}, "cbid": 211, "correlation": {correlation}\n    }}\n  }},\n  {{\n    "ph": "X", "cat": '
                '"kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",'
                f' "pid": 0, "tid": 20,\n    "ts": {reduce_ts:.3f}, "dur": {reduce_end - reduce_ts:.3f},\n    '
                f'"args": {{\n      "External id": {external}, "device": 0, "stream": 20, "correlation": '
                f'{correlation}, "Collective name": "allreduce", "In msg nelems": 1048576, "Out msg nelems": '
                f'1048576, "Group size": {world}, "dtype": "Float"\n    }}\n  }},\n  {{\n    "ph": "X", "cat": '
                f'"user_annotation", "name": "ProfilerStep#{step + 1}", "pid": {1000 + rank}, "tid": {1000 + rank},'
                f'\n    "ts": {start:.3f}, "dur": {step_us - 1:.3f},\n    "args": {{\n      "External id": '
                f'{external + 1}\n    }}\n  }}')
            correlation += 1
            external += 2
        out.write('\n  ],\n  "traceName": "synthetic",\n  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": '
                  '1700000000000000000\n}\n')


def synthetic_folder(ranks: int, mb_per_rank: float) -> Path:
    """A folder of ``ranks`` trace files of about ``mb_per_rank`` MB each, made once (a stamp says it is whole)."""
    folder = cache_folder() / f"traces-{ranks}x{mb_per_rank:g}MB"
    stamp = folder / ".complete"
    if stamp.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    kernels = int(mb_per_rank * 1e6 / BYTES_PER_KERNEL)
    started = time.perf_counter()
    with ProcessPoolExecutor(os.cpu_count() or 1) as pool:
        list(pool.map(write_rank, [folder / f"rank-{r}.json" for r in range(ranks)], range(ranks), [ranks] * ranks,
                      [kernels] * ranks))
    stamp.write_text("")
    size = sum(p.stat().st_size for p in folder.glob("*.json"))
    print(f"  generated {folder} ({size / 1e9:.2f} GB) in {time.perf_counter() - started:.0f} s", flush=True)
    return folder


# ---- measuring a child -------------------------------------------------------------------------------------------
def measure(python: Path | str, code: str, folder: Path, timeout: float) -> dict:
    """Run ``code`` on ``folder`` in a child: its JSON line, its process tree's peak RSS (MB) and its own max RSS."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    started = time.perf_counter()
    proc = subprocess.Popen([str(python), "-c", code, str(folder)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    tree_peak = 0
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        if time.perf_counter() - started > timeout:
            for child in root.children(recursive=True):
                child.kill()
            proc.kill()
            proc.communicate()
            return {"error": f"did not finish in {timeout:.0f} s"}
        try:
            members = [root] + root.children(recursive=True)
            tree_peak = max(tree_peak, sum(_rss(p) for p in members))
        except psutil.NoSuchProcess:
            pass
        time.sleep(0.02)
    out, err = proc.communicate()
    if proc.returncode:
        return {"error": f"exit {proc.returncode}: {err.strip()[-400:]}"}
    result = json.loads(out.strip().splitlines()[-1])
    result["tree_peak_mb"] = tree_peak / 2**20
    result["wall_s"] = time.perf_counter() - started
    return result


def _rss(process: psutil.Process) -> int:
    try:
        return process.memory_info().rss
    except psutil.NoSuchProcess:
        return 0


def compare(name: str, folder: Path, hta: Path | None, repeats: int, timeout: float) -> dict:
    size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file()) / 1e6
    ranks = len([p for p in folder.iterdir() if p.name.endswith((".json", ".json.gz"))])
    row = {"folder": name, "ranks": ranks, "mb": size}
    for who, python, code in (("ours", sys.executable, OURS), ("hta", hta, HTA)):
        if python is None:
            continue
        runs = [measure(python, code, folder, timeout) for _ in range(repeats)]
        failed = next((r for r in runs if "error" in r), None)
        if failed:
            row[who] = failed
            continue
        row[who] = {"read_s": statistics.median(r["read_s"] for r in runs),
                    "tree_peak_mb": statistics.median(r["tree_peak_mb"] for r in runs),
                    "import_s": statistics.median(r["import_s"] for r in runs), "idle_pct": runs[0]["idle_pct"]}
    return row


def report(row: dict) -> None:
    print(f"  {row['folder']}: {row['ranks']} ranks, {row['mb']:.1f} MB", flush=True)
    for who in ("ours", "hta"):
        got = row.get(who)
        if got is None:
            continue
        if "error" in got:
            print(f"    {who:>4}: {got['error']}", flush=True)
            continue
        print(f"    {who:>4}: read {got['read_s']:.2f} s (imports {got['import_s']:.2f} s more), peak memory "
              f"{got['tree_peak_mb']:.0f} MB", flush=True)
    ours, hta = row.get("ours", {}), row.get("hta", {})
    if "read_s" in ours and "read_s" in hta:
        same = all(abs(ours["idle_pct"].get(rank, -1) - pct) < 0.05 for rank, pct in hta["idle_pct"].items())
        print(f"    ours {hta['read_s'] / ours['read_s']:.1f}x faster (goal 2x), memory "
              f"{ours['tree_peak_mb'] / hta['tree_peak_mb']:.2f} of HTA's (goal at most 1); idle % per rank "
              f"{'the same' if same else 'DIFFERENT'}", flush=True)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64, help="ranks of the large synthetic job (default 64)")
    parser.add_argument("--mb-per-rank", type=float, default=16, help="MB per rank file (default 16: 1 GB)")
    parser.add_argument("--hta-timeout", type=float, default=900, help="seconds HTA gets per folder")
    parser.add_argument("--no-hta", action="store_true", help="ours alone")
    args = parser.parse_args(argv if argv is not None else [])
    hta, how = (None, "not asked for") if args.no_hta else hta_python()
    print(f"trace reading, ours against HTA {HTA_VERSION} ({how if hta else 'skipped: ' + how}); "
          f"{os.cpu_count()} cores; read time after imports, peak memory of the process tree:", flush=True)
    rows = [compare("real 2-rank trace (tests/data)", REAL, hta, 3, args.hta_timeout)]
    report(rows[-1])
    mid = synthetic_folder(8, args.mb_per_rank)
    rows.append(compare("synthetic 8 ranks", mid, hta, 1, args.hta_timeout))
    report(rows[-1])
    large = synthetic_folder(args.ranks, args.mb_per_rank)
    rows.append(compare(f"synthetic {args.ranks} ranks", large, hta, 1, args.hta_timeout))
    report(rows[-1])
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
