"""How a watched script is read, in one process and without launching anything (issue 51): its steps where
several optimizers step or none does, its evaluation apart from its steps, its samples from keyword inputs and
sequence-first models, a DataLoader's fetches loaded or waited for, the command line's plain python form, and what
the findings say of impossible figures."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from engine.record.findings import findings
from engine.record.time_by_kind import exclusive
from engine.results import DeviceKinds, RunSummary
from engine.results.efficiency import DeviceEfficiency, Efficiency, Peak
from engine.watch.instruments import Instruments

pytestmark = pytest.mark.quick


def watching(body) -> tuple[list, Instruments]:
    """The step reports of ``body()`` run under the instruments, and the instruments."""
    reports: list = []
    instruments = Instruments("cpu:0", reports.append, count_flops=False)
    instruments.install()
    try:
        body()
        instruments.finish()
    finally:
        instruments.uninstall()
    return reports, instruments


def kinds(report) -> list[str]:
    return [kind for kind, *_ in report.intervals["cpu:0"]]


def test_two_optimizers_stepping_for_one_batch_make_one_step_and_evaluation_is_no_step():
    """A GAN's discriminator and generator step once each per batch: one step; the evaluation between epochs
    (eval() and no_grad) is its own kind, its samples not the step's."""
    generator, discriminator = nn.Linear(4, 8), nn.Linear(8, 1)

    def train():   # the optimizers made by the script, as the instruments see them made
        opt_g = torch.optim.Adam(generator.parameters())
        opt_d = torch.optim.Adam(discriminator.parameters())
        for _epoch in range(2):
            for _ in range(3):
                fake = generator(torch.randn(5, 4))
                discriminator(fake.detach()).mean().backward()
                opt_d.step()
                discriminator(fake).mean().backward()
                opt_g.step()
            generator.eval()
            with torch.no_grad():
                generator(torch.randn(7, 4))
            generator.train()
    reports, instruments = watching(train)
    assert len(reports) == 6 and [r.samples for r in reports] == [5] * 6
    assert "eval" in kinds(reports[3]) and "eval" not in kinds(reports[1])
    facts = instruments.reader.facts()
    assert facts.optimizers == ["Adam", "Adam"] and facts.model == "Linear" and facts.micro_steps == 2


def test_an_optimizer_that_steps_more_often_than_another_ends_a_step_each_time():
    """A critic stepped three times for each generator step (a WGAN's): a step per critic step (the first ended
    where it stood at its last optimizer step, once the critic stepped again), the generator's step inside the next
    one; the script's last generator step, after its last critic step, a step of its own."""
    generator, critic = nn.Linear(4, 4), nn.Linear(4, 1)

    def train():
        opt_g, opt_c = torch.optim.SGD(generator.parameters(), lr=0.1), torch.optim.SGD(critic.parameters(), lr=0.1)
        for _ in range(2):
            for _ in range(3):
                critic(generator(torch.randn(6, 4)).detach()).mean().backward()
                opt_c.step()
            critic(generator(torch.randn(6, 4))).mean().backward()
            opt_g.step()
    reports, _ = watching(train)
    assert len(reports) == 7 and kinds(reports[-1]).count("optimizer") == 1
    assert sum(kinds(r).count("optimizer") for r in reports) == 8
    assert all(kinds(r).count("backward") >= 1 for r in reports)


