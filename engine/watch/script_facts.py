"""What a watched script is, read from the script as it runs: its model's class and size, its optimizers and their
learning rates, the dtype it computes in, its DataLoaders' settings and where each step's samples were counted
from (the summary's ``script``, engine/results/read_facts.py ScriptFacts).

Read through class-level wrappers that ``Instruments.uninstall`` takes back (an optimizer's and a DataLoader
iterator's construction and a batch's fetch), never through anything put on the script's own objects: a
script that pickles its whole model or optimizer finds nothing of ours on them (tests/scripts/save_whole_model.py).
Reading never fails the script: what cannot be read (an unusual batch, a model of another shape) is left unread
(``unread`` says what, once).
"""
from __future__ import annotations

import functools
import weakref
from collections.abc import Callable

from engine.results.read_facts import LoaderFacts, ScriptFacts

# The first dimension of a recurrent module's input is its sequence, not its batch, unless batch_first.
SEQUENCE_FIRST = "nn.RNN, nn.LSTM or nn.GRU without batch_first: its input's second dimension"


class ScriptReader:
    """The facts, gathered from the hooks (the instruments, engine/watch/call_hooks.py and step_queue.py, call
    ``model_called``, ``optimizer_stepped`` and ``step_samples``) and from the wrappers ``install`` puts on
    torch's classes."""

    def __init__(self):
        self.optimizers: weakref.WeakSet = weakref.WeakSet()   # every optimizer the script made, alive
        self.models: dict[int, tuple[str, int]] = {}   # id -> (class name, parameters) of the modules it trained
        self.stepped: dict[int, tuple[str, float | None]] = {}   # id -> (class name, lr) of those that stepped
        self.dtypes: dict[str, int] = {}        # the dtype of each training forward (autocast's, else the model's)
        self.loader: LoaderFacts | None = None  # the last DataLoader a training batch came from
        self.loaders: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # iterator -> its loader's
        self.loader_samples = 0                 # samples of the batches fetched since the last reset
        self.source: str | None = None          # where the last step's samples were counted from
        self.micro_steps: list[int] = []        # backwards per step
        self.hand_updates = False               # no optimizer: the script updated its parameters itself
        self.unread: str | None = None          # the first thing that could not be read, and why
        self._sequence_first: dict[int, bool] = {}   # module id -> whether its batch is its input's second dimension
        self._first_parameters: dict[int, object] = {}   # module id -> its first parameter (first_parameter)
        self._dtype_names: dict[object, str] = {}
        self.clock: Callable[[], object] | None = None         # the instruments' marks, and what takes each
        self.on_fetch: Callable[[str, object, object], None] = lambda kind, t0, t1: None   # batch's fetch: its
        # kind (fetch_kind) from-to
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
            try:
                loaders[iterator] = LoaderFacts(
                    batch_size=loader.batch_size if isinstance(loader.batch_size, int) else None,
                    num_workers=int(loader.num_workers), pin_memory=bool(loader.pin_memory),
                    persistent_workers=bool(loader.persistent_workers), prefetch_factor=loader.prefetch_factor)
            except Exception as exc:  # noqa: BLE001  (a DataLoader of its own kind: its settings left unread)
                reader.could_not("a DataLoader's settings", exc)
        dataloader._BaseDataLoaderIter.__init__ = iter_init
        undo.append(lambda: setattr(dataloader._BaseDataLoaderIter, "__init__", original_iter_init))

        @functools.wraps(original_next)
        def fetch(iterator):
            t0 = reader.clock() if reader.clock is not None else None
            batch = original_next(iterator)
            try:
                if t0 is not None:
                    reader.on_fetch(reader.fetch_kind(iterator), t0, reader.clock())
                reader.fetched(iterator, batch)
            except Exception as exc:  # noqa: BLE001  (never the script's batch lost for our count)
                reader.could_not("a DataLoader batch's samples", exc)
            return batch
        dataloader._BaseDataLoaderIter.__next__ = fetch
        undo.append(lambda: setattr(dataloader._BaseDataLoaderIter, "__next__", original_next))
        return undo

    def could_not(self, what: str, exc: Exception) -> None:
        if self.unread is None:
            self.unread = f"{what} could not be read ({type(exc).__name__}: {exc})"

    def fetch_kind(self, iterator) -> str:
        """What the rank did while a batch came out of ``iterator``: loaded it itself ("data", busy: a DataLoader
        without workers runs ``__getitem__`` and collate in the rank's process) or waited for a worker process to
        hand it over ("data-wait", idle)."""
        loader = self.loaders.get(iterator)
        workers = loader.num_workers if loader is not None else getattr(iterator, "_num_workers", 0)
        return "data-wait" if workers else "data"

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
        self.loader = loader

    def eval_forward(self) -> None:
        """The batches fetched since the last training forward fed an evaluation, not a step."""
        self.loader_samples = 0

    def model_called(self, module) -> None:
        """An outermost module with parameters called in a training forward: the model (a DDP or FSDP wrapper's
        own module named), and the dtype it computes in."""
        try:
            self._model_called(module)
        except Exception as exc:  # noqa: BLE001  (a model of an unusual kind: left unread, the script goes on)
            self.could_not("the model", exc)

    def first_parameter(self, module):
        """The module's first floating-point parameter (its first of any kind where none is), or None: looked up once
        a module (a generator over its tree on every call is most of what the hooks would cost a small model)."""
        found = self._first_parameters.get(id(module), self)
        if found is self:
            found = next((p for p in module.parameters() if p.is_floating_point()), None)
            if found is None:
                found = next(iter(module.parameters()), None)
            self._first_parameters[id(module)] = found
        return found

    def _model_called(self, module) -> None:
        import torch
        first = self.first_parameter(module)
        if id(module) not in self.models:
            self.models[id(module)] = (model_name(module), sum(p.numel() for p in module.parameters()))
        device = first.device.type if first is not None else "cpu"
        if torch.is_autocast_enabled(device):
            dtype = torch.get_autocast_dtype(device)
        else:
            dtype = first.dtype if first is not None and first.is_floating_point() else None
        if dtype is not None:
            name = self._dtype_names.get(dtype)
            if name is None:
                name = self._dtype_names[dtype] = str(dtype).removeprefix("torch.")
            self.dtypes[name] = self.dtypes.get(name, 0) + 1

    def optimizer_stepped(self, optimizer) -> None:
        """An optimizer stepped: its class, and its learning rate (a tensor's only where it is on the host: reading
        a GPU's would wait for the GPU every step)."""
        try:
            groups = getattr(optimizer, "param_groups", None) or [{}]
            lr = groups[0].get("lr")
            if hasattr(lr, "device"):
                lr = lr.item() if lr.device.type == "cpu" else None
            lr = float(lr) if isinstance(lr, (int, float)) else None
        except Exception as exc:  # noqa: BLE001  (an optimizer of its own kind: its rate left unread)
            self.could_not("an optimizer's learning rate", exc)
            lr = None
        self.stepped[id(optimizer)] = (type(optimizer).__name__, lr)

    def first_input(self, module, args, kwargs) -> tuple[int, str] | None:
        """``first_input``, never failing the script; whether the module is sequence-first known once each."""
        try:
            known = self._sequence_first.get(id(module))
            if known is None:
                known = self._sequence_first[id(module)] = _sequence_first(module)
            return first_input(args, kwargs, known)
        except Exception as exc:  # noqa: BLE001  (inputs of a kind not read: the step's samples said missing)
            self.could_not("the model's inputs", exc)
            return None

    def step_samples(self, declared: int | None, given: int | None, first_input: tuple[int, str] | None,
                     backwards: int) -> int:
        """The step's samples, from the first of: what the script said (watch.step), the DataLoader's batches,
        --samples-per-step, the model's first tensor input; ``source`` says which."""
        if backwards:
            self.micro_steps.append(backwards)
        loader, self.loader_samples = self.loader_samples, 0
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
            loader=self.loader, hand_updates=self.hand_updates, unread=self.unread)


