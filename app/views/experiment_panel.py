"""ExperimentPanel: model, devices, strategy, micro-batches, schedule, batch size, steps.

The choices come from the engine's torch-free catalogues (MODELS, STRATEGIES,
SCHEDULES). Problems found by the engine's validation show below the form in the
app's words, in a box of fixed height (app/views/notice_area.py), each fix a button
that sets the panel's controls (``show_problems``, ``apply_changes``); so does the
warning that CPU devices share cores. Nothing is changed behind the user's back: a
model's batch size is a suggestion beside the batch box, applied with a click.
"""
from __future__ import annotations

import os

from PySide6 import QtCore, QtWidgets

from app.state.device_words import device_choices, hardware_text, sharing_warning
from app.state.problem_help import Help
from app.views import form_settings
from app.views.batch_hint import BatchHint
from app.views.devices_box import DevicesBox
from app.views.layout import labelled_row
from app.views.model_box import ModelBox, split_level_text
from app.views.more_options import MoreOptions
from app.views.nodes_row import NodesRow
from app.views.notice_area import NoticeArea
from app.views.tips import add_described
from app.views.wrapped_label import WrappedLabel
from engine.config import INPUT_PREP, ExperimentConfig, bounds_of
from engine.devices import cuda_visible
from engine.models import MODELS, SPLIT_LEVELS, lookup, torchvision_name
from engine.precision import DTYPES, OPTIMIZERS
from engine.run_options import options
from engine.strategies import SCHEDULE_INFO, SCHEDULES, STRATEGIES
from engine.telemetry.gpu_inventory import GpuInfo


