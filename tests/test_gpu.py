"""On a machine with an NVIDIA GPU (skipped elsewhere; `make gpu-check` runs them with the headless runs).

One GPU is enough for all of these: two stages sharing cuda:0, the tutorial's
cpu+cuda split, data-parallel and ddp over one GPU, resnet50 at the tutorial's
setup. What needs two GPUs is said where the experiments leave it out.
"""
from __future__ import annotations

import json
import re

import pytest

from engine.store import Store
from helpers import cli
from procs import ROOT

pytestmark = pytest.mark.gpu

RUN_S = 240  # one CLI run, CUDA start-up included; under pytest's own 300 s per test


def timeline_kinds(db: str, run_id: str) -> dict[str, set[str]]:
    with Store(db) as store:
        rows = store.timeline(run_id)
    kinds: dict[str, set[str]] = {}
    for _, device, kind, *_ in rows:
        kinds.setdefault(device, set()).add(kind)
    return kinds


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return str(tmp_path_factory.mktemp("gpu") / "runs.sqlite3")


@pytest.fixture(scope="module")
def single_gpu(db):
    args = ["--model", "mlp", "--width", "256", "--depth", "4", "--batch-size", "256", "--steps", "5", "--json",
            "--db", db]
    _, summary = cli("run", *args, "--devices", "cuda:0", check_json=True, timeout=RUN_S)
    return args, summary


@pytest.mark.parametrize("extra", [
    ["--strategy", "model-parallel", "--devices", "cuda:0,cuda:0"],
    ["--strategy", "pipeline", "--devices", "cuda:0,cuda:0", "--micro-batches", "4"],
])
def test_two_stages_sharing_one_gpu_train_like_one_device_and_read_as_one_device(single_gpu, db, extra):
    args, single = single_gpu
    _, summary = cli("run", *args, *extra, check_json=True, timeout=RUN_S)
    assert summary["param_norm"] == pytest.approx(single["param_norm"], rel=1e-4)
    assert summary["devices"] == ["cuda:0"] and len(summary["devices_busy"]) == 1
    assert 0 < summary["devices_busy"][0] <= 1
    # The stages take turns on the GPU: no bubble formula, and the summary says why.
    assert summary["bubble"]["theory"] is None and any("share cuda:0" in n for n in summary["notes"])
    kinds = timeline_kinds(db, summary["run_id"])
    assert set(kinds) == {"cuda:0"} and {"forward", "backward", "optimizer"} <= kinds["cuda:0"]
    assert summary["telemetry"]["util_mean"][0] is not None


@pytest.mark.parametrize("devices", ["cpu,cuda:0", "cuda:0,cpu"])
def test_seed_embedding_on_cpu_and_gpu_matches_the_cpu(devices):
    """Both directions of the host copy: one still landing when the CPU stage reads it shows here."""
    args = ["--model", "seed-embedding", "--strategy", "model-parallel", "--steps", "5", "--json"]
    _, summary = cli("run", *args, "--devices", devices, check_json=True, timeout=RUN_S)
    _, on_cpu = cli("run", *args, "--devices", "cpu:2", check_json=True, timeout=RUN_S)
    assert summary["status"] == "finished" and set(summary["devices"]) == {"cpu:0", "cuda:0"}
    assert summary["param_norm"] == pytest.approx(on_cpu["param_norm"], rel=1e-3)
    assert summary["bubble"]["theory"] == pytest.approx(0.5)  # the naive split's formula holds on mixed devices


def test_resnet50_at_the_tutorials_setup_keeps_the_gpu_busy(db):
    """Batches prepared ahead on the GPU: the step is the GPU's work, not the host drawing images."""
    _, summary = cli("run", "--model", "resnet50", "--devices", "cuda:0", "--steps", "30", "--telemetry-hz", "50",
                     "--json", "--db", db, check_json=True, timeout=RUN_S)
    assert summary["batch_size"] == 120 and summary["status"] == "finished"
    assert summary["devices_busy"][0] > 0.8, summary["devices_busy"]
    assert summary["telemetry"]["util_mean"][0] > 50, summary["telemetry"]
    assert "transfer" not in timeline_kinds(db, summary["run_id"])["cuda:0"]  # the batch is already there
    assert summary["loss"]["last"] < summary["loss"]["first"]


