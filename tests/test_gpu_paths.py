"""The GPU paths, checked where a CPU can check them (fake NVML); tests/test_gpu.py runs the rest on a GPU.

A one-GPU machine is the common case: two stages sharing cuda:0, experiments that
run what one GPU can, NCCL kept on loopback like gloo, a run that cannot start
stored as failed rather than left running.
"""
from __future__ import annotations

import sys
import time

import pytest

from engine import experiments
from engine.config import ExperimentConfig
from engine.devices import Device, parse
from engine.planner.planning import balanced_split_per_stage
from engine.run.local_ranks import rank_environment
from engine.run.session import RunSession
from engine.store import Store
from engine.telemetry import TelemetrySampler, gpu_inventory
from engine.telemetry.targets import physical_name, targets_for
from fake_nvml import FakeGpu, make_fake_pynvml

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def gpus(monkeypatch):
    """NVML sees ``gpus(n)`` GPUs from here on."""
    def install(n: int):
        monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml([FakeGpu(uuid=f"GPU-{k}") for k in range(n)]))
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        gpu_inventory.reset()
    yield install
    gpu_inventory.reset()


def test_two_stages_sharing_a_gpu_are_one_device_to_sample(gpus):
    gpus(1)
    devices = parse("cuda:0,cuda:0", 2)
    targets = targets_for(devices)
    assert [t.name for t in targets] == ["cuda:0"]
    sampler = TelemetrySampler(targets, rate_hz=20)  # refused two targets of one name before
    sampler.start()
    samples, deadline = [], time.monotonic() + 5
    while not samples and time.monotonic() < deadline:
        time.sleep(0.05)
        samples = sampler.drain()
    sampler.stop()
    assert {s.device for s in samples} == {"cuda:0"}
    assert physical_name(devices[0]) == "cuda:0"
    assert physical_name(Device("cpu:1", "cpu", 1, core=5)) == "core 5"


@pytest.mark.parametrize("name,expected", [
    ("compare-strategies", {"single": "cuda:0", "model-parallel": "cuda:0,cuda:0", "pipeline": "cuda:0,cuda:0",
                            "data-parallel": "cuda:0", "ddp": "cuda:0"}),
    ("schedules", {"model-parallel": "cuda:0,cuda:0", "gpipe": "cuda:0,cuda:0"}),
    ("dp-scaling", {"single x1": "cuda:0", "data-parallel x1": "cuda:0", "ddp x1": "cuda:0"}),
])
def test_experiments_on_one_gpu_run_what_one_gpu_can_and_say_what_needs_a_second(gpus, name, expected):
    gpus(1)
    base = experiments.default_config({})
    assert base.devices == "cuda:0" and base.model == "resnet50" and base.batch_size == 120
    points = experiments.PRESETS[name].points(base)
    assert {p.label: p.config.devices for p in points} == expected
    from engine.run.validate import plan
    for point in points:  # every point is a valid run on this machine
        assert plan(point.config)[1] == [], point.label
    (note,) = experiments.limits(name, base)
    assert "second GPU" in note


def test_split_sweeps_on_one_gpu_share_it_and_on_two_use_both(gpus):
    gpus(1)
    base = experiments.default_config({"model": "seed-toy"})
    for name in ("split-point", "split-size"):
        assert {p.config.devices for p in experiments.PRESETS[name].points(base)} == {"cuda:0,cuda:0"}
    gpus(2)
    base = experiments.default_config({"model": "seed-toy"})
    assert base.devices == "cuda:0,cuda:1" and experiments.limits("schedules", base) == []
    assert [p.label for p in experiments.PRESETS["schedules"].points(base)] == ["model-parallel", "gpipe", "1f1b"]


def test_nccl_stays_on_loopback_as_gloo_does():
    env = rank_environment({"PATH": "/bin"}, rank=1, world=2, config_json="{}", devices_json="[]", event_fd=9,
                           store_file="/tmp/s")
    assert env["NCCL_SOCKET_IFNAME"] == "lo" and env["GLOO_SOCKET_IFNAME"] == "lo"
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"]) == ("1", "2", "1")


def test_a_run_that_cannot_start_is_stored_as_failed_not_left_running(fresh_store):
    """Telemetry for a GPU this machine lacks fails inside start(): the stored run says so."""
    session = RunSession(ExperimentConfig(model="seed-toy", devices="cuda:7"), db_path=fresh_store)
    with pytest.raises(Exception, match="cuda:7"):
        session.start()
    with Store(fresh_store) as store:
        (run,) = store.list_runs()
    assert run.status == "failed" and "could not start" in run.error and "cuda:7" in run.error
    assert session.wait(0).status == "failed"


def test_a_mixed_split_is_balanced_with_each_stage_devices_own_block_times():
    """On cpu,cuda:0 each block costs far more on the CPU stage: the balanced split gives the CPU stage less."""
    on_gpu = [1.0] * 8
    on_cpu = [10.0] * 8
    assert balanced_split_per_stage([on_gpu, on_gpu]) == (4,)
    assert balanced_split_per_stage([on_cpu, on_gpu]) == (1,)   # 10 | 7, not 40 | 4
    assert balanced_split_per_stage([on_gpu, on_cpu]) == (7,)
