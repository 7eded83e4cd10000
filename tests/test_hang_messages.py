"""A hang's message and its limit, without a run: engine/run/failure.py names the rank, what it was doing and the limit
that ran out. The engine's own start-up (engine/run/heartbeat.py START_UP) has the start-up allowance, the user's
code (the model's build, a script, every step) the hang timeout; a rank waiting in torch.distributed is said to wait
there, and the one that stopped is named, not the peers waiting for it."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.run import heartbeat
from engine.run.failure import START_UP_ALLOWANCE_S, Cause, Hang, hang_limit, hung_rank

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`

ENDED = "; the run was ended by the watchdog"


def rank(n: int = 0, *, phase: str = heartbeat.TRAINING, last_step: int = -1, where: str | None = None,
         in_collective: bool = False, alive_at: float | None = None) -> SimpleNamespace:
    """What the worker keeps of a rank (engine/run/local_ranks.py Rank) that a hang's message reads."""
    return SimpleNamespace(rank=n, label=f"rank {n} (cpu:{n}, pid {100 + n})", device=SimpleNamespace(name=f"cpu:{n}"),
                           phase=phase, ready=phase == heartbeat.TRAINING, last_step=last_step, where=where,
                           in_collective=in_collective, alive_at=alive_at, done=False)


def message(r, hang: Hang) -> str:
    return Cause("hang", r, hang).error_fields()["message"]


@pytest.mark.parametrize("phase", sorted(heartbeat.START_UP))
def test_the_engines_own_start_up_is_held_to_the_start_up_allowance(phase):
    assert hang_limit(rank(phase=phase), 4) == START_UP_ALLOWANCE_S
    assert hang_limit(rank(phase=phase), 600) == 600   # a hang timeout above the allowance holds there too


@pytest.mark.parametrize("phase", [heartbeat.BUILDING, heartbeat.SCRIPT, heartbeat.TRAINING])
def test_the_users_code_is_held_to_the_hang_timeout(phase):
    assert hang_limit(rank(phase=phase), 4) == 4


def test_a_start_up_that_ran_out_names_its_phase_and_the_allowance():
    preparing = rank(phase=heartbeat.PREPARING)
    assert message(preparing, Hang(START_UP_ALLOWANCE_S, heartbeat.PREPARING, 0.5, 2.0, start_up=True)) == (
        "rank 0 (cpu:0, pid 100) hung while setting up the strategy and measuring the devices' peak FLOP/s: no "
        f"progress for {START_UP_ALLOWANCE_S:g} s (the start-up allowance)" + ENDED)
    joining = rank(phase=heartbeat.JOINING, where="torch.distributed's init_process_group", in_collective=True)
    assert message(joining, Hang(START_UP_ALLOWANCE_S, heartbeat.JOINING, 0.5, 2.0, start_up=True)) == (
        "rank 0 (cpu:0, pid 100) hung while joining the process group: no progress for "
        f"{START_UP_ALLOWANCE_S:g} s (the start-up allowance); it was waiting in torch.distributed's "
        "init_process_group" + ENDED)


def test_the_users_code_that_ran_out_names_the_hang_timeout_and_where_it_was():
    building = rank(phase=heartbeat.BUILDING, where="build_model (model.py:12)")
    assert message(building, Hang(4, heartbeat.BUILDING, 0.5, 2.0)) == (
        "rank 0 (cpu:0, pid 100) hung while building the model: no progress for 4 s (--hang-timeout); it was last "
        "seen in build_model (model.py:12)" + ENDED)
    first_step = rank(where="make_batch (model.py:7)")
    assert message(first_step, Hang(4, heartbeat.TRAINING, 0.5, 2.0)) == (
        "rank 0 (cpu:0, pid 100) hung in its first step: no progress for 4 s (--hang-timeout); it was last seen in "
        "make_batch (model.py:7)" + ENDED)


def test_a_rank_waiting_in_a_collective_is_said_to_wait_there():
    waiting = rank(1, last_step=6, where="torch.distributed's all_reduce", in_collective=True)
    assert message(waiting, Hang(4, heartbeat.TRAINING, 0.3, 2.0)) == (
        "rank 1 (cpu:1, pid 101) hung in step 7 (last finished step: 6): no progress for 4 s (--hang-timeout); it "
        "was waiting in torch.distributed's all_reduce" + ENDED)


def test_the_rank_outside_the_collective_is_named_not_its_waiting_peers():
    peers = [rank(0, last_step=6, where="torch.distributed's all_reduce", in_collective=True, alive_at=99.5),
             rank(1, last_step=6, where="forward (model.py:30)", alive_at=99.5),
             rank(2, last_step=6, where="torch.distributed's all_reduce", in_collective=True, alive_at=99.5)]
    assert hung_rank(peers, now=100.0, hang_timeout_s=4).rank == 1


def test_a_rank_whose_heartbeat_stopped_is_named_and_said_to_be_stopped():
    peers = [rank(0, last_step=6, where="torch.distributed's all_reduce", in_collective=True, alive_at=99.5),
             rank(1, last_step=6, where="forward (model.py:30)", alive_at=99.5),
             rank(2, last_step=6, where="torch.distributed's all_reduce", in_collective=True, alive_at=95.0)]
    stopped = hung_rank(peers, now=100.0, hang_timeout_s=4)
    assert stopped.rank == 2
    assert message(stopped, Hang(4, heartbeat.TRAINING, 5.0, heartbeat.silent_after(4))) == (
        "rank 2 (cpu:2, pid 102) hung in step 7 (last finished step: 6): no progress for 4 s (--hang-timeout); its "
        "heartbeat stopped 5 s ago (the process is stopped, or stuck without releasing Python's lock)" + ENDED)
