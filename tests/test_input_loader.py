"""--input-prep loader (issue 32): a real DataLoader feeds the steps, the rank's decoding the step's "data" (busy),
its wait for the workers "data-wait" (idle), its workers run on the cores no device holds and end with the run, and
the input-pipeline experiment sweeps them."""
from __future__ import annotations

import json
import os
import time

import psutil
import pytest
import torch

from engine import cli
from engine.config import ExperimentConfig
from engine.cores import usable_cores
from engine.record.time_by_kind import input_share
from engine.results import Step
from engine.run.session import RunSession
from engine.run.validate import plan
from engine.store import Store
from faulty_models import write as faulty_model
from procs import tagged_processes

LOADER = dict(input_prep="loader")
SMALL_MLP = dict(model="mlp", width=32, depth=3, batch_size=32, steps=4, warmup=1)


def run(config: ExperimentConfig, db) -> object:
    session = RunSession(config, db_path=db, telemetry_hz=10)
    session.start()
    result = session.wait(240)
    assert result is not None and result.status == "finished", result and result.error
    return result


def data_share(result) -> float:
    return max(d.share("data") for d in result.summary.time_by_kind)


# ---- the dataset ----------------------------------------------------------------------------------------------
@pytest.mark.quick
def test_an_image_is_decoded_from_jpeg_and_augmented_alike_on_every_rank_and_other_rows_cost_nothing():
    from engine.run.loader import PoolOrder, SampleSet, spend_cpu
    pool = [(torch.rand(4, 3, 32, 32), torch.arange(4) + 4 * k) for k in range(2)]
    mine = SampleSet(pool, rows=lambda size: range(2), decode_cost_ms=0, seed=0)
    theirs = SampleSet(pool, rows=lambda size: range(size), decode_cost_ms=0, seed=0)
    assert mine.image and [sorted(batch) for batch in mine.stored] == [[0, 1], [0, 1]]   # kept as JPEG bytes
    inputs, targets = mine[1]
    assert inputs.shape == (4, 3, 32, 32) and inputs.dtype == torch.float32 and targets.tolist() == [4, 5, 6, 7]
    assert torch.equal(inputs[:2], theirs[1][0][:2])   # the same crops and flips on another rank
    assert -3 < float(inputs[:2].min()) < float(inputs[:2].max()) < 3   # normalized as ImageNet's
    assert not torch.equal(inputs[0], inputs[1])   # each sample its own
    assert torch.count_nonzero(inputs[2:]) == 0   # rows another rank reads: zeros
    later_stage = SampleSet(pool, rows=lambda size: range(0), decode_cost_ms=0, seed=0)
    assert later_stage[0][0].numel() == 0 and later_stage[0][1].tolist() == [0, 1, 2, 3]   # no inputs at all
    # a short batch (seed-linear's last of 100 rows in 30s) stays short, and the batches come in turn
    uneven = SampleSet([(torch.randn(30, 5), torch.randn(30, 2)), (torch.randn(10, 5), torch.randn(10, 2))],
                       rows=lambda size: range(size), decode_cost_ms=0, seed=0)
    assert not uneven.image and [len(uneven[k][0]) for k in PoolOrder(2, 5)] == [30, 10, 30, 10, 30]
    started = time.thread_time()
    spend_cpu(20)
    assert time.thread_time() - started >= 0.02   # CPU time, not a sleep


@pytest.mark.quick
def test_the_loader_options_are_checked_before_anything_launches(capsys):
    refused = ExperimentConfig(loader_workers=2, pin_memory=True)
    assert {(p.option, p.message) for p in plan(refused)[1]} >= {
        ("loader_workers", "applies only with --input-prep loader"),
        ("pin_memory", "applies only with --input-prep loader")}
    no_workers = ExperimentConfig(**LOADER, prefetch_factor=4, persistent_workers=True, loader_cores="1")
    assert {p.option for p in plan(no_workers)[1]} == {"prefetch_factor", "persistent_workers", "loader_cores"}
    assert cli.main(["run", "--input-prep", "loader", "--loader-workers", "1", "--loader-cores", "2-x",
                     "--steps", "1"]) == cli.EXIT_INVALID
    assert "--loader-cores: must be core numbers and ranges such as 2,3 or 2-5" in capsys.readouterr().err
    # a switch on the command line; pinned memory is for copies to GPUs
    assert cli.main(["run", "--input-prep", "loader", "--pin-memory", "--devices", "cpu:1", "--steps", "1"]) \
        == cli.EXIT_INVALID
    assert "--pin-memory: applies to runs on GPUs" in capsys.readouterr().err
    from engine import rules  # on each node, the cores its devices leave
    over_nodes = ExperimentConfig(**LOADER, loader_workers=1, loader_cores="1", nodes="10.0.0.2:29400")
    assert any(p.option == "loader_cores" and "not with --nodes" in p.message for p in rules.problems(over_nodes))
    absent = max(usable_cores()) + 1
    cores = plan(ExperimentConfig(**LOADER, loader_workers=1, loader_cores=str(absent), devices="cpu:1"))[1]
    assert [p.option for p in cores] == ["loader_cores"] and f"core {absent} is not among" in cores[0].message


