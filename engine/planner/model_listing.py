"""``main.py models``: the models to choose from, and one model's split points with their measured cost.

The catalogue (built-in models, torchvision's list) and a model's split units
are what the app's model picker and split view show too; here they are text and
JSON for the command line. Listing torchvision's models or a model's split
points imports torch; the built-in list does not.
"""
from __future__ import annotations

from engine import models
from engine.config import ExperimentConfig
from engine.planner.planning import PROFILE_MAX_BATCH
from engine.rules import effective_batch_size


def builtin_rows() -> list[dict]:
    return [{"name": m.name, "description": m.description, "batch_size": m.batch_size} for m in models.MODELS.values()]


def torchvision_rows() -> list[dict]:
    """Each torchvision classification model: its name to give ``--model``, parameters, expected image size."""
    from torchvision.models import get_model_weights

    from engine.models.torchvision_zoo import classification_models, expected_size
    rows = []
    for name in classification_models():
        size, smallest = expected_size(name)
        rows.append({"name": models.TORCHVISION + name, "image_size": size, "min_size": smallest,
                     "params": int(get_model_weights(name).DEFAULT.meta.get("num_params", 0))})
    return rows


def split_point_rows(config: ExperimentConfig, stages: int = 2) -> tuple[list[dict], tuple[int, ...]]:
    """The model's split points (blocks, or submodules in call order) with parameters, measured forward+backward
    time and bytes per sample leaving each, and the balanced split into ``stages``."""
    import torch

    from engine.models.build import build
    from engine.planner import planning
    torch.set_num_threads(1)  # as on one CPU virtual device
    spec = build(config)
    infos = planning.block_costs(spec, effective_batch_size(config))
    split = planning.balanced_split([b.cost_s for b in infos], min(stages, len(infos)))
    rows = [{"index": i, "name": b.name, "kind": b.kind, "params": b.params, "cost_ms": b.cost_s * 1e3,
             "flops_per_sample": b.flops, "out_bytes": b.out_bytes} for i, b in enumerate(infos)]
    return rows, split


def builtin_text(rows: list[dict]) -> str:
    width = max(len(r["name"]) for r in rows)
    lines = [f"{r['name']:<{width}}  {r['description']}" for r in rows]
    lines += ["", f"{models.TORCHVISION}NAME  any torchvision classification model (`models --torchvision` lists them)",
              "--model-file F.py  your own: build_model() returning any nn.Module, make_batch(batch_size, generator)"]
    return "\n".join(lines)


def torchvision_text(rows: list[dict]) -> str:
    width = max(len(r["name"]) for r in rows)
    lines = [f"{'model':<{width}}  {'params':>8}  image"]
    lines += [f"{r['name']:<{width}}  {r['params'] / 1e6:>7.1f}M  {r['image_size']} (at least {r['min_size']})"
              for r in rows]
    return "\n".join(lines)


def split_points_text(rows: list[dict], split: tuple[int, ...], batch: int, split_level: int = 1) -> str:
    width = max(len("split point"), max(len(r["name"]) for r in rows))
    kinds = max(len("module"), max(len(r["kind"]) for r in rows))
    lines = [f"{'#':>3}  {'split point':<{width}}  {'module':<{kinds}}  {'params':>10}  {'ms':>8}  "
             f"{'MFLOP/sample':>12}  {'out/sample':>10}"]
    for r in rows:
        mark = "  <- balanced split" if r["index"] in split else ""
        lines.append(f"{r['index']:>3}  {r['name']:<{width}}  {r['kind']:<{kinds}}  {r['params']:>10,}  "
                     f"{r['cost_ms']:>8.2f}  {r['flops_per_sample'] / 1e6:>12.3g}  "
                     f"{r['out_bytes']:>9,}B{mark}")
    level = f" --split-level {split_level}" if split_level != 1 else ""
    lines.append(f"ms: forward+backward of a batch of {min(batch, PROFILE_MAX_BATCH)} on one CPU core; MFLOP: "
                 "its FLOPs per sample by torch's formulas; "
                 f"--split {','.join(rows[k]['name'] for k in split)}{level} gives the balanced {len(split) + 1} "
                 "stages")
    return "\n".join(lines)
