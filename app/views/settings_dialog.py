"""Settings: model, device, method and (under "Advanced") the method's hyper-parameters.

The form scrolls (the dialog fits a 1280×800 screen with every hyper-parameter open, OK and
Cancel always visible), and a model path is loaded before the dialog accepts it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app._engine import MAX_BATCH, shown
from app.core.arrival import ORDER_LABELS
from app.core.field_labels import field_label, field_tooltip
from app.core.names import method_label, readable_help
from app.core.settings import FUNDUS_DEMO_MODEL, AppSettings, FieldSpec, ModelCheck, clean_overrides
from app.views._plain import plain_label


def _decimals(value: float) -> int:
    text = f"{value:.10f}".rstrip("0")
    return max(2, min(8, len(text.split(".")[1]) + 1 if "." in text else 2))


class SettingsDialog(QDialog):
    """Edits an :class:`AppSettings`; read the result with :meth:`result_settings` after ``exec()``.

    Args:
        settings: the current settings.
        methods: every registered method with the editable fields of its config dataclass.
        devices: device choices to offer (e.g. ``["auto", "cpu", "cuda"]``).
        check_model: says why a model path cannot be used (None: it loads); OK is refused until it can.
    """

    def __init__(
        self,
        settings: AppSettings,
        methods: dict[str, list[FieldSpec]],
        devices: list[str],
        parent: QWidget | None = None,
        check_model: ModelCheck | None = None,
        start_folder: str = "",
    ) -> None:
        super().__init__(parent)
        self._check_model = check_model
        self._start_folder = start_folder  # where Browse… starts (not the working directory)
        self.setWindowTitle("Settings")
        self._settings = settings
        self._methods = methods
        self._editors: dict[str, QWidget] = {}
        self._current_method = settings.method
        self._overrides: dict[str, dict[str, Any]] = {settings.method: dict(settings.method_config)}

        self.model_edit = QLineEdit(settings.model)
        self.model_edit.setPlaceholderText("demo model (resources/demo/model.safetensors)")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._on_browse_clicked)
        demo = QPushButton("Histology demo")
        demo.setToolTip("The demo model trained on generated histology (resources/demo)")
        demo.clicked.connect(lambda: self.model_edit.setText(""))
        fundus = QPushButton("Fundus demo")
        fundus.setToolTip("The demo model trained on generated fundus photographs (resources/demo-fundus)")
        fundus.clicked.connect(lambda: self.model_edit.setText(str(FUNDUS_DEMO_MODEL)))
        fundus.setVisible(FUNDUS_DEMO_MODEL.is_file())
        model_row = QHBoxLayout()
        model_row.addWidget(self.model_edit, 1)
        model_row.addWidget(browse)
        model_row.addWidget(demo)
        model_row.addWidget(fundus)
        self.model_error = plain_label("")
        self.model_error.setWordWrap(True)
        self.model_error.setStyleSheet("color: #b3261e;")
        self.model_error.setVisible(False)
        self.model_edit.textEdited.connect(lambda _text: self.model_error.setVisible(False))
        self.device_combo = QComboBox()
        for device in devices:
            self.device_combo.addItem(device, device)
        if self.device_combo.findData(settings.device) < 0:
            self.device_combo.addItem(settings.device, settings.device)
        self.device_combo.setCurrentIndex(self.device_combo.findData(settings.device))
        self.method_combo = QComboBox()
        for name in methods:
            self.method_combo.addItem(method_label(name), name)
        index = self.method_combo.findData(settings.method)
        self.method_combo.setCurrentIndex(max(index, 0))
        self.order_combo = QComboBox()
        for key, text in ORDER_LABELS.items():
            self.order_combo.addItem(text, key)
        self.order_combo.setCurrentIndex(max(self.order_combo.findData(settings.order), 0))
        self.seed_spin = QSpinBox()
        self.seed_spin.setRange(0, 2**31 - 1)
        self.seed_spin.setValue(settings.order_seed)
        self.seed_spin.setToolTip("The same seed gives the same interleaved order of the same files")
        self.seed_spin.setEnabled(settings.order == "interleaved")
        self.order_combo.currentIndexChanged.connect(
            lambda _i: self.seed_spin.setEnabled(self.order_combo.currentData() == "interleaved")
        )
        self.tissue_spin = QDoubleSpinBox()
        self.tissue_spin.setRange(0.0, 1.0)
        self.tissue_spin.setSingleStep(0.05)
        self.tissue_spin.setValue(settings.min_tissue)
        self.autosave_spin = QSpinBox()
        self.autosave_spin.setRange(0, 100000)
        self.autosave_spin.setValue(settings.autosave_every)
        self.autosave_spin.setSpecialValueText("only when stopped")
        self.autosave_spin.setSuffix(" images")
        self.batch_spin = QSpinBox()
        self.batch_spin.setRange(0, MAX_BATCH)
        self.batch_spin.setValue(settings.batch)
        self.batch_spin.setSpecialValueText("chosen from the device")
        self.batch_spin.setSuffix(" images")
        self.batch_spin.setToolTip(
            "Images the model takes in one step: more is faster on a GPU; the table fills a step at a time, "
            "and pause and stop take effect between steps (0: 16 on a CPU, 64 on a CUDA GPU)"
        )
        self.maps_combo = QComboBox()
        self.maps_combo.addItem("after the decisions (decisions at full speed)", "behind")
        self.maps_combo.addItem("with each decision", "inline")
        self.maps_combo.setCurrentIndex(max(self.maps_combo.findData(settings.maps), 0))
        self.maps_combo.setToolTip(
            "Where the method decides from the source model alone (the default, source only), the table "
            "and slide map can fill at decision speed and the uncertainty maps follow in order"
        )
        self.reviewer_edit = QLineEdit(settings.reviewer)
        self.reviewer_edit.setPlaceholderText(dataclasses.replace(settings, reviewer="").reviewer_name())
        self.reviewer_edit.setToolTip("Kept with each review mark; empty: your user name on this computer")

        form = QFormLayout()
        form.addRow("Model checkpoint", model_row)
        form.addRow("", self.model_error)
        form.addRow("Device", self.device_combo)
        form.addRow("Adaptation method", self.method_combo)
        form.addRow("Arrival order (folders)", self.order_combo)
        form.addRow("Interleaving seed", self.seed_spin)
        form.addRow("Minimum tissue per slide tile", self.tissue_spin)
        form.addRow("Save state every", self.autosave_spin)
        form.addRow("Images per step", self.batch_spin)
        form.addRow("Uncertainty maps", self.maps_combo)
        form.addRow("Reviewer name", self.reviewer_edit)

        self.advanced_toggle = QToolButton()
        self.advanced_toggle.setText("&Advanced ▸")
        self.advanced_toggle.setCheckable(True)
        self.advanced_toggle.setAutoRaise(True)
        self.advanced_box = QGroupBox("Method hyper-parameters (defaults are the paper's)")
        self.advanced_form = QFormLayout(self.advanced_box)
        self.defaults_button = QPushButton("Restore defaults")
        self.defaults_button.clicked.connect(self._on_defaults_clicked)
        self.advanced_box.setVisible(False)
        self.advanced_toggle.toggled.connect(self._on_advanced_toggled)

        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self._on_ok_clicked)
        buttons.rejected.connect(self.reject)
        content = QWidget()
        inner = QVBoxLayout(content)
        inner.addLayout(form)
        inner.addWidget(self.advanced_toggle)
        inner.addWidget(self.advanced_box)
        inner.addStretch(1)
        self.scroll_area = QScrollArea()
        self.scroll_area.setWidget(content)
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QScrollArea.Shape.NoFrame)
        self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        layout = QVBoxLayout(self)
        layout.addWidget(self.scroll_area, 1)
        layout.addWidget(buttons)
        self.method_combo.currentIndexChanged.connect(self._on_method_changed)
        self._build_advanced()
        for combo in (self.device_combo, self.method_combo, self.order_combo, self.maps_combo):
            _narrow(combo)
        self.model_edit.setFocus()
        screen = QGuiApplication.primaryScreen().availableGeometry()
        self.resize(
            min(720, screen.width() - 40), min(max(560, int(screen.height() * 0.7)), screen.height() - 80)
        )
        self.setMaximumHeight(max(screen.height() - 40, 300))

    # -- result -------------------------------------------------------------------------------
    def result_settings(self) -> AppSettings:
        method = str(self.method_combo.currentData())
        self._overrides[method] = self._read_advanced()
        return dataclasses.replace(
            self._settings,
            model=self.model_edit.text().strip(),
            device=str(self.device_combo.currentData()),
            method=method,
            method_config=clean_overrides(self._methods.get(method, []), self._overrides[method]),
            order=str(self.order_combo.currentData()),
            order_seed=self.seed_spin.value(),
            min_tissue=self.tissue_spin.value(),
            autosave_every=self.autosave_spin.value(),
            batch=self.batch_spin.value(),
            maps=str(self.maps_combo.currentData()),
            reviewer=self.reviewer_edit.text().strip(),
        )

    # -- advanced form ------------------------------------------------------------------------
    def _build_advanced(self) -> None:
        while self.advanced_form.rowCount():
            self.advanced_form.removeRow(0)
        self._editors = {}
        method = str(self.method_combo.currentData())
        fields = self._methods.get(method, [])
        values = self._overrides.get(method, {})
        self._current_method = method
        if not fields:
            self.advanced_form.addRow(QLabel("This method has no hyper-parameters."))
            return
        for spec in fields:
            editor = self._editor_for(spec, values.get(spec.name, spec.default))
            tip = field_tooltip(spec.name, readable_help(spec.help or ""), spec.default)
            editor.setToolTip(tip)
            label = QLabel(field_label(spec.name, method))  # the code name is in the tooltip
            label.setToolTip(tip)
            label.setBuddy(editor)
            self._editors[spec.name] = editor
            self.advanced_form.addRow(label, editor)
        self.defaults_button = QPushButton("Restore defaults")
        self.defaults_button.clicked.connect(self._on_defaults_clicked)
        self.advanced_form.addRow(self.defaults_button)

    @staticmethod
    def _editor_for(spec: FieldSpec, value: Any) -> QWidget:
        if spec.choices:
            combo = QComboBox()
            for choice in spec.choices:
                combo.addItem(str(choice), choice)
            combo.setCurrentIndex(max(combo.findData(value), 0))
            return _narrow(combo)
        if spec.kind is bool:
            box = QCheckBox()
            box.setChecked(bool(value))
            return box
        low = -1e6 if spec.low is None else spec.low  # bounds from the field's metadata
        high = 1e6 if spec.high is None else spec.high
        if spec.kind is int:
            spin = QSpinBox()
            spin.setRange(int(low), int(high))
            spin.setValue(int(value))
            return spin
        dspin = QDoubleSpinBox()
        dspin.setDecimals(_decimals(float(spec.default)))
        dspin.setRange(low, high)
        dspin.setSingleStep(10 ** -(dspin.decimals() - 1))
        dspin.setValue(float(value))
        return dspin

    def _read_advanced(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, editor in self._editors.items():
            if isinstance(editor, QComboBox):
                values[name] = editor.currentData()
            elif isinstance(editor, QCheckBox):
                values[name] = editor.isChecked()
            elif isinstance(editor, QSpinBox | QDoubleSpinBox):
                values[name] = editor.value()
        return values

    def set_field(self, name: str, value: Any) -> None:
        """Set one hyper-parameter editor (used by tests and scripts)."""
        editor = self._editors[name]
        if isinstance(editor, QComboBox):
            editor.setCurrentIndex(editor.findData(value))
        elif isinstance(editor, QCheckBox):
            editor.setChecked(bool(value))
        elif isinstance(editor, QSpinBox | QDoubleSpinBox):
            editor.setValue(value)

    # -- slots --------------------------------------------------------------------------------
    @Slot(int)
    def _on_method_changed(self, _index: int) -> None:
        self._overrides[self._current_method] = self._read_advanced()
        self._build_advanced()

    @Slot(bool)
    def _on_advanced_toggled(self, checked: bool) -> None:
        self.advanced_toggle.setText("&Advanced ▾" if checked else "&Advanced ▸")
        self.advanced_box.setVisible(checked)

    @Slot()
    def _on_ok_clicked(self) -> None:
        """Accept, unless the model path changed and the model cannot be loaded (then say why)."""
        text = self.model_edit.text().strip()
        if self._check_model is not None and text != self._settings.model:
            problem = self._check_model(text)
            if problem:
                self.model_error.setText(shown(f"This model cannot be used: {problem}"))
                self.model_error.setVisible(True)
                self.model_edit.setFocus()
                self.scroll_area.ensureWidgetVisible(self.model_edit)
                return
        self.accept()

    @Slot()
    def _on_defaults_clicked(self) -> None:
        method = str(self.method_combo.currentData())
        self._overrides[method] = {}
        self._build_advanced()

    @Slot()
    def _on_browse_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Choose a checkpoint (its model card .json must be beside it)",
            self._start_folder or str(Path(self.model_edit.text()).expanduser().parent),
            "Checkpoints (*.safetensors *.pt *.pth);;All files (*)",
        )
        if path:
            self.model_edit.setText(path)


def _narrow(combo: QComboBox) -> QComboBox:
    """``combo`` as wide as 24 characters, not as its longest entry (the method's whole name made
    the dialog's content 845 px wide in a 720-px dialog at 1280x800, cut at its right edge); the
    list it opens shows each entry whole."""
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(24)
    # Its minimum size hint still follows the longest entry: a minimum width of its own overrides it.
    combo.setMinimumWidth(combo.fontMetrics().horizontalAdvance("x" * 24))
    return combo