@pytest.mark.quick
def test_workers_that_must_share_the_devices_cores_are_said_before_the_run():
    every_core = f"cpu:{len(usable_cores())}"
    run_plan, _ = plan(ExperimentConfig(**SMALL_MLP, **LOADER, loader_workers=2, strategy="ddp", devices=every_core))
    assert any("the loader's 2 workers have no core of their own" in w for w in run_plan.warnings)
    run_plan, _ = plan(ExperimentConfig(**SMALL_MLP, **LOADER, loader_workers=1, devices="cpu:1",
                                        loader_cores=str(usable_cores()[0])))
    assert any("share core" in w for w in run_plan.warnings)
    if len(usable_cores()) > 1:   # a core of their own: nothing to say
        run_plan, _ = plan(ExperimentConfig(**SMALL_MLP, **LOADER, loader_workers=1, devices="cpu:1"))
        assert not any("loader" in w for w in run_plan.warnings)


# ---- runs -----------------------------------------------------------------------------------------------------
def test_the_loader_feeds_the_prepared_batches_and_a_replica_decodes_its_own_rows(fresh_store):
    """An MLP's samples through a DataLoader are the batches prepared ahead would be: one device, and ddp's
    replicas each decoding their half on a worker of their own, train exactly alike."""
    ahead = run(ExperimentConfig(**SMALL_MLP, devices="cpu:1"), fresh_store).summary
    single = run(ExperimentConfig(**SMALL_MLP, **LOADER, loader_workers=2, devices="cpu:1"), fresh_store).summary
    ddp = run(ExperimentConfig(**SMALL_MLP, **LOADER, strategy="ddp", devices="cpu:2", decode_cost_ms=0.2,
                               loader_workers=1), fresh_store).summary
    for summary in (single, ddp):
        assert summary.param_change == pytest.approx(ahead.param_change, rel=1e-5)
        assert summary.loss.last == pytest.approx(ahead.loss.last, rel=1e-5)
        # each rank waited for its workers' batch (idle), and loaded none itself
        assert all(d.by_kind.get("data-wait", 0) > 0 and not d.by_kind.get("data") for d in summary.time_by_kind)
    assert not any(input_share(d) for d in ahead.time_by_kind)


def loader_workers() -> list[psutil.Process]:
    """The DataLoader workers of the test's runs: the children of its rank processes."""
    found = []
    for rank in (p for p in tagged_processes() if "engine.run.rank" in " ".join(p.cmdline())):
        try:
            found += rank.children()
        except psutil.NoSuchProcess:
            pass
    return found


