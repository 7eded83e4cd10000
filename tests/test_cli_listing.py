"""``devices`` and ``runs``: what users and scripts read."""
from __future__ import annotations

import json

from engine import cli


def test_devices_json_lists_gpus_and_cpu(capsys):
    assert cli.main(["devices", "--json"]) == 0
    inventory = json.loads(capsys.readouterr().out)
    assert isinstance(inventory["gpus"], list)
    assert inventory["cpu"]["cores"] >= 1 and inventory["cpu"]["virtual_devices"] >= 1


def test_devices_table(capsys):
    assert cli.main(["devices"]) == 0
    out = capsys.readouterr().out
    from engine.devices import usable_cores
    n = len(usable_cores())
    assert f"--devices cpu:1 .. cpu:{n} gives virtual devices cpu:0 .. cpu:{n - 1}" in out


def test_runs_lists_stored_runs_newest_first(capsys, fresh_store):
    for steps in ("2", "3"):
        assert cli.main(["run", "--model", "seed-toy", "--devices", "cpu:1", "--steps", steps, "--json"]) == 0
    capsys.readouterr()
    assert cli.main(["runs", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [r["config"]["steps"] for r in runs] == [3, 2]
    assert all(r["status"] == "finished" for r in runs)
    assert cli.main(["runs"]) == 0
    assert "seed-toy" in capsys.readouterr().out


def test_a_run_on_more_cpu_devices_than_cores_is_warned_in_the_panels_words():
    """The check's warning (printed by ``run``, logged by the app) says what the app's panel says."""
    from engine.config import ExperimentConfig
    from engine.devices import parse, sharing_note, usable_cores
    from engine.run.validate import plan
    n = len(usable_cores()) + 1
    config = ExperimentConfig(strategy="ddp", model="seed-toy", devices=f"cpu:{n}", steps=3)
    run_plan, problems = plan(config)
    assert problems == []
    note = sharing_note(parse(config.devices, n))
    assert note in run_plan.warnings
    assert note.startswith(f"{n} CPU devices on {n - 1} core") and "utilization reads per core" in note
