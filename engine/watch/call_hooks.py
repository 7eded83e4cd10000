"""The instruments' hooks on torch's module calls and optimizer steps (``CallHooks``, a part of
engine/watch/instruments.py's ``Instruments``): where a forward, an evaluation and a step begin and end.

``Instruments.install`` registers them with torch (global forward pre- and post-hooks, the optimizer step pre-
and post-hooks); what they decide is the heart of the step rules engine/watch/instruments.py's docstring states.
Their own module because they are one job (reading the script's calls as they come) apart from installing,
the timers' and the script's reports and the ending of a run, which stay with the class; like step_queue's
``StepEnds`` they work on the state ``Instruments.__init__`` sets up.
"""
from __future__ import annotations

import threading

from engine.watch.clocks import clock_for
from engine.watch.step_queue import Boundary


class CallHooks:
    """How engine/watch/instruments.py's Instruments read the script's module calls and optimizer steps (torch's
    global hooks, registered by ``Instruments.install``)."""

    def _before_forward(self, module, args) -> None:
        # Inside torch.compile's tracing (a compiled module's own modules) the hooks are not there: traced, they
        # would break the script's graph. Its outermost call, the compiled module's, runs them as any module's.
        if self._compiling() or threading.get_ident() != self._main or self._in_backward:
            return
        if self._depth:
            self._depth += 1
            return
        has_parameters = self.reader.first_parameter(module) is not None
        if not self._forwarded and not has_parameters:
            # a module without parameters before the step's model (torchvision's transforms in the rank's own
            # DataLoader): the input pipeline's work, not a forward
            self._calls.append("skip")
            return
        self._depth = 1
        if not self._clock_chosen:   # the model's first call: its parameters are where its work runs
            (self.clock, self.misplaced), self._clock_chosen = clock_for(module, self.own), True
        now = self.clock.now()
        self.training()
        if not self._optimized and self._forwarded and module is self._counted and self._backward_seen \
                and self._update_sign() != self._after_backward:
            # No optimizer, but the parameters changed or their gradients were reset since the backward: the
            # script updates them itself, and this call starts what follows (gradient accumulation changes
            # neither between its micro-batches).
            self.hand_steps = self.reader.hand_updates = True
            self._end_step(now)
        without_gradients = not self._grad_enabled() or self._inference_mode()
        if without_gradients and not self._forwarded and self._trains(module):
            # Evaluation: a call without gradients of a module the script trains, before the step's first training
            # forward (one within a step, a frozen teacher's, is the step's work): timed between the steps.
            self._calls.append("eval")
            self.reader.eval_forward()
            if self._eval_from is None:   # the time since the step ended is the evaluation's, not the next step's
                self._eval_from = self._step_start if self._step_start is not None else now
            self._forward_start = now
            return
        self._calls.append("train")
        if self._counted is None and has_parameters:
            self._counted = module
        if without_gradients and not self._trains_at_all() and self._forwarded and module is self._counted:
            # The step's model called again without gradients by a script that never made an optimizer nor ran a
            # backward: an inference script, whose steps are its model's calls.
            self.forward_steps = True
            self._end_step(now)
        if not self._forwarded:
            self._forwarded = True
            if self._count_next:   # the counted step: from its first forward to its end
                self._start_counting()
            if self._eval_from is not None:   # an evaluation ended: the step starts after it
                self.add("eval", self._eval_from, self._eval_until)
                self._step_start, self._eval_from = self._eval_until, None
            if self._step_start is None:
                self._step_start = now                     # the first step starts at its first forward
            elif not self._own_data and not self._loader_timed:
                # waiting for (or making) the next batch; a wait for a peer's activation is the peer's
                self.add("data", self._step_start, now, self._waited_until)
        if has_parameters:
            self.reader.model_called(module)
        self._forward_start = now

    def _trains_at_all(self) -> bool:
        """The script has shown it trains: it made an optimizer or ran a backward."""
        return self._ever_trained or len(self.reader.optimizers) > 0

    def _trains(self, module) -> bool:
        """Whether the script trains ``module``: some parameter of it in an optimizer it made (without one, any
        parameter that requires a gradient, once it has run a backward). A frozen one (a VAE, a teacher) is
        not; known once a module, and again when optimizers are added."""
        if not self._trains_at_all():
            return False
        known = self._trained.get(id(module))
        optimizers = len(self.reader.optimizers)
        if known is None or known[1] != optimizers:
            if optimizers:
                held = {id(p) for o in list(self.reader.optimizers) for g in o.param_groups for p in g["params"]}
                trained = any(id(p) in held for p in module.parameters())
            else:
                trained = any(p.requires_grad for p in module.parameters())
            known = self._trained[id(module)] = (trained, optimizers)
        return known[0]

    def _after_forward(self, module, args, *kwargs_and_output) -> None:
        # (module, args, kwargs, output); torch leaves the keyword arguments out after a forward that raised
        kwargs = kwargs_and_output[0] if len(kwargs_and_output) == 2 else {}
        if self._compiling() or threading.get_ident() != self._main or self._in_backward:
            return
        if self._depth > 1:
            self._depth -= 1
            return
        call = self._calls.pop() if self._calls else "train"
        if call == "skip":
            return
        self._depth = 0
        now = self.clock.now()
        if call == "eval":
            self._eval_until = now
        elif self._forward_start is not None:
            self.add("forward", self._forward_start, now)
            if module is self._counted:
                found = self.reader.first_input(module, args, kwargs)
                if found is not None:
                    self._samples += found[0]
                    self._samples_from = found[1]
        self._forward_start = None

    def _before_optimizer(self, optimizer, args, kwargs) -> None:
        if self._compiling():
            return
        if id(optimizer) in self._stepped_now and self._boundary is not None:
            # An optimizer steps a second time in the step under way, whose other optimizers did not all step:
            # the step ended at the last optimizer step before this one.
            self._end_at(self._boundary)
        self._optimizer_start = self.clock.now()

    def _after_optimizer(self, optimizer, args, kwargs) -> None:
        if self._compiling():
            return
        end = self.clock.now()
        self._optimizer_steps += 1
        if self._optimizer_start is not None:
            self.add("optimizer", self._optimizer_start, end)
        self._optimized = True
        self.reader.optimizer_stepped(optimizer)
        self._stepped_now.add(id(optimizer))
        # A step ends when each of its optimizers has stepped once: those of the first step, or, in it, every
        # optimizer the script has made (a GAN's two, stepped one after the other for one batch).
        expected = self._steppers if self._steppers is not None else {id(o) for o in self.reader.optimizers}
        if expected <= self._stepped_now:
            self._end_step(end)
        else:
            with self._lock:
                held = len(self._intervals)
            self._boundary = Boundary(end, held, self._samples, self.reader.loader_samples, len(self._losses),
                                       self._backwards)
