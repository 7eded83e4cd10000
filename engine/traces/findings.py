"""What a job's trace figures say, as findings of the run summary's form (``engine.results.read_facts.Finding``:
code, severity, words, devices, and the share of the time it explains, which orders them). A rank is named
"rank N" where a run names its devices."""
from __future__ import annotations

from engine.results.read_facts import Finding
from engine.traces.results import TraceJob

NOTICEABLE = 0.1       # a share worth a finding (engine/record/findings.py's)
SEVERE = 0.3
IDLE_WHY = {
    "host_wait": "host wait: the CPU launched its kernels later than the GPU could run them (CPU-bound: the "
                 "Python, the data loading or synchronizations between launches)",
    "kernel_wait": "kernel wait: gaps under the launch overhead between back-to-back kernels (many small "
                   "kernels: fuse them, or CUDA graphs)",
    "other": "other: gaps the CPU is not behind (waiting on another stream, another rank or the host)",
}


def _severity(share: float) -> str:
    return "problem" if share >= SEVERE else "warning"


def pct(share: float) -> str:
    return f"{100 * share:.0f} %"


GROUPED_FROM = 5       # ranks with one finding's code beyond which they are said together, in one finding
SEVERITIES = ("info", "warning", "problem")


def job_findings(job: TraceJob) -> list[Finding]:
    found = _grouped(_rank_findings(job))
    found += _job_findings(job)
    if not found or max(f.share for f in found) < NOTICEABLE:
        busy = [r for r in job.ranks if r.kernel_us > 0]
        if busy:
            least = max(r.idle_pct for r in busy)
            found.append(Finding("busy", "info", f"every GPU busy at least {100 - least:.0f} % of its span",
                                 [f"rank {r.rank}" for r in busy], 0.0))
    return sorted(found, key=lambda f: -f.share)


def _grouped(found: list[Finding]) -> list[Finding]:
    """Each code that many ranks share, said once: the ranks, their shares' range, the worst rank's words."""
    by_code: dict[str, list[Finding]] = {}
    for finding in found:
        by_code.setdefault(finding.code, []).append(finding)
    out = []
    for code, each in by_code.items():
        if len(each) < GROUPED_FROM:
            out += each
            continue
        worst = max(each, key=lambda f: f.share)
        low = min(f.share for f in each)
        out.append(Finding(code, max((f.severity for f in each), key=SEVERITIES.index),
                           f"{len(each)} ranks, {pct(low)} to {pct(worst.share)}; the most: {worst.text}",
                           [d for f in each for d in f.devices], worst.share))
    return out


def _rank_findings(job: TraceJob) -> list[Finding]:
    found: list[Finding] = []
    for rank in job.ranks:
        device = f"rank {rank.rank}"
        if rank.gpu_events_read == 0:
            found.append(Finding("cpu_only", "info", f"{device}: no GPU kernels in its trace: CPU ops only "
                                 f"({rank.cpu_ops} ops); no GPU figures", [device], 0.0))
            continue
        idle = rank.idle_pct / 100
        if idle >= NOTICEABLE:
            why = IDLE_WHY.get(rank.top_idle_category or "", "")
            most = f"; of its streams' idle time, {rank.top_idle_category_pct:.0f} % is {why}" if why else ""
            found.append(Finding("gpu_idle", _severity(idle), f"{device}'s GPU idles {pct(idle)} of its span"
                                 f"{most}", [device], idle))
        # communication that runs with no compute beside it: the kernel types without COMPUTATION in their name
        alone = sum(us for kind, us in rank.kernel_type_us.items()
                    if "COMMUNICATION" in kind and "COMPUTATION" not in kind)
        exposed = alone / rank.kernel_us if rank.kernel_us > 0 else 0.0
        if rank.comm_comp_overlap_pct is not None and exposed >= NOTICEABLE:
            found.append(Finding("exposed_communication", _severity(exposed), f"{device} communicates "
                                 f"{pct(exposed)} of its span with no compute beside it (compute overlaps "
                                 f"{rank.comm_comp_overlap_pct:.0f} % of its communication)", [device], exposed))
        waited = rank.wait_at_collectives_us / rank.kernel_us if rank.kernel_us > 0 else 0.0
        if waited >= NOTICEABLE:
            found.append(Finding("collective_wait", _severity(waited), f"{device} waits at collectives for a later "
                                 f"rank {pct(waited)} of its span ({rank.wait_at_collectives_us / 1e3:.1f} ms)",
                                 [device], waited))
    return found


def _job_findings(job: TraceJob) -> list[Finding]:
    found: list[Finding] = []
    if job.straggler is not None and job.straggler.wait_set_us > 0:
        share = max((r.wait_at_collectives_us / r.kernel_us for r in job.ranks if r.kernel_us > 0), default=0.0)
        found.append(Finding("straggler", "warning" if share >= NOTICEABLE else "info", job.straggler.text,
                             [f"rank {job.straggler.rank}"], share))
    idles = [it.job_idle_pct for it in job.iterations if it.job_idle_pct is not None]
    if idles and len(job.ranks) > 1:
        mean = sum(idles) / len(idles) / 100
        if mean >= NOTICEABLE:
            found.append(Finding("job_idle", _severity(mean), f"every GPU read idles at once {pct(mean)} of each "
                                 "iteration (on average): no rank's kernel runs then, so the whole job waits on its "
                                 "CPUs or input", [f"rank {r.rank}" for r in job.ranks], mean))
    if job.missing_ranks:
        found.append(Finding("ranks_missing", "info", f"{len(job.ranks)} of {job.world_size} ranks read: the "
                             "figures across ranks (straggler, waits, the job's idle time) are of those ranks alone",
                             [], 0.0))
    return found
