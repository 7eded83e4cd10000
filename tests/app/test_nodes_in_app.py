"""A run over two namespace nodes from the window (model-parallel: the command line's over nodes are ddp, fsdp and
the pipeline, tests/test_nodes.py): its devices grouped by node while it runs."""
from __future__ import annotations

import re

from PySide6 import QtCore

from app_helpers import set_small_mlp, wait_ready, wait_steps


def test_a_run_over_two_nodes_shows_its_devices_grouped_by_node(qtbot, window, node_cluster):
    set_small_mlp(window, strategy="model-parallel", devices="cpu:1", steps=100_000)  # its stages over the nodes
    window.experiment.nodes_row.set_token_file(str(node_cluster.token_file))
    window.experiment.nodes_row.set_nodes(node_cluster.nodes_option())
    assert window.experiment.config().nodes == node_cluster.nodes_option()
    wait_ready(qtbot, window, profiled=False)
    qtbot.keyClick(window, QtCore.Qt.Key.Key_R, QtCore.Qt.KeyboardModifier.ControlModifier)
    wait_steps(qtbot, window, 3, timeout=120_000)
    timeline = window.plots.timeline
    assert timeline.node_groups() == [("node0", ["node0/cpu:0"]), ("node1", ["node1/cpu:0"])]
    labels = [text for _, text in timeline.getPlotItem().getAxis("left")._tickLevels[0]]
    assert labels[0].startswith("node0/cpu:0") and labels[1].startswith("node1/cpu:0")
    # Each node with its address and its clock, under the plots.
    bubble = "\n".join(window.plots.findings.texts())
    assert f"node0 {node_cluster.address(0)}:" in bubble and f"node1 {node_cluster.address(1)}:" in bubble
    offset = float(re.search(r"node1 .*: rank 1, clock ([+-][\d.]+) s", bubble).group(1))
    assert abs(offset - 1000.0) < 0.05  # node1's clock runs 1000 s ahead (tests/netns.py)
    # Each node's devices sampled by its own agent, under their run names.
    def sampled():
        assert {"node0/cpu:0", "node1/cpu:0"} <= set(window.telemetry.util), set(window.telemetry.util)
    qtbot.waitUntil(sampled, timeout=20_000)
    qtbot.waitUntil(lambda: "2 devices on 2 nodes" in window.telemetry_label.text(), timeout=5_000)
    with qtbot.waitSignal(window.sigRunFinished, timeout=30_000) as finished:
        qtbot.keyClick(window, QtCore.Qt.Key.Key_Escape)
    assert finished.args[0].status == "stopped"
    assert [n.label for n in finished.args[0].summary.nodes] == ["node0", "node1"]
    assert "node1 " in "\n".join(window.plots.findings.texts())  # from the run's summary now
