"""The two-way exchange's probe (engine/strategies/pipeline/exchange_probe.py), over real gloo process groups."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from engine.strategies.pipeline.exchange_probe import handover_shape, two_way_extra_s

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`
ROOT = Path(__file__).resolve().parent.parent


class Kept:
    """What split_backward_probe.LastInputs keeps: per stage position, its inputs' (shape, dtype, device)."""

    def __init__(self, inputs: dict):
        self.inputs = inputs


def rank_main(argv: list[str]) -> None:
    """One rank: ``python -m tests.test_exchange_probe RANK WORLD STORE_FILE`` prints its two results as JSON."""
    rank, world, store_file = int(argv[0]), int(argv[1]), argv[2]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store_file, world), rank=rank, world_size=world)
    try:
        activation = (torch.Size([16, 64]), torch.float32, torch.device("cpu"))
        # Rank r holds stage r: stage 0's input is the batch, not a hand-over, so rank 0 offers no shape.
        measured = two_way_extra_s(Kept({0: (activation,)}), [rank], torch.device("cpu"))
        nothing = two_way_extra_s(Kept({0: (torch.tensor([1, 2]),)}), [rank], torch.device("cpu"))  # token ids
        # no time for more than one try: all ranks agree on one (a rank stopping alone would leave the others
        # waiting in a barrier)
        once = two_way_extra_s(Kept({0: (activation,)}), [rank], torch.device("cpu"), budget_s=0.0)
        # one rank whose kept inputs cannot be read: every rank returns, none waits in a collective for it
        broken = two_way_extra_s(Kept(None) if rank == 1 else Kept({0: (activation,)}), [rank], torch.device("cpu"))
        print(json.dumps({"measured": measured, "nothing": nothing, "once": once, "broken": broken}))
    finally:
        dist.destroy_process_group()


def test_three_ranks_measure_one_figure_and_the_odd_one_only_meets_them(tmp_path):
    """Ranks 0 and 1 exchange, rank 2 has no partner: all three return the same figure (the slowest pair's),
    at least 0; with no activation on any stage, none measures and each says why; with no time budget, one try;
    with one rank unable to take part, all return None together, naming it."""
    store = str(tmp_path / "store")
    ranks = [subprocess.Popen([sys.executable, "-m", "tests.test_exchange_probe", str(r), "3", store],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True) for r in range(3)]
    try:
        outputs = [json.loads(rank.communicate(timeout=120)[0]) for rank in ranks]
    finally:
        for rank in ranks:
            rank.kill()
            rank.wait()
    values = {tuple(out["measured"]) for out in outputs}
    assert len(values) == 1, outputs
    value, why = values.pop()
    assert isinstance(value, float) and value >= 0 and why is None
    assert all(out["nothing"][0] is None and "no stage received an activation" in out["nothing"][1]
               for out in outputs)
    assert len({tuple(out["once"]) for out in outputs}) == 1 and isinstance(outputs[0]["once"][0], float)
    assert all(out["broken"][0] is None and out["broken"][1].startswith("rank 1: AttributeError") for out in outputs)


def test_the_hand_over_is_the_largest_activation_a_later_stage_received():
    kept = Kept({0: ((torch.Size([4, 8]), torch.float32, None),),
                 1: ((torch.Size([4, 32]), torch.bfloat16, None), torch.tensor([0, 1]),
                     (torch.Size([4, 16]), torch.float32, None))})
    assert handover_shape(kept, [0, 5]) == (torch.Size([4, 32]), torch.bfloat16)   # stage 0's input is the batch
    assert handover_shape(kept, [0]) is None



def test_a_probe_that_did_not_measure_is_noted_with_what_the_what_if_takes_instead():
    from engine.devices import Device
    from engine.run.local_ranks import Rank
    rank = Rank(1, Device("cpu:1", "cpu", 1), None, None)
    assert rank.probe_notes() == []
    rank.split_backward_problem = "stage 1 ran no forward on the last step"
    rank.two_way_problem = "rank 1: AttributeError: no inputs"
    assert rank.probe_notes() == [
        "cpu:1: a split backward's cost was not measured (stage 1 ran no forward on the last step); what-if takes "
        "it as free there",
        "two devices' sending to each other at once was not measured (rank 1: AttributeError: no inputs); what-if "
        "takes it as sending one way"]


if __name__ == "__main__":
    rank_main(sys.argv[1:])
