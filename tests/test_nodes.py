"""Runs over several machines: namespace "nodes" on this one, each with its agent (tests/netns.py).

What the issue asks of them: the same training as one machine, every rank on one
clock, a node that dies or drops off the network ending the run with its name and
no rank left anywhere, and agents that serve only who proves the token from where
they are told.
"""
from __future__ import annotations

import json
import re
import socket
import subprocess
import time

import pytest

from engine.store import Store
from helpers import ROOT, cli, end_torchrun, small_mlp, start_cli, start_torchrun
from netns import AGENT_PORT, Agent, node_processes

TOLERANCE = 1e-4


def node_run(cluster, *args: str) -> list[str]:
    return ["run", "--nodes", cluster.nodes_option(), "--token-file", str(cluster.token_file), "--devices", "cpu:1",
            *args]


def start(*args: str) -> subprocess.Popen:
    return start_cli(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_steps(db, at_least: int, proc: subprocess.Popen, timeout: float = 120) -> str:
    """The running run's id once it stored ``at_least`` steps."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        with Store(db) as store:
            runs = store.list_runs()
            if runs and store.step_count(runs[0].id) >= at_least:
                return runs[0].id
        time.sleep(0.2)
    raise AssertionError(f"fewer than {at_least} steps after {timeout} s")


def logged(agent, text: str, timeout: float = 15) -> bool:
    """Whether the agent's log says ``text`` within ``timeout`` (it writes once its run's processes are gone)."""
    deadline = time.monotonic() + timeout
    while text not in agent.log():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def wait_for_no_ranks(timeout: float) -> list:
    deadline = time.monotonic() + timeout
    while (left := node_processes()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


# Every kind of communication a strategy spans processes with, over two nodes and on one machine: ddp's
# all-reduce, fsdp's all-gather and reduce-scatter, and a staged model's sends and receives (the pipeline;
# model-parallel is one, its schedule with one micro-batch). The pipeline takes a model file (it travels with
# the run because the user named it) and records a profiled step on each rank (its traces travel back).
ACROSS = {
    "ddp": ("--strategy", "ddp"),
    "pipeline": ("--strategy", "pipeline", "--micro-batches", "4", "--profile-steps", "1",
                 "--model-file", str(ROOT / "examples" / "tiny_transformer.py"), "--split", "layers.2",
                 "--batch-size", "16", "--steps", "4", "--warmup", "1", "--json"),
    "fsdp": ("--strategy", "fsdp", "--optimizer", "adamw"),
}


def test_strategies_over_two_nodes_train_as_one_machine_on_one_clock(node_cluster, fresh_store):
    def options(name):
        given = ACROSS[name]
        return given if "--model-file" in given else (*given, *small_mlp("--steps", "6", "--json"))
    here = {name: start("run", "--devices", "cpu:2", *options(name)) for name in ACROSS}
    try:
        over = {name: cli(*node_run(node_cluster, *options(name)), timeout=180, check_json=True)[1] for name in ACROSS}
        alone = {}
        for name, proc in here.items():
            out, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, err
            alone[name] = json.loads(out)
    finally:
        for proc in here.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for name in ACROSS:
        nodes, one = over[name], alone[name]
        assert nodes["devices"] == ["node0/cpu:0", "node1/cpu:0"], name
        for key in ("param_norm", "param_change"):
            assert nodes[key] == pytest.approx(one[key], rel=TOLERANCE, abs=TOLERANCE), (name, key)
        assert nodes["loss"]["last"] == pytest.approx(one["loss"]["last"], rel=TOLERANCE), name
        # node1's clock runs 1000 s ahead (its time namespace): measured, stored, and taken off its times.
        offsets = [n["clock_offset_s"] for n in nodes["nodes"]]
        assert offsets[0] == pytest.approx(0.0, abs=0.05) and offsets[1] == pytest.approx(1000.0, abs=0.05)
        assert [n["ranks"] for n in nodes["nodes"]] == [[0], [1]]
        with Store(fresh_store) as store:
            steps = {s.step: s for s in store.steps(nodes["run_id"])}
            rows = store.timeline(nodes["run_id"])
            stored = store.get_run(nodes["run_id"]).summary
            profiles = store.profiles(nodes["run_id"])
        assert stored.nodes[1].clock_offset_s == pytest.approx(1000.0, abs=0.05)
        assert {device for _, device, *_ in rows} == {"node0/cpu:0", "node1/cpu:0"}, name
        for step, device, kind, t0, t1 in rows:
            # Every interval inside its own step: one clock for both nodes (node1's reads 1000 s ahead). A
            # second of slack for the step's bounds, which load moves (a loaded clean-clone run once put an
            # fsdp forward 155 ms before its step's start as rank 0's step time and the merged end place it).
            end = steps[step].t
            assert end - steps[step].time_s - 1.0 <= t0 <= t1 <= end + 1.0, (name, step, device, kind, t0, t1, end)
        if "--profile-steps" in ACROSS[name]:
            assert sorted((rank, device) for rank, device, _, _ in profiles) == [(0, "node0/cpu:0"),
                                                                                 (1, "node1/cpu:0")]
            last = max(s.t for s in steps.values())
            assert all(0 < t0 < last for _, _, t0, _ in profiles)  # the profiled step, on the run's clock


DDP_EXAMPLE = ROOT / "examples" / "ddp_train.py"


def test_a_watched_script_travels_to_nodes_that_allow_scripts_and_trains_as_under_torchrun(node_cluster,
                                                                                           fresh_store, tmp_path):
    """`watch --nodes`: the DDP example, its text sent with the run to agents started with --allow-scripts, a rank
    on each node, trains to torchrun's final loss on one machine, with every kind timed on both devices on one
    clock; an agent without --allow-scripts is named before anything starts."""
    args = ["--steps", "4", "--decode-ms", "0.3", "--batch-size", "32"]
    plain = start_torchrun(DDP_EXAMPLE, *args, log_dir=tmp_path / "torchrun")
    try:
        watched = cli("watch", "--json", "--nodes", node_cluster.nodes_option(), "--token-file",
                      str(node_cluster.token_file), "--devices", "cpu:1", "--", str(DDP_EXAMPLE), *args, timeout=180)
        out, err = plain.communicate(timeout=180)
    finally:
        end_torchrun(plain)
    assert plain.returncode == 0, err[-3000:]
    assert watched.returncode == 0, watched.stderr[-3000:]
    loss = re.compile(r"final loss (\S+)")
    assert loss.search(watched.stderr).group(1) == loss.search(out).group(1)   # rank 0's print, from node0
    summary = json.loads(watched.stdout.strip().splitlines()[-1])
    assert summary["devices"] == ["node0/cpu:0", "node1/cpu:0"] and summary["strategy"] == "script"
    assert [n["clock_offset_s"] for n in summary["nodes"]] == [pytest.approx(0.0, abs=0.05),
                                                               pytest.approx(1000.0, abs=0.05)]
    for device in summary["time_by_kind"]:
        assert {"forward", "backward", "communication", "optimizer", "data"} <= set(device["by_kind"]), device
    with Store(fresh_store) as store:
        (record,) = store.list_runs()
        steps = {s.step: s for s in store.steps(record.id)}
        rows = store.timeline(record.id)
    assert record.config.script == str(DDP_EXAMPLE) and len(steps) == 4   # the path here: the nodes' is temporary
    for step, device, kind, t0, t1 in rows:   # node1's times on this machine's clock (see the test above)
        assert steps[step].t - steps[step].time_s - 1.0 <= t0 <= t1 <= steps[step].t + 1.0, (step, device, kind)

    port = AGENT_PORT + 2   # an agent as started by default, beside node0's usual one
    plain_agent = Agent(node_cluster, 0, ["--listen", f"{node_cluster.address(0)}:{port}", "--token-file",
                                          str(node_cluster.token_file)], 0.0).start()
    try:
        refused = cli("watch", "--nodes", f"{node_cluster.address(0)}:{port},{node_cluster.address(1)}:{AGENT_PORT}",
                      "--token-file", str(node_cluster.token_file), "--devices", "cpu:1", "--", str(DDP_EXAMPLE))
    finally:
        plain_agent.stop()
    assert refused.returncode == 2, refused.stderr
    assert f"--nodes: node0 ({node_cluster.address(0)}:{port}): its agent runs no scripts" in refused.stderr
    assert "node1" not in refused.stderr and "runs no scripts" in plain_agent.log()
    assert "torchrun" not in plain_agent.log()   # nothing started there
    with Store(fresh_store) as store:
        assert len(store.list_runs()) == 1


def listening(namespace: str) -> set[str]:
    """Local addresses of the listening TCP sockets in a namespace."""
    out = subprocess.run(["ip", "netns", "exec", namespace, "ss", "-Hltn"], capture_output=True, text=True).stdout
    return {line.split()[3].rsplit(":", 1)[0].strip("[]") for line in out.splitlines() if line.strip()}


def test_a_node_whose_agent_is_killed_ends_the_run_naming_it_and_leaves_no_rank(node_cluster, fresh_store):
    proc = start(*node_run(node_cluster, "--strategy", "ddp", "--hang-timeout", "60",
                           *small_mlp("--steps", "1000000", "--json")))
    try:
        run_id = wait_for_steps(fresh_store, 5, proc)
        token = node_cluster.token_file.read_text().strip()
        for p in node_processes(""):  # the agents, torchrun and the ranks: no token in sight
            assert token not in " ".join(p.cmdline()) and token not in json.dumps(p.environ())
        for k in range(2):  # the agent, the rendezvous store and gloo listen on the node's address alone
            assert listening(node_cluster.namespace(k)) <= {node_cluster.address(k)}, k
        assert node_processes(), "the ranks run under the agents"
        node_cluster.agents[1].kill()
        killed = time.monotonic()
        out, err = proc.communicate(timeout=60)
        ended_after = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        node_cluster.restart(1)
    assert proc.returncode == 1 and ended_after < 30, (ended_after, err)
    assert "node1 (" in err and "rank 1" in err and "lost" in err, err
    assert not wait_for_no_ranks(10), "a rank outlived the run"
    with Store(fresh_store) as store:
        run = store.get_run(run_id)
        assert run.status == "failed" and store.step_count(run_id) >= 5
        assert "node1" in run.error


def test_a_node_cut_off_the_network_ends_the_run_within_the_hang_timeout(node_cluster, fresh_store):
    hang_timeout = 12
    proc = start(*node_run(node_cluster, "--strategy", "ddp", "--hang-timeout", str(hang_timeout),
                           *small_mlp("--steps", "1000000", "--json")))
    try:
        run_id = wait_for_steps(fresh_store, 5, proc)
        node_cluster.link(1, up=False)
        cut = time.monotonic()
        out, err = proc.communicate(timeout=60)
        ended_after = time.monotonic() - cut
        assert proc.returncode == 1 and ended_after <= hang_timeout, (ended_after, err)
        assert "node1 (" in err and "silent" in err, err
        # node1 cannot be told to stop: its agent hears nothing from the coordinator either, and ends them.
        assert not wait_for_no_ranks(hang_timeout + 10), "a rank on the cut-off node outlived the run"
        assert logged(node_cluster.agents[1], "silent")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        node_cluster.link(1, up=True)
    with Store(fresh_store) as store:
        assert store.get_run(run_id).status == "failed" and store.step_count(run_id) >= 5


def test_a_coordinator_that_dies_has_the_agents_end_their_ranks(node_cluster, fresh_store):
    proc = start(*node_run(node_cluster, "--strategy", "ddp", *small_mlp("--steps", "1000000", "--json")))
    try:
        wait_for_steps(fresh_store, 3, proc)
        import psutil
        (worker,) = [p for p in psutil.Process(proc.pid).children() if "engine.run.worker" in " ".join(p.cmdline())]
        worker.kill()  # the coordinator's connections die with it
        killed = time.monotonic()
        assert not wait_for_no_ranks(15), "the agents kept their ranks after the coordinator died"
        assert time.monotonic() - killed < 15
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1
    for agent in node_cluster.agents:
        assert logged(agent, "ended: the coordinator is gone")


def test_agents_refuse_a_wrong_token_and_addresses_they_do_not_serve(node_cluster, tmp_path):
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-the-token-of-these-nodes\n")
    wrong.chmod(0o600)
    refused = cli("run", "--nodes", node_cluster.nodes_option(), "--token-file", str(wrong), "--devices", "cpu:1",
                  "--strategy", "ddp", *small_mlp())
    assert refused.returncode == 2, refused.stderr
    assert "--nodes: node0" in refused.stderr and "did not prove the shared token" in refused.stderr
    assert logged(node_cluster.agents[0], "refused a connection from")

    # An agent told to serve the coordinator's address alone, on node0 beside its usual agent.
    port = AGENT_PORT + 1
    picky = Agent(node_cluster, 0, ["--listen", f"{node_cluster.address(0)}:{port}", "--token-file",
                                    str(node_cluster.token_file), "--allow", f"{node_cluster.coordinator}/32"],
                  0.0).start()
    try:
        with socket.create_connection((node_cluster.address(0), port), timeout=10,
                                      source_address=(node_cluster.stranger, 0)) as sock:
            answer = json.loads(sock.makefile().readline())
        assert answer["type"] == "refused" and "not an address this agent serves" in answer["reason"]
        from engine.config import ExperimentConfig
        from engine.nodes.coordinator import preflight
        config = ExperimentConfig(strategy="ddp", devices="cpu:1", token_file=str(node_cluster.token_file),
                                  nodes=f"{node_cluster.address(0)}:{port},{node_cluster.address(1)}:{AGENT_PORT}")
        assert preflight(config) == []  # from the address it serves, with the token: welcome
    finally:
        picky.stop()
    assert logged(picky, "not an address this agent serves")


def test_an_agent_refuses_a_token_file_others_may_read(tmp_path):
    loose = tmp_path / "token"
    loose.write_text("a-token-that-is-long-enough\n")
    loose.chmod(0o644)
    proc = cli("node", "--listen", "127.0.0.1:29999", "--token-file", str(loose))
    assert proc.returncode == 2 and "chmod 600" in proc.stderr, proc.stderr
