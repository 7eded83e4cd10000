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
