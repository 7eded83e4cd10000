"""A run of many devices summed up node by node, for the terminal and the HTML report.

From HEATMAP_FROM devices on (engine/figures/heatmap.py), a summary's per-device rows (busy, tensor memory,
communication, time by kind, utilization: 256 entries on a line) are read node by node instead: a line per
node with its devices' mean and range, and the devices that stand out (engine/record/outliers.py) named.
Every device's own figures stay in the exports' CSV tables (``export RUN --format csv``).
"""
from __future__ import annotations

import statistics
from collections.abc import Sequence

from engine.devices import node_groups
from engine.figures.heatmap import uses_heatmap
from engine.record.outliers import alike, outliers
from engine.results import RunSummary

PER_DEVICE = "every device's figures: `export RUN --format csv` (a column or row per device in each table)"


def rolled_up(s: RunSummary) -> bool:
    """Whether ``s`` is summed up by node (a run of many devices)."""
    return uses_heatmap(len(s.devices))


def devices_text(s: RunSummary) -> str:
    """"64 devices on 8 nodes: node0/cuda:0 .. node7/cuda:7"."""
    groups = node_groups(list(s.devices))
    where = f" on {len(groups)} nodes" if len(groups) > 1 else ""
    return f"{len(s.devices)} devices{where}: {s.devices[0]} .. {s.devices[-1]}"


def node_table(s: RunSummary) -> list[str]:
    """A header and a line per node: its devices, and their busy share, idle share, utilization and tensor
    memory as the mean and [lowest-highest] over them."""
    index = {d: i for i, d in enumerate(s.devices)}
    kinds = {k.device: k for k in s.time_by_kind or []}
    tel = s.telemetry
    columns = ("busy", "idle", "util", "tensor MiB")
    rows = []
    for node, names in node_groups(list(s.devices)):
        at = [index[n] for n in names]
        busy = [s.devices_busy[i] * 100 for i in at if i < len(s.devices_busy or [])]
        idle = [kinds[n].idle_share * 100 for n in names if n in kinds]
        util = [tel.util_mean[i] for i in at if tel and i < len(tel.util_mean) and tel.util_mean[i] is not None]
        memory = [s.tensor_memory[i].total / 2 ** 20 for i in at
                  if s.tensor_memory and i < len(s.tensor_memory) and s.tensor_memory[i] is not None]
        rows.append((node or "this one", len(names), [_spread(busy, "%"), _spread(idle, "%"), _spread(util, "%"),
                                                      _spread(memory, "")]))
    shown = [k for k in range(len(columns)) if any(cells[k] != "-" for _, _, cells in rows)]   # none: left out
    lines = [f"{'node':<8} {'devices':>7}  " + "  ".join(f"{columns[k]:<17}" for k in shown)]
    lines += [f"{node:<8} {count:>7}  " + "  ".join(f"{cells[k]:<17}" for k in shown) for node, count, cells in rows]
    return [line.rstrip() for line in lines]


def outlier_lines(s: RunSummary) -> list[str]:
    """The devices to look at first (engine/record/outliers.py), or what they share when none stands out."""
    memory = {d: float(m.total) for d, m in zip(s.devices, s.tensor_memory or [], strict=False) if m is not None}
    found = outliers(s.time_by_kind or [], memory)
    if found:
        return [o.text for o in found]
    return [alike(s.time_by_kind)] if s.time_by_kind else []


def _spread(values: Sequence[float], unit: str) -> str:
    """"92% [88-95]": the mean, and the lowest and highest in brackets; "-" with none."""
    if not values:
        return "-"
    return f"{statistics.fmean(values):.0f}{unit} [{min(values):.0f}-{max(values):.0f}]"
