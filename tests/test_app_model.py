"""The app's model (app/state/app_model.py) without Qt: each change announced under its name, in order."""
from __future__ import annotations

import pytest

from app.state.app_model import AppModel
from app.state.live_data import TelemetryHistory
from app.state.plan_state import OK, PENDING
from app.state.run_rules import Activity


def heard(model: AppModel) -> list[tuple]:
    """Every event the model announces, as (name, *args)."""
    told: list[tuple] = []
    for name in ("status", "logged", "activity", "plan", "ended", "stored", "experiment", "store"):
        getattr(model.events, name).connect(lambda *args, name=name: told.append((name, *args)))
    return told


@pytest.fixture
def model() -> AppModel:
    return AppModel(TelemetryHistory(10.0), db_path=":memory:", telemetry_hz=10.0)


def test_a_logged_line_reaches_the_status_line_only_when_asked(model):
    told = heard(model)
    model.log("planner ready")
    model.log("run failed", status=True, level="error")
    assert told == [("logged", "planner ready", "info"), ("logged", "run failed", "error"),
                    ("status", "run failed")]
    assert model.status == "run failed"


def test_work_is_announced_as_it_begins_is_asked_to_stop_and_ends(model):
    told = heard(model)
    model.begin("run")
    assert model.is_busy() and model.busy and model.blocked_reason() == "A run is in progress."
    model.stop_asked()
    assert model.blocked_reason() == "Stopping the run…"
    model.work_ended()
    assert told == [("activity", Activity(run=True)), ("activity", Activity(run=True, stopping=True)),
                    ("activity", Activity()), ("ended",)]
    assert not model.busy


def test_an_advise_holds_the_devices_but_a_close_need_not_wait_for_it(model):
    model.begin("advise")
    assert model.busy and not model.is_busy()


def test_unknown_work_is_refused_with_the_known_kinds(model):
    with pytest.raises(ValueError, match="run, experiment, advise"):
        model.begin("sweep")


def test_a_run_asked_before_the_check_waits_for_it_and_the_change_is_announced(model):
    told = heard(model)
    model.plan.check = PENDING
    model.plan_changed()
    assert model.blocked_reason() is None   # Run can be clicked while the planner checks
    model.wait_for_check()
    assert model.blocked_reason().startswith("Run starts once the configuration is checked")
    assert not model.busy   # nothing holds the devices yet
    model.plan.check = OK
    model.plan_changed()
    model.wait_for_check(False)
    assert model.blocked_reason() is None
    assert [t[0] for t in told] == ["plan", "activity", "plan", "activity"]


def test_the_store_and_the_experiment_in_it_are_announced(model):
    told = heard(model)
    model.set_store_notice("damaged")
    model.set_experiment("e-1")
    model.run_stored()
    model.set_experiment(None)
    model.set_store_notice(None)
    assert told == [("store", "damaged"), ("experiment", "e-1"), ("stored",), ("experiment", None), ("store", None)]
    assert model.experiment_id is None and model.store_notice is None
