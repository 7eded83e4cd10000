"""PlotPanel: utilization, memory, throughput, loss, MFU; under them the run's findings, then the timeline with
its bubble figures (two runs compared: side by side, app/views/plots/timeline_row.py).

Two modes: *live* (the ring buffers of this session: telemetry of the machine
or of the running devices, and the current run's steps) and *history* (runs
loaded from the store, one or several overlaid). A single QTimer in the main
window calls ``redraw()``; only series whose buffers changed are handed to
pyqtgraph. History draws the run's figure definitions (engine.figures), the
ones its exports draw; live plots carry the same titles, units and colours.
"""
from __future__ import annotations

import time

from PySide6 import QtCore, QtWidgets

from app.state import run_status
from app.state.finding_rows import labelled, live_rows, memory_limits, summary_rows, theory_notes
from app.state.live_data import RunProgress, StepHistory, TelemetryHistory
from app.state.stored_run import RunData
from app.views.elided_label import ElidedLabel
from app.views.findings_panel import FindingsPanel
from app.views.flash import flash
from app.views.plots.live_grid import LIVE_TIME, LivePlotGrid
from app.views.plots.live_plots import LIVE_PLOTS
from app.views.plots.run_marks import RunMarks
from app.views.plots.series_plot import SeriesPlot
from app.views.plots.telemetry_redraw import TelemetryRedraw
from app.views.plots.timeline_row import TimelineRow, drawn_kinds
from engine.figures import comparison_figures, palette, run_figures
from engine.figures.heatmap import uses_heatmap
from engine.figures.run import STEP_COLORS
from engine.figures.run_names import run_names
from engine.record.outliers import alike, outliers, step_kinds
from engine.results import RunSummary, Step

LIVE_WINDOW_S = 60.0
# The plots redrawn together, each in its own redraw tick (see PlotPanel.redraw).
FRAME_GROUPS = ("telemetry", "steps", "timeline")
HEAT_FRAME_S = 1.0  # seconds between live heatmap and many devices' timeline redraws (see _is_due)


STEP_AXIS_PAD = 0.02


def step_axis_end(last_step: float | None, steps_total: int) -> float:
    """Where the live step axis ends: the first of 10, 20, 50, 100, 200, ... past the last
    step, and never past the run's last step."""
    last = last_step or 0.0
    end, scale = 10, 10
    while end <= last:
        for m in (2, 5, 10):
            end = m * scale
            if end > last:
                break
        scale *= 10
    return float(min(end, steps_total - 1)) if steps_total > 1 else float(end)


