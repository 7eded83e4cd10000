"""The executor behind data-parallel: nn.DataParallel's steps, each cut apart and timed on its device.

nn.DataParallel runs one process with a thread per device (parallel_apply) and
autograd stitching the devices together. Here the same steps are done one at a
time, on CPU virtual devices and on GPUs alike, so each is timed on the device
that does it: scatter the batch (torch.chunk, dim 0), replicate device 0's
parameters into each replica, forward in parallel (a thread per device), gather
the outputs on device 0 and compute the loss there, hand each replica its
output's gradient, backward in parallel, reduce the gradients to device 0 (timed
as communication), step the optimizer there. The gradients are those of one
backward through nn.DataParallel: the sum over replicas of each replica's share.

A copy between GPUs runs on the source GPU's stream (torch's copy kernel), so the
scatter, replicate and the gradients handed back are transfers on device 0, a
replica's output sent to device 0 is one on that replica's GPU, and in the reduce
each replica's sending of its gradients is communication on its GPU, their sum
communication on device 0. Device 0's extra work (loss, reduce, optimizer) is what
this strategy makes visible.
"""
from __future__ import annotations

import copy

import torch

from engine.measure.tensor_memory import Placement
from engine.precision import make_optimizer
from engine.strategies.base import Executor, RankContext, StepResult, place_on
from engine.strategies.device_threads import DeviceThread


def _after(device, other) -> None:
    """GPU ``device``'s stream waits for what is queued on ``other``'s so far. A copy between GPUs makes
    both streams wait for each other; done first, that wait falls before the copy's span, not in it."""
    if device.kind == "cuda" and other.kind == "cuda" and device != other:
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(other.index))
        torch.cuda.current_stream(device.index).wait_event(event)


class DataParallelSteps(Executor):
    def __init__(self, ctx: RankContext):
        self.devices = ctx.devices
        self.timer = ctx.timer
        self.loss_fn = ctx.spec.loss_fn
        self.module = ctx.spec.whole().to(self.devices[0].torch_device)   # the master copy, on device 0
        self.replicas = [self.module] + [copy.deepcopy(self.module).to(d.torch_device) for d in self.devices[1:]]
        self.optimizer = make_optimizer(self.module.parameters(), ctx.config)
        # Device 0 works on the rank's own thread (pinned to its core, or on its GPU, by the rank).
        self.threads = [None] + [DeviceThread(d) for d in self.devices[1:]]

    def place_batch(self, inputs, targets):
        """Both on device 0: DataParallel scatters from there and computes the loss there."""
        return place_on(self.timer, self.devices[0], inputs, targets)

    def _parallel(self, fn, used: int) -> list:
        """fn(i) on devices 0..used-1 at once: the others' threads first, then device 0 here.

        On a CPU device 0 the time it then spends blocked on the others is its "wait";
        a GPU's time comes from its own stream, whatever the host thread waits for.
        """
        futures = [self.threads[i].submit(lambda i=i: fn(i)) for i in range(1, used)]
        first = fn(0)
        dev0 = self.devices[0]
        waited = self.timer.mark(dev0) if dev0.kind == "cpu" and futures else None
        rest = [f.result() for f in futures]
        if waited is not None:
            self.timer.between(dev0, "wait", waited, self.timer.mark(dev0))
        return [first] + rest

    def step(self, inputs, targets) -> StepResult:
        timer, devices, dev0 = self.timer, self.devices, self.devices[0]
        self.optimizer.zero_grad(set_to_none=True)
        with timer.span(dev0, "transfer"):
            # scatter (dim 0, as DataParallel) and replicate: device 0's parameters and buffers
            # (BatchNorm's statistics) into each replica
            chunks = [c.to(devices[i].torch_device) for i, c in enumerate(inputs.chunk(len(devices)))]
            used = len(chunks)
            with torch.no_grad():
                for replica in self.replicas[1:used]:
                    for p_rep, p in zip(replica.parameters(), self.module.parameters(), strict=True):
                        p_rep.copy_(p)
                        p_rep.grad = None
                    for b_rep, b in zip(replica.buffers(), self.module.buffers(), strict=True):
                        b_rep.copy_(b)

        def forward(i):
            with timer.span(devices[i], "forward"):
                return self.replicas[i](chunks[i])
        outputs = self._parallel(forward, used)

        gathered = [outputs[0].detach().requires_grad_()]
        for i in range(1, used):  # gather: each output sent to device 0, a copy on the replica's GPU
            _after(devices[i], dev0)
            with timer.span(devices[i], "transfer"):
                gathered.append(outputs[i].detach().to(dev0.torch_device).requires_grad_())
        with timer.span(dev0, "forward"):
            loss = self.loss_fn(torch.cat(gathered), targets)
        with timer.span(dev0, "backward"):
            loss.backward()
        with timer.span(dev0, "transfer"):  # each replica's share of the output gradient, from device 0
            grads = [g.grad.to(devices[i].torch_device) for i, g in enumerate(gathered)]

        def backward(i):
            with timer.span(devices[i], "backward"):
                outputs[i].backward(grads[i])
        self._parallel(backward, used)

        # Reduce the replicas' gradients to device 0: each replica sends its own (a copy on its GPU),
        # device 0 sums them.
        received = []
        for i in range(1, used):
            _after(devices[i], dev0)
            with timer.span(devices[i], "communication"):
                received.append([p.grad.to(dev0.torch_device) if p.grad is not None else None
                                 for p in self.replicas[i].parameters()])
        with timer.span(dev0, "communication"), torch.no_grad():
            for grads_of_replica in received:
                for p, grad in zip(self.module.parameters(), grads_of_replica, strict=True):
                    if grad is not None:
                        p.grad = grad.clone() if p.grad is None else p.grad.add_(grad)
        with timer.span(dev0, "optimizer"):
            self.optimizer.step()
        split = [len(c) for c in chunks] + [0] * (len(devices) - used)
        return StepResult(loss_part=float(loss.detach()), samples=int(inputs.shape[0]), batch_split=split)

    def reported_parameters(self) -> list:
        return list(self.module.parameters())

    def placements(self) -> list[Placement]:
        # The optimizer updates the master copy on device 0; the replicas are copied from it each step.
        return [Placement(d, replica, self.optimizer if i == 0 else None)
                for i, (d, replica) in enumerate(zip(self.devices, self.replicas, strict=True))]

    def close(self) -> None:
        for t in self.threads[1:]:
            t.close()