class ExperimentPanel(QtWidgets.QWidget):
    sigConfigChanged = QtCore.Signal()
    sigModelFileChosen = QtCore.Signal(str)

    # Options whose problems show together, in the form's order; others go to the "config" row.
    ROWS = ("model", "devices", "nodes", "strategy", "micro_batches", "schedule", "batch_size", "steps")
    OPTION_ROW = {"model": "model", "model_file": "model", "width": "model", "depth": "model",
                  "image_size": "model", "split_level": "model",
                  "devices": "devices", "strategy": "strategy", "micro_batches": "micro_batches",
                  "split_size": "micro_batches", "schedule": "schedule", "stages_per_device": "schedule", "batch_size": "batch_size",
                  "steps": "steps", "warmup": "steps", "nodes": "nodes", "token_file": "nodes"}

    def __init__(self, cores: int, gpus: list[GpuInfo] | None = None, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.cores = max(1, cores)
        self.gpus = list(gpus or [])
        self._updating = False

        form = QtWidgets.QFormLayout(self)
        form.setContentsMargins(0, 0, 0, 0)
        form.setLabelAlignment(QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
        form.setFieldGrowthPolicy(QtWidgets.QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.notices = NoticeArea((*self.ROWS, "config"))
        self.notices.sigFixChosen.connect(self.apply_changes)
        self.problems: dict[str, QtWidgets.QLabel] = self.notices.labels
        # The rows in the form's order, which is also the order Tab goes through them.
        self._add_model_rows(form)
        self._add_device_rows(form)
        self._add_strategy_rows(form)
        self._add_micro_batch_row(form)
        self._add_schedule_rows(form)
        self._add_run_rows(form)
        form.addRow(self.notices)
        self._form = form

        for spin in (self.width_spin, self.depth_spin, self.image_spin, self.mb_spin, self.batch_spin,
                     self.steps_spin, self.per_device_spin):
            spin.setKeyboardTracking(False)
            spin.valueChanged.connect(self._changed)
        self.model_combo.setCurrentIndex(self.model_combo.findData("mlp"))
        self.strategy_combo.setCurrentIndex(self.strategy_combo.findData("model-parallel"))
        self._on_model_changed()
        self._on_strategy_changed()
        self._on_schedule_changed()

    # -- building ------------------------------------------------------------------
    @staticmethod
    def _spin_box(option: str, value: int, tooltip: str = "", object_name: str = "", *,
                  bounds: tuple[int, int] | None = None) -> QtWidgets.QSpinBox:
        """A box for whole-number option ``option``, within its declared bounds (engine/config.py) or, where the
        box means more than the option (an image size of 0: as trained) or a registry decides, ``bounds``."""
        least, most = bounds or bounds_of(option)
        spin = QtWidgets.QSpinBox(minimum=int(least), maximum=int(most), value=value)
        spin.setObjectName(object_name)
        spin.setToolTip(tooltip)
        return spin

    @staticmethod
    def _muted_label(text: str = "") -> WrappedLabel:
        label = WrappedLabel(text)
        label.setObjectName("muted")
        return label

    def _add_model_rows(self, form: QtWidgets.QFormLayout) -> None:
        """The model box, its description, and the rows only some models have (shown by ``_on_model_changed``)."""
        self.model_combo = ModelBox()
        self.model_combo.sigModelFileChosen.connect(self.sigModelFileChosen)
        self.model_combo.currentIndexChanged.connect(self._on_model_changed)
        self.model_desc = self._muted_label()
        self.width_spin = self._spin_box("width", 512, "mlp: features of each hidden Linear")
        self.depth_spin = self._spin_box("depth", 8, "mlp: number of Linear+ReLU blocks before the head")
        shape = QtWidgets.QHBoxLayout()
        shape.setContentsMargins(0, 0, 0, 0)
        shape.addWidget(QtWidgets.QLabel("width"))
        shape.addWidget(self.width_spin, 1)
        shape.addWidget(QtWidgets.QLabel("depth"))
        shape.addWidget(self.depth_spin, 1)
        self.shape_row = QtWidgets.QWidget()
        self.shape_row.setLayout(shape)
        self._build_any_module_rows()
        form.addRow("Model", self.model_combo)
        form.addRow("", self.model_desc)
        form.addRow("", self.shape_row)
        form.addRow("", self.image_row)
        form.addRow("", self.level_row)

    def _build_any_module_rows(self) -> None:
        """Any-module models: the image size (torchvision) and how deep the split points are."""
        self.image_spin = self._spin_box("image_size", 0, "torchvision models: height and width of the synthetic "
                                         "images; \"as trained\": the size its weights were trained at (224 for "
                                         "most)", "imageSizeSpin", bounds=(0, 4096))
        self.image_spin.setSpecialValueText("as trained")
        self.image_spin.setSuffix(" px")
        self.image_label = QtWidgets.QLabel("image")
        self.level_label = QtWidgets.QLabel("split at")
        self.level_combo = QtWidgets.QComboBox()
        self.level_combo.setObjectName("splitLevelCombo")
        for level in SPLIT_LEVELS:
            self.level_combo.addItem(split_level_text(level), level)
        # The texts are long; the combo must not widen the panel past its pane.
        self.level_combo.setSizeAdjustPolicy(QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.level_combo.setMinimumContentsLength(8)
        self.level_combo.setToolTip("Where stages may start: the model's own children, or the submodules inside "
                                    "them (--split-level)")
        self.level_combo.currentIndexChanged.connect(self._changed)
        # Two short rows: one wide row would widen the panel past its pane.
        self.image_row = labelled_row(self.image_label, self.image_spin)
        self.level_row = labelled_row(self.level_label, self.level_combo)

    def _add_device_rows(self, form: QtWidgets.QFormLayout) -> None:
        self.devices_combo = DevicesBox()
        self.devices_combo.set_choices(device_choices(self.cores, self.gpus))
        self.devices_combo.set_spec("cpu:2")
        self.devices_combo.currentTextChanged.connect(self._changed)
        self.devices_info = self._muted_label(self._hardware_text())
        form.addRow("Devices", self.devices_combo)
        form.addRow("", self.devices_info)
        self.nodes_row = NodesRow()
        self.nodes_row.sigChanged.connect(self._changed)
        form.addRow("Nodes", self.nodes_row)

    def _add_strategy_rows(self, form: QtWidgets.QFormLayout) -> None:
        self.strategy_combo = QtWidgets.QComboBox()
        self.strategy_combo.setObjectName("strategyCombo")
        for name, info in STRATEGIES.items():
            if info.in_picker:   # a watched script comes from Run › Watch a script…
                add_described(self.strategy_combo, name, name, info.description)
        self.strategy_desc = self._muted_label()
        self.strategy_combo.currentIndexChanged.connect(self._on_strategy_changed)
        form.addRow("Strategy", self.strategy_combo)
        form.addRow("", self.strategy_desc)

    def _add_micro_batch_row(self, form: QtWidgets.QFormLayout) -> None:
        """Micro-batches (or the tutorial's split size): pipeline only."""
        self.mb_mode = QtWidgets.QComboBox()
        self.mb_mode.addItem("micro-batches", "micro_batches")
        self.mb_mode.addItem("split size", "split_size")
        self.mb_mode.setToolTip("Micro-batches per step, or samples per micro-batch (the tutorial's split size)")
        self.mb_spin = self._spin_box("batch_size", 4)   # micro-batches, or samples in one: at most a batch
        self.mb_mode.currentIndexChanged.connect(self._changed)
        mb = QtWidgets.QHBoxLayout()
        mb.setContentsMargins(0, 0, 0, 0)
        mb.addWidget(self.mb_mode)
        mb.addWidget(self.mb_spin, 1)
        self.mb_row = QtWidgets.QWidget()
        self.mb_row.setLayout(mb)
        self.mb_label = QtWidgets.QLabel("Micro-batching")
        form.addRow(self.mb_label, self.mb_row)

    def _add_schedule_rows(self, form: QtWidgets.QFormLayout) -> None:
        """The pipeline's schedule, its description, and the stages per device of those that place several."""
        self.schedule_combo = QtWidgets.QComboBox()
        for name, description in SCHEDULES.items():
            # Named for people; the id (--schedule) in the tooltip, with what it does.
            add_described(self.schedule_combo, SCHEDULE_INFO[name].display_name, name,
                          f"{description}\n--schedule {name}")
        self.schedule_desc = self._muted_label()
        self.schedule_combo.currentIndexChanged.connect(self._on_schedule_changed)
        self.schedule_label = QtWidgets.QLabel("Schedule")
        form.addRow(self.schedule_label, self.schedule_combo)
        self.schedule_desc_label = QtWidgets.QLabel("")
        form.addRow(self.schedule_desc_label, self.schedule_desc)
        # Stages per device (V): the interleaved, looped and zero-bubble schedules place several on each.
        self.per_device_spin = self._spin_box(
            "stages_per_device", 2, bounds=(1, max(v for s in SCHEDULE_INFO.values() for v in s.stages_per_device)),
            tooltip="Stages each device runs (--stages-per-device): the model is cut into "
            "devices x V stages, placed in a loop (or a V for zbv and dualpipev)", object_name="stagesPerDeviceSpin")
        self.per_device_label = QtWidgets.QLabel("Stages per device")
        form.addRow(self.per_device_label, self.per_device_spin)

    def _add_run_rows(self, form: QtWidgets.QFormLayout) -> None:
        """Batch size, steps, optimizer, precision, input, and the options the form shows folded."""
        self.batch_spin = self._spin_box("batch_size", MODELS["mlp"].batch_size, "Global batch per step", "batchSpin")
        form.addRow("Batch size", self.batch_spin)
        self.batch_hint = BatchHint()
        self.batch_hint.sigUse.connect(self.batch_spin.setValue)
        form.addRow("", self.batch_hint)
        self.steps_spin = self._spin_box("steps", 20, "Optimizer steps; the first two are warm-up and left "
                                         "out of the summary", "stepsSpin")
        form.addRow("Steps", self.steps_spin)
        self.optimizer_combo = self._choice(form, "Optimizer", "optimizerCombo", OPTIMIZERS)
        self.dtype_combo = self._choice(form, "Precision", "dtypeCombo", DTYPES)
        self.input_combo = self._choice(form, "Input", "inputPrepCombo", INPUT_PREP)
        self.more = MoreOptions([o for o in options() if o.in_form])
        self.more.sigChanged.connect(self._changed)
        form.addRow(self.more)

    def _hardware_text(self) -> str:
        return hardware_text(self.cores, self.gpus)

    def set_gpus(self, gpus: list[GpuInfo]) -> None:
        """GPU inventory arrived (it is read off the UI thread): offer them."""
        self.gpus = list(gpus)
        self._updating = True
        self.devices_combo.set_choices(device_choices(self.cores, self.gpus))
        self._updating = False
        self._show_hardware()
        self._show_sharing()

    # -- reactions -------------------------------------------------------------------
    def _show_hardware(self) -> None:
        # With nodes, the devices are each node's, not this machine's.
        self.devices_info.setText("each node runs these devices, on its own cores or GPUs" if self.nodes_row.nodes()
                                  else self._hardware_text())

    def _changed(self, *_args) -> None:
        self._show_hardware()
        if not self._updating:
            self._show_sharing()
            self._show_batch_hint()
            self.sigConfigChanged.emit()

    def _show_sharing(self) -> None:
        """More CPU devices than cores stay allowed, with what that does to the figures said under the form."""
        self.notices.show_warning(sharing_warning(self.config(), self.cores, len(cuda_visible(self.gpus))))

    def _on_model_changed(self, *_args) -> None:
        if self.model_combo.choosing():
            return
        data = self.model_combo.currentData()
        is_file, is_torchvision = self.model_combo.is_file(), self.model_combo.is_torchvision()
        self.model_desc.setText(self.model_combo.description())
        self._form.setRowVisible(self.shape_row, data == "mlp")
        # Any module (torchvision's, or a file's): the split level; torchvision's: the image size too.
        # Whole rows, label cell included: a hidden row takes no height from the form.
        self._form.setRowVisible(self.level_row, is_file or is_torchvision)
        self._form.setRowVisible(self.image_row, is_torchvision)
        self._changed()

    def _on_strategy_changed(self, *_args) -> None:
        info = STRATEGIES.get(self.strategy_combo.currentData())
        self.strategy_desc.setText(info.description if info else "")
        pipelined = bool(info and info.uses_micro_batches)
        for w in (self.mb_label, self.mb_row, self.schedule_label, self.schedule_combo,
                  self.schedule_desc_label, self.schedule_desc):
            w.setVisible(pipelined)
        if not pipelined:
            for key in ("micro_batches", "schedule"):
                self.problems[key].hide()
        self._show_per_device()
        self._changed()

    def _on_schedule_changed(self, *_args) -> None:
        self.schedule_desc.setText(SCHEDULES.get(self.schedule_combo.currentData(), ""))
        self._show_per_device()
        self._changed()

    def _show_per_device(self) -> None:
        """The stages-per-device box, for the schedules that place several stages on a device; set to the
        schedule's default when the one shown is not one it runs."""
        schedule = SCHEDULE_INFO.get(self.schedule_combo.currentData())
        info = STRATEGIES.get(self.strategy_combo.currentData())
        shown = bool(schedule and schedule.multi_stage and info and info.uses_micro_batches)
        self._form.setRowVisible(self.per_device_spin, shown)
        if shown and self.per_device_spin.value() not in schedule.stages_per_device:
            self.per_device_spin.blockSignals(True)
            self.per_device_spin.setValue(schedule.stages_per_device[0])
            self.per_device_spin.blockSignals(False)

    def _show_batch_hint(self) -> None:
        self.batch_hint.show_for(lookup(self.model_combo.currentData() or ""), self.batch_spin.value())

    # -- fixes -------------------------------------------------------------------------
    def apply_changes(self, changes: dict) -> None:
        """Set the controls to options' values: a fix's (app/state/problem_help.py: {"devices": "cpu:1"}, ...)
        or a whole stored config's (``restore``). The one place an option reaches its control; ``config`` reads
        them back."""
        for option, value in changes.items():
            if option == "model":
                if value in MODELS:
                    self.model_combo.setCurrentIndex(self.model_combo.findData(value))
                elif torchvision_name(value or ""):
                    self.model_combo.set_torchvision_model(value)
            elif option == "model_file":
                if value and os.path.exists(value):
                    self.model_combo.set_model_file(value)
            elif option in ("width", "depth", "batch_size", "steps", "stages_per_device"):
                if value is not None:
                    self._spins[option].setValue(int(value))
            elif option == "devices":
                self.devices_combo.set_spec(str(value))
            elif option in ("micro_batches", "split_size"):
                if value is not None:
                    self.mb_mode.setCurrentIndex(self.mb_mode.findData(option))
                    self.mb_spin.setValue(int(value))
            elif option in ("schedule", "strategy", "optimizer", "dtype", "input_prep"):
                combo = self._combos[option]
                combo.setCurrentIndex(max(0, combo.findData(value)))
            elif option == "image_size":
                self.image_spin.setValue(int(value or 0))
            elif option == "split_level":
                self.level_combo.setCurrentIndex(max(0, self.level_combo.findData(int(value))))
            elif option == "nodes":
                self.nodes_row.set_nodes(value)
            elif option == "token_file":
                if value:
                    self.nodes_row.set_token_file(value)
            elif option in self.more.names:
                self.more.set_value(option, value)

    @property
    def _spins(self) -> dict:
        return {"width": self.width_spin, "depth": self.depth_spin, "batch_size": self.batch_spin,
                "steps": self.steps_spin, "stages_per_device": self.per_device_spin}

    def _choice(self, form: QtWidgets.QFormLayout, label: str, object_name: str,
                choices: dict[str, str]) -> QtWidgets.QComboBox:
        """A row choosing one of ``choices`` (name -> description, each item's tooltip)."""
        combo = QtWidgets.QComboBox()
        combo.setObjectName(object_name)
        for name, description in choices.items():
            add_described(combo, name, name, description)
        combo.currentIndexChanged.connect(self._changed)
        form.addRow(label, combo)
        return combo

    @property
    def _combos(self) -> dict:
        return {"schedule": self.schedule_combo, "strategy": self.strategy_combo,
                "optimizer": self.optimizer_combo, "dtype": self.dtype_combo, "input_prep": self.input_combo}

    # -- the config ------------------------------------------------------------------
    @property
    def strategy(self) -> str:
        return self.strategy_combo.currentData()

    def config(self, split: tuple[int, ...] | None = None) -> ExperimentConfig:
        is_file, is_torchvision = self.model_combo.is_file(), self.model_combo.is_torchvision()
        info = STRATEGIES.get(self.strategy)
        pipelined = bool(info and info.uses_micro_batches)
        mb_mode = self.mb_mode.currentData()
        steps = self.steps_spin.value()
        return ExperimentConfig(
            strategy=self.strategy,
            model=self.model_combo.model(),
            model_file=self.model_combo.chosen_file(),
            width=self.width_spin.value(),
            depth=self.depth_spin.value(),
            image_size=(self.image_spin.value() or None) if is_torchvision else None,
            split_level=self.level_combo.currentData() if (is_file or is_torchvision) else 1,
            devices=self.devices_combo.spec(),
            split=split if (info and info.uses_split) else None,
            micro_batches=self.mb_spin.value() if pipelined and mb_mode == "micro_batches" else None,
            split_size=self.mb_spin.value() if pipelined and mb_mode == "split_size" else None,
            schedule=self.schedule_combo.currentData(),
            stages_per_device=self.per_device_spin.value() if pipelined and getattr(
                SCHEDULE_INFO.get(self.schedule_combo.currentData()), "multi_stage", False) else None,
            batch_size=self.batch_spin.value(),
            steps=steps,
            warmup=min(2, steps - 1) if steps > 1 else 0,
            input_prep=self.input_combo.currentData(),
            optimizer=self.optimizer_combo.currentData(),
            dtype=self.dtype_combo.currentData(),
            nodes=self.nodes_row.nodes(),
            token_file=self.nodes_row.token_file(),
            **self.more.values(),
        )

    def show_check(self, problems: list[Help], block_names: list[str]) -> None:
        """The planner's check came back: a model file's line says whether it loaded, the split level its blocks."""
        failed = next((p for p in problems if p.option in ("model", "model_file")), None)
        self.model_combo.take_check(failed.message if failed else None)
        self.model_desc.setText(self.model_combo.description())
        for index in range(self.level_combo.count()):
            level = self.level_combo.itemData(index)
            shown = block_names if level == self.level_combo.currentData() else None
            self.level_combo.setItemText(index, split_level_text(level, shown))

    def show_problems(self, problems: list[Help]) -> list[str]:
        """Show the problems below the form, in the form's order, each fix a button; returns the texts shown.
        ``problems``: in the app's words, with their fixes (app/state/problem_help.py)."""
        by_row: dict[str, list[Help]] = {}
        for p in problems:
            by_row.setdefault(self.OPTION_ROW.get(p.option, "config"), []).append(p)
        self.notices.show_problems(by_row)
        return [p.text for key in self.notices.labels for p in by_row.get(key, [])]

    # -- settings (app/views/form_settings.py) -------------------------------------------
    def save(self, settings: QtCore.QSettings) -> None:
        form_settings.save(self, settings)

    def restore(self, settings: QtCore.QSettings) -> None:
        self._updating = True
        try:
            form_settings.restore(self, settings)
            self._on_model_changed()   # descriptions and visible rows
            self._on_strategy_changed()
        finally:
            self._updating = False
        self._changed()
