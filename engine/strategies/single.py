"""single: the whole model on one device; the baseline."""
from __future__ import annotations

from engine.measure.tensor_memory import Placement
from engine.precision import make_optimizer
from engine.problems import Problem
from engine.strategies.base import Executor, RankContext, StepResult, place_on
from engine.strategies.strategy import Strategy


class Single(Strategy):
    name = "single"
    description = "Whole model on one device: the baseline every other strategy is compared with."

    def check(self, config, devices, n_blocks) -> list[Problem]:
        if len(devices) != 1:
            return [Problem("devices", f"single uses exactly one device, got {len(devices)} "
                                       f"({', '.join(d.name for d in devices)})")]
        return []

    def devices_needed(self, config) -> int:
        return 1

    def build(self, ctx: RankContext) -> Executor:
        return SingleDevice(ctx)


class SingleDevice(Executor):
    def __init__(self, ctx: RankContext):
        self.device = ctx.devices[0]
        self.timer = ctx.timer
        self.model = ctx.spec.whole().to(self.device.torch_device)
        self.loss_fn = ctx.spec.loss_fn
        self.optimizer = make_optimizer(self.model.parameters(), ctx.config)

    def place_batch(self, inputs, targets):
        return place_on(self.timer, self.device, inputs, targets)

    def step(self, inputs, targets) -> StepResult:
        dev, timer = self.device, self.timer
        self.optimizer.zero_grad(set_to_none=True)
        with timer.span(dev, "forward"):
            loss = self.loss_fn(self.model(inputs), targets)
        with timer.span(dev, "backward"):
            loss.backward()
        with timer.span(dev, "optimizer"):
            self.optimizer.step()
        return StepResult(loss_part=float(loss.detach()), samples=int(inputs.shape[0]))

    def reported_parameters(self) -> list:
        return list(self.model.parameters())

    def placements(self) -> list[Placement]:
        return [Placement(self.device, self.model, self.optimizer)]
