"""Export a plot as PNG, SVG or CSV, robustly.

pyqtgraph 0.14.0's exporters have two traps:

- ``ImageExporter`` raises "Cannot export image with size=0" when the plot has
  not been laid out yet (a plot in a tab never shown, a window not yet shown):
  its target rectangle is empty. We give the plot item a provisional geometry
  for the export and put the old one back.
- ``SVGExporter`` re-parses the SVG that Qt generates for every item and
  rewrites the coordinates of each ``<path d="...">`` by splitting on spaces and
  commas (``x, y = c.split(',')`` then ``float(x)``). Anything Qt writes that is
  not a plain "x,y" pair breaks that: a non-finite coordinate (Qt writes
  ``nan``/``inf``, whose first letter is then taken for a path command), an item
  whose transform is singular, or an empty bounding rect (division by a zero
  width). The result is a ValueError (or ZeroDivisionError) from deep inside the
  exporter on what looks like a plain line plot. We keep non-finite values out
  of the curves (the ring buffers hold only real samples), give empty plots a
  geometry, and if the exporter still fails, fall back to rendering the plot's
  scene straight into ``QSvgGenerator``, which always works (its only loss is
  that items outside the view box are not clipped, so we clip the painter).
"""
from __future__ import annotations

import contextlib
import csv
import re
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import pyqtgraph as pg
from pyqtgraph.exporters import ImageExporter, SVGExporter
from PySide6 import QtCore, QtGui, QtSvg, QtWidgets

PROVISIONAL_SIZE = QtCore.QSizeF(900, 520)
FORMATS = ("png", "svg", "csv")


@contextlib.contextmanager
def _laid_out(item: pg.PlotItem) -> Iterator[None]:
    """Give an item that has never been laid out a size for the export."""
    old = item.geometry()
    if old.width() >= 2 and old.height() >= 2:
        yield
        return
    item.setGeometry(QtCore.QRectF(QtCore.QPointF(0, 0), PROVISIONAL_SIZE))
    try:
        yield
    finally:
        item.setGeometry(old)


def export_plot(plot_item: pg.PlotItem, fmt: str, path: str | Path, write_csv) -> Path:
    """A plot widget's export: PNG or SVG of ``plot_item`` as drawn, or CSV by ``write_csv(path) -> Path``."""
    if fmt == "png":
        return export_png(plot_item, path)
    if fmt == "svg":
        return export_svg(plot_item, path)
    if fmt == "csv":
        return write_csv(Path(path))
    raise ValueError(f"unknown export format {fmt!r}; allowed: {', '.join(FORMATS)}")


def export_png(plot_item: pg.PlotItem, path: str | Path, width: int | None = None) -> Path:
    path = Path(path)
    with _laid_out(plot_item):
        exporter = ImageExporter(plot_item)
        if width:
            exporter.parameters()["width"] = int(width)
        exporter.export(str(path))
    return path


def export_svg(plot_item: pg.PlotItem, path: str | Path) -> Path:
    path = Path(path)
    with _laid_out(plot_item):
        try:
            data = _sized_background(SVGExporter(plot_item).export(toBytes=True))
        except (ValueError, ZeroDivisionError, IndexError):
            data = _render_svg(plot_item)
    path.write_bytes(data)
    return path


def _sized_background(svg: bytes) -> bytes:
    """Give pyqtgraph's background rectangle the picture's size instead of "100%".

    SVG Tiny, which pyqtgraph declares and Qt's renderer (and every QtSvg-based viewer)
    reads, has no percentages: the dark background was drawn as a 100-pixel square.
    """
    size = re.search(rb'viewBox ?= ?"0 0 ([0-9.]+) ([0-9.]+)"', svg)
    if size is None:
        return svg
    return svg.replace(b'<rect width="100%" height="100%"',
                       b'<rect width="' + size.group(1) + b'" height="' + size.group(2) + b'"', 1)


def _render_svg(plot_item: pg.PlotItem) -> bytes:
    """Render the plot item's part of the scene with Qt's own SVG generator."""
    scene = plot_item.scene()
    source = plot_item.sceneBoundingRect()
    buffer = QtCore.QBuffer()
    buffer.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
    generator = QtSvg.QSvgGenerator()
    generator.setOutputDevice(buffer)
    generator.setSize(source.size().toSize())
    generator.setViewBox(QtCore.QRectF(QtCore.QPointF(0, 0), source.size()))
    generator.setTitle("Splitscope plot")
    painter = QtGui.QPainter(generator)
    try:
        target = QtCore.QRectF(QtCore.QPointF(0, 0), source.size())
        painter.setClipRect(target)
        if scene is not None:
            scene.render(painter, target, source)
    finally:
        painter.end()
    return bytes(buffer.data().data())


def write_csv(series: Iterable[tuple[str, np.ndarray, np.ndarray]], path: str | Path,
              x_name: str = "x", y_name: str = "y") -> Path:
    """All the data behind a plot, not the downsampled drawing: one row per point."""
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["series", x_name, y_name])
        for name, x, y in series:
            for xv, yv in zip(np.asarray(x).tolist(), np.asarray(y).tolist()):
                writer.writerow([name, repr(float(xv)), repr(float(yv))])
    return path


def confirm_overwrite(parent: QtWidgets.QWidget | None, existing: list[Path]) -> bool:
    """Ask before replacing files (issue 6: an export never overwrites without asking); True to go on."""
    if not existing:
        return True
    names = "\n".join(str(p) for p in existing[:5])
    more = f"\n… and {len(existing) - 5} more" if len(existing) > 5 else ""
    title = "Replace the file?" if len(existing) == 1 else f"Replace {len(existing)} files?"
    answer = QtWidgets.QMessageBox.question(
        parent, title, f"These files already exist and would be overwritten:\n{names}{more}\n\nReplace them?",
        QtWidgets.QMessageBox.StandardButton.Yes | QtWidgets.QMessageBox.StandardButton.No,
        QtWidgets.QMessageBox.StandardButton.No)
    return answer == QtWidgets.QMessageBox.StandardButton.Yes


def ask_path(parent: QtWidgets.QWidget, fmt: str, suggested: str, directory: str) -> str | None:
    """A save dialog for one plot; None when cancelled or when the user keeps an existing file."""
    filters = {"png": "PNG image (*.png)", "svg": "SVG drawing (*.svg)", "csv": "CSV table (*.csv)"}
    start = str(Path(directory or Path.home()) / f"{suggested}.{fmt}")
    # We ask about overwriting ourselves, after the extension is added: the dialog's own
    # question would check the name as typed, before ".png" makes it another file.
    path, _ = QtWidgets.QFileDialog.getSaveFileName(
        parent, f"Export {fmt.upper()}", start, filters[fmt],
        options=QtWidgets.QFileDialog.Option.DontConfirmOverwrite)
    if not path:
        return None
    if not path.lower().endswith("." + fmt):
        path += "." + fmt
    if not confirm_overwrite(parent, [Path(path)] if Path(path).exists() else []):
        return None
    return path
