"""A GPU's counters read as differences of two readings (engine/telemetry/gpu_counters.py): the energy used
since the sampler started, and GPM's SM, occupancy, tensor and DRAM percentages, against the fake pynvml."""
from __future__ import annotations

import sqlite3
import sys
import threading
import time

import pynvml as real_pynvml
import pytest

from engine.cli.report import device_inventory, devices_table
from engine.store import Store
from engine.telemetry import GpuTarget, TelemetrySampler, gpu_counters, gpu_fields, gpu_inventory
from engine.telemetry.poll import Poll
from fake_nvml import DEFAULT_GPM_METRICS, GPM_FUNCTIONS, GPM_TYPES, FakeGpu, make_fake_pynvml

pytestmark = [pytest.mark.timeout(30), pytest.mark.quick]

GPM_FIELDS = ("sm_active", "sm_occupancy", "tensor_active", "dram_bw_util")
EXPECTED_GPM = {"sm_active": DEFAULT_GPM_METRICS[real_pynvml.NVML_GPM_METRIC_SM_UTIL],
                "sm_occupancy": DEFAULT_GPM_METRICS[real_pynvml.NVML_GPM_METRIC_SM_OCCUPANCY],
                "tensor_active": DEFAULT_GPM_METRICS[real_pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL],
                "dram_bw_util": DEFAULT_GPM_METRICS[real_pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL]}
INTERVAL_S = gpu_counters.GPM_MIN_INTERVAL_S + 0.02  # long enough for GPM to count the interval


@pytest.fixture
def fake_nvml(monkeypatch):
    """Install a fake pynvml made of ``gpus`` (and its options) for one test; returns the module."""
    def install(gpus, **options):
        module = make_fake_pynvml(gpus, **options)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        gpu_inventory.reset()
        return module

    yield install
    gpu_inventory.reset()


@pytest.fixture
def sampler_of():
    """A sampler of GPU 0 read with ``poll_once``; stopped after the test (its targets closed)."""
    made: list[TelemetrySampler] = []

    def make() -> TelemetrySampler:
        made.append(TelemetrySampler([GpuTarget("cuda:0", 0)]))
        return made[-1]

    yield make
    for sampler in made:
        sampler.stop()


def poll(sampler):
    """The poll's own sample of cuda:0 (the last one: driver-buffered ones come first)."""
    return [s for s in sampler.poll_once() if s.device == "cuda:0"][-1]


def gpm_of(sample) -> dict:
    return {name: getattr(sample, name) for name in GPM_FIELDS}


# ---- GPM -------------------------------------------------------------------------------------------

def test_gpm_metrics_are_the_interval_since_the_previous_sample(fake_nvml, sampler_of):
    gpu = FakeGpu()
    fake = fake_nvml([gpu])
    sampler = sampler_of()
    first = poll(sampler)   # opens: the first GPM sample, no interval yet
    assert gpm_of(first) == dict.fromkeys(GPM_FIELDS)
    time.sleep(INTERVAL_S)
    assert gpm_of(poll(sampler)) == EXPECTED_GPM
    gpu.gpm_metrics[real_pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL] = 3.5  # the next interval's
    time.sleep(INTERVAL_S)
    assert poll(sampler).tensor_active == 3.5
    assert gpu_fields.gpu_counter_notes(0) == []
    assert len(fake.gpm_buffers) == 2   # the previous sample's and the spare: nothing allocated per poll
    sampler.stop()
    assert fake.gpm_buffers == {}       # given back to NVML


def test_gpm_interval_shorter_than_nvml_refreshes_goes_on_to_a_later_poll(fake_nvml, sampler_of, monkeypatch):
    # A longer floor than NVML's 90 ms: "right after" stays inside it on a loaded machine too.
    monkeypatch.setattr(gpu_counters, "GPM_MIN_INTERVAL_S", 0.3)
    gpu = FakeGpu()
    fake_nvml([gpu])
    sampler = sampler_of()
    poll(sampler)
    time.sleep(0.32)
    assert gpm_of(poll(sampler)) == EXPECTED_GPM
    taken = gpu.calls.count("nvmlGpmSampleGet")
    assert gpm_of(poll(sampler)) == dict.fromkeys(GPM_FIELDS)  # a poll right after: too short
    assert gpu.calls.count("nvmlGpmSampleGet") == taken         # and no sample taken for it
    time.sleep(0.32)
    assert gpm_of(poll(sampler)) == EXPECTED_GPM


