"""Watching scripts nobody here designed for (issue 51): tests/scripts/ holds training scripts written in the styles
of well-known public trainers (nanoGPT, pytorch/examples' word language model, DCGAN and ImageNet scripts, the
Hugging Face training-loop tutorial), each run unchanged by `main.py watch`, as plain python or as torchrun's ranks.
Their steps, samples, optimizers and findings are read from the scripts themselves, and checked against what
each script prints of its own counts.

The watches run at once, a few at a time (``watched``): what each asserts is a count or a figure of its own run,
never a time held against a band."""
from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from engine.store import Store
from helpers import start_cli
from procs import ROOT

SCRIPTS = ROOT / "tests" / "scripts"
# name -> the watch's arguments after --db: each script at its tiny defaults
WATCHES = {
    "char_gpt": ["--", "python", str(SCRIPTS / "char_gpt.py")],
    "lstm_lm": ["--", "python", str(SCRIPTS / "lstm_lm.py")],
    "dcgan": ["--", "python", str(SCRIPTS / "dcgan.py")],
    "hf_style": ["--", "python", str(SCRIPTS / "hf_style.py"), "--gradient_accumulation_steps", "2"],
    "needs_two_gpus": ["--", "python", str(SCRIPTS / "needs_two_gpus.py")],
    "save_whole_model": ["--", "python", str(SCRIPTS / "save_whole_model.py")],
    # from the project's folder, its samples a step given (it says none, and takes no DataLoader's)
    "as_module": ["--samples-per-step", "7", "--", "python", "-m", "tests.scripts.lstm_lm", "--epochs", "1"],
    "no_group": ["--devices", "cpu:2", "--", str(SCRIPTS / "no_group.py")],
    "slow_loader_ddp": ["--devices", "cpu:2", "--", "torchrun", "--nproc-per-node", "2",
                        str(SCRIPTS / "slow_loader_ddp.py"), "--steps", "6"],
}


class Watched:
    def __init__(self, db, proc: subprocess.CompletedProcess, summary: dict):
        self.db, self.proc, self.summary = db, proc, summary

    def codes(self) -> list[str]:
        return [f["code"] for f in self.summary["findings"]]

    def steps(self):
        with Store(self.db) as store:
            return store.steps(self.summary["run_id"])


@pytest.fixture(scope="module")
def watched(tmp_path_factory) -> dict[str, Watched]:
    """Every script of WATCHES watched, three at a time, each into a store of its own."""
    folder = tmp_path_factory.mktemp("real-scripts")

    def one(name: str) -> Watched:
        db = folder / f"{name}.db"
        proc = start_cli("watch", "--json", "--db", str(db), *WATCHES[name], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=280)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        lines = out.strip().splitlines()
        return Watched(db, done, json.loads(lines[-1]) if lines else {})
    with ThreadPoolExecutor(3) as pool:
        return dict(zip(WATCHES, pool.map(one, WATCHES), strict=True))


def finished(run: Watched) -> dict:
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    assert run.summary["status"] == "finished", run.summary
    return run.summary


def test_a_nanogpt_style_trainer_runs_as_plain_python_with_its_accumulation_and_evaluations(watched):
    """It picks DDP and `cuda:LOCAL_RANK` when RANK is set: as plain python it trains on the CPU, its 6 iterations
    6 steps of 2 micro-steps (AdamW), its estimate_loss() passes between them evaluation, not steps."""
    summary = finished(watched["char_gpt"])
    assert summary["steps"] == 6 and "iter 5:" in watched["char_gpt"].proc.stderr
    assert summary["optimizer"] == "AdamW" and summary["script"]["model"] == "GPT"
    assert summary["script"]["micro_steps"] == 2 and summary["script"]["lr"][0] > 0
    assert [s.samples for s in watched["char_gpt"].steps()] == [8] * 6   # 2 micro-batches of 4
    assert "eval_time" in watched["char_gpt"].codes()
    assert summary["time_by_kind"][0]["between_steps"]["eval"] > 0


def test_a_word_language_model_updating_its_own_parameters_counts_each_training_batch_once(watched):
    """No optimizer, sequence-first batches, an evaluation after each epoch: a step per training batch (the
    script's own count), its samples the batch dimension (the second), the optimizer said to be the script."""
    run = watched["lstm_lm"]
    summary = finished(run)
    printed = int(run.proc.stderr.split("training batches ")[1].split()[0])
    assert summary["steps"] == printed == 10
    assert summary["optimizer"] == "none: parameters updated by the script"
    assert {s.samples for s in run.steps()} == {4} and "dimension 1" in summary["script"]["samples_source"]
    assert "peer_wait" not in run.codes() and "eval_time" in run.codes()