def test_samples_come_from_keyword_inputs_and_a_sequence_first_models_second_dimension():
    class Keywords(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(10, 4)

        def forward(self, input_ids=None, attention_mask=None):
            return self.embed(input_ids).sum()

    class SequenceFirst(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(3, 5)

        def forward(self, x):
            return self.rnn(x)[0].sum()

    for model, call, expected in ((Keywords(), lambda m: m(input_ids=torch.zeros(6, 9, dtype=torch.long)), 6),
                                  (SequenceFirst(), lambda m: m(torch.randn(35, 20, 3)), 20)):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        def train(call=call, model=model, optimizer=optimizer):
            for _ in range(2):
                call(model).backward()
                optimizer.step()
        reports, instruments = watching(train)
        assert [r.samples for r in reports] == [expected] * 2, instruments.reader.facts()


def test_the_declared_and_given_samples_come_first():
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def train():
        model(torch.ones(3, 2)).sum().backward()
        optimizer.step()
    reports: list = []
    instruments = Instruments("cpu:0", reports.append, count_flops=False)
    instruments.given_samples = 11
    instruments.install()
    try:
        train()
        instruments.declare(samples=5)
        train()
    finally:
        instruments.uninstall()
    assert [r.samples for r in reports] == [11, 5]
    assert instruments.reader.facts().samples_source == "the script's watch.step(samples=...)"


class SlowItems(torch.utils.data.Dataset):
    """A dataset whose every sample takes 2 ms to make (a slow decode)."""

    def __len__(self):
        return 32

    def __getitem__(self, index):
        import time
        time.sleep(0.002)
        return torch.ones(2), torch.zeros(1)


@pytest.mark.parametrize("workers, kind", [(0, "data"), (1, "data-wait")])
def test_a_dataloaders_fetch_is_loading_without_workers_and_a_wait_with_them(workers, kind):
    """Without workers the rank runs __getitem__ itself: its fetches are ``data`` (busy); with a worker process the
    rank waits for each batch: ``data-wait`` (idle). Either way every step has its fetch, and nothing else is data."""
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def train():
        for inputs, targets in torch.utils.data.DataLoader(SlowItems(), batch_size=8, num_workers=workers):
            optimizer.zero_grad()
            nn.functional.mse_loss(model(inputs), targets).backward()
            optimizer.step()
    reports, instruments = watching(train)
    assert len(reports) == 4 and [r.samples for r in reports] == [8] * 4
    for report in reports:
        data = [k for k in kinds(report) if k.startswith("data")]
        assert data == [kind], kinds(report)
    assert instruments.reader.facts().loader.num_workers == workers


@pytest.mark.parametrize("words, script, module, args, refused", [
    (["-u", "train.py", "--lr", "3"], "train.py", None, ["--lr", "3"], None),
    (["-m", "pkg.train", "--x"], None, "pkg.train", ["--x"], None),
    (["-O", "train.py"], None, None, None, "-O: watch -- python takes a script"),
    (["-m"], None, None, None, "-m: give the module"),
    ([], None, None, None, "give the script to run"),
])
def test_the_plain_python_command_line_is_read_or_refused_with_the_reason(words, script, module, args, refused):
    from engine.watch import python_form
    assert python_form.is_python("python3") and python_form.is_python("/usr/bin/python3.11")
    assert not python_form.is_python("torchrun") and not python_form.is_python("train.py")
    form, problems = python_form.read(words)
    if refused:
        assert form is None and refused in problems[0]
    else:
        assert (form.script, form.module, form.args) == (script, module, args) and not problems


def test_a_plain_scripts_process_has_no_torchrun_variables_and_the_users_thread_count():
    from engine.run.local_ranks import plain_environment
    rank = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_PORT": "1", "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1", "PATH": "/bin"}
    assert plain_environment(rank, {"OMP_NUM_THREADS": "6", "GLOO_SOCKET_IFNAME": "eth0"}) == {
        "OMP_NUM_THREADS": "6", "GLOO_SOCKET_IFNAME": "eth0", "PATH": "/bin"}
    assert plain_environment(rank, {}) == {"PATH": "/bin"}


def test_overlapping_kinds_count_each_moment_once_and_add_up_to_the_step():
    """An all-reduce that outlasts the backward it started in is the backward's time, its own where it sticks out;
    an all-gather waited for inside a forward is the all-gather's (the forward is its envelope); evaluation before
    the step is not in it."""
    intervals = [["eval", -5.0, 0.0], ["data", 0.0, 1.0], ["forward", 1.0, 2.0], ["communication", 1.2, 1.5],
                 ["backward", 2.0, 4.0], ["communication", 3.0, 4.5], ["optimizer", 4.5, 5.0]]
    held, hidden = exclusive(intervals, 0.0, 6.0)
    assert held == pytest.approx({"data": 1.0, "forward": 0.7, "backward": 2.0, "communication": 0.8,
                                  "optimizer": 0.5})
    assert hidden == pytest.approx({"communication": 1.0, "forward": 0.3}) and sum(held.values()) <= 6.0


def test_an_mfu_over_the_peak_and_uncounted_operations_are_findings_not_figures():
    device = DeviceEfficiency("cpu:0", flops_per_step=3e9, step_s=0.01, busy_s=0.01,
                              measured_peak=Peak(1e11, "measured: test"))
    summary = RunSummary(devices=["cpu:0"], steps=3, time_by_kind=[DeviceKinds("cpu:0", 0.01, {"forward": 0.01})],
                         efficiency=Efficiency([device]))
    assert device.mfu is None and device.over_peak == pytest.approx(3.0) and summary.efficiency.mfu is None
    found = findings(summary, script=True, world=1, unformulated={"aten._fft_r2c": 0.002, "step": 0.01})
    codes = [f.code for f in found]
    assert codes[0] == "mfu_over_peak" and "300 %" in found[0].text and "uncounted_flops" in codes
    assert "aten._fft_r2c 20 %" in found[codes.index("uncounted_flops")].text


def test_two_views_before_one_backward_a_frozen_encoder_and_training_in_eval_mode_are_one_step_each():
    """A Siamese step (the model called twice, then one backward), a frozen encoder called without gradients
    before the trained head (a diffusion model's VAE, a teacher), and a model trained in eval() mode (a fine-tune
    with frozen BatchNorm): a step per batch, nothing of it taken for evaluation; its samples the trained model's
    inputs, over its calls (the Siamese step's two views of 5: 10, as a pipeline's micro-batches add up)."""
    encoder, head = nn.Linear(4, 4).requires_grad_(False), nn.Linear(4, 2)

    def siamese():
        optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
        for _ in range(3):
            (head(torch.randn(5, 4)) - head(torch.randn(5, 4))).pow(2).mean().backward()
            optimizer.step()

    def frozen_first():
        optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
        for _ in range(3):
            with torch.no_grad():
                features = encoder(torch.randn(6, 4))
            head(features).sum().backward()
            optimizer.step()

    def in_eval_mode():
        head.eval()
        optimizer = torch.optim.SGD(head.parameters(), lr=0.1)
        for _ in range(3):
            head(torch.randn(7, 4)).sum().backward()
            optimizer.step()
        head.train()
    for body, samples in ((siamese, 10), (frozen_first, 6), (in_eval_mode, 7)):
        reports, _ = watching(body)
        assert [r.samples for r in reports] == [samples] * 3, body.__name__
        assert all("eval" not in kinds(r) and "forward" in kinds(r) for r in reports), body.__name__


def test_a_step_ended_late_still_has_its_flops_counted_and_a_skipped_amp_step_ends_a_step():
    """A critic stepped more often than its generator ends its first step late (at its second step), after the
    next step's forward: the FLOPs are counted on a later whole step, never 0. GradScaler skips the optimizer's
    step where the gradients overflowed: the training step ends there all the same."""
    critic, generator = nn.Linear(8, 1), nn.Linear(8, 8)
    reports: list = []
    instruments = Instruments("cpu:0", reports.append, count_flops=True)
    instruments.install()
    try:
        opt_c, opt_g = torch.optim.SGD(critic.parameters(), lr=0.1), torch.optim.SGD(generator.parameters(), lr=0.1)
        for _ in range(3):
            for _ in range(2):
                critic(generator(torch.randn(16, 8)).detach()).mean().backward()
                opt_c.step()
            critic(generator(torch.randn(16, 8))).mean().backward()
            opt_g.step()
        instruments.finish()
    finally:
        instruments.uninstall()
    counted = [r.flops["cpu:0"] for r in reports if r.flops]
    assert counted and counted[0] > 0

    model = nn.Linear(4, 1)

    def amp():
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu")
        for overflow in (False, True, False):
            loss = model(torch.ones(3, 4)).sum() * (float("inf") if overflow else 1.0)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
    reports, _ = watching(amp)
    assert [r.samples for r in reports] == [3, 3, 3]


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_reading_a_scripts_unusual_inputs_never_fails_it():
    """A model given its batch in a dict, and one given a nested tensor: the script runs on; the first counts its
    batch, the second's samples are said to be unread rather than guessed."""
    class Dicts(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(3, 1)

        def forward(self, batch):
            return self.linear(batch["x"]).sum()

    class Nested(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(()))

        def forward(self, values):
            return sum(t.sum() for t in values.unbind()) * self.weight

    for model, batch, samples in ((Dicts(), lambda: {"x": torch.randn(9, 3)}, 9),
                                  (Nested(), lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]), 0)):
        def train(model=model, batch=batch):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for _ in range(2):
                model(batch()).backward()
                optimizer.step()
        reports, _ = watching(train)
        assert [r.samples for r in reports] == [samples] * 2


@pytest.mark.quick
def test_a_gpus_steps_wait_in_their_queue_until_its_marks_are_passed():
    """On a GPU a step is reported once the device has passed its marks; up to QUEUED_AT_MOST wait for it without
    the script waiting (this path runs only where a clock's marks lag: never on a CPU)."""
    import types

    from engine.watch.step_queue import QUEUED_AT_MOST, StepEnds

    class Lagging:
        def done(self, marks):
            return False

        def wait(self, marks):
            raise AssertionError("waited with room in the queue")
    queued = [types.SimpleNamespace(marks=lambda: ()) for _ in range(QUEUED_AT_MOST)]
    state = types.SimpleNamespace(_queued=list(queued), clock=Lagging(), emit=None, device="cuda:0")
    StepEnds._report(state, wait=False)
    assert len(state._queued) == QUEUED_AT_MOST


def test_ddp_on_a_cpu_is_timed_by_its_own_timer_without_a_hook_once_a_synchronised_backward(tmp_path):
    """DDP on a CPU: each step's all-reduce is one communication interval inside its backward, read from DDP's
    own timer (no comm hook of ours: a Python hook's callback on gloo's thread cost 10 % of a step); a backward
    under no_sync (gradient accumulation) adds none; a script's own comm hook is kept and still timed."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    made = []

    def train():
        plain = DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)))
        hooked = DistributedDataParallel(nn.Linear(8, 1))
        hooked.register_comm_hook(None, default_hooks.allreduce_hook)
        made.extend([plain, hooked])
        for ddp in (plain, hooked):
            optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
            for _ in range(3):
                with ddp.no_sync():
                    ddp(torch.randn(4, 8)).sum().backward()
                ddp(torch.randn(4, 8)).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
    try:
        reports, _ = watching(train)
    finally:
        dist.destroy_process_group()
    assert len(reports) == 6
    assert not made[0]._comm_hooks and len(made[1]._comm_hooks) == 1
    for report in reports:
        intervals = report.intervals["cpu:0"]
        talks = [(t0, t1) for kind, t0, t1, *_ in intervals if kind == "communication"]
        backwards = [(t0, t1) for kind, t0, t1, *_ in intervals if kind == "backward"]
        assert len(talks) == 1 and len(backwards) == 2, intervals
        (t0, t1), (b0, b1) = talks[0], backwards[1]
        # the system clock read against the host's: within a millisecond of the backward that ran it
        assert b0 - 1e-3 <= t0 <= t1 <= b1 + 1e-3
