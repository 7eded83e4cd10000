"""The CPU side of engine.telemetry, for real: OS counters, a pinned busy process,
the sampler thread's rate and lifetime, and the summary's window."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from engine.devices import Device
from engine.results import TelemetrySummary
from engine.telemetry import CpuTarget, DeviceSample, TelemetrySampler, disagreements, nvml, summarize, targets_for

pytestmark = [pytest.mark.timeout(30), pytest.mark.quick]

SPIN = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])}); print('spinning', flush=True)\nwhile True: pass"


def wait_for_samples(device: str, count: int, rate_hz: float, **kwargs) -> tuple[TelemetrySampler, list]:
    """Run a sampler until ``device`` has ``count`` samples (or 10 s pass); return it stopped."""
    got: list[DeviceSample] = []
    enough = threading.Event()

    def on_samples(batch):
        got.extend(s for s in batch if s.device == device)
        if len(got) >= count:
            enough.set()

    sampler = TelemetrySampler(kwargs.pop("targets"), rate_hz=rate_hz, on_samples=on_samples, **kwargs)
    sampler.start()
    try:
        assert enough.wait(timeout=10), f"{len(got)} of {count} samples of {device}"
    finally:
        sampler.stop()
    return sampler, got


@pytest.fixture
def spinner():
    """A Python process busy-looping on core 0, once it is (its interpreter loaded: the RSS read is its own, not
    that of a process still starting, under 1 MB once in a suite's run)."""
    proc = subprocess.Popen([sys.executable, "-c", SPIN, "0"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "spinning"
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.solo   # a spinner pinned to core 0 (or 10 Hz sampling) must have the core to itself
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")
def test_busy_core_reads_high_and_its_process_rss_is_reported(spinner):
    target = CpuTarget("cpu:0", core=0)
    other = CpuTarget("cpu:1", core=1) if len(os.sched_getaffinity(0)) > 1 else None
    targets = [t for t in (target, other) if t is not None]
    got: list[DeviceSample] = []
    enough = threading.Event()

    def on_samples(batch):
        got.extend(s for s in batch if s.device == "cpu:0" and s.mem_used is not None)
        if len(got) >= 20:  # ~1 s at 20 Hz once the pid is known
            enough.set()

    sampler = TelemetrySampler(targets, rate_hz=20, on_samples=on_samples)
    sampler.start()
    assert sampler.name == "telemetry-sampler" and sampler.daemon
    sampler.set_pid("cpu:0", spinner.pid)  # as the CLI does once the worker reports its ranks
    try:
        assert enough.wait(timeout=10), f"{len(got)} samples with RSS"
    finally:
        sampler.stop()
    assert not sampler.is_alive()
    utils = [s.util for s in got if s.util is not None]  # but set_pid's own memory-only sample
    assert len(utils) >= len(got) - 1 and sum(utils) / len(utils) > 60, utils
    assert all(s.mem_used > 1_000_000 for s in got)  # a Python interpreter's RSS
    assert all(s.mem_total > s.mem_used for s in got)


@pytest.mark.solo   # a spinner pinned to core 0 (or 10 Hz sampling) must have the core to itself
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")
def test_a_run_device_reads_its_own_threads_apart_from_its_cores_total(spinner):
    """A run's device counts the run's work on its core, not another program's: with the spinner (another
    program) on core 0, a device whose process sleeps there reads near 0 while the core's total reads busy;
    the spinner named as the device's process reads busy itself; a second spinner sharing the core reads
    busy too, about half of it waiting for the core (as the engine's timers would count a span it spent so)."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import os, time; os.sched_setaffinity(0, {0}); time.sleep(60)"])
    try:
        target = CpuTarget("cpu:0", 0, pid=sleeper.pid, own_work=True)
        sampler = TelemetrySampler([target], rate_hz=20)

        def read(passes: int) -> tuple[float, float]:
            got = []
            for _ in range(passes):
                time.sleep(0.05)
                got += [s for s in sampler.poll_once() if s.util is not None and s.core_util is not None]
            return (sum(s.util for s in got) / len(got), sum(s.core_util for s in got) / len(got),
                    sum(s.wait_util for s in got) / len(got))

        read(2)  # the sleeper's start-up (its interpreter's imports) out of the figures
        own, core, waited = read(10)
        assert own < 5 and waited < 5 and core > 60, (own, core, waited)
        sampler.set_pid("cpu:0", spinner.pid)
        own, core, _ = read(10)
        assert own > 60 and own <= core + 5, (own, core)
        rival = subprocess.Popen([sys.executable, "-c", SPIN, "0"])
        try:
            sampler.set_pid("cpu:0", rival.pid)
            read(4)  # the rival's start-up
            own, core, waited = read(10)
        finally:
            rival.kill()
            rival.wait()
        assert own > 80 and 20 < waited < 80, (own, core, waited)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_others_on_a_devices_core_mark_the_run_disturbed():
    from engine.telemetry.summary import TelemetryTotals
    totals = TelemetryTotals(["cpu:0", "cpu:1"], warmup=0, rate_hz=10)
    totals.add_samples([DeviceSample(t=0.1 * k, device=f"cpu:{k % 2}", util=50.0,
                                     core_util=55.0 if k % 2 == 0 else 85.0) for k in range(1, 40)])
    totals.add_step(0, 0.0, 4.0)
    totals.finish()
    summary = totals.summary()
    assert summary.other_mean == [5.0, 35.0]
    assert summary.disturbed == "other programs took 35% of cpu:1 during this run: its times are not comparable"
    quiet = TelemetryTotals(["cpu:0"], warmup=0, rate_hz=10)
    quiet.add_samples([DeviceSample(t=0.5, device="cpu:0", util=50.0, core_util=58.0)])
    quiet.add_step(0, 0.0, 1.0)
    quiet.finish()
    assert quiet.summary().disturbed is None and quiet.summary().other_mean == [8.0]
    # A core's ticks read one sample above the run's work and the next below: no one else ran.
    ticks = TelemetryTotals(["cpu:0"], warmup=0, rate_hz=10)
    ticks.add_samples([DeviceSample(t=0.1 * k, device="cpu:0", util=50.0, core_util=40.0 if k % 2 else 60.0)
                       for k in range(1, 9)])
    ticks.add_step(0, 0.0, 1.0)
    ticks.finish()
    assert ticks.summary().other_mean == [0.0]
    # The run's threads waited 20 of their 60 points for the core: the core ran someone else's 20 then.
    waited = TelemetryTotals(["cpu:0"], warmup=0, rate_hz=10)
    waited.add_samples([DeviceSample(t=0.5, device="cpu:0", util=60.0, wait_util=20.0, core_util=100.0)])
    waited.add_step(0, 0.0, 1.0)
    waited.finish()
    assert waited.summary().other_mean == [60.0] and waited.summary().util_mean == [60.0]


@pytest.mark.solo   # a spinner pinned to core 0 (or 10 Hz sampling) must have the core to itself
def test_at_10_hz_every_device_gets_at_least_9_samples_per_second():
    targets = [CpuTarget("cpu:0", 0), CpuTarget("cpu:1", 0)]
    sampler, got = wait_for_samples("cpu:1", 11, rate_hz=10, targets=targets)
    span = got[10].t - got[0].t
    assert 10 / span >= 9, f"10 intervals took {span:.3f} s"
    drained = sampler.drain()
    for device in ("cpu:0", "cpu:1"):
        times = [s.t for s in drained if s.device == device]
        assert len(times) >= 11 and times == sorted(times)
    assert sampler.drain() == []  # drained means drained


def test_a_dead_pid_gives_no_rss_and_no_exception():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # exited and reaped: the pid no longer exists
    warnings: list[str] = []
    sampler = TelemetrySampler([CpuTarget("cpu:0", 0, pid=proc.pid)], on_warning=warnings.append)
    sampler.poll_once()
    [sample] = sampler.poll_once()
    assert sample.mem_used is None and sample.device == "cpu:0"
    sampler.set_pid("cpu:0", os.getpid())
    [sample] = sampler.poll_once()
    assert sample.mem_used > 0
    assert warnings == []
    with pytest.raises(ValueError, match="no telemetry target named 'cpu:7'"):
        sampler.set_pid("cpu:7", 1)


def test_a_process_named_is_read_at_once_not_a_period_later():
    """set_pid reads the new process's memory out of the passes' schedule: a rank forked warm may have ended
    before the next pass. The passes keep their rate, each a whole period of utilization."""
    got: list[DeviceSample] = []
    first = threading.Event()

    def on_samples(batch):
        got.extend(batch)
        if any(s.mem_used for s in batch):
            first.set()
    sampler = TelemetrySampler([CpuTarget("cpu:0", 0)], rate_hz=0.2, on_samples=on_samples)  # a pass every 5 s
    sampler.start()
    try:
        sampler.set_pid("cpu:0", os.getpid())
        assert first.wait(timeout=2), got
    finally:
        sampler.stop()
    (sample,) = got
    assert sample.util is None and sample.mem_used > 1_000_000 and sample.device == "cpu:0"


def test_rate_outside_0_to_50_names_the_option():
    for bad in (0, -1, 50.5, float("nan"), "fast"):
        with pytest.raises(ValueError, match="--telemetry-hz.*at most 50"):
            TelemetrySampler([], rate_hz=bad)
    assert TelemetrySampler([], rate_hz=50).rate_hz == 50.0


def test_stop_is_prompt_even_at_a_slow_rate():
    sampler = TelemetrySampler([CpuTarget("cpu:0", 0)], rate_hz=0.1)  # a pass every 10 s
    sampler.start()
    sampler.stop(timeout=2)
    assert not sampler.is_alive()


def test_a_failing_target_is_one_warning_and_the_others_go_on():
    class Broken(CpuTarget):
        def read(self, poll):
            raise RuntimeError("boom")

    warnings: list[str] = []
    sampler = TelemetrySampler([Broken("cpu:0", 0), CpuTarget("cpu:1", 0)], on_warning=warnings.append)
    for _ in range(3):
        assert [s.device for s in sampler.poll_once()] == ["cpu:1"]
    assert warnings == ["cpu:0: telemetry read failed: RuntimeError: boom"]


def test_targets_follow_the_run_devices(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # cuda:0 is then NVML's GPU 0, where there is one
    devices = [Device("cpu:0", "cpu", 0, core=1), Device("cuda:0", "cuda", 0)]
    cpu, gpu = targets_for(devices)
    assert (cpu.name, cpu.core, cpu.kind) == ("cpu:0", 1, "cpu")
    assert (gpu.name, gpu.kind) == ("cuda:0", "cuda")
    assert gpu.index == (0 if nvml.device_count() else None)  # None: no GPU here to read


def test_samples_are_frozen_and_json_ready():
    sample = DeviceSample(t=1.5, device="cpu:0", util=50.0, mem_used=10)
    with pytest.raises(AttributeError):
        sample.util = 1.0
    assert list(sample.to_dict()) == ["t", "device", "util", "wait_util", "core_util", "mem_util", "mem_used", "mem_total",
                                      "power_w", "sm_clock_mhz", "temp_c", "pcie_rx_bps", "pcie_tx_bps",
                                      "energy_j", "sm_active", "sm_occupancy", "tensor_active", "dram_bw_util"]
    assert sample.to_dict()["util"] == 50.0 and sample.to_dict()["power_w"] is None


def test_summary_counts_only_the_steps_window():
    def s(t, device, util):
        return DeviceSample(t=t, device=device, util=util)

    samples = [s(0.5, "cpu:0", 0.0),                          # before the first step: kept, not counted
               s(1.0, "cpu:0", 40.0), s(2.0, "cpu:0", 60.0), s(3.0, "cpu:0", 80.0),
               s(1.5, "cpu:1", 90.0), s(2.5, "cpu:1", None),   # not available: not in the mean
               s(3.5, "cpu:0", 0.0), s(2.0, "cuda:9", 5.0)]   # after the last step; a device not asked
    summary = summarize(samples, ["cpu:0", "cpu:1", "cpu:2"], t_first_step=1.0, t_last_step=3.0, rate_hz=10)
    assert summary == TelemetrySummary(rate_hz=10, util_mean=[60.0, 90.0, None], samples=8,
                                       samples_per_s=[1.5, 1.0, 0.0], mem_peak_bytes=[None, None, None],
                                       other_mean=[None, None, None], sm_active_mean=[None, None, None],
                                       power_w=[None, None, None])
    empty = summarize(samples, ["cpu:0"], t_first_step=None, t_last_step=None, rate_hz=10)
    assert empty.util_mean == [None] and empty.samples_per_s == [None] and empty.samples == 8


def test_telemetry_totals_built_step_by_step_equal_the_summary_of_all_samples():
    """The session settles samples as steps come (memory independent of the run); the figures are the same."""
    from engine.telemetry.summary import TelemetryTotals
    samples = [DeviceSample(t=0.05 * k + 0.001, device=f"cpu:{k % 2}", util=float(k % 7) * 10, mem_used=k)
               for k in range(200)]
    ends = [1.0 + 0.5 * k for k in range(12)]  # step k covers (ends[k-1], ends[k]]; warm-up: steps 0, 1
    totals = TelemetryTotals(["cpu:0", "cpu:1"], warmup=2, rate_hz=20)
    fed = 0
    for k, end in enumerate(ends):
        while fed < len(samples) and samples[fed].t <= end + 0.3:  # samples arrive ahead of the steps
            totals.add_samples([samples[fed]])
            fed += 1
        totals.add_step(k, ends[k - 1] if k else 0.6, end)
    totals.add_samples(samples[fed:])
    assert totals.summary() == summarize(samples, ["cpu:0", "cpu:1"], t_first_step=ends[1], t_last_step=ends[-1],
                                         rate_hz=20)


def test_os_and_engine_disagreeing_by_more_than_10_points_is_said():
    names = ["cpu:0", "cpu:1", "cpu:2"]
    lines = disagreements([50.0, 70.0, None], [0.45, 0.55, 0.5], names)
    assert lines == ["cpu:1: the OS measured 70.0% busy, the engine timed 55.0% (more than 10 points apart)"]