def test_the_tutorial_split_of_resnet50_on_one_gpu(db):
    _, summary = cli("run", "--model", "resnet50", "--strategy", "pipeline", "--devices", "cuda:0,cuda:0",
                     "--split", "layer3", "--split-size", "20", "--steps", "6", "--json", "--db", db,
                     check_json=True, timeout=RUN_S)
    assert summary["split"] == [8] and summary["micro_batches"] == 6
    assert any("BatchNorm" in n for n in summary["notes"])


def test_data_parallel_on_a_gpu_times_each_of_its_steps(db):
    _, summary = cli("run", "--model", "mlp", "--width", "256", "--depth", "4", "--batch-size", "256",
                     "--strategy", "data-parallel", "--devices", "cuda:0", "--steps", "4", "--json", "--db", db,
                     check_json=True, timeout=RUN_S)
    kinds = timeline_kinds(db, summary["run_id"])
    assert {"transfer", "forward", "backward", "communication", "optimizer"} <= kinds["cuda:0"], kinds


def test_ddp_on_nccl_times_its_all_reduce_as_communication(db):
    _, summary = cli("run", "--model", "mlp", "--width", "256", "--depth", "4", "--batch-size", "256",
                     "--strategy", "ddp", "--devices", "cuda:0", "--steps", "4", "--json", "--db", db,
                     check_json=True, timeout=RUN_S)
    with Store(db) as store:
        rows = store.timeline(summary["run_id"])
    per_step = {}
    for step, _, kind, t0, t1 in rows:
        per_step.setdefault(step, set()).add(kind)
        assert t1 >= t0
    assert all({"communication", "backward"} <= kinds for kinds in per_step.values()), per_step


def test_input_prep_in_step_draws_on_the_host_and_copies_inside_the_step(db):
    _, summary = cli("run", "--model", "mlp", "--width", "256", "--depth", "4", "--batch-size", "256",
                     "--devices", "cuda:0", "--steps", "4", "--input-prep", "in-step", "--json", "--db", db,
                     check_json=True, timeout=RUN_S)
    assert "transfer" in timeline_kinds(db, summary["run_id"])["cuda:0"]


