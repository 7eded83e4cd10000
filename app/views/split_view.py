"""SplitView: choose the split points on the model's blocks.

Shows every block with its parameters, its measured forward+backward time and
the activation bytes it hands on; per stage, the share of parameters and of
compute time; at each split, the bytes that cross per micro-batch. The balanced
split (from the engine's planning) is preselected and marked. What changes as
boxes are ticked (problems with the split and the buttons that mend them,
``show_problems``; the stages' bars and lines) is below the table, and the summary
above it is one line: the rows under the cursor stay where they are.
"""
from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from app.state.number_formats import human_bytes, human_count
from app.state.plan_state import coarse_blocks_hint
from app.state.problem_help import Help
from app.views import theme
from app.views.elided_label import ElidedLabel
from app.views.notice_area import FixButtons
from engine.planner.planning import BlockInfo, stage_shares
from engine.results.efficiency import si


class StageBar(QtWidgets.QWidget):
    """Two stacked bars, parameters and compute time, cut into stages; crossing bytes at each split."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.shares: list[dict] = []
        self.micro_batch_size = 1.0
        self.setMinimumHeight(78)
        self.setSizePolicy(QtWidgets.QSizePolicy.Policy.Expanding, QtWidgets.QSizePolicy.Policy.Fixed)

    def set_shares(self, shares: list[dict], micro_batch_size: float) -> None:
        self.shares = shares
        self.micro_batch_size = micro_batch_size
        self.update()

    def paintEvent(self, event):  # noqa: N802
        p = QtGui.QPainter(self)
        p.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        rect = self.rect().adjusted(52, 2, -4, -2)
        label_w = 52
        row_h = 20
        font = p.font()
        font.setPointSizeF(max(7.0, font.pointSizeF() - 1))
        p.setFont(font)
        p.setPen(QtGui.QColor(theme.MUTED))
        p.drawText(QtCore.QRectF(0, rect.top(), label_w - 6, row_h),
                   QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter, "params")
        p.drawText(QtCore.QRectF(0, rect.top() + row_h + 4, label_w - 6, row_h),
                   QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter, "time")
        if not self.shares:
            p.drawText(QtCore.QRectF(rect), QtCore.Qt.AlignmentFlag.AlignCenter, "")
            p.end()
            return
        for row, key in enumerate(("params", "time")):
            x = float(rect.left())
            y = rect.top() + row * (row_h + 4)
            for s, share in enumerate(self.shares):
                w = rect.width() * share[key]
                r = QtCore.QRectF(x, y, max(w, 1.0), row_h)
                p.fillRect(r, QtGui.QColor(theme.stage_color(s)))
                p.setPen(QtGui.QColor(theme.FOREGROUND))
                if w > 34:
                    p.drawText(r, QtCore.Qt.AlignmentFlag.AlignCenter, f"{100 * share[key]:.0f}%")
                x += w
        # Split markers on the time row, with the bytes that cross per micro-batch below.
        y0 = rect.top() + 2 * (row_h + 4)
        x = float(rect.left())
        p.setPen(QtGui.QColor(theme.FOREGROUND))
        for share in self.shares[:-1]:
            x += rect.width() * share["time"]
            text = f"▲ {human_bytes(share['crossing'] * self.micro_batch_size)}"
            p.drawText(QtCore.QRectF(x - 60, y0, 120, 16), QtCore.Qt.AlignmentFlag.AlignCenter, text)
        p.end()


class SplitView(QtWidgets.QWidget):
    sigSplitChanged = QtCore.Signal()
    sigSkipProfile = QtCore.Signal()    # the user stops the blocks' profile (Run need not wait for it)
    sigProfileAgain = QtCore.Signal()   # the user wants the profile skipped before

    # The block's index heads its row: the name has the stretching column to itself.
    # Short headers leave the block's name its room in a narrow pane; each header's tooltip says the rest.
    COLUMNS = ("split", "block", "params", "fwd+bwd", "output")
    COLUMN_TIPS = ("tick to start a new stage at this block", "the block's name", "its parameters",
                   "its forward and backward time, measured on a sample batch", "its output's size per micro-batch")

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.blocks: list[BlockInfo] = []
        self.names: list[str] = []      # the blocks' names, known from the check before their profile
        self.balanced: tuple[int, ...] | None = None
        self._split: tuple[int, ...] | None = None
        self.stages = 2
        self.uses_split = False
        self.micro_batch_size = 1.0
        self._filling = False
        self._profile_action: str | None = None
        self._waiting = ""   # what the view says while it has no blocks (a profile's progress, or why none)
        self.split_is_automatic = True   # the split was not chosen by the user (balanced, or even by count)

        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        head = QtWidgets.QHBoxLayout()
        self.summary = ElidedLabel()
        self.summary.setObjectName("muted")
        head.addWidget(self.summary, 1)
        self.balanced_button = QtWidgets.QPushButton("Balanced")
        self.balanced_button.setToolTip("Go back to the balanced split: the slowest stage as fast as it can be")
        self.balanced_button.clicked.connect(self.use_balanced)
        head.addWidget(self.balanced_button)
        self.tutorial_name: str | None = None
        self.tutorial_button = QtWidgets.QPushButton("Tutorial split")
        self.tutorial_button.setObjectName("tutorialSplitButton")
        self.tutorial_button.clicked.connect(self.use_tutorial)
        head.addWidget(self.tutorial_button)
        self.profile_button = QtWidgets.QPushButton("Skip")
        self.profile_button.setObjectName("profileButton")
        self.profile_button.clicked.connect(self._on_profile_button)
        self.profile_button.hide()
        head.addWidget(self.profile_button)
        layout.addLayout(head)
        self.table = QtWidgets.QTableWidget(0, len(self.COLUMNS))
        self.table.setObjectName("splitTable")
        self.table.setHorizontalHeaderLabels(self.COLUMNS)
        for c, tip in enumerate(self.COLUMN_TIPS):
            self.table.horizontalHeaderItem(c).setToolTip(tip)
        # Names like "layer3.0" differ at their ends: cut in the middle, the whole name in the tooltip.
        self.table.setTextElideMode(QtCore.Qt.TextElideMode.ElideMiddle)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.NoSelection)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(1, QtWidgets.QHeaderView.ResizeMode.Stretch)
        self.table.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.setMinimumHeight(140)
        self.table.itemChanged.connect(self._on_item_changed)
        layout.addWidget(self.table, 1)
        self.problem = QtWidgets.QLabel()
        self.problem.setObjectName("problem")
        self.problem.setWordWrap(True)
        self.problem.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.problem)
        self.fixes = FixButtons()
        self.fixes.sigChosen.connect(lambda changes: self.set_split(changes["split"]))
        layout.addWidget(self.fixes)
        self.bar = StageBar()
        layout.addWidget(self.bar)
        self.stage_text = QtWidgets.QLabel()
        self.stage_text.setWordWrap(True)
        self.stage_text.setTextFormat(QtCore.Qt.TextFormat.RichText)
        layout.addWidget(self.stage_text)
        self.show_problems([])
        self._refresh()

    # -- inputs ------------------------------------------------------------------
    def set_context(self, uses_split: bool, stages: int, micro_batch_size: float) -> None:
        stages_changed = stages != self.stages
        self.uses_split = uses_split
        self.stages = max(1, stages)
        self.micro_batch_size = max(1.0, micro_batch_size)
        if stages_changed and (self.blocks or self._split is not None):  # a split by names too: one as even
            self.balanced = None  # stale for this stage count until the planner answers
            self._split = self.even_split() if uses_split else None
            self.split_is_automatic = True
        self._refresh()

    def set_blocks(self, blocks: list[BlockInfo] | None, balanced: list[int] | None, keep_choice: bool = False) -> None:
        """Blocks profiled by the planner; the balanced split is preselected unless ``keep_choice``."""
        self.blocks = list(blocks or [])
        self.balanced = tuple(balanced) if balanced is not None else None
        if not keep_choice or self._split is None or not self._valid(self._split):
            self._split = self.balanced if self.balanced is not None else self.even_split()
            self.split_is_automatic = True
        self._refresh()
        self.sigSplitChanged.emit()

    def set_names(self, names: list[str]) -> None:
        """The blocks' names from the check: the tutorial's split can be chosen by them before the profile."""
        if names != self.names:
            self.names = list(names)
            self._refresh()

    def show_profile_action(self, action: str | None) -> None:
        """The button beside the split's: "skip" while the blocks are profiled, "profile" once skipped."""
        self.profile_button.setVisible(action is not None and self.uses_split)
        if action == "skip":
            self.profile_button.setText("Skip")
            self.profile_button.setToolTip("Stop timing the blocks: Run can start now, split by the blocks' "
                                           "names (evenly by count, unless you choose the tutorial's split)")
        elif action == "profile":
            self.profile_button.setText("Time blocks")
            self.profile_button.setToolTip("Time the model's blocks to find the balanced split (Run waits)")
        self._profile_action = action

    def _on_profile_button(self) -> None:
        (self.sigSkipProfile if self._profile_action == "skip" else self.sigProfileAgain).emit()

    def show_waiting(self, message: str) -> None:
        """What the view says while it waits for the blocks (a profile's progress)."""
        self._waiting = message
        if not self.blocks and self.uses_split:
            self.summary.setText(message)

    def clear_blocks(self, message: str = "") -> None:
        self.blocks = []
        self.names = []
        self.balanced = None
        self._split = None
        self.split_is_automatic = True
        self._waiting = message
        self._refresh()

    def split(self) -> tuple[int, ...] | None:
        """The chosen split points, or None when the blocks are neither timed nor a split chosen by their
        names (a run's rank 0 then times them and balances the split: engine/run/rank.py resolve_split)."""
        return self._split if (self.uses_split and (self.blocks or self.names)) else None

    def set_split(self, split: tuple[int, ...], automatic: bool = False) -> None:
        self._split = tuple(split)
        self.split_is_automatic = automatic
        self._refresh()
        self.sigSplitChanged.emit()

    def use_balanced(self) -> None:
        if self.balanced is not None:
            self.set_split(self.balanced)

    def set_tutorial_split(self, name: str | None) -> None:
        """The block where the model-parallel tutorial starts its second stage ("layer3"), if the model has one."""
        if name != self.tutorial_name:
            self.tutorial_name = name
            self._refresh()

    def tutorial_split(self) -> tuple[int, ...] | None:
        """The tutorial's two-stage split on these blocks: the first block named ``name`` or ``name.*``."""
        if not self.tutorial_name or self.stages != 2:
            return None
        names = [b.name for b in self.blocks] or self.names
        index = next((i for i, n in enumerate(names)
                      if n == self.tutorial_name or n.startswith(self.tutorial_name + ".")), None)
        return (index,) if index else None

    def use_even_split(self) -> None:
        split = self.even_split()
        if split is not None:
            self.set_split(split, automatic=True)

    def use_tutorial(self) -> None:
        split = self.tutorial_split()
        if split is not None:
            self.set_split(split)

    def show_problems(self, problems: list[Help]) -> None:
        """The split's problems in the app's words (app/state/problem_help.py); each fix that sets the split is
        a button that applies it."""
        self.problem.setText("\n".join(p.text for p in problems))
        self.problem.setVisible(bool(problems))
        self.fixes.set_fixes([f for p in problems for f in p.fixes if set(f.changes) == {"split"}])

    def _valid(self, split) -> bool:
        return len(split) == self.stages - 1 and all(0 < s < len(self.blocks) for s in split) \
            and list(split) == sorted(set(split))

    def even_split(self) -> tuple[int, ...] | None:
        """Stages of (nearly) as many blocks each, by the blocks' count (their names' before they are timed)."""
        n = len(self.blocks) or len(self.names)
        if n < self.stages or self.stages < 2:
            return None
        return tuple(round(k * n / self.stages) for k in range(1, self.stages))

    # -- drawing -------------------------------------------------------------------
    def _refresh(self) -> None:
        self._fill_table()
        self._refresh_buttons()
        if not self.blocks:
            self._show_untimed_split()
        elif not self.uses_split or not self._split:
            self.bar.set_shares([], 1)
            self.stage_text.setText("")
            self.summary.setText(f"{len(self.blocks)} blocks. "
                                 + ("Split points apply to model-parallel and pipeline." if not self.uses_split
                                    else "Tick where each later stage starts."))
        else:
            self._show_stages()

    def _stage_of_blocks(self) -> list[int]:
        """Each block's stage under the chosen split."""
        split = set(self._split or ())
        stage_of = []
        stage = 0
        for i in range(len(self.blocks)):
            if i in split:
                stage += 1
            stage_of.append(stage)
        return stage_of

    def _fill_table(self) -> None:
        """A row per block, tinted by its stage; ``_filling`` keeps the ticks set here from reading as the user's."""
        self._filling = True
        try:
            self.table.setRowCount(len(self.blocks))
            self.table.setVerticalHeaderLabels([str(i) for i in range(len(self.blocks))])
            stage_of = self._stage_of_blocks()
            for i, block in enumerate(self.blocks):
                tint = QtGui.QColor(theme.stage_color(stage_of[i])) if self.uses_split else None
                for c, item in enumerate(self._row_cells(i, block, stage_of[i])):
                    if c > 0:
                        item.setFlags(QtCore.Qt.ItemFlag.ItemIsEnabled)
                    if c in (2, 3, 4):
                        item.setTextAlignment(QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
                    if tint is not None:
                        tint.setAlpha(120)
                        item.setBackground(tint)
                        item.setToolTip(item.toolTip() or f"stage {stage_of[i]}")
                    self.table.setItem(i, c, item)
        finally:
            self._filling = False

    def _split_cell(self, i: int) -> QtWidgets.QTableWidgetItem:
        """Block ``i``'s tick box: ticked where a stage starts, marked where the balanced split starts one."""
        check = QtWidgets.QTableWidgetItem("")
        if i > 0 and self.uses_split:
            check.setFlags(QtCore.Qt.ItemFlag.ItemIsUserCheckable | QtCore.Qt.ItemFlag.ItemIsEnabled)
            check.setCheckState(QtCore.Qt.CheckState.Checked if i in (self._split or ())
                                else QtCore.Qt.CheckState.Unchecked)
            check.setToolTip(f"Start a new stage at block {i}")
            if i in (self.balanced or ()):
                check.setText("⚖")
                check.setToolTip("The balanced split point: each stage's compute time as even as blocks allow")
        else:
            check.setFlags(QtCore.Qt.ItemFlag.ItemIsEnabled)
        return check

    def _row_cells(self, i: int, block: BlockInfo, stage: int) -> list[QtWidgets.QTableWidgetItem]:
        """Block ``i``'s row, one item per column (``COLUMNS``)."""
        # The dotted name is the submodule's place in the tree (layer3.0 inside layer3); its class in the tooltip.
        name = QtWidgets.QTableWidgetItem(block.name)
        name.setToolTip(f"block {i}: {block.name}" + (f" ({block.kind})" if block.kind else "")
                        + (f" (stage {stage})" if self.uses_split else ""))
        cells = [self._split_cell(i),
                 name,
                 QtWidgets.QTableWidgetItem(human_count(block.params)),
                 QtWidgets.QTableWidgetItem(f"{1000 * block.cost_s:.2f} ms"),
                 QtWidgets.QTableWidgetItem(human_bytes(block.out_bytes * self.micro_batch_size))]
        # Its work by torch's FLOP formulas beside its time (the narrow panel has no room for a column).
        cells[3].setToolTip(f"forward+backward: {1000 * block.cost_s:.2f} ms, "
                            f"{si(block.flops * self.micro_batch_size, 'FLOP')} per micro-batch "
                            f"of {self.micro_batch_size}")
        return cells

    def _refresh_buttons(self) -> None:
        self.balanced_button.setEnabled(self.uses_split and self.balanced is not None
                                        and self._split != self.balanced)
        self.balanced_button.setVisible(bool(self.blocks))   # nothing to balance yet: its room to the summary
        tutorial = self.tutorial_split() if self.uses_split else None
        self.tutorial_button.setVisible(bool(self.tutorial_name))
        self.tutorial_button.setEnabled(tutorial is not None and self._split != tutorial)
        self.tutorial_button.setToolTip(
            f"The model-parallel tutorial's split: a second stage from {self.tutorial_name} on "
            f"(--split {self.tutorial_name})" if tutorial is not None else
            "The tutorial's split has two stages: choose two devices" if self.tutorial_name else "")
        self.table.setEnabled(self.uses_split)

    def _show_untimed_split(self) -> None:
        """No blocks timed yet: the split chosen by the blocks' names, if any, and what the view waits for."""
        self.bar.set_shares([], 1)
        chosen = self.split()
        self.stage_text.setText(
            f"Split at {', '.join(f'block {i} ({self.names[i]})' for i in chosen)}, by the blocks' names: "
            "their times are not known." if chosen else "")
        self.summary.setText((self._waiting or "Profiling the model's blocks…") if self.uses_split
                             else "Split points apply to model-parallel and pipeline.")

    def _show_stages(self) -> None:
        """Each stage's blocks, its share of parameters and time, and the bytes it hands on."""
        shares = stage_shares(self.blocks, self._split)
        self.bar.set_shares(shares, self.micro_batch_size)
        lines = []
        for s, share in enumerate(shares):
            crossing = (f", hands on {human_bytes(share['crossing'] * self.micro_batch_size)} per micro-batch"
                        if s < len(shares) - 1 else "")
            blocks = (f"block {share['first']}" if share["first"] == share["last"]
                      else f"blocks {share['first']}–{share['last']}")
            lines.append(f"<span style='color:{theme.FOREGROUND};background:{theme.stage_color(s)}'>&nbsp;stage "
                         f"{s}&nbsp;</span> {blocks}: "
                         f"{100 * share['params']:.0f}% params, {100 * share['time']:.0f}% time{crossing}")
        hint = coarse_blocks_hint(shares) if self._split == self.balanced else None
        if hint:
            lines.append(f"<i>{hint}</i>")
        self.stage_text.setText("<br>".join(lines))
        mark = " (balanced)" if self._split == self.balanced else ""
        self.summary.setText(f"{len(self.blocks)} blocks · split at {', '.join(map(str, self._split))}{mark}")

    def _on_item_changed(self, item: QtWidgets.QTableWidgetItem) -> None:
        if self._filling or item.column() != 0:
            return
        chosen = []
        for i in range(1, self.table.rowCount()):
            cell = self.table.item(i, 0)
            if cell is not None and cell.checkState() == QtCore.Qt.CheckState.Checked:
                chosen.append(i)
        self._split = tuple(chosen)
        self.split_is_automatic = False
        self._refresh()
        self.sigSplitChanged.emit()
