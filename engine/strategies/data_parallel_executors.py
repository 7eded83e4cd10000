"""The executors behind data-parallel: DataParallel's steps on CPU threads, and nn.DataParallel on GPUs."""
from __future__ import annotations

import copy

import torch
from torch import nn

from engine.strategies.base import Executor, RankContext, StepResult, params_sq, sgd
from engine.strategies.device_threads import DeviceThread


class ThreadedDataParallel(Executor):
    """DataParallel for CPU virtual devices."""

    def __init__(self, ctx: RankContext):
        self.devices = ctx.devices
        self.timer = ctx.timer
        self.loss_fn = ctx.spec.loss_fn
        self.module = ctx.spec.sequential()           # the master copy, on device 0
        self.replicas = [self.module] + [copy.deepcopy(self.module) for _ in self.devices[1:]]
        self.optimizer = sgd(self.module.parameters(), ctx.config)
        # Device 0 works on the rank's own thread (pinned to its core by the rank).
        self.threads = [None] + [DeviceThread(d.name, d.core) for d in self.devices[1:]]

    def _parallel(self, fn, used: int) -> list:
        """fn(i) on devices 0..used-1 at once: the others' threads first, then device 0 here."""
        futures = [self.threads[i].submit(lambda i=i: fn(i)) for i in range(1, used)]
        first = fn(0)
        return [first] + [f.result() for f in futures]

    def step(self, inputs, targets) -> StepResult:
        timer, dev0 = self.timer, self.devices[0]
        self.optimizer.zero_grad(set_to_none=True)
        with timer.span(dev0, "transfer"):
            chunks = inputs.chunk(len(self.devices))  # scatter, as DataParallel does (dim 0)
            used = len(chunks)
            # replicate: broadcast device 0's parameters into each replica
            with torch.no_grad():
                master = list(self.module.parameters())
                for replica in self.replicas[1:used]:
                    for p_rep, p in zip(replica.parameters(), master):
                        p_rep.copy_(p)
                        p_rep.grad = None

        def forward(i):
            with timer.span(self.devices[i], "forward"):
                return self.replicas[i](chunks[i])
        outputs = self._parallel(forward, used)

        with timer.span(dev0, "transfer"):  # gather on device 0
            detached = [o.detach().requires_grad_() for o in outputs]
            gathered = torch.cat(detached)
        with timer.span(dev0, "forward"):
            loss = self.loss_fn(gathered, targets)
        with timer.span(dev0, "backward"):
            loss.backward()

        def backward(i):
            with timer.span(self.devices[i], "backward"):
                outputs[i].backward(detached[i].grad)
        self._parallel(backward, used)

        with timer.span(dev0, "transfer"):  # reduce gradients to device 0
            with torch.no_grad():
                for replica in self.replicas[1:used]:
                    for p, p_rep in zip(self.module.parameters(), replica.parameters()):
                        if p_rep.grad is not None:
                            p.grad = p_rep.grad.clone() if p.grad is None else p.grad.add_(p_rep.grad)
        with timer.span(dev0, "optimizer"):
            self.optimizer.step()
        split = [len(c) for c in chunks] + [0] * (len(self.devices) - used)
        return StepResult(loss_part=float(loss.detach()), samples=int(inputs.shape[0]), batch_split=split)

    def param_sq(self) -> float:
        return params_sq(self.module)

    def close(self) -> None:
        for t in self.threads[1:]:
            t.close()


class CudaDataParallel(Executor):
    """nn.DataParallel itself. Per-device forward time comes from a hook on every replica."""

    def __init__(self, ctx: RankContext):
        self.devices = ctx.devices
        self.timer = ctx.timer
        ids = [d.index for d in self.devices]
        self.module = ctx.spec.sequential().to(f"cuda:{ids[0]}")
        self.model = nn.DataParallel(self.module, device_ids=ids, output_device=ids[0])
        self.loss_fn = ctx.spec.loss_fn
        self.optimizer = sgd(self.module.parameters(), ctx.config)
        self._split: list[int] = []
        by_index = {d.index: d for d in self.devices}
        timer = self.timer

        # Hooks are copied onto each replica, so they run in each device's thread.
        def pre_hook(module, args):
            x = args[0]
            self._split.append((x.device.index, int(x.shape[0])))
            module._splitscope_span = timer.span(by_index[x.device.index], "forward")
            module._splitscope_span.__enter__()

        def post_hook(module, args, output):
            module._splitscope_span.__exit__(None, None, None)
        self.module.register_forward_pre_hook(pre_hook)
        self.module.register_forward_hook(post_hook)

    def step(self, inputs, targets) -> StepResult:
        dev0, timer = self.devices[0], self.timer
        self._split = []
        self.optimizer.zero_grad(set_to_none=True)
        out = self.model(inputs)
        with timer.span(dev0, "forward"):
            loss = self.loss_fn(out, targets.to(dev0.torch_device))
        with timer.span(dev0, "backward"):
            loss.backward()
        with timer.span(dev0, "optimizer"):
            self.optimizer.step()
        sizes = dict(self._split)
        split = [sizes.get(d.index, 0) for d in self.devices]
        return StepResult(loss_part=float(loss.detach()), samples=int(inputs.shape[0]), batch_split=split)

    def param_sq(self) -> float:
        return params_sq(self.module)
