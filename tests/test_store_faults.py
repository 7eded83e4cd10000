"""The store's disk read-only or full: a clear error, the run ended, what was stored intact."""
from __future__ import annotations

import os
import subprocess
import threading
import uuid

import pytest

from engine import cli
from engine.config import ExperimentConfig
from engine.results import RunSummary, Step
from engine.run.session import RunSession
from engine.store import Store


def test_read_only_location_is_refused_before_launch(capsys):
    code = cli.main(["run", "--model", "seed-toy", "--devices", "cpu:1", "--steps", "2",
                     "--db", "/proc/splitscope/runs.sqlite3"])
    assert code == 2
    assert "error: --db: cannot write the run store" in capsys.readouterr().err


@pytest.fixture
def tiny_disk(tmp_path):
    mount_point = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount_point)],
                          capture_output=True)
    if done.returncode != 0:
        # Where the suite runs as root (CI, the project's machines), a failed mount is a failure to look at.
        message = f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}"
        if os.geteuid() == 0:
            pytest.fail(message)
        pytest.skip(message)
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_disk_full_mid_run_ends_the_run_with_a_clear_error(tiny_disk):
    db = tiny_disk / "runs.sqlite3"
    with Store(db) as store:  # an earlier, finished run must survive
        earlier = store.create_run({"strategy": "single"})
        store.finish_run(earlier, "finished", RunSummary(strategy="single"))
    config = ExperimentConfig(model="seed-toy", devices="cpu:1", steps=10_000_000, warmup=0)
    stepping = threading.Event()
    session = RunSession(config, db_path=db, telemetry_hz=50,
                         on_event=lambda event: isinstance(event, Step) and stepping.set())
    session.start()
    # The disk fills once steps are stored (each is stored before anyone is told of it), however long the
    # launch took: a slow one's telemetry alone once filled a small disk before the first step.
    assert stepping.wait(60), "no step within 60 s"
    with open(tiny_disk / "filler", "wb", buffering=0) as filler:
        try:
            while True:
                filler.write(bytes(1 << 16))
        except OSError:   # ENOSPC: the disk is full
            pass
    result = session.wait(120)
    assert result is not None, "the run did not end when the disk filled"
    assert result.status == "failed"
    assert "cannot write the run store" in result.error and "full" in result.error
    with Store(db) as store:
        assert store.integrity_ok()
        assert store.get_run(earlier).summary == RunSummary(strategy="single")
        assert len(store.steps(result.run_id)) > 0
