"""The NVML path of engine.telemetry against a fake pynvml (no GPU here), plus
one real-NVML check marked ``gpu`` for machines that have one."""
from __future__ import annotations

import sys
import threading
import time

import pynvml as real_pynvml
import pytest

from engine.telemetry import GpuTarget, TelemetrySampler, all_targets, gpu_inventory, nvml
from fake_nvml import FakeGpu, make_fake_pynvml

pytestmark = [pytest.mark.timeout(30), pytest.mark.quick]


@pytest.fixture
def use_nvml(monkeypatch):
    """Install a fake pynvml for one test; the real state comes back after it."""
    def install(module) -> None:
        monkeypatch.setitem(sys.modules, "pynvml", module)
        gpu_inventory.reset()

    yield install
    gpu_inventory.reset()


@pytest.fixture
def samplers():
    """Samplers a test made; each is stopped, and must be dead, after the test."""
    made: list[TelemetrySampler] = []
    yield made
    for sampler in made:
        sampler.stop()
        assert not sampler.is_alive()


def one_pass(targets, warnings=None) -> list:
    sampler = TelemetrySampler(targets, on_warning=(warnings.append if warnings is not None else None))
    return sampler.poll_once()


def full_sample(samples, device):
    """The poll's own sample (the last one of the device; buffered ones come first)."""
    return [s for s in samples if s.device == device][-1]


def test_fields_are_mapped_to_sample_units(use_nvml):
    use_nvml(make_fake_pynvml([FakeGpu()]))
    sample = full_sample(one_pass([GpuTarget("cuda:0", 0)]), "cuda:0")
    assert sample.util == 87.0 and sample.mem_util == 41.0
    assert sample.mem_used == 3 * 2**30 and sample.mem_total == 141 * 2**30
    assert sample.power_w == pytest.approx(312.5)          # mW -> W
    assert sample.sm_clock_mhz == 1980.0
    assert sample.temp_c == 54.0
    assert sample.pcie_rx_bps == 2_000 * 1024.0             # KiB/s -> bytes/s
    assert sample.pcie_tx_bps == 500 * 1024.0
    assert abs(sample.t - time.perf_counter()) < 1.0


def test_pcie_counters_give_rates_without_the_slow_call(use_nvml):
    gpu = FakeGpu(pcie_rx_counter_bps=8e9, pcie_tx_counter_bps=1e9)
    use_nvml(make_fake_pynvml([gpu]))
    sampler = TelemetrySampler([GpuTarget("cuda:0", 0)])
    sampler.poll_once()  # opens: the baseline reading of the counters
    time.sleep(0.02)     # the counters are rates over time: let some pass
    sample = full_sample(sampler.poll_once(), "cuda:0")
    assert sample.pcie_rx_bps == pytest.approx(8e9, rel=0.02)
    assert sample.pcie_tx_bps == pytest.approx(1e9, rel=0.02)
    assert "nvmlDeviceGetPcieThroughput" not in gpu.calls


def test_not_supported_fields_are_none_and_probed_once(use_nvml):
    gpu = FakeGpu(unsupported={"nvmlDeviceGetPowerUsage", "nvmlDeviceGetPcieThroughput",
                               "nvmlDeviceGetTemperature"})
    use_nvml(make_fake_pynvml([gpu]))
    warnings: list[str] = []
    sampler = TelemetrySampler([GpuTarget("cuda:0", 0)], on_warning=warnings.append)
    for _ in range(3):
        sample = full_sample(sampler.poll_once(), "cuda:0")
        assert sample.power_w is None and sample.temp_c is None
        assert sample.pcie_rx_bps is None and sample.pcie_tx_bps is None
        assert sample.util == 87.0 and sample.sm_clock_mhz == 1980.0
    assert gpu.calls.count("nvmlDeviceGetPowerUsage") == 1  # the probe, then never again
    assert warnings == []
    fields = gpu_inventory.inventory()[0].fields
    assert fields["power_w"] is False and fields["temp_c"] is False and fields["pcie_rx_bps"] is False
    assert fields["util"] is True and fields["mem_total"] is True


def test_inventory_lists_each_gpu(use_nvml):
    use_nvml(make_fake_pynvml([FakeGpu(), FakeGpu(name="NVIDIA Fake L4", uuid="GPU-1", mem_total=24 * 2**30)]))
    assert nvml.device_count() == 2
    gpus = gpu_inventory.inventory()
    assert [g.name for g in gpus] == ["NVIDIA Fake H200", "NVIDIA Fake L4"]
    assert (gpus[1].index, gpus[1].uuid, gpus[1].memory_total, gpus[1].driver_version, gpus[1].lost) == \
        (1, "GPU-1", 24 * 2**30, "580.82.07", False)
    assert gpus[0].fields["util_samples"] is True  # NOT_FOUND (empty ring) still means offered
    assert [t.name for t in all_targets()][:2] == ["cuda:0", "cuda:1"]


