"""The optimizer and the compute dtype a run asks for (``--optimizer``, ``--dtype``), in one place.

Named here without torch, so the config, the CLI and the app can list them; the
ranks build them through ``make_optimizer`` and ``autocast``. Optimizer state is
what sharding saves most of (AdamW keeps two tensors per parameter, SGD none),
so the two optimizers are the two ends of that trade.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager

from engine import models
from engine.config import ExperimentConfig

OPTIMIZERS = {
    "sgd": "plain SGD: no state of its own",
    "adamw": "AdamW: two running moments per parameter (twice the parameters' bytes of state)",
}
# Learning rates where --lr is not given and the model's own (tuned for SGD) does not fit: torch's AdamW default.
DEFAULT_LR = {"adamw": 1e-3}
DTYPES = {
    "float32": "float32 throughout",
    "bfloat16": "bfloat16 compute under torch.autocast (parameters, gradients and optimizer state stay float32)",
}
# The device types a run's devices can have (engine.devices), whose autocast state a thread can hold.
_AUTOCAST_TYPES = ("cpu", "cuda")


def effective_lr(config: ExperimentConfig) -> float:
    """The given lr; else AdamW's own default (torch's 1e-3), or the model's SGD rate."""
    if config.lr is not None:
        return config.lr
    if config.optimizer in DEFAULT_LR:
        return DEFAULT_LR[config.optimizer]
    known = models.lookup(config.model)
    return known.lr if known else 0.01


def make_optimizer(params, config: ExperimentConfig):
    """The run's optimizer over ``params``, or None when there are none (a lone ReLU's stage):
    torch's optimizers refuse an empty list."""
    import torch
    params = list(params)
    if not params:
        return None
    if config.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=effective_lr(config))
    return torch.optim.SGD(params, lr=effective_lr(config))


@contextmanager
def autocast(config: ExperimentConfig, device_types):
    """The run's compute dtype for what runs inside, on each of ``device_types`` (a no-op for float32)."""
    if config.dtype == "float32":
        yield
        return
    import torch
    dtype = getattr(torch, config.dtype)
    with ExitStack() as stack:
        for device_type in device_types:
            stack.enter_context(torch.autocast(device_type, dtype=dtype))
        yield


def current_autocast():
    """The calling thread's autocast state, to enter in another thread (torch keeps it per thread, as
    nn.DataParallel's parallel_apply knows): a function returning the context for that thread."""
    import torch
    state = [(t, torch.get_autocast_dtype(t)) for t in _AUTOCAST_TYPES if torch.is_autocast_enabled(t)]

    def enter() -> ExitStack:
        stack = ExitStack()
        for device_type, dtype in state:
            stack.enter_context(torch.autocast(device_type, dtype=dtype))
        return stack
    return enter