def test_a_50_hz_sampler_thread_reads_gpm_every_few_passes_and_frees_its_buffers(fake_nvml, monkeypatch):
    monkeypatch.setattr(gpu_counters, "GPM_MIN_INTERVAL_S", 0.15)  # ten passes: not all late, however loaded
    fake = fake_nvml([FakeGpu()])
    enough = threading.Event()
    full: list = []

    def on_samples(batch):
        full.extend(s for s in batch if s.mem_used is not None)
        if sum(s.sm_active is not None for s in full) >= 3:
            enough.set()

    sampler = TelemetrySampler([GpuTarget("cuda:0", 0)], rate_hz=50, on_samples=on_samples)
    sampler.start()
    try:
        assert enough.wait(timeout=10)
    finally:
        sampler.stop()
    assert not sampler.is_alive() and fake.gpm_buffers == {}   # stopped: given back to NVML
    with_gpm = [s for s in full if s.sm_active is not None]
    assert all(gpm_of(s) == EXPECTED_GPM for s in with_gpm)
    assert len(with_gpm) < len(full)   # passes 20 ms apart: most are inside an interval and carry None
    gaps = [b.t - a.t for a, b in zip(with_gpm, with_gpm[1:], strict=False)]
    assert all(gap >= 0.15 for gap in gaps)   # never an interval shorter than the floor
    assert all(s.energy_j == 0.0 for s in full)


def test_gpm_metric_nvml_cannot_compute_is_none_alone(fake_nvml, sampler_of):
    gpu = FakeGpu()
    del gpu.gpm_metrics[real_pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL]   # its nvmlReturn: NOT_SUPPORTED
    fake_nvml([gpu])
    sampler = sampler_of()
    poll(sampler)
    time.sleep(INTERVAL_S)
    sample = poll(sampler)
    assert sample.dram_bw_util is None
    assert sample.sm_active == EXPECTED_GPM["sm_active"] and sample.tensor_active == EXPECTED_GPM["tensor_active"]


@pytest.mark.parametrize("error, named", [(real_pynvml.NVML_ERROR_NOT_SUPPORTED, "NVML_ERROR_NOT_SUPPORTED"),
                                          (real_pynvml.NVML_ERROR_NO_PERMISSION, "NVML_ERROR_NO_PERMISSION")])
def test_gpm_refused_gives_none_and_one_note(fake_nvml, sampler_of, error, named):
    gpu = FakeGpu(gpm_refused_with=error)  # a GPU in MIG mode, or a user without the permission
    fake = fake_nvml([gpu])
    sampler = sampler_of()
    for k in range(3):
        if k:
            time.sleep(INTERVAL_S)
        sample = poll(sampler)
        assert gpm_of(sample) == dict.fromkeys(GPM_FIELDS)
        assert sample.util == 87.0 and sample.mem_used == 3 * 2**30 and sample.energy_j == 0.0
    notes = gpu_fields.gpu_counter_notes(0)
    assert len(notes) == 1 and named in notes[0] and "GPU 0" in notes[0] and "sm_active" in notes[0]
    assert gpu.calls.count("nvmlGpmSampleGet") == 1   # the probe's trial, then never again
    assert fake.gpm_buffers == {}                      # the trial's buffer freed
    assert sampler.warnings == []                      # a note, not a warning: nothing went wrong
    info = gpu_inventory.inventory()[0]
    assert info.notes == notes and info.fields["sm_active"] is False and info.fields["util"] is True


@pytest.mark.parametrize("old", ["driver", "nvidia-ml-py"])
def test_gpm_absent_from_an_old_driver_or_binding_gives_none_and_one_note(fake_nvml, sampler_of, old):
    gpu = FakeGpu()
    if old == "driver":
        fake_nvml([gpu], driver_lacks=set(GPM_FUNCTIONS))
    else:
        fake_nvml([gpu], binding_lacks=set(GPM_FUNCTIONS + GPM_TYPES))
    sampler = sampler_of()
    poll(sampler)
    time.sleep(INTERVAL_S)
    sample = poll(sampler)
    assert gpm_of(sample) == dict.fromkeys(GPM_FIELDS)
    assert sample.util == 87.0 and sample.power_w == pytest.approx(312.5)
    notes = gpu_fields.gpu_counter_notes(0)
    assert len(notes) == 1 and "NVML_ERROR_FUNCTION_NOT_FOUND" in notes[0]