@pytest.mark.parametrize("error", [real_pynvml.NVML_ERROR_GPU_IS_LOST, real_pynvml.NVML_ERROR_UNKNOWN])
def test_gpu_lost_mid_run_is_reported_once_and_others_continue(use_nvml, samplers, monkeypatch, error):
    escaped: list = []
    monkeypatch.setattr(threading, "excepthook", escaped.append)  # what would end the thread
    gpus = [FakeGpu(), FakeGpu()]
    use_nvml(make_fake_pynvml(gpus))
    lost_at: list[float] = []
    enough = threading.Event()
    counts = {"cuda:0": 0, "cuda:1": 0}

    def on_samples(batch):
        for s in batch:
            counts[s.device] += 1
        if counts["cuda:1"] >= 3 and not lost_at:
            gpus[1].lost_with = error  # every NVML call on GPU 1 fails from now on
            lost_at.append(time.perf_counter())
        if lost_at and counts["cuda:0"] >= 8:
            enough.set()

    warnings: list[str] = []
    sampler = TelemetrySampler([GpuTarget("cuda:0", 0), GpuTarget("cuda:1", 1)], rate_hz=50,
                               on_samples=on_samples, on_warning=warnings.append)
    samplers.append(sampler)
    sampler.start()
    assert enough.wait(timeout=10), counts
    assert sampler.is_alive() and escaped == []  # nothing escaped the thread
    sampler.stop()
    samples = sampler.drain()
    assert len(warnings) == 1 and "cuda:1" in warnings[0] and "lost" in warnings[0]
    assert not [s for s in samples if s.device == "cuda:1" and s.t > lost_at[0]]
    assert [s for s in samples if s.device == "cuda:0" and s.t > lost_at[0]]
    assert nvml.is_lost(1) and not nvml.is_lost(0)
    calls_after = len(gpus[1].calls)
    assert nvml.device_query(1, "nvmlDeviceGetPowerUsage") is None
    assert len(gpus[1].calls) == calls_after  # a lost GPU is not asked again


def test_missing_library_means_no_gpus(use_nvml):
    use_nvml(None)  # sys.modules["pynvml"] = None: "import pynvml" raises ImportError
    assert nvml.device_count() == 0
    assert gpu_inventory.inventory() == []
    assert "pynvml" in nvml.start_error()
    assert all(t.kind == "cpu" for t in all_targets())


def test_missing_driver_means_no_gpus(use_nvml):
    use_nvml(make_fake_pynvml([FakeGpu()], init_error=real_pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    assert nvml.device_count() == 0
    assert gpu_inventory.inventory() == []
    assert nvml.query("nvmlSystemGetDriverVersion", default="n/a") == "n/a"
    warnings: list[str] = []
    assert one_pass([GpuTarget("cuda:0", 0)], warnings) == []  # asked for a GPU that is not there
    assert len(warnings) == 1 and "does not see GPU 0" in warnings[0]


def test_buffered_utilization_samples_move_to_the_perf_counter_clock(use_nvml):
    gpu = FakeGpu()
    use_nvml(make_fake_pynvml([gpu]))
    sampler = TelemetrySampler([GpuTarget("cuda:0", 0)])
    now_wall_us = int(time.time() * 1e6)
    gpu.util_samples = [(now_wall_us - 500_000, 99)]  # buffered before the sampler started
    sampler.poll_once()  # opens: only samples newer than this belong to the run
    time.sleep(0.05)     # the driver buffers three samples during the next 50 ms
    now_wall_us, now_perf = int(time.time() * 1e6), time.perf_counter()
    gpu.util_samples += [(now_wall_us - 30_000, 10), (now_wall_us - 20_000, 20), (now_wall_us - 10_000, 30)]
    samples = sampler.poll_once()
    buffered = samples[:-1]
    assert [s.util for s in buffered] == [10.0, 20.0, 30.0]
    for s, seconds_ago in zip(buffered, (0.03, 0.02, 0.01), strict=True):
        assert s.t == pytest.approx(now_perf - seconds_ago, abs=0.004)
        assert s.mem_used is None and s.power_w is None  # utilization-only samples
    assert samples[-1].mem_used is not None
    # The next poll asks only for newer samples: nothing is returned twice.
    assert len(sampler.poll_once()) == 1


@pytest.mark.gpu
def test_real_nvml_samples_at_10_hz():
    """Real NVML on a machine with a GPU: inventory and >= 9 samples/s."""
    gpu_inventory.reset()
    if nvml.device_count() == 0:
        pytest.skip(f"no GPU visible through NVML ({nvml.start_error()})")
    gpus = gpu_inventory.inventory()
    assert gpus[0].name and gpus[0].memory_total > 0 and gpus[0].fields["util"]
    done = threading.Event()
    full: list = []

    def on_samples(batch):
        full.extend(s for s in batch if s.mem_used is not None)
        if len(full) >= 11:
            done.set()

    sampler = TelemetrySampler([GpuTarget("cuda:0", 0)], rate_hz=10, on_samples=on_samples)
    sampler.start()
    try:
        assert done.wait(timeout=5)
    finally:
        sampler.stop()
    assert (len(full) - 1) / (full[-1].t - full[0].t) >= 9
    assert all(s.util is not None and s.mem_total > 0 for s in full)
