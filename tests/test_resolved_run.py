"""A run is resolved once (engine/run/resolved_run.py): the session resolves it, the worker launches it as sent,
and the app previews a config by the same call."""
from __future__ import annotations

from dataclasses import replace

import pytest

from engine.config import ExperimentConfig
from engine.devices import Device, DeviceError
from engine.events import Started
from engine.run import resolved_run, session as session_mod
from engine.run.resolved_run import ResolvedRun, own_device, resolve
from engine.wire.codec import WireError


@pytest.mark.quick
def test_a_pipeline_resolves_to_its_ranks_devices_and_theory_and_travels_as_it_is():
    run = resolve(ExperimentConfig(strategy="pipeline", devices="cpu:2", micro_batches=4))
    assert [d.name for d in run.devices] == ["cpu:0", "cpu:1"] and run.world_size == 2
    assert run.micro_batches == 4 and run.theory_bubble == pytest.approx(1 / 5)   # (p-1)/(m+p-1), p=2, m=4
    assert run.theory_text == "(p−1)/(m+p−1): p=2 stages, m=4" and run.theory_notes == []
    assert [own_device(run.devices, r, run.world_size).name for r in (0, 1)] == ["cpu:0", "cpu:1"]
    assert [d.name for d in run.rank_devices(1)] == ["cpu:1"]
    assert ResolvedRun.from_dict(run.to_dict()) == run
    # a run over nodes: the devices its nodes have once connected (their cores), the same ranks and theory
    on_nodes = run.with_devices([replace(d, core=None, node="node0") for d in run.devices])
    assert (on_nodes.world_size, on_nodes.theory_bubble, on_nodes.theory_text) == (2, run.theory_bubble,
                                                                                  run.theory_text)
    assert on_nodes.rank_devices(1)[0].node == "node0"


@pytest.mark.quick
def test_a_split_in_one_process_works_on_every_device_and_says_why_no_formula_holds():
    gpu = Device("cuda:0", "cuda", 0)
    run = resolve(ExperimentConfig(strategy="model-parallel", devices="cuda:0,cuda:0"), [gpu, gpu])
    assert run.world_size == 1 and run.device_names == ["cuda:0"]   # two stages, one device
    assert run.theory_bubble is None and "share cuda:0" in run.theory_notes[0]
    assert run.rank_devices(0) == [gpu, gpu] and own_device(run.devices, 0, run.world_size) == gpu


@pytest.mark.quick
def test_a_garbled_run_is_refused_naming_its_field_and_a_wrong_spec_before_anything_resolves():
    data = resolve(ExperimentConfig()).to_dict()
    with pytest.raises(WireError, match="world_size"):
        ResolvedRun.from_dict({**data, "world_size": "two"})
    with pytest.raises(DeviceError):
        resolve(ExperimentConfig(devices="cpu:0,gpu:7"))


def test_the_worker_launches_the_run_the_session_resolved_and_never_resolves_it_again(monkeypatch, tmp_path):
    """What the session sends is what the worker's `started` and summary say: a theory the session's resolve
    wrote (here marked so) reaches both, where the worker computing its own would lose the mark."""
    config = ExperimentConfig(model="mlp", width=32, depth=3, batch_size=8, steps=3, warmup=1, strategy="pipeline",
                              devices="cpu:2", micro_batches=4)

    def marked(config, *args, **kwargs):
        run = resolve(config, *args, **kwargs)
        return replace(run, theory_text=run.theory_text + " (as the session resolved it)",
                       theory_notes=["resolved once, by the session"])
    monkeypatch.setattr(resolved_run, "resolve", marked)
    started = []
    session = session_mod.RunSession(config, db_path=str(tmp_path / "runs.db"), telemetry_hz=0,
                                     on_event=lambda e: isinstance(e, Started) and started.append(e))
    session.start()
    result = session.wait(120)
    assert result is not None and result.status == "finished", result
    assert session.resolved.world_size == 2 and [d.name for d in session.resolved.devices] == ["cpu:0", "cpu:1"]
    assert started and started[0].theory_text.endswith("(as the session resolved it)")
    assert started[0].theory_bubble == pytest.approx(1 / 5)
    assert "resolved once, by the session" in started[0].notes
    assert result.summary.bubble.formula.endswith("(as the session resolved it)")