def test_gpm_on_an_ampere_or_older_gpu_gives_none_and_a_note(fake_nvml, sampler_of):
    gpu = FakeGpu(name="NVIDIA Fake A100", gpm_supported_device=False)
    fake = fake_nvml([gpu])
    sampler = sampler_of()
    poll(sampler)
    time.sleep(INTERVAL_S)
    assert gpm_of(poll(sampler)) == dict.fromkeys(GPM_FIELDS)
    notes = gpu_fields.gpu_counter_notes(0)
    assert len(notes) == 1 and "Ampere" in notes[0] and "isSupportedDevice 0" in notes[0]
    assert "nvmlGpmSampleGet" not in gpu.calls and fake.gpm_buffers == {}


def test_main_py_devices_shows_the_note(fake_nvml):
    fake_nvml([FakeGpu(gpm_supported_device=False), FakeGpu(uuid="GPU-1")])
    table = devices_table(device_inventory())
    assert table.count("note: ") == 1 and "note: GPU 0: no GPM metrics" in table


def test_gpm_refused_mid_run_is_noted_once_and_not_asked_again(fake_nvml, sampler_of):
    gpu = FakeGpu()
    fake = fake_nvml([gpu])
    sampler = sampler_of()
    poll(sampler)
    time.sleep(INTERVAL_S)
    assert gpm_of(poll(sampler)) == EXPECTED_GPM
    gpu.gpm_refused_with = real_pynvml.NVML_ERROR_NO_PERMISSION
    for _ in range(3):
        time.sleep(INTERVAL_S)
        sample = poll(sampler)
        assert gpm_of(sample) == dict.fromkeys(GPM_FIELDS) and sample.util == 87.0
    notes = gpu_fields.gpu_counter_notes(0)
    assert len(notes) == 1 and "NVML_ERROR_NO_PERMISSION" in notes[0]
    asked = gpu.calls.count("nvmlGpmSampleGet")
    assert fake.gpm_buffers == {}   # the refused GPU's buffers went back at once
    # The next sampler of this GPU (the next run) knows already.
    later = sampler_of()
    poll(later)
    time.sleep(INTERVAL_S)
    assert gpm_of(poll(later)) == dict.fromkeys(GPM_FIELDS)
    assert gpu.calls.count("nvmlGpmSampleGet") == asked and len(gpu_fields.gpu_counter_notes(0)) == 1


# ---- energy ----------------------------------------------------------------------------------------

def test_energy_starts_at_zero_and_grows_by_the_counters_delta(fake_nvml, sampler_of):
    gpu = FakeGpu(energy_mj=987_654_321)   # the driver has counted since it loaded: none of it is the run's
    fake_nvml([gpu])
    sampler = sampler_of()
    assert poll(sampler).energy_j == 0.0
    gpu.energy_mj += 2_500
    assert poll(sampler).energy_j == pytest.approx(2.5)
    gpu.energy_mj += 1_000_001
    assert poll(sampler).energy_j == pytest.approx(1002.501)
    assert poll(sampler).energy_j == pytest.approx(1002.501)   # nothing used: the total stays


def test_energy_used_between_the_samplers_start_and_its_first_pass_counts(fake_nvml):
    gpu = FakeGpu(energy_mj=40_000)
    fake_nvml([gpu])
    target = GpuTarget("cuda:0", 0)
    target.open(Poll())   # the sampler starts: its first reading of the counter
    gpu.energy_mj += 1_250
    assert target.read(Poll())[-1].energy_j == pytest.approx(1.25)
    target.close()


