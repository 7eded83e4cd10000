"""Models from a user's file: ``build_model()``, ``make_batch(batch_size, generator)``, optional ``loss_fn``.

``build_model()`` returns any ``nn.Module``. An ``nn.Sequential``'s children are
its blocks, run in order (split points by index or name, as before); any other
module's split points are its named submodules (engine.models.split_units) and the
staged strategies cut it by tracing (engine.models.tracing). The file is
executed only when the user names it (``--model-file`` or the app's "Open model
file...").
"""
from __future__ import annotations

import importlib.util
import traceback
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from engine.models.spec import DataSource, ModelSpec
from engine.models.split_units import meta_only_failure, module_device, split_units
from engine.models.user_calls import calling, timed_call


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
        # The file's own top-level tensors on the host, as its author wrote them, even while
        # validation builds the model itself on the meta device.
        with torch.device("cpu"), calling(f"importing {file.name}"):
            spec.loader.exec_module(module)
    except BaseException as exc:  # a user's file can raise anything, SystemExit included
        raise ModelFileError(f"{path}{_where(file, exc)}: failed to load: {_what(exc)}") from None
    return module


def _what(exc: BaseException) -> str:
    """The exception as Python's last traceback line says it (a SyntaxError's message without its position)."""
    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        return f"{type(exc).__name__}: {exc.msg}"
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


def _where(file: Path, exc: BaseException) -> str:
    """", line N: `text`" for the line of the user's file the error is at: a syntax error's own, else the
    file's last line in the traceback (where its top level called what raised); "" if the file has none."""
    if isinstance(exc, SyntaxError) and exc.lineno is not None and exc.filename \
            and Path(exc.filename).resolve() == file.resolve():
        line, text = exc.lineno, exc.text
    else:
        mine = [frame for frame in traceback.extract_tb(exc.__traceback__)
                if Path(frame.filename).resolve() == file.resolve()]
        if not mine:
            return ""
        line, text = mine[-1].lineno, mine[-1].line
    text = (text or "").strip()
    return f", line {line}" + (f": `{text}`" if text else "")


def build(path: str, seed: int, split_level: int = 1) -> ModelSpec:
    module = load_module(path)
    missing = [name for name in ("build_model", "make_batch") if not callable(getattr(module, name, None))]
    if missing:
        raise ModelFileError(f"{path}: defines no {' and no '.join(missing)}(); a model file needs "
                             "build_model() returning an nn.Module and make_batch(batch_size, generator)")
    try:
        with calling("build_model()"):
            model = module.build_model()
    except Exception as exc:
        if meta_only_failure(exc):  # validation's meta-device build; it retries on the host
            raise
        raise ModelFileError(f"{path}: build_model() raised {type(exc).__name__}: {exc}") from None
    if not isinstance(model, nn.Module):
        raise ModelFileError(f"{path}: build_model() must return an nn.Module, got {type(model).__name__}")
    if isinstance(model, nn.Sequential) and len(model) == 0:
        raise ModelFileError(f"{path}: build_model() returned an empty nn.Sequential")
    loss_fn = getattr(module, "loss_fn", None) or _default_loss
    data = DataSource(timed_call("make_batch()", module.make_batch), seed)
    if isinstance(model, nn.Sequential):
        return ModelSpec(Path(path).stem, list(model.named_children()), loss_fn, data)
    if next(model.children(), None) is None:  # a lone nn.Linear: a chain of one block
        return ModelSpec(Path(path).stem, [(type(model).__name__, model)], loss_fn, data)
    try:
        inputs = data.example_inputs(2, module_device(model))
        with calling("the model's forward on a batch of 2"):
            units = split_units(model, split_level, inputs)
    except Exception as exc:
        if meta_only_failure(exc):
            raise
        raise ModelFileError(f"{path}: the model's forward failed on a batch of 2 from make_batch: "
                             f"{type(exc).__name__}: {exc}") from None
    if not units:
        raise ModelFileError(f"{path}: the module's forward calls none of its submodules, so it has no split "
                             "points; return an nn.Sequential of blocks")
    return ModelSpec(Path(path).stem, units, loss_fn, data, module=model)