class PlotPanel(QtWidgets.QWidget):
    sigBackToLive = QtCore.Signal()

    def __init__(self, telemetry: TelemetryHistory, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.telemetry = telemetry
        self.steps = StepHistory()
        self.progress = RunProgress()
        self.mode = "live"
        self.window_s = LIVE_WINDOW_S
        # Scrolling the telemetry plots repaints them whole; twice a second reads as live
        # (every sample is drawn; nvitop refreshes less often) at a fraction of the cost.
        self.telemetry_frame_s = 0.5
        self.step_frame_s = 0.5
        self._drawn: dict[tuple[str, str], int] = {}
        self._timeline_drawn = -1
        self._kinds: tuple[int, list] = (-1, [])   # the live timeline's time by kind, at its version
        self._group_drawn_at = dict.fromkeys(FRAME_GROUPS, -1e9)
        self._step_axis_end: dict[str, float] = {}  # per step plot, while live
        self.history_runs: list[RunData] = []

        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        header = QtWidgets.QHBoxLayout()
        self.mode_label = ElidedLabel()
        self.mode_label.setObjectName("modeLabel")
        header.addWidget(self.mode_label, 1)
        self.live_button = QtWidgets.QPushButton("Back to live")
        self.live_button.setToolTip("Show this machine's live telemetry and the current run again")
        self.live_button.clicked.connect(self.sigBackToLive)
        header.addWidget(self.live_button)
        layout.addLayout(header)

        # The live plots, from their definitions (app/views/plots/live_plots.py), two to a row.
        grid = self.plot_grid = LivePlotGrid(self.now, self.window_s, self._device_clicked)
        self.series_plots, self.heatmaps, self.time_axes = grid.series_plots, grid.heatmaps, grid.time_axes
        self.outliers = grid.outliers
        self.run_marks = RunMarks(self._plots(per_device=True))
        telemetry_plots = [spec for spec in LIVE_PLOTS if spec.per_device]
        self.telemetry_redraw = TelemetryRedraw(telemetry, telemetry_plots,
                                                {spec.name: self.series_plots[spec.name] for spec in telemetry_plots},
                                                self.heatmaps, on_heat=grid.give_heatmaps_room,
                                                make_heatmaps=lambda: grid.make_heatmaps(live=self.mode == "live"))
        layout.addLayout(grid, 5)

        # What the figures say, first thing under the plots (app/views/findings_panel.py).
        self.findings = FindingsPanel()
        self.findings.sigDevicesHovered.connect(self._finding_hovered)
        self.findings.sigWhy.connect(self.point_at)
        layout.addWidget(self.findings)
        self.timeline_row = TimelineRow()   # the timeline and bubble box; two runs compared side by side
        self.timeline, self.bubble = self.timeline_row.timeline, self.timeline_row.bubble
        self.timeline.sigDeviceClicked.connect(self._device_clicked)
        layout.addWidget(self.timeline_row, 2)
        self.picked: str | None = None   # the device a click picked (a hovered finding's devices pass)
        self.set_mode("live")

    @property
    def plots(self) -> dict[str, QtWidgets.QWidget]:
        """Every plot by its figure's name, the timeline last (File › Export's submenus)."""
        return {**self.series_plots, "timeline": self.timeline}

    def _plots(self, per_device: bool) -> list[SeriesPlot]:
        return [self.series_plots[spec.name] for spec in LIVE_PLOTS if spec.per_device == per_device]

    # -- modes -------------------------------------------------------------------
    def set_mode(self, mode: str, label: str | None = None) -> None:
        self.mode = mode
        self.live_button.setVisible(mode == "history")
        if mode == "live":
            self.mode_label.setText(label or "Live: this machine's telemetry"
                                    + (" and the current run" if self.progress.run_id else ""))
            self._drawn.clear()
            self.telemetry_redraw.reset()
            for heatmap in self.heatmaps.values():
                heatmap.go_live(self.now)
            self._timeline_drawn = -1
            for plot in self.series_plots.values():
                plot.clear_series()
            for plot in self._plots(per_device=True):
                plot.set_axes(LIVE_TIME, plot.spec.y, origin=self.now)
                plot.getPlotItem().enableAutoRange(x=False)
            self._fit_step_axes()
            self.run_marks.restore()
            self.timeline_row.show_one()
            self.timeline.set_devices(self.progress.devices)
            self.timeline.clear_steps()
            self.redraw(force=True)
        else:
            self.mode_label.setText(label or "History")

    # -- live --------------------------------------------------------------------
    def set_live_title(self, text: str) -> None:
        """The live view's title; a stored run in view keeps its own."""
        if self.mode == "live":
            self.mode_label.setText(text)

    def add_step(self, event: Step) -> None:
        """A merged step as the worker reported it: its throughput, loss, devices' MFU and intervals."""
        self.steps.add(event, self.progress.step_mfu(event))

    def set_run_devices(self, devices: list[str]) -> None:
        """The timeline's lanes: the run's devices, in stage order."""
        self.timeline.set_devices(devices)

    def begin_run(self, progress: RunProgress, show: bool = True) -> None:
        """A run starts: fresh step history and timeline; telemetry keeps flowing.

        ``show=False`` leaves stored runs in view (the next run of an experiment must
        not pull the user away from the history they are reading); Back to live shows it.
        """
        self.progress = progress
        self.steps = StepHistory()
        self._kinds = (-1, [])
        for plot in self._plots(per_device=False):
            plot.clear_series()
            # The last run's range goes with its curve: a run that fails before its first step shows none.
            plot.getPlotItem().setYRange(0, 1, padding=0)
            plot.getPlotItem().enableAutoRange(y=True)
        steps = {spec.name for spec in LIVE_PLOTS if not spec.per_device}
        self._drawn = {k: v for k, v in self._drawn.items() if k[0] not in steps}
        self._timeline_drawn = -1
        self.timeline.set_devices(progress.devices)
        self.timeline.clear_steps()
        if self.mode == "live":
            self._fit_step_axes()
        elif show:
            self.set_mode("live")

    def _fit_step_axes(self) -> None:
        """Live: the step axis grows in steps of 10, 20, 50, 100, ... (see step_axis_end).

        An axis that followed every step was redrawn, tick text and grid, on every step
        (half of these plots' paint time); one that moves a few times a run is painted
        from its cache, and the curve still fills at least 40 % of the width.
        """
        self._step_axis_end.clear()
        for spec in (spec for spec in LIVE_PLOTS if not spec.per_device):
            plot = self.series_plots[spec.name]
            # One curve is named by the title (a legend would hide the first steps); a curve a device, by it.
            plot.legend.setVisible(isinstance(spec.data(self.steps), dict))
            plot.getPlotItem().enableAutoRange(x=False, y=True)
            self._set_step_axis(plot, step_axis_end(0, self.progress.steps_total))

    def _set_step_axis(self, plot: SeriesPlot, end: float) -> None:
        if self._step_axis_end.get(plot.export_name) != end:
            self._step_axis_end[plot.export_name] = end
            plot.getPlotItem().setXRange(-STEP_AXIS_PAD * end, (1 + STEP_AXIS_PAD) * end, padding=0)

    def mark_run(self, t: float, text: str) -> None:
        """A vertical line on the telemetry plots at telemetry time ``t`` (run start or end)."""
        self.run_marks.add(t, text)   # shown when the live view is (a stored run's time axis is another)

    def now(self) -> float:
        return time.perf_counter() - self.telemetry.origin

    def redraw(self, force: bool = False) -> int:
        """Hand changed buffers to the plots and scroll the time window; returns curves updated.

        One call draws at most one group of plots (``FRAME_GROUPS``), the one that has
        waited longest; ``force`` draws them all. A view's repaint takes milliseconds, twice
        that while a run's ranks hold every core, and a tick that repainted all five views
        blocked the UI thread for 40-70 ms. With the 10 Hz tick of a run, a group that has
        something new waits at most two ticks.
        """
        if self.mode != "live":
            return 0
        now = self.now()
        due = [group for group in FRAME_GROUPS if force or self._is_due(group, now)]
        if not force:
            due = [min(due, key=self._group_drawn_at.__getitem__)] if due else []
        updated = 0
        for group in due:
            self._group_drawn_at[group] = now
            if group == "telemetry":
                updated += self._redraw_telemetry(now, force)
            elif group == "steps":
                updated += self._redraw_steps(force)
            else:
                self._redraw_timeline(force)
        return updated

    def _is_due(self, group: str, now: float) -> bool:
        # Many devices' heatmaps and folded timeline: once a second (a column is at least 0.2 s wide; the
        # timeline's lanes carry thousands of bars; DCGM's dashboards refresh slower still).
        frame = self.telemetry_frame_s if group == "telemetry" else self.step_frame_s
        if self.telemetry_redraw.heat and group != "steps":
            frame = max(frame, HEAT_FRAME_S)
        if group == "telemetry":
            return now - self._group_drawn_at["telemetry"] >= frame
        # Steps and the timeline: when something is new, at most every step_frame_s (a fast run has new
        # steps every tick; repainting them ten times a second took a tenth of a core from the ranks'
        # cores, which their utilization then showed).
        if now - self._group_drawn_at[group] < frame:
            return False
        if group == "steps":
            return any(self._drawn.get((spec.name, name)) != buf.version
                       for spec in LIVE_PLOTS if not spec.per_device
                       for name, buf in self._step_curves(spec).items() if len(buf))
        return self._timeline_drawn != self.steps.timeline_version

    def _redraw_telemetry(self, now: float, force: bool) -> int:
        for axis in self.time_axes:
            axis.now = now
        return self.telemetry_redraw.redraw(now - self.window_s, now, force, self.progress.devices)

    def _step_curves(self, spec) -> dict:
        """A step plot's curves: {series name: buffer}, its one curve under its own name, or one per device."""
        data = spec.data(self.steps)
        return data if isinstance(data, dict) else {spec.name: data}

    def _redraw_steps(self, force: bool) -> int:
        updated = 0
        for spec in (spec for spec in LIVE_PLOTS if not spec.per_device):
            plot, curves = self.series_plots[spec.name], self._step_curves(spec)
            for position, (name, buf) in enumerate(curves.items()):
                key = (spec.name, name)
                if not len(buf) or not (force or self._drawn.get(key) != buf.version):
                    continue
                single = name == spec.name
                color = STEP_COLORS[plot.spec.name] if single else palette.device_color(name, position)
                with plot.frame():
                    self._set_step_axis(plot, step_axis_end(buf.last(0), self.progress.steps_total))
                    plot.set_series(name, buf.column(0), buf.column(1) * spec.scale, color,
                                    plot.spec.y.label if single else name)
                self._drawn[key] = buf.version
                updated += 1
        return updated

    def _redraw_timeline(self, force: bool) -> None:
        """The timeline's steps when new ones came (what changed only: with 64 devices its bars are
        thousands), and the bubble box."""
        changed = self._timeline_drawn != self.steps.timeline_version
        if changed:
            self._timeline_drawn = self.steps.timeline_version
            if self.steps.timeline:
                self.timeline.set_steps(list(self.steps.timeline))
        if force or changed:
            self._update_bubble()

    def _update_bubble(self) -> None:
        p = self.progress
        self.timeline.set_busy(p.busy)   # the last step's, also once the run ended
        if self._kinds[0] != self.steps.timeline_version:
            self._kinds = (self.steps.timeline_version, step_kinds(self.steps.timeline))
        run_devices = set(p.devices)
        memory = {d: buf.last(1) for d, buf in self.telemetry.mem.items() if d in run_devices and len(buf)}
        self._show_outliers(p.devices, self._kinds[1], memory)
        self.bubble.show_legend(drawn_kinds(self.timeline))
        when = (run_status.covers_note(p.summary) if p.summary else
                "as configured, until its ranks start" if p.status == "starting" else
                "live, the last steps" if p.run_id or p.launched else "for the experiment as configured")
        notes = (p.summary.notes if p.summary else None) or p.notes
        self.bubble.show_figures(p.measured_bubble(), p.theory_bubble(), p.theory_formula(), note=when,
                                 why_no_theory=" ".join(theory_notes(notes)))
        self.findings.show_rows(
            summary_rows(p.summary, self.telemetry.mem_total, [] if p.summary.notes else p.notes) if p.summary
            else live_rows(p.notes, p.nodes, p.tensor_memory.items()))

    def _show_outliers(self, devices: list[str], kinds: list, memory: dict[str, float]) -> None:
        """The ranked list beside the timeline, for runs of many devices (engine/record/outliers.py)."""
        many = uses_heatmap(len(devices))
        self.outliers.setVisible(many)
        if many:
            self.outliers.show_outliers(outliers(kinds, memory), alike(kinds) if kinds else "")

    def _device_clicked(self, device: str) -> None:
        """A device picked in a heatmap, the timeline or the outlier list: highlighted in all of them (a heatmap's
        utilization row may be a core: the run's device on it is meant)."""
        self.picked = self.telemetry_redraw.run_device(device) if device else None
        self.highlight(self.picked)

    def _finding_hovered(self, devices: list[str]) -> None:
        """A finding under the cursor: its devices marked on the timelines, and one device alone highlighted in
        the plots as a click would; the cursor gone, the picked device again."""
        self.timeline_row.mark_devices(devices)
        self.telemetry_redraw.highlight(devices[0] if len(devices) == 1 else self.picked)

    def point_at(self, figure: str) -> None:
        """A finding's "why": its figure flashes (the Memory tab's are the window's middle's to show)."""
        shown = {**self.series_plots, "timeline": self.timeline, "bubble": self.bubble}
        heatmap = self.heatmaps.get(figure)
        widget = heatmap if heatmap is not None and heatmap.isVisible() else shown.get(figure)
        if widget is not None:
            flash(widget)

    def highlight(self, device: str | None) -> None:
        self.telemetry_redraw.highlight(device)
        self.timeline.highlight(device)
        self.outliers.pick(device)

    def refresh_bubble(self) -> None:
        if self.mode == "live":
            self._update_bubble()

    # -- history -------------------------------------------------------------------
    def show_runs(self, runs: list[RunData]) -> None:
        """Show stored runs: one run's own figures, or several overlaid for comparison (engine.figures)."""
        self.history_runs = list(runs)
        single = len(runs) == 1
        self.set_mode("history", f"Run {runs[0].label} ({runs[0].status})" if single
                      else f"Comparing {len(runs)} runs")
        for axis in self.time_axes:
            axis.now = None
        self.run_marks.hide()
        views = [run.view() for run in runs]
        figures = {f.name: f for f in (run_figures(views[0]) if single else comparison_figures(views))}
        heat = any(figures[spec.name].heat is not None for spec in LIVE_PLOTS if spec.per_device)
        self.telemetry_redraw.set_heat(heat)
        for spec in LIVE_PLOTS:
            plot = self.series_plots[spec.name]
            if figures[spec.name].heat is not None:
                self.heatmaps[spec.name].draw_figure(figures[spec.name])
                continue
            plot.draw_figure(figures[spec.name])
            # devices, or runs; a step plot's one curve is named by its title
            plot.legend.setVisible(not single or spec.per_device or isinstance(spec.data(self.steps), dict))
        if not runs:
            return
        # The timeline and bubble of the first (newest) run selected, or of the first two side by side.
        names = run_names([r.config.to_dict() for r in runs], [r.label for r in runs], [r.summary for r in runs])
        self.timeline_row.show_stored(runs, names)
        first = runs[0]
        summary = first.summary or RunSummary()
        memory: dict[str, float] = {}
        known = set(summary.devices)
        for sample in first.samples:
            if sample.mem_used is not None and sample.device in known:
                memory[sample.device] = max(memory.get(sample.device, 0.0), sample.mem_used)
        self._show_outliers(list(summary.devices), summary.time_by_kind or [], memory)
        rows = [summary_rows(r.summary or RunSummary(), memory_limits(r.samples)) for r in runs[:2]]
        self.findings.show_rows(rows[0] if single else [row for name, of_run in zip(names, rows, strict=False)
                                                         for row in labelled(name, of_run)])