def test_energy_counter_reset_adds_nothing_and_keeps_counting(fake_nvml, sampler_of):
    gpu = FakeGpu(energy_mj=50_000_000)
    fake_nvml([gpu])
    sampler = sampler_of()
    poll(sampler)
    gpu.energy_mj += 3_000
    assert poll(sampler).energy_j == pytest.approx(3.0)
    gpu.energy_mj = 200                 # the driver reloaded: its counter starts again
    assert poll(sampler).energy_j == pytest.approx(3.0)
    gpu.energy_mj += 800
    assert poll(sampler).energy_j == pytest.approx(3.8)


def test_energy_counter_wrapping_past_64_bits_adds_what_was_used_across(fake_nvml, sampler_of):
    gpu = FakeGpu(energy_mj=2**64 - 1_500)
    fake_nvml([gpu])
    sampler = sampler_of()
    assert poll(sampler).energy_j == 0.0
    gpu.energy_mj = 2**64 + 500         # the fake hands back the low 64 bits: 500
    assert poll(sampler).energy_j == pytest.approx(2.0)
    gpu.energy_mj += 1_000
    assert poll(sampler).energy_j == pytest.approx(3.0)


@pytest.mark.parametrize("previous, current, used", [(10, 25, 15), (10, 10, 0), (5_000, 7, 0),
                                                     (2**64 - 1, 0, 1), (2**64 - 2**32, 4, 2**32 + 4),
                                                     (2**64 - 2**32 - 1, 4, 0)])
def test_used_millijoules_across_a_reset_and_a_wrap(previous, current, used):
    assert gpu_counters.used_mj(previous, current) == used


def test_gpu_without_energy_or_gpm_still_reads_everything_else(fake_nvml, sampler_of):
    gpu = FakeGpu(energy_mj=None, gpm_supported_device=False, unsupported={"nvmlDeviceGetPowerUsage"})
    fake_nvml([gpu])
    sampler = sampler_of()
    for k in range(3):
        if k:
            time.sleep(INTERVAL_S)
        sample = poll(sampler)
        assert sample.energy_j is None and gpm_of(sample) == dict.fromkeys(GPM_FIELDS)
        assert sample.util == 87.0 and sample.mem_util == 41.0
        assert sample.mem_used == 3 * 2**30 and sample.mem_total == 141 * 2**30
        assert sample.sm_clock_mhz == 1980.0 and sample.temp_c == 54.0 and sample.power_w is None
    assert gpu.calls.count("nvmlDeviceGetTotalEnergyConsumption") == 1   # the probe, then never again
    assert gpu_inventory.inventory()[0].fields["energy_j"] is False
    assert sampler.warnings == []


# ---- the store -------------------------------------------------------------------------------------

def test_an_old_store_gains_the_columns_and_thinning_keeps_energy_by_its_maximum(tmp_path):
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as old:   # the samples table as stores were first made
        old.execute("CREATE TABLE samples (run_id TEXT NOT NULL, t REAL NOT NULL, device TEXT NOT NULL, "
                    "util REAL, mem_util REAL, mem_used INTEGER, mem_total INTEGER, power_w REAL, "
                    "sm_clock_mhz REAL, temp_c REAL, pcie_rx_bps REAL, pcie_tx_bps REAL)")
        old.execute("INSERT INTO samples (run_id, t, device, util) VALUES ('before', 0.5, 'cuda:0', 40.0)")
    old.close()
    with Store(path) as store:
        assert store.samples("before")[0].util == 40.0 and store.samples("before")[0].energy_j is None
        run_id = store.create_run({"strategy": "single"})
        store.add_samples(run_id, [{"t": 0.1 * k, "device": "cuda:0", "util": 50.0, "energy_j": 10.0 * k,
                                    "sm_active": 20.0 + k, "sm_occupancy": 30.0, "tensor_active": None,
                                    "dram_bw_util": 60.0} for k in range(10)])
        assert store.samples(run_id)[3].energy_j == 30.0 and store.samples(run_id)[3].sm_active == 23.0
        assert store.thin_samples(run_id, before_t=1.0, bucket_s=1.0) == 9
        (row,) = store.samples(run_id)
        assert row.energy_j == 90.0                          # a running total: its bucket's last, not its mean
        assert row.sm_active == pytest.approx(24.5) and row.dram_bw_util == 60.0   # percentages: the mean
        assert row.tensor_active is None and row.span_s == 1.0