def watched_on_gpu(db: str, script: str, *args: str) -> tuple[dict, str, list]:
    """``main.py watch --devices cuda:0`` of an example: its summary, its log (the script's prints) and timeline."""
    proc = cli("watch", "--json", "--db", db, "--devices", "cuda:0", "--", str(ROOT / "examples" / script), *args,
               timeout=RUN_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    with Store(db) as store:
        rows = store.timeline(summary["run_id"])
    return summary, proc.stderr, rows


def test_a_watched_script_on_a_gpu_is_timed_where_the_gpu_runs_its_work(db):
    """The DDP example on cuda:0 (NCCL, one rank): forward, backward, all-reduce and optimizer from CUDA events,
    so each step's work lies inside the step in order, and the busy time adds up to most of the step (host
    clocks would time the launches: a forward of microseconds); its loss read without stalling the GPU is the
    script's own; the step the script measures itself is the watch's within a quarter."""
    summary, log, rows = watched_on_gpu(db, "ddp_train.py", "--device", "cuda", "--steps", "30", "--batch-size",
                                        "2048", "--features", "1024")
    assert summary["devices"] == ["cuda:0"] and summary["steps"] == 30
    (device,) = summary["time_by_kind"]
    assert {"forward", "backward", "communication", "optimizer"} <= set(device["by_kind"]), device
    assert summary["loss"]["last"] == pytest.approx(float(re.search(r"final loss (\S+)", log).group(1)), rel=1e-6)
    own_ms = float(re.search(r"([0-9.]+) ms per step", log).group(1))
    assert summary["step_time_s"]["mean"] * 1e3 == pytest.approx(own_ms, rel=0.25)
    for step in range(1, 30):
        mine = sorted((t0, t1, kind) for s, _, kind, t0, t1 in rows if s == step and kind != "communication")
        kinds = [kind for *_, kind in mine]
        assert kinds[-3:] == ["forward", "backward", "optimizer"], mine
        # one stream: one after another
        assert all(a[1] <= b[0] + 1e-4 for a, b in zip(mine, mine[1:], strict=False)), mine
    forward = device["by_kind"]["forward"]
    assert forward > 1e-4   # 2048 x 1024 through three layers on the GPU, not a launch's microseconds


def test_a_watched_fsdp_script_on_a_gpu_is_timed_on_its_gpu(db):
    """FSDP2 over NCCL on one GPU (a mesh of one: torch makes no collective, so none is on the timeline), timed
    by events on the streams FSDP2 runs its work on; its loss is the script's."""
    summary, log, rows = watched_on_gpu(db, "fsdp_train.py", "--device", "cuda", "--steps", "8", "--width", "1024")
    assert summary["steps"] == 8 and summary["devices"] == ["cuda:0"]
    assert {"forward", "backward", "optimizer"} <= {kind for _, _, kind, *_ in rows}
    assert summary["loss"]["last"] == pytest.approx(float(re.search(r"final loss (\S+)", log).group(1)), rel=1e-5)


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


def _two_gpus() -> bool:
    from engine.devices import gpu_count
    return gpu_count() >= 2


needs_two = pytest.mark.skipif(not _two_gpus(), reason="needs a second GPU")


@needs_two
@pytest.mark.parametrize("extra", [
    ["--strategy", "pipeline", "--micro-batches", "4"],
    ["--strategy", "pipeline", "--micro-batches", "4", "--schedule", "1f1b"],
    ["--strategy", "model-parallel"],
    ["--strategy", "ddp"],
    ["--strategy", "data-parallel"],
])
def test_two_gpus_train_like_one_and_time_every_device(single_gpu, db, extra):
    """A stage or replica per GPU (NCCL between processes, copies between GPUs in one): each GPU's timeline."""
    args, single = single_gpu
    _, summary = cli("run", *args, "--devices", "cuda:0,cuda:1", *extra, check_json=True, timeout=RUN_S)
    assert summary["devices"] == ["cuda:0", "cuda:1"]
    assert summary["param_change"] == pytest.approx(single["param_change"], rel=1e-3)
    kinds = timeline_kinds(db, summary["run_id"])
    assert {"forward", "backward"} <= kinds["cuda:0"] and {"forward", "backward"} <= kinds["cuda:1"], kinds
    if "ddp" in extra or "data-parallel" in extra:
        assert "communication" in kinds["cuda:0"] and "communication" in kinds["cuda:1"], kinds
    if "pipeline" in extra:
        assert summary["bubble"]["theory"] == pytest.approx(0.2)


def test_a_plain_scripts_lstm_on_a_gpu_counts_its_cudnn_flops_and_each_training_batch(db):
    """tests/scripts/lstm_lm.py (pytorch/examples' word language model's style: no optimizer, an evaluation each
    epoch) watched as plain python on the GPU: a step per training batch, its cuDNN LSTM's FLOPs counted
    (engine/measure/flop_formulas.py: a count of the decoder's alone would be a fraction), no impossible MFU."""
    script = ROOT / "tests" / "scripts" / "lstm_lm.py"
    proc = cli("watch", "--json", "--db", db, "--devices", "cuda:0", "--", "python", str(script), "--cuda",
               "--nhid", "256", "--emsize", "256", "--train-tokens", "4000", "--batch_size", "32", timeout=RUN_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["steps"] == int(proc.stderr.split("training batches ")[1].split()[0])
    codes = [f["code"] for f in summary["findings"]]
    assert "mfu_over_peak" not in codes and "uncounted_flops" not in codes, summary["findings"]
    # per token: 2 layers of 4 gates x 256 x (256 + 256), forward and backward (3x), and the decoder; at least the
    # LSTM's forward: 2 * 4 * 256 * 512 * 2 per token
    tokens = 32 * 8
    assert summary["efficiency"]["devices"][0]["flops_per_step"] >= 2 * 2 * 4 * 256 * 512 * tokens
