"""Models from a user's file: ``build_model()``, ``make_batch(batch_size, generator)``, optional ``loss_fn``.

The file is executed only when the user names it (``--model-file`` or the app's
"Open model file...").
"""
from __future__ import annotations

import importlib.util
import traceback
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from engine.models.spec import DataSource, ModelSpec


class ModelFileError(ValueError):
    pass


def _default_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    # Integer targets are class labels; anything else is regressed.
    if not target.is_floating_point():
        return F.cross_entropy(output, target)
    return F.mse_loss(output, target)


def load_module(path: str):
    file = Path(path)
    if not file.is_file():
        raise ModelFileError(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(f"splitscope_user_model_{abs(hash(str(file.resolve())))}", file)
    if spec is None or spec.loader is None:
        raise ModelFileError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # a user's file can raise anything, SystemExit included
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        raise ModelFileError(f"{path}: failed to load: {tb}") from None
    return module


def build(path: str, seed: int) -> ModelSpec:
    module = load_module(path)
    missing = [name for name in ("build_model", "make_batch") if not callable(getattr(module, name, None))]
    if missing:
        raise ModelFileError(f"{path}: defines no {' and no '.join(missing)}(); a model file needs "
                             "build_model() returning nn.Sequential and make_batch(batch_size, generator)")
    try:
        model = module.build_model()
    except Exception as exc:
        raise ModelFileError(f"{path}: build_model() raised {type(exc).__name__}: {exc}") from None
    if not isinstance(model, nn.Sequential):
        raise ModelFileError(f"{path}: build_model() must return nn.Sequential, got {type(model).__name__}")
    if len(model) == 0:
        raise ModelFileError(f"{path}: build_model() returned an empty nn.Sequential")
    loss_fn = getattr(module, "loss_fn", None) or _default_loss
    return ModelSpec(Path(path).stem, list(model.named_children()), loss_fn, DataSource(module.make_batch, seed))
