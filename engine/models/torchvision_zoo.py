"""``torchvision:NAME``: any classification model torchvision.models lists, as torchvision builds it.

The model is torchvision's own (``get_model``, no weights loaded), not a copy:
10 classes, fed synthetic images of the size its weights were trained at (224
for most; ``--image-size`` makes them smaller) drawn around a fixed pattern per
class, so the loss has something to learn. Its split points are its named
submodules (engine.models.split_units).
"""
from __future__ import annotations

import difflib

from torch.nn import functional as F

from engine.models import TORCHVISION
from engine.models.spec import DataSource, ModelSpec
from engine.models.split_units import meta_only_failure, module_device, split_units
from engine.models.zoo import image_batches

CLASSES = 10


class TorchvisionModelError(ValueError):
    """An unknown name, or an image size the model cannot take; ``option`` is the one to change."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option


def classification_models() -> list[str]:
    """The names torchvision lists for its classification models (not detection, segmentation or video)."""
    import torchvision
    return torchvision.models.list_models(module=torchvision.models)


def expected_size(name: str) -> tuple[int, int]:
    """(the image size its weights were trained at, the smallest it accepts), from torchvision's metadata."""
    from torchvision.models import get_model_weights
    weights = get_model_weights(name).DEFAULT
    crop = getattr(weights.transforms(), "crop_size", [224])[0]
    return int(crop), int(weights.meta.get("min_size", (1, 1))[0])


def _constructor_options(name: str, size: int) -> dict:
    """What a model needs to be told at construction: its input size (vision transformers fix it) and no
    auxiliary heads (they return a tuple in training, which no loss takes)."""
    options: dict = {"num_classes": CLASSES}
    if name.startswith("vit_"):
        options["image_size"] = size
    if name.startswith("maxvit"):
        options["input_size"] = (size, size)
    if name in ("googlenet", "inception_v3"):
        options.update(aux_logits=False, init_weights=True)
    return options


def build(name: str, seed: int, image_size: int | None, split_level: int) -> ModelSpec:
    from torchvision.models import get_model
    known = classification_models()
    if name not in known:
        close = difflib.get_close_matches(name, known, n=4)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; torchvision has {len(known)}: {', '.join(known)}"
        raise TorchvisionModelError("model", f"torchvision has no classification model {name!r}{hint}")
    size = image_size or expected_size(name)[0]
    try:
        net = get_model(name, **_constructor_options(name, size))
        data = DataSource(image_batches(CLASSES, size), seed)
        units = split_units(net, split_level, data.example_inputs(2, module_device(net)))
    except (RuntimeError, ValueError, AssertionError) as exc:
        if meta_only_failure(exc):  # validation's meta-device build; it retries on the host
            raise
        # Sizes are the usual cause (a window or patch that does not fit); torchvision's message says which.
        smallest = expected_size(name)[1]
        raise TorchvisionModelError("image_size", f"{name} cannot take {size}x{size} images (its weights expect "
                                                  f"{expected_size(name)[0]}, at least {smallest}): "
                                                  f"{' '.join(str(exc).split())[:300]}") from None
    return ModelSpec(TORCHVISION + name, units, F.cross_entropy, data, module=net)