def workers_once_stepping(steps: list, count: int, timeout: float = 60) -> list[psutil.Process]:
    """The run's ``count`` loader workers, once its ranks have stepped twice."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = loader_workers()
        if len(workers) >= count and len(steps) >= 2:
            return workers
        time.sleep(0.1)
    pytest.fail(f"no {count} loader workers stepping within {timeout} s: {loader_workers()}, {len(steps)} steps")


def test_loader_workers_run_on_the_free_core_and_end_with_the_run_on_stop_and_on_a_crash(fresh_store, tmp_path):
    config = ExperimentConfig(**dict(SMALL_MLP, steps=100_000), **LOADER, loader_workers=2, decode_cost_ms=0.5,
                              devices="cpu:1")
    steps = []
    session = RunSession(config, db_path=fresh_store, telemetry_hz=10,
                         on_event=lambda e: steps.append(e) if isinstance(e, Step) else None)
    session.start()
    try:
        workers = workers_once_stepping(steps, 2)
        # the workers' temporary files (multiprocessing's, as they hand batches over) are in the run's folder
        assert [name for name in os.listdir(session.folder) if name.startswith("pymp-")]
        spare = sorted(set(usable_cores()) - {usable_cores()[0]})
        if spare:   # cpu:0 holds the first core: the workers are on the others, never on the device's
            assert all(sorted(w.cpu_affinity()) == spare for w in workers), [w.cpu_affinity() for w in workers]
    finally:
        session.stop()
    stopped = session.wait(60)
    assert stopped.status == "stopped"
    gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, alive
    assert not os.path.exists(session.folder)   # with the temporary files the ended workers could not remove
    if spare:   # the workers' own core is sampled beside the device, as the loader's
        with Store(fresh_store) as store:
            loader = [s for s in store.samples(stopped.run_id) if s.device == f"loader (core {spare[0]})"]
        # a core's busy share (a poll within one tick of the last has none), no memory: no process is its own
        assert any(s.util is not None for s in loader) and all(s.mem_used is None for s in loader)
        from app.state.live_data import physical_names  # the window draws it as the core's series
        assert physical_names(config)[f"loader (core {spare[0]})"] == f"core {spare[0]}"

    # a model that raises at its third step: the run fails, and its loader's workers are gone with its rank
    broken = faulty_model("raise", tmp_path, at_step=3)
    crashed = ExperimentConfig(model_file=str(broken), model="custom", batch_size=16, steps=20, warmup=1,
                               **LOADER, loader_workers=2, devices="cpu:1")
    session = RunSession(crashed, db_path=fresh_store, telemetry_hz=10)
    session.start()
    result = session.wait(120)
    assert result.status == "failed" and "user model broke" in result.error
    assert not loader_workers()
    assert not os.path.exists(session.folder)


@pytest.mark.solo   # compares input waits that another test's runs on the free core would lengthen
@pytest.mark.skipif(len(usable_cores()) < 2, reason="needs a core no device holds")
def test_a_heavy_decode_without_workers_is_most_of_the_step_and_a_worker_on_a_free_core_cuts_it(fresh_store):
    """resnet18's 64-px images, JPEG-decoded and augmented with 80 ms of further CPU a sample: decoded by the
    rank itself they take more than half its step (about 70 %; at 40 ms it was 54 %, and once, under load, 48 %);
    one worker on the free core decodes while the device trains (the order asserted; the values are the
    benchmark's)."""
    base = ExperimentConfig(model="resnet18", devices="cpu:1", batch_size=8, steps=5, warmup=1, **LOADER,
                            decode_cost_ms=80)
    alone = run(base, fresh_store).summary
    helped = run(base.replace(loader_workers=1), fresh_store).summary
    starved = max(input_share(d) for d in alone.time_by_kind)
    assert starved > 0.5 and max(input_share(d) for d in helped.time_by_kind) < starved, (alone, helped)
    # decoding itself the rank is busy on its data; with a worker, what is left of it is a wait (idle)
    assert alone.diagnosis.startswith("cpu:0 spends") and "loading its data in its own process" in alone.diagnosis
    assert "--loader-workers" in alone.diagnosis
    assert all(d.share("data") == 0 for d in helped.time_by_kind)
    assert helped.throughput.mean > alone.throughput.mean


def test_the_input_pipeline_experiment_sweeps_the_workers_and_its_figures_export(capsys, fresh_store, tmp_path):
    code = cli.main(["experiment", "input-pipeline", "--repeats", "1", "--steps", "3", "--warmup", "1",
                     "--width", "32", "--depth", "2", "--batch-size", "32", "--devices", "cpu:1", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    points = {p["label"]: p for p in result["points"]}
    spare = len(usable_cores()) - 1
    assert list(points) == ["0 workers", "1 worker", "2 workers", "4 workers"][:2 + (spare >= 2) + (spare >= 4)]
    assert [p["x"] for p in result["points"]] == [0, 1, 2, 4][:len(points)]
    # 1 ms of CPU a sample (the preset's, the base giving none): 32 ms against a step of about one
    assert points["0 workers"]["input_wait"] > 0.5
    assert result["best"] in points
    with Store(fresh_store) as store:
        configs = [run.config for run in store.list_runs(experiment_id=result["experiment_id"])]
    assert sorted((c.input_prep, c.loader_workers, c.decode_cost_ms) for c in configs) == \
        [("loader", w, 1.0) for w in [0, 1, 2, 4][:len(points)]]
    assert cli.main(["export", result["experiment_id"], "--format", "csv", "--out", str(tmp_path)]) == 0
    waits = next(tmp_path.glob("*input-wait*.csv")).read_text().splitlines()
    assert waits[0].split(",")[:3] == ["label", "strategy", "loader workers"] and len(waits) == 1 + len(points)
    assert next(tmp_path.glob("*sweep*.csv")).read_text().splitlines()[0].split(",")[2] == "loader workers"