def test_a_module_runs_as_python_m_runs_it_with_the_samples_a_step_given(watched):
    run = watched["as_module"]
    summary = finished(run)
    assert summary["model"] == "tests.scripts.lstm_lm" and summary["steps"] == 5 == int(
        run.proc.stderr.split("training batches ")[1].split()[0])
    assert {s.samples for s in run.steps()} == {7} and summary["script"]["samples_source"] == "--samples-per-step"


def test_a_gan_in_one_process_has_one_step_a_batch_and_names_both_optimizers(watched):
    run = watched["dcgan"]
    summary = finished(run)
    assert summary["steps"] == int(run.proc.stderr.split("batches ")[1].split()[0]) == 8
    assert summary["optimizer"] == "Adam, Adam" and summary["script"]["model"] == "Discriminator, Generator"
    assert "peer_wait" not in run.codes()
    assert {s.samples for s in run.steps()} == {16}   # the DataLoader's batch, not the fake one too


def test_a_hugging_face_style_loop_counts_its_keyword_batches_and_its_throughput_is_samples_over_time(watched):
    """model(**batch) from a DataLoader of dicts, AdamW, 2 batches accumulated a step: 16 samples a step, and the
    summary's throughput is the measured steps' samples over their time (not a mean of per-step rates)."""
    run = watched["hf_style"]
    summary = finished(run)
    assert summary["steps"] == int(run.proc.stderr.split("optimizer steps ")[1].split()[0]) == 6
    assert summary["optimizer"] == "AdamW" and summary["script"]["micro_steps"] == 2
    assert "DataLoader" in summary["script"]["samples_source"] and summary["script"]["loader"]["batch_size"] == 8
    measured = [s for s in run.steps() if s.step >= summary["steps"] - summary["steps_measured"]]
    assert {s.samples for s in measured} == {16}
    assert summary["throughput"]["mean"] == pytest.approx(sum(s.samples for s in measured)
                                                          / sum(s.time_s for s in measured), rel=1e-6)


def test_a_script_that_finds_no_gpus_and_exits_says_so_instead_of_a_silent_run(watched):
    run = watched["needs_two_gpus"]
    summary = finished(run)
    assert summary["steps"] == 0 and run.codes() == ["no_steps"]
    assert "Unable to locate sufficient 2 gpus" in summary["findings"][0]["text"]
    assert "exited with status 0" in summary["diagnosis"]


def test_a_whole_model_saved_and_loaded_with_weights_only_finds_nothing_of_ours_on_it(watched):
    run = watched["save_whole_model"]
    finished(run)
    assert "reloaded ok" in run.proc.stderr


def test_ranks_that_never_form_a_process_group_are_said_to_train_alone_not_to_wait_on_a_peer(watched):
    run = watched["no_group"]
    summary = finished(run)
    assert "independent_ranks" in run.codes() and "peer_wait" not in run.codes()
    assert summary["steps"] == 16


def test_a_ddp_script_with_a_slow_loader_has_kinds_that_add_up_to_its_step(watched):
    """Every third batch waits 80 ms on its data: each device's kinds (its all-reduce under its backward counted
    once, the rest `other`) add up to its step, and throughput is samples over time on the uneven steps. Its
    DataLoader has no workers: the rank loads its batches itself, busy on its data, and the finding says so."""
    run = watched["slow_loader_ddp"]
    summary = finished(run)
    assert summary["steps"] == 6
    for device in summary["time_by_kind"]:
        timed = {kind: s for kind, s in device["by_kind"].items() if kind != "other"}
        assert sum(timed.values()) <= 1.01 * device["step_s"], device   # each moment once, within the step
        assert sum(device["by_kind"].values()) == pytest.approx(device["step_s"], rel=0.01), device
        assert timed["data"] > 0 and device["by_kind"].get("communication", 0) + device["hidden"].get(
            "communication", 0) > 0   # DDP's all-reduce, counted once where it overlaps
        assert "data-wait" not in timed   # no worker to wait for
    measured = [s for s in run.steps() if s.step >= summary["steps"] - summary["steps_measured"]]
    assert summary["throughput"]["mean"] == pytest.approx(sum(s.samples for s in measured)
                                                          / sum(s.time_s for s in measured), rel=1e-6)
    loads = [f for f in summary["findings"] if f["code"] == "data_load"]
    assert loads and all("num_workers, now 0" in f["text"] for f in loads) and "data_wait" not in run.codes()
    shares = {d["device"]: d["by_kind"]["data"] / d["step_s"] for d in summary["time_by_kind"]}
    assert all(f["share"] == pytest.approx(shares[f["devices"][0]]) for f in loads)   # the kind's share, as said
    assert {"worker", "session", "telemetry"} <= set(summary["recording_cpu_s"]) and "recording_cpu" in run.codes()
    assert "--loader-workers" not in json.dumps(summary["findings"])   # the script's words, not our flags
