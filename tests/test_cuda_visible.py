"""cuda:K is the K-th GPU CUDA_VISIBLE_DEVICES shows torch, and telemetry reads that GPU (fake NVML)."""
from __future__ import annotations

import sys

import pytest

from engine import devices
from engine.cli.report import device_inventory, devices_table
from engine.devices import Device
from engine.telemetry import TelemetrySampler, all_targets, gpu_inventory
from engine.telemetry.cuda_visible import visible_gpus
from engine.telemetry.targets import targets_for
from fake_nvml import FakeGpu, make_fake_pynvml

pytestmark = [pytest.mark.timeout(30), pytest.mark.quick]


@pytest.fixture
def four_gpus(monkeypatch):
    """NVML sees four GPUs, each with its own utilization so a reading says which GPU it came from."""
    gpus = [FakeGpu(uuid=uuid, util_gpu=util) for uuid, util in
            (("GPU-aaaa-0", 10), ("GPU-bbbb-1", 11), ("GPU-bbcc-2", 12), ("GPU-dddd-3", 13))]
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml(gpus))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    gpu_inventory.reset()
    yield gpus
    gpu_inventory.reset()


@pytest.mark.parametrize("value,expected", [
    (None, [0, 1, 2, 3]),
    ("", []),                        # hides every GPU
    ("2,3", [2, 3]),
    ("3, 1", [3, 1]),                # the list's order is CUDA's numbering
    ("1gpu2,2ampere", [1, 2]),       # numbers read like strtoul
    ("1,7,2", [1]),                  # the list ends at a number past the last GPU...
    ("1,-1,2", [1]),                 # ...or a negative one, or no number at all
    ("1,+-1,2", [1]),
    ("1,\u00b2", [1]),              # a superscript two is a digit to str.isdigit, not to CUDA
    ("0,2,0", []),                   # a repeat hides every GPU...
    ("1,7,1", []),                   # ...even after a number past the last GPU
    ("GPU-dddd", [3]),               # a unique UUID prefix
    ("GPU-bbcc-2,GPU-aaaa", [2, 0]),
    ("GPU-bbcc-2,0", [2]),           # the first entry's kind is the list's
    ("GPU-bb,GPU-aaaa", []),         # an ambiguous prefix ends the list
    ("GPU-aaaa,GPU-aaaa-0", []),     # the same GPU twice
    ("MIG-5e1c,MIG-77f0,1", [None]), # one MIG instance runs; NVML telemetry here does not read it
    ("first", []),
])
def test_visible_gpus_reads_cuda_visible_devices_as_cuda_does(four_gpus, value, expected):
    environ = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
    assert visible_gpus(environ) == expected


def test_a_run_on_cuda_0_samples_the_gpu_cuda_visible_devices_names(four_gpus, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert devices.gpu_count() == 2
    assert [d.name for d in devices.parse("cuda", 2)] == ["cuda:0", "cuda:1"]
    with pytest.raises(devices.DeviceError, match="GPUs 0..1"):
        devices.parse("cuda:2", 1)
    targets = targets_for([Device("cuda:0", "cuda", 0), Device("cuda:1", "cuda", 1)])
    samples = TelemetrySampler(targets).poll_once()
    util = {s.device: s.util for s in samples if s.util is not None}
    assert util == {"cuda:0": 12, "cuda:1": 13}       # NVML's GPUs 2 and 3, not 0 and 1
    assert [t.name for t in all_targets() if t.kind == "cuda"] == ["cuda:0", "cuda:1"]


def test_the_inventory_names_each_gpu_as_a_run_would(four_gpus, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    inventory = gpu_inventory.inventory()
    assert [g.cuda_index for g in inventory] == [None, 1, None, 0]
    assert [g.uuid for g in devices.cuda_visible(inventory)] == ["GPU-dddd-3", "GPU-bbbb-1"]
    table = devices_table(device_inventory())
    assert "GPU 0 (hidden by CUDA_VISIBLE_DEVICES)" in table and "cuda:0  NVIDIA Fake H200" in table


def test_a_mig_instance_is_said_to_have_no_telemetry_once(four_gpus, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-5e1c")
    warnings: list[str] = []
    sampler = TelemetrySampler(targets_for([Device("cuda:0", "cuda", 0)]), on_warning=warnings.append)
    assert sampler.poll_once() == [] and sampler.poll_once() == []
    assert len(warnings) == 1 and "CUDA_VISIBLE_DEVICES='MIG-5e1c'" in warnings[0]


# Not "1,+-1,2": torch 2.14's parser raises ValueError on it (int("+")); ours ends the list there.
SPELLINGS = ["", "2,3", "3, 1", "1gpu2,2ampere", "1,7,2", "1,-1,2", "0,2,0", "1,7,1", " 2 ,x", "first",
             "GPU-dddd", "GPU-bbcc-2,GPU-aaaa", "GPU-bbcc-2,0", "GPU-bb,GPU-aaaa", "GPU-aaaa,GPU-aaaa-0",
             "GPU-zz", "GPU-aaaa-0,GPU-aaaa-0"]


@pytest.mark.parametrize("value", SPELLINGS)
def test_visible_gpus_agrees_with_torchs_own_parser(four_gpus, monkeypatch, value):
    """torch.cuda's private parser (the one its NVML device count uses), run on the same GPUs."""
    import torch.cuda

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    monkeypatch.setattr(torch.cuda, "_raw_device_count_nvml", lambda: len(four_gpus))
    monkeypatch.setattr(torch.cuda, "_raw_device_uuid_nvml", lambda: [g.uuid for g in four_gpus])
    ours = visible_gpus()
    assert len(ours) == torch.cuda._device_count_nvml()   # torch's count of the GPUs it may use
    parsed = torch.cuda._parse_visible_devices()
    if parsed and isinstance(parsed[0], str):
        assert ours == torch.cuda._transform_uuid_to_ordinals(parsed, [g.uuid for g in four_gpus])
    else:
        assert ours == parsed[:len(ours)]                    # the same GPUs, in the same order
