"""What a watched script is, read from the script as it runs: its model's class and size, its optimizers and their
learning rates, the dtype it computes in, its DataLoaders' settings and where each step's samples were counted
from (the summary's ``script``, engine/results.py ScriptFacts).

Read through class-level wrappers that ``Instruments.uninstall`` takes back (an optimizer's and a DataLoader
iterator's construction and a batch's fetch), never through anything put on the script's own objects: a
script that pickles its whole model or optimizer finds nothing of ours on them (tests/scripts/save_whole_model.py).
"""
from __future__ import annotations

import functools
import weakref
from typing import Callable

from engine.script_results import LoaderFacts, ScriptFacts

# The first dimension of a recurrent module's input is its sequence, not its batch, unless batch_first.
SEQUENCE_FIRST = "nn.RNN, nn.LSTM or nn.GRU without batch_first: its input's second dimension"


class ScriptReader:
    """The facts, gathered from the hooks (engine/watch/instruments.py calls ``model_called`` and
    ``counted_samples``) and from the wrappers ``install`` puts on torch's classes."""

    def __init__(self):
        self.optimizers: "weakref.WeakSet" = weakref.WeakSet()   # every optimizer the script made, alive
        self.models: dict[int, tuple[str, int]] = {}   # id -> (class name, parameters) of the modules it trained
        self.stepped: dict[int, tuple[str, float | None]] = {}   # id -> (class name, lr) of those that stepped
        self.dtypes: dict[str, int] = {}        # the dtype of each training forward (autocast's, else the model's)
        self.loader: LoaderFacts | None = None  # the last DataLoader a training batch came from
        self.loaders: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # iterator -> its loader's
        self.loader_samples = 0                 # samples of the batches fetched since the last reset
        self.loader_fetches = 0
        self.source: str | None = None          # where the last step's samples were counted from
        self.micro_steps: list[int] = []        # backwards per step
        self._undo: list[Callable[[], None]] = []

    # ---- installing ------------------------------------------------------------------
    def install(self) -> list[Callable[[], None]]:
        """The wrappers on torch's classes; what takes each back."""
        import torch
        from torch.utils.data import dataloader

        optimizers = self.optimizers
        original_init = torch.optim.Optimizer.__init__

        @functools.wraps(original_init)
        def init(optimizer, *args, **kwargs):
            original_init(optimizer, *args, **kwargs)
            optimizers.add(optimizer)
        torch.optim.Optimizer.__init__ = init
        undo = [lambda: setattr(torch.optim.Optimizer, "__init__", original_init)]

        original_next = dataloader._BaseDataLoaderIter.__next__
        original_iter_init = dataloader._BaseDataLoaderIter.__init__
        reader, loaders = self, self.loaders

        @functools.wraps(original_iter_init)
        def iter_init(iterator, loader, *args, **kwargs):
            original_iter_init(iterator, loader, *args, **kwargs)
            loaders[iterator] = LoaderFacts(
                batch_size=loader.batch_size if isinstance(loader.batch_size, int) else None,
                num_workers=loader.num_workers, pin_memory=bool(loader.pin_memory),
                persistent_workers=bool(loader.persistent_workers), prefetch_factor=loader.prefetch_factor)
        dataloader._BaseDataLoaderIter.__init__ = iter_init
        undo.append(lambda: setattr(dataloader._BaseDataLoaderIter, "__init__", original_iter_init))

        @functools.wraps(original_next)
        def fetch(iterator):
            batch = original_next(iterator)
            reader.fetched(iterator, batch)
            return batch
        dataloader._BaseDataLoaderIter.__next__ = fetch
        undo.append(lambda: setattr(dataloader._BaseDataLoaderIter, "__next__", original_next))
        return undo

    # ---- what the hooks report -------------------------------------------------------
    def fetched(self, iterator, batch) -> None:
        """A batch came out of a DataLoader: its samples (the first dimension of its first tensor, which the
        default collate stacks samples along; else the loader's batch size) count for the step it feeds."""
        loader = self.loaders.get(iterator)
        size, batch_size = _first_dimension(batch), loader.batch_size if loader is not None else None
        if size is None or (batch_size and size > batch_size):
            size = batch_size
        if size is None:
            return
        self.loader_samples += size
        self.loader_fetches += 1
        self.loader = loader

    def eval_forward(self) -> None:
        """The batches fetched since the last training forward fed an evaluation, not a step."""
        self.loader_samples = self.loader_fetches = 0

    def model_called(self, module, training_forward: bool) -> None:
        """An outermost module with parameters called in a training forward: the model (a DDP or FSDP wrapper's
        own module named), and the dtype it computes in."""
        import torch
        if id(module) not in self.models:
            inner = getattr(module, "module", module)   # DistributedDataParallel and DataParallel wrap one
            count = sum(p.numel() for p in module.parameters())
            self.models[id(module)] = (type(inner).__name__, count)
        if training_forward:
            if torch.is_autocast_enabled():
                dtype = torch.get_autocast_dtype("cuda" if torch.cuda.is_available() else "cpu")
            else:
                first = next((p for p in module.parameters() if p.is_floating_point()), None)
                dtype = first.dtype if first is not None else None
            if dtype is not None:
                name = str(dtype).removeprefix("torch.")
                self.dtypes[name] = self.dtypes.get(name, 0) + 1

    def optimizer_stepped(self, optimizer) -> None:
        groups = getattr(optimizer, "param_groups", None) or [{}]
        lr = groups[0].get("lr")
        try:
            lr = float(lr) if lr is not None else None
        except (TypeError, ValueError):   # a tensor lr on a GPU, or something else: not read
            lr = None
        self.stepped[id(optimizer)] = (type(optimizer).__name__, lr)

    def step_samples(self, declared: int | None, given: int | None, first_input: tuple[int, str] | None,
                     backwards: int) -> int:
        """The step's samples, from the first of: what the script said (watch.step), the DataLoader's batches,
        --samples-per-step, the model's first tensor input; ``source`` says which."""
        if backwards:
            self.micro_steps.append(backwards)
        loader, self.loader_samples, self.loader_fetches = self.loader_samples, 0, 0
        if declared is not None:
            self.source = "the script's watch.step(samples=...)"
            return declared
        if loader:
            self.source = f"the DataLoader's batches (batch size {self.loader.batch_size})" \
                if self.loader is not None and self.loader.batch_size else "the DataLoader's batches"
            return loader
        if given is not None:
            self.source = "--samples-per-step"
            return given
        if first_input is not None:
            self.source = first_input[1]
            return first_input[0]
        self.source = None
        return 0

    def facts(self) -> ScriptFacts:
        names = [name for name, _ in self.models.values()]
        stepped = list(self.stepped.values())
        dtype = max(self.dtypes, key=self.dtypes.get) if self.dtypes else None
        steps = len(self.micro_steps)
        return ScriptFacts(
            model=", ".join(dict.fromkeys(names)) or None,
            parameters=sum(count for _, count in self.models.values()) or None,
            optimizers=[name for name, _ in stepped],
            lr=[lr for _, lr in stepped],
            dtype=dtype,
            samples_source=self.source,
            micro_steps=round(sum(self.micro_steps) / steps, 2) if steps else None,
            loader=self.loader)


def first_input(module, args, kwargs) -> tuple[int, str] | None:
    """(samples, where from) of a model's call: the batch dimension of its first tensor argument, positional or
    else keyword (``model(**batch)``: the first tensor among them); the second dimension where the model is
    recurrent and sequence-first."""
    named = [(f"argument {i}", a) for i, a in enumerate(args)] + list((kwargs or {}).items())
    found = next(((name, a) for name, a in named if hasattr(a, "shape") and len(a.shape) > 0), None)
    if found is None:
        return None
    name, tensor = found
    shape = list(tensor.shape)
    if len(shape) > 1 and _sequence_first(module):
        return int(shape[1]), f"the model's input {name} {shape}, dimension 1 ({SEQUENCE_FIRST})"
    return int(shape[0]), f"the model's first tensor input, {name} {shape}, dimension 0"


def _sequence_first(module) -> bool:
    from torch import nn
    inner = getattr(module, "module", module)
    first = next((m for m in inner.modules() if isinstance(m, nn.RNNBase)), None)
    return first is not None and not first.batch_first


def _first_dimension(batch) -> int | None:
    import torch
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() > 0 else None
    values = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, (list, tuple)) else ()
    for value in values:
        found = _first_dimension(value)
        if found is not None:
            return found
    return None