def first_input(args, kwargs, sequence_first: bool = False) -> tuple[int, str] | None:
    """(samples, where from) of a model's call: the batch dimension of its first tensor argument, positional or
    else keyword (``model(**batch)``: the first tensor among them), looked for inside lists, tuples and dicts;
    the second dimension where the model is recurrent and sequence-first."""
    named = [(f"argument {i}", a) for i, a in enumerate(args)] + list((kwargs or {}).items())
    for name, value in named:
        tensor = _first_tensor(value)
        if tensor is None:
            continue
        shape = list(tensor.shape)
        if len(shape) > 1 and sequence_first:
            return int(shape[1]), f"the model's input {name} {shape}, dimension 1 ({SEQUENCE_FIRST})"
        return int(shape[0]), f"the model's first tensor input, {name} {shape}, dimension 0"
    return None


def model_name(module) -> str:
    """The class the script wrote: through DDP's and DataParallel's ``module``, torch.compile's ``_orig_mod``, and
    FSDP2's class made for the module (``FSDPGPT`` for a GPT)."""
    import torch
    for _ in range(4):
        inner = getattr(module, "_orig_mod", None) or getattr(module, "module", None)
        if not isinstance(inner, torch.nn.Module):
            break
        module = inner
    cls = type(module)
    if cls.__name__.startswith("FSDP") and len(cls.__mro__) > 2 and cls.__mro__[2].__name__ == cls.__name__[4:]:
        return cls.__name__[4:]
    return cls.__name__


def _sequence_first(module) -> bool:
    from torch import nn
    inner = getattr(module, "module", module)
    if not isinstance(inner, nn.Module):
        inner = module
    first = next((m for m in inner.modules() if isinstance(m, nn.RNNBase)), None)
    return first is not None and not first.batch_first


def _first_tensor(value, depth: int = 0):
    """The first tensor with a batch dimension in ``value`` (a tensor, or a list, tuple or dict of them), or None;
    a nested tensor's batch is not read."""
    import torch
    if isinstance(value, torch.Tensor):
        return value if value.dim() > 0 and not value.is_nested else None
    if depth > 3:
        return None
    values = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    for item in values:
        found = _first_tensor(item, depth + 1)
        if found is not None:
            return found
    return None


def _first_dimension(batch) -> int | None:
    tensor = _first_tensor(batch)
    return int(tensor.shape[0]) if tensor is not None else None
