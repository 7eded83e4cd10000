"""Export one plot as PNG, SVG, PDF or CSV: the figure it shows, drawn as File › Export draws it.

A plot hands over its figure definition (engine.figures: the one its history
drew, or its live series made into one), and the exports' own backend draws it
(matplotlib, engine/export/drawing.py), off screen: a plot never laid out or
never shown exports like any other, and a plot's PNG looks like the run's. CSV
writes the figure's table, every point behind the curves, units in the header.

These are a plot's only exports: pyqtgraph's own "Export..." (its scene's context
menu) is taken out, whose files looked like neither (a bar chart's points as 0.0,
1.0, ...). The save dialog opens in the folder the last export went to, from any
plot, in this launch or the last (app/settings.py last_folder).
"""
from __future__ import annotations

import weakref
from pathlib import Path

from PySide6 import QtGui, QtWidgets

from app.settings import last_folder, remember_folder
from engine.export import csv_text, drawing
from engine.figures import Figure

FORMATS = ("png", "svg", "pdf", "csv")
# Every plot with export actions: a folder chosen on one is where the next dialog opens, on any of them.
_EXPORTERS: weakref.WeakSet = weakref.WeakSet()


def export_figure(figure: Figure, fmt: str, path: str | Path) -> Path:
    """Write ``figure`` as ``fmt`` to ``path``; ExportError names what is missing (matplotlib)."""
    path = Path(path)
    if fmt == "csv":
        path.write_text(csv_text(figure), encoding="utf-8", newline="")
    elif fmt in drawing.FORMATS:
        drawing.write(figure, fmt, path)
    else:
        raise ValueError(f"unknown export format {fmt!r}; allowed: {', '.join(FORMATS)}")
    return path


def add_export_actions(widget) -> dict[str, QtGui.QAction]:
    """"Export PNG…" and the others in a plot widget's context menu: ask where, then ``widget.export``."""
    widget.scene().contextMenu = []   # pyqtgraph's "Export...": one export menu, ours
    _EXPORTERS.add(widget)
    menu = widget.getPlotItem().getViewBox().menu
    menu.addSeparator()
    actions = {}
    for fmt in FORMATS:
        action = menu.addAction(f"Export {fmt.upper()}…")
        action.triggered.connect(lambda _checked=False, f=fmt: _export_interactive(widget, f))
        actions[fmt] = action
    return actions


def _export_interactive(widget, fmt: str) -> None:
    path = ask_path(widget, fmt, widget.export_name, last_folder() or widget.export_dir)
    if path:
        remember_export_folder(str(Path(path).parent))
        widget.export(fmt, path)


def remember_export_folder(folder: str) -> None:
    """The next plot export opens in ``folder``: kept in the settings now (for the next launch too), and on
    every plot (where the settings cannot be written)."""
    remember_folder(folder)
    for widget in list(_EXPORTERS):
        widget.export_dir = folder


def export_widget(widget, fmt: str, path: str | Path) -> Path | None:
    """A plot widget's figure (``widget.to_figure()``) as ``fmt``; emits its sigExported, or sigExportFailed."""
    try:
        out = export_figure(widget.to_figure(), fmt, path)
    except Exception as exc:  # a failed export is a message, never a crash
        widget.sigExportFailed.emit(f"export to {path} failed: {type(exc).__name__}: {exc}")
        return None
    widget.sigExported.emit(str(out))
    return out


def confirm_overwrite(parent: QtWidgets.QWidget | None, existing: list[Path]) -> bool:
    """Ask before replacing files (an export never overwrites without asking); True to go on."""
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
    filters = {"png": "PNG image (*.png)", "svg": "SVG drawing (*.svg)", "pdf": "PDF document (*.pdf)",
               "csv": "CSV table (*.csv)"}
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
