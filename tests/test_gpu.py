"""On a machine with an NVIDIA GPU (skipped elsewhere): the in-process strategies on cuda:0,
the seed's CPU+GPU model, resnet50 at the tutorial's setup, and NCCL-free paths."""
from __future__ import annotations

import pytest

from helpers import cli

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def single_gpu(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("gpu") / "runs.sqlite3")
    args = ["--model", "mlp", "--width", "256", "--depth", "4", "--batch-size", "256", "--steps", "5", "--json",
            "--db", db]
    _, summary = cli("run", *args, "--devices", "cuda:0", check_json=True)
    return args, summary


@pytest.mark.parametrize("extra", [
    ["--strategy", "model-parallel", "--devices", "cuda:0,cuda:0"],
    ["--strategy", "pipeline", "--devices", "cuda:0,cuda:0", "--micro-batches", "4"],
])
def test_in_process_stages_on_one_gpu_match_single(single_gpu, extra):
    args, single = single_gpu
    _, summary = cli("run", *args, *extra, check_json=True)
    assert summary["param_norm"] == pytest.approx(single["param_norm"], rel=1e-4)
    assert all(b > 0 for b in summary["devices_busy"])


@pytest.mark.parametrize("devices", ["cpu,cuda:0", "cuda:0,cpu"])
def test_seed_embedding_on_cpu_and_gpu_matches_the_cpu(devices):
    """Both directions of the host copy: one still landing when the CPU stage reads it shows here."""
    args = ["--model", "seed-embedding", "--strategy", "model-parallel", "--steps", "5", "--json"]
    _, summary = cli("run", *args, "--devices", devices, check_json=True)
    _, on_cpu = cli("run", *args, "--devices", "cpu:2", check_json=True)
    assert summary["status"] == "finished" and set(summary["devices"]) == {"cpu:0", "cuda:0"}
    assert summary["param_norm"] == pytest.approx(on_cpu["param_norm"], rel=1e-3)


def test_resnet50_tutorial_setup_single_gpu():
    # An H200 runs these steps in a fraction of a second: sample at 50 Hz so the window has samples.
    _, summary = cli("run", "--model", "resnet50", "--devices", "cuda:0", "--steps", "20", "--telemetry-hz", "50",
                     "--json", check_json=True, timeout=600)
    assert summary["batch_size"] == 120 and summary["status"] == "finished"
    assert summary["telemetry"]["util_mean"][0] is not None


def test_cuda_visible_devices_maps_to_the_same_gpu_in_torch_and_nvml():
    """Real NVML and the CUDA runtime: a UUID prefix, an index and an empty list give the GPU torch gets."""
    import os
    import subprocess
    import sys

    from engine.telemetry import nvml
    from engine.telemetry.cuda_visible import visible_gpus
    last = nvml.device_count() - 1
    uuid = nvml.text(nvml.device_query(last, "nvmlDeviceGetUUID"))
    for value, expected in ((uuid[:12], [last]), (str(last), [last]), ("", [])):
        assert visible_gpus({"CUDA_VISIBLE_DEVICES": value}) == expected
        # The runtime's own answer: cuda:0's UUID as CUDA reports it (8-4-4-4-12 hex; NVML adds "GPU-").
        code = ("import torch; n = torch.cuda.device_count(); "
                "print(n, str(torch.cuda.get_device_properties(0).uuid) if n else '')")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "CUDA_VISIBLE_DEVICES": value, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
        count, *cuda0 = out.stdout.split()
        assert int(count) == len(expected), value
        if expected:
            assert "GPU-" + cuda0[0] == nvml.text(nvml.device_query(expected[0], "nvmlDeviceGetUUID")), value
