"""The app's state without a window: the run's progress fed by worker events, the rules that block Run, the
status line's texts and the planner's state."""
from __future__ import annotations

import dataclasses
import json

import pytest

from app.state.live_data import RunProgress
from app.state.problem_help import Help
from app.state.run_rules import Activity, blocked_reason, ready_text
from engine.config import ExperimentConfig
from engine.devices import Device
from engine.events import Errored, Finished, Launched, Log, Started, Warned
from engine.results import Bubble, RunSummary, Step
from engine.wire import planner as planner_answers
from no_qt import run_without_qt

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`

STARTED = Started(t=1.0, devices=[Device("cuda:0", "cuda", 0), Device("cuda:0", "cuda", 0),
                                  Device("cuda:1", "cuda", 1)],
                  theory_bubble=0.2, notes=["why"], split=[3], micro_batches=4)


def step(k: int, time_s: float, busy: dict) -> Step:
    return Step(step=k, time_s=time_s, busy=busy)


def test_the_runs_progress_follows_a_run_from_its_events():
    run = RunProgress(run_id="r1", steps_total=10)
    announced: list = []   # what the live view draws from (app/views/center_area.py subscribes)
    run.applied.connect(lambda event: announced.append((type(event).__name__, run.steps_done)))
    run.apply(Launched(t=0.5, pids={"0": 1}))          # known to the window, nothing to keep here
    assert run.status == "idle" and run.launched
    run.apply(STARTED)
    assert run.status == "running" and run.devices == ["cuda:0", "cuda:1"]  # two stages on one GPU: one device
    assert (run.theory, run.notes, run.split, run.micro_batches) == (0.2, ["why"], [3], 4)
    for k in range(4):
        run.apply(step(k, 0.5, {"cuda:0": 0.75, "cuda:1": 0.25}))
    assert run.steps_done == 4 and run.time_left_s() == pytest.approx(3.0)  # 6 steps of 0.5 s left
    assert run.measured_bubble() == pytest.approx(0.5) and run.theory_bubble() == 0.2
    run.apply(Warned(t=3.0, message="slow"))
    run.apply(Errored(t=3.1, message="rank 1 died", rank=1))
    run.apply(Finished(t=3.2, status="failed", summary=RunSummary(bubble=Bubble(measured=0.4, theory=None))))
    assert run.error.rank == 1 and run.summary.bubble.measured == 0.4  # a warning is the log's, not state
    assert run.measured_bubble() == 0.4 and run.theory_bubble() is None  # the summary's figures, once it ends
    # Each event announced once, after it was applied (a listener reads the state it changed).
    assert announced == [("Launched", 0), ("Started", 0), ("Step", 1), ("Step", 2), ("Step", 3), ("Step", 4),
                         ("Warned", 4), ("Errored", 4), ("Finished", 4)]


@pytest.mark.parametrize("activity, problems, check, reason", [
    (Activity(), [], "ok", None),
    (Activity(), [], "pending", None),   # clickable: the run then waits for the check
    (Activity(waiting_check=True), [], "pending", "Run starts once the configuration is checked (Esc cancels)."),
    (Activity(), [], "unavailable", None),
    (Activity(run=True), [], "ok", "A run is in progress."),
    (Activity(run=True, stopping=True), [], "ok", "Stopping the run…"),
    (Activity(experiment=True), [], "ok", "An experiment is in progress."),
    (Activity(experiment=True, stopping=True), [], "ok", "Stopping the experiment…"),
    (Activity(advise=True), [], "ok", "Advise is probing and checking candidates (Esc stops)."),
    (Activity(advise=True, stopping=True), [], "ok", "Stopping advise…"),
    (Activity(), [Help("micro_batches", "must divide 64", "Micro-batches: must divide 64"),
                  Help("split", "x", "Split points: x")],
     "problems", "Cannot run: Micro-batches: must divide 64 (and 1 more)"),
    (Activity(), [Help("config", "broken", "broken")], "problems", "Cannot run: broken"),
    (Activity(run=True), [Help("split", "x", "Split points: x")], "problems", "A run is in progress."),
])
def test_run_is_blocked_while_busy_checking_or_wrong_and_says_why(activity, problems, check, reason):
    assert blocked_reason(activity, problems, check) == reason


def test_the_line_under_run_says_when_nobody_checks():
    assert ready_text(None, "ok") == "Ready: Ctrl+R runs, Esc stops."
    assert ready_text(None, "pending").startswith("Checking the configuration…")
    assert ready_text(None, "unavailable").startswith("Validation is unavailable")
    assert ready_text("A run is in progress.", "unavailable") == "A run is in progress."


def test_the_state_modules_need_no_qt():
    proc = run_without_qt("""
        import app.state.live_data, app.state.run_rules, app.state.number_formats, app.state.plan_state
        import app.state.run_status
        assert not [m for m in sys.modules if m.startswith(("PySide6", "pyqtgraph"))]
    """)
    assert proc.returncode == 0, proc.stderr


def test_the_window_finds_its_style_sheet_icon_and_planner():
    """Paths from app/ subpackages to the repository's resources/ and to the planner's module."""
    from pathlib import Path

    from app.services import forked_process
    from app.views import theme
    assert theme.style_sheet()  # "" when app/resources/style.qss is not where the theme looks
    assert Path(theme.icon_path("splitscope.svg")).is_file()
    assert (forked_process.ROOT / "app" / "services" / "planner_service.py").is_file()


# -- the status line's texts ---------------------------------------------------------------------

def test_a_finished_run_says_its_steps_time_speed_and_bubble():
    from app.state.run_status import finished_text
    from engine.results import Bubble, MeanStd, RunSummary
    from engine.run.session import RunResult
    summary = RunSummary(steps=20, step_time_s=MeanStd(0.0071), throughput=MeanStd(1234.4), bubble=Bubble(0.4))
    result = RunResult("20250101-182558-ab12", "finished", summary)
    assert finished_text(result, RunProgress(steps_done=19), 3.1) == \
        "Finished 20 steps in 3.1 s · 7.1 ms/step · 1,234 samples/s · bubble 40%"
    # Without a summary (or its figures) the steps the progress saw, and only what is known.
    assert finished_text(RunResult("r", "finished", None), RunProgress(steps_done=6), 0.5) == \
        "Finished 6 steps in 0.5 s"


def test_a_stopped_or_failed_run_says_where_it_stopped_or_why():
    from app.state.run_status import finished_text
    from engine.run.session import RunResult
    progress = RunProgress(steps_done=3, steps_total=100)
    assert finished_text(RunResult("r", "stopped", None), progress, 9.0) == "Stopped after 3 of 100 steps"
    assert finished_text(RunResult("r", "failed", None, "rank 1 (cpu:1) was killed by SIGKILL"), progress, 1.0) \
        == "Failed: rank 1 (cpu:1) was killed by SIGKILL"
    assert finished_text(RunResult("r", "failed", None), progress, 1.0) == "Failed: the run failed"


def test_while_a_run_goes_the_status_line_counts_steps_and_the_time_left():
    from app.state.run_status import live_title, running_text, started_text, time_left_text
    run = RunProgress(run_id="20250101-182558-ab12", config=ExperimentConfig(strategy="pipeline", devices="cpu:2"),
                      steps_total=10, label="run 182558")
    assert live_title(run) == "Live: run 182558, pipeline on cpu:2"          # the configured devices, at first
    assert running_text(run) is None and time_left_text(run) is None       # no step yet
    run.apply(STARTED)
    assert live_title(run) == "Live: run 182558, pipeline on cuda:0, cuda:1"   # the devices the ranks got
    assert started_text(run) == "Running pipeline on cuda:0, cuda:1, split at 3"
    for k in range(4):
        run.apply(step(k, 0.5, {"cuda:0": 0.75, "cuda:1": 0.25}))
    assert running_text(run) == "Running pipeline on cuda:0, cuda:1 · step 4/10 · 500.0 ms/step · bubble 50%"
    assert time_left_text(run) == "≈ 3.0 s left"


def test_each_worker_event_has_its_log_line_and_level():
    from app.state.run_status import event_log_line
    run = RunProgress()
    run.apply(STARTED)
    assert event_log_line(dataclasses.replace(STARTED, pids={"0": 11}), run) == \
        ("started: devices cuda:0, cuda:1, split at 3, pids {'0': 11}", "info")
    assert event_log_line(Warned(t=1.0, message="slow"), run) == ("warning: slow", "warning")
    assert event_log_line(Errored(t=1.0, rank=1, message="died"), run) == ("error (rank 1): died", "error")
    assert event_log_line(step(0, 0.1, {}), run) is None   # steps are the plots'
    # what a rank printed, under its rank; a script watched as one plain process is "the script"
    assert event_log_line(Log(t=1.0, rank=1, message="epoch 1"), run) == ("rank 1: epoch 1", "info")
    plain = RunProgress(config=ExperimentConfig(strategy="script", script="/work/train.py", script_launch="python"))
    assert event_log_line(Log(t=1.0, rank=0, message="epoch 1"), plain) == ("the script: epoch 1", "info")
    # a failure's traceback under the rank that raised; a node's error names the node
    tb = 'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\nKeyError: 4\n'
    assert event_log_line(Errored(t=1.0, rank=0, message="rank 0 failed: KeyError: 4", traceback=tb), run) == \
        ("error (rank 0): rank 0 failed: KeyError: 4\n" + tb.rstrip(), "error")
    assert event_log_line(Errored(t=1.0, node="node1", message="node1 lost"), run) == ("error (node1): node1 lost",
                                                                                       "error")


# -- the planner's state -------------------------------------------------------------------------

def small_config(**overrides):
    from engine.config import ExperimentConfig
    return ExperimentConfig(**dict(dict(strategy="model-parallel", model="mlp", width=64, depth=4, devices="cpu:2",
                                        batch_size=64, steps=6), **overrides))


# The planner's answer as its line reads back (engine/wire/planner.py).
BLOCKS = planner_answers.decode(json.dumps({
    "kind": "blocks", "id": 1, "blocks": [{"name": f"layer{i}", "params": 10, "cost_s": c, "out_bytes": 4}
                                         for i, c in enumerate([1.0, 1.0, 1.0, 3.0])],
    "costs_by_kind": {"cpu": [1.0, 1.0, 1.0, 3.0]}, "error": None}))


def test_the_planner_is_asked_to_profile_a_model_once_and_checks_every_change():
    from app.state.plan_state import PENDING, PlanState, profile_key
    state = PlanState()
    config = small_config()
    changed, profile = state.select(profile_key(config))
    assert changed and profile is None and state.split_text() == "Profiling the model's blocks…"
    request = state.ask(config, [], stages=2, planner_up=True)
    assert request.profile and request.stages == 2 and request.config["model"] == "mlp"
    assert state.check == PENDING
    profile = state.profiled(BLOCKS)
    assert [b.name for b in profile.blocks] == ["layer0", "layer1", "layer2", "layer3"]
    # Another step count is the same model: checked again, not profiled again.
    more_steps = small_config(steps=60)
    assert state.select(profile_key(more_steps)) == (False, profile)
    assert not state.ask(more_steps, [], stages=2, planner_up=True).profile
    # Another width is another model; coming back to this one finds its blocks.
    assert state.select(profile_key(small_config(width=128))) == (True, None)
    assert state.select(profile_key(config)) == (True, profile)


def test_the_check_blocks_run_until_it_passes_and_places_the_split_problems_under_the_split():
    from app.state.plan_state import OK, PROBLEMS, UNAVAILABLE, PlanState
    state = PlanState()
    quick = [Help("batch_size", "must be positive", "Batch size: must be positive")]
    assert state.ask(small_config(), quick, stages=2, planner_up=False) is None
    assert state.check == UNAVAILABLE and state.problems == quick    # nobody to ask: the quick check stands
    state.ask(small_config(), [], stages=2, planner_up=True)
    state.checked([Help("split", "needs 1 point", "Split points: needs 1 point"),
                   Help("devices", "x", "Devices: x")])
    assert state.check == PROBLEMS
    assert state.panel_problems() == [Help("devices", "x", "Devices: x")]
    assert state.split_problems_text() == "--split: needs 1 point"
    state.checked([])
    assert state.check == OK and state.split_problems_text() == ""
    state.planner_lost()
    assert state.check == UNAVAILABLE


def test_a_failed_profile_says_why_in_the_split_view_and_is_asked_again():
    from app.state.plan_state import PlanState, profile_key
    state = PlanState()
    state.select(profile_key(small_config()))
    assert state.profiled(planner_answers.Profiled(2, error="RuntimeError: no memory")) is None
    assert state.split_text() == "Could not profile the blocks: RuntimeError: no memory"
    assert state.needs_profile       # the next change tries again
    state.select(profile_key(small_config(width=128)))
    assert state.split_text() == "Profiling the model's blocks…"


def test_the_balanced_split_costs_each_stage_on_its_own_kind_of_device():
    from app.state.plan_state import BlockProfile
    profile = BlockProfile.from_answer(dataclasses.replace(BLOCKS, costs_by_kind={"cpu": [1.0, 1.0, 1.0, 3.0],
                                                                   "cuda": [0.1, 0.1, 0.1, 0.3]}))
    assert profile.balanced(["cpu", "cpu"], 2) == [3]      # 3 | 3: the last block alone
    assert profile.balanced(["cpu", "cuda"], 2) == [1]     # the GPU takes all it can
    assert profile.balanced(["cpu"], 2) == [3]             # kinds not settled: the first kind for every stage
    assert profile.balanced(["cpu"] * 5, 5) is None        # more stages than blocks
    assert BlockProfile.from_answer(planner_answers.Profiled(4, blocks=[], error="no blocks")) is None


def test_before_a_run_the_bubble_box_previews_the_theory_of_the_configured_split():
    from app.state.plan_state import micro_batch_size, preview_run, stage_count
    run = RunProgress()
    naive = small_config()
    preview_run(run, naive, stage_count(naive, []))
    assert (run.split, run.micro_batches, run.theory) == ([0], 1, 0.5)     # (p-1)/(m+p-1), p=2, m=1
    piped = small_config(strategy="pipeline", micro_batches=4, split=(2,))
    preview_run(run, piped, stage_count(piped, []))
    assert (run.split, run.micro_batches, run.theory) == ([2], 4, 0.2)
    assert micro_batch_size(piped) == 16
    assert stage_count(small_config(devices="cuda:0,cuda:1"), gpus=[]) is None   # no such GPUs here


# -- Run waits for the blocks a split is chosen on ------------------------------------------------

def test_run_waits_while_the_blocks_the_split_needs_are_profiled_and_says_so():
    from app.state.plan_state import OK, PROFILING, PlanState, profile_key
    state = PlanState()
    resnet = small_config(model="resnet50", batch_size=8)
    state.select(profile_key(resnet))
    state.ask(resnet, [], stages=2, planner_up=True)
    state.checked([])                                    # the check passed before the profile came
    assert state.check == PROFILING and state.model_name == "resnet50"
    assert blocked_reason(Activity(), state.problems, state.check, state.model_name) == \
        "Profiling resnet50's blocks for the split… (Skip, above the split points, lets Run start now)"
    assert blocked_reason(Activity(), [], PROFILING) == \
        "Profiling the model's blocks for the split… (Skip, above the split points, lets Run start now)"
    state.profiled(BLOCKS)
    assert state.check == OK and blocked_reason(Activity(), state.problems, state.check) is None


def test_a_run_without_a_split_or_whose_profile_failed_does_not_wait_for_blocks():
    from app.state.plan_state import OK, PlanState, profile_key
    state = PlanState()
    single = small_config(strategy="single", devices="cpu:1", model="resnet50")
    state.select(profile_key(single))
    state.ask(single, [], stages=1, planner_up=True)
    state.checked([])
    assert state.check == OK                             # single has no split: its blocks are only shown
    staged = small_config(model="resnet50")
    state.select(profile_key(staged))
    state.ask(staged, [], stages=2, planner_up=True)
    state.checked([])
    state.profiled(planner_answers.Profiled(3, error="MemoryError"))
    assert state.check == OK                             # the engine balances the split itself


def test_a_skipped_profile_lets_run_go_on_until_asked_again_and_a_new_model_profiles_again():
    from app.state.plan_state import OK, PROFILING, PlanState, profile_key
    state = PlanState()
    resnet = small_config(model="resnet50", batch_size=8)
    state.select(profile_key(resnet))
    assert state.ask(resnet, [], stages=2, planner_up=True).profile
    state.checked([])
    assert state.check == PROFILING and state.profile_action == "skip"
    state.skip_profile()
    assert state.check == OK and state.profile_action == "profile" and "skipped" in state.split_text()
    assert not state.ask(resnet, [], stages=2, planner_up=True).profile    # the next check times nothing
    state.checked([])
    assert state.check == OK
    state.profile_again()
    assert state.ask(resnet, [], stages=2, planner_up=True).profile and state.profile_action == "skip"
    state.checked([])
    assert state.check == PROFILING
    # Another model: its blocks are timed, and Run waits for them again.
    resnet18 = small_config(model="resnet18", batch_size=8)
    state.skip_profile()
    state.select(profile_key(resnet18))
    state.ask(resnet18, [], stages=2, planner_up=True)
    state.checked([])
    assert state.check == PROFILING and not state.skipped
    state.profiled(BLOCKS)
    assert state.profile_action is None


def test_run_says_a_problem_in_the_apps_words_when_it_has_them():
    problems = [Help("devices", "single uses exactly one device, got 2",
                     "Single device runs on one device; Devices is set to 2 CPU devices (cpu:0, cpu:1).")]
    assert blocked_reason(Activity(), problems, "problems") == \
        "Cannot run: Single device runs on one device; Devices is set to 2 CPU devices (cpu:0, cpu:1)."


def test_the_runs_progress_says_what_each_devices_tensors_hold():
    """Live: the last step's tensor memory per device; ended: the summary's peaks. ddp's replicas each hold
    the whole model, a split model a part on each device."""
    from engine.results import TensorMemory
    run = RunProgress(run_id="r", steps_total=4)
    run.apply(Step(step=0, tensor_memory={"cpu:0": {"params": 2 ** 20, "grads": 2 ** 20}, "cpu:1": {"params": 2 ** 19}}))
    run.apply(Step(step=1, tensor_memory=None))   # unchanged: kept
    assert run.tensor_lines() == ["tensors cpu:0: 2 MiB (params 1, grads 1, optimizer 0, activations 0)",
                                  "tensors cpu:1: 0.5 MiB (params 0.5, grads 0, optimizer 0, activations 0)"]
    ended = RunSummary(devices=["cpu:0", "cpu:1"], tensor_memory=[TensorMemory(params=3 * 2 ** 20), None])
    run.apply(Finished(t=1.0, status="finished", summary=ended))
    assert run.tensor_lines() == ["tensors cpu:0: 3 MiB (params 3, grads 0, optimizer 0, activations 0)"]


def test_a_finished_runs_figures_say_which_steps_they_cover():
    from app.state.run_status import covers_note, measured_steps
    from engine.results import RunSummary
    assert covers_note(RunSummary(steps=20, steps_measured=18)) == "over the 18 measured steps, after 2 of warm-up"
    assert measured_steps(RunSummary(steps=1, steps_measured=1)) == "the 1 measured step"
    assert measured_steps(RunSummary(steps=2, steps_measured=0)) == "no measured step"


def test_a_balanced_split_worse_than_70_30_hints_at_smaller_blocks():
    from app.state.plan_state import coarse_blocks_hint
    stages = lambda *times: [{"time": t} for t in times]   # noqa: E731
    assert coarse_blocks_hint(stages(0.65, 0.35)) is None               # 65/30: as even as it needs to be
    hint = coarse_blocks_hint(stages(0.2, 0.8))
    assert hint.startswith("Stage 1 takes 80% of the time") and "one level deeper" in hint
    assert coarse_blocks_hint(stages(0.3, 0.3, 0.4)) is None            # 1.2 times a third
    assert coarse_blocks_hint(stages(0.5, 0.25, 0.25)).startswith("Stage 0 takes 50%")   # 1.5 times a third
    assert coarse_blocks_hint(stages(1.0)) is None                       # one stage: nothing to balance


def test_the_memory_tab_compares_the_runs_selected_side_by_side():
    """Two stored runs selected: a bar per run and device, each run named by what sets it apart."""
    from app.state.stored_run import RunData, compared_memory_figures
    from engine.results import RunSummary, TensorMemory
    mib = 2 ** 20

    def run(strategy: str, held: int) -> RunData:
        summary = RunSummary(devices=["cpu:0", "cpu:1"], tensor_memory=[TensorMemory(params=held * mib)] * 2)
        return RunData(run_id=strategy, label="12:00", status="finished", config=ExperimentConfig(strategy=strategy),
                       summary=summary, error=None)
    memory, communication = compared_memory_figures([run("ddp", 4), run("fsdp", 2)])
    assert memory.bars.labels == ["ddp · cpu:0", "ddp · cpu:1", "fsdp · cpu:0", "fsdp · cpu:1"]
    assert [row[1] for row in memory.rows] == [4.0, 4.0, 2.0, 2.0]   # params (MiB), per run and device
    assert communication.rows == []                                 # none measured: no bar
    one, _ = compared_memory_figures([run("ddp", 4)])
    assert one.bars.labels == ["cpu:0", "cpu:1"]                     # one run: its devices, as before
