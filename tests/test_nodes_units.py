"""The node agents' parts that need no second machine: the handshake and its MACs, the clock offset, addresses
and their order, the token file, the devices of a run over nodes, and what --nodes refuses before launching."""
from __future__ import annotations

import dataclasses
import json
import os
import socket
import threading

import pytest

from engine.config import ExperimentConfig
from engine.devices import DeviceError
from engine.nodes import connection
from engine.nodes.address import AddressError, allowed, parse_address, parse_networks, parse_nodes
from engine.nodes.clock import ClockOffset, estimate, shift_rank_event
from engine.nodes.cluster import cluster_devices, node_devices
from engine.nodes.token import TokenError, new_token, read_token
from engine.rules import problems
from engine.wire import nodes as messages

pytestmark = pytest.mark.quick   # launches no training, opens no window: `make test-quick`

TOKEN = b"a-shared-token-of-enough-length"


def handshake(agent_token: bytes, coordinator_token: bytes):
    """Both sides of a handshake over a socket pair: (agent's channel or error, coordinator's or error)."""
    a, c = socket.socketpair()
    result = {}

    def agent():
        try:
            result["agent"] = connection.handshake_agent(a, agent_token)
        except connection.WireError as exc:
            result["agent"] = exc
    thread = threading.Thread(target=agent)
    thread.start()
    try:
        coordinator = connection.handshake_coordinator(c, coordinator_token)
    except connection.WireError as exc:
        coordinator = exc
    thread.join(10)
    return result["agent"], coordinator


def test_both_sides_prove_the_token_and_every_later_line_is_checked():
    agent, coordinator = handshake(TOKEN, TOKEN)
    coordinator.send({"type": "ping", "id": 1})
    assert agent.receive() == {"type": "ping", "id": 1}
    agent.send({"type": "pong", "id": 1})
    assert coordinator.receive()["type"] == "pong"
    # A line written past the MAC (injected on the way) ends the connection.
    coordinator.sock.sendall(b"0" * connection.TAG_HEX + b' {"type":"launch"}\n')
    with pytest.raises(connection.WireError, match="authentication"):
        agent.receive()
    agent.close()
    coordinator.close()


def test_a_replayed_line_fails_its_check():
    agent, coordinator = handshake(TOKEN, TOKEN)
    sent = []
    original = coordinator._write_locked
    coordinator._write_locked = lambda data: (sent.append(data), original(data))
    coordinator.send({"type": "stop"})
    assert agent.receive() == {"type": "stop"}
    original(sent[0])  # the same bytes again: its sequence number is spent
    with pytest.raises(connection.WireError):
        agent.receive()


def test_a_wrong_token_is_refused_by_either_side():
    agent, coordinator = handshake(TOKEN, b"another-token-of-enough-length")
    assert isinstance(agent, connection.WireError) and isinstance(coordinator, connection.WireError)
    assert "did not prove the shared token" in str(coordinator)


def test_the_clock_offset_comes_from_the_quickest_round_trip():
    # The node's clock runs 100 s ahead; the slow trips' answers would mislead by their delay.
    trips = [(0.0, 100.4, 1.0), (2.0, 102.0105, 2.02), (3.0, 103.9, 3.5)]
    clock = estimate(trips)
    assert clock.offset_s == pytest.approx(100.0005) and clock.rtt_s == pytest.approx(0.02)
    event = {"type": "rank_step", "time": 110.0, "start": 108.0, "end": 109.5,
             "intervals": {"node1/cpu:0": [["forward", 108.0, 108.5], ["backward", 108.5, 109.5, "0B0"]]}}
    shifted = shift_rank_event(event, ClockOffset(100.0, 0.0))
    assert (shifted["time"], shifted["start"], shifted["end"]) == (10.0, 8.0, 9.5)
    assert shifted["intervals"]["node1/cpu:0"] == [["forward", 8.0, 8.5], ["backward", 8.5, 9.5, "0B0"]]


def test_nodes_are_addresses_in_the_order_torchrun_numbers_them():
    nodes = parse_nodes("10.0.0.2:29400, 10.0.0.10:29401")
    # torchrun's c10d rendezvous sorts nodes by their address text: "10.0.0.10" before "10.0.0.2".
    assert [str(n) for n in nodes] == ["10.0.0.10:29401", "10.0.0.2:29400"]
    assert str(parse_address("[fe80::1]:7")) == "[fe80::1]:7" and parse_address("10.0.0.1").port == 29400
    for bad, why in (("host.example:1", "IP address"), ("10.0.0.1:70000", "port"), ("10.0.0.1:1", "at least two"),
                     ("10.0.0.1:1,10.0.0.1:2", "share an address")):
        with pytest.raises(AddressError, match=why):
            parse_nodes(bad)
    networks = parse_networks("10.0.0.1, 10.1.0.0/16")
    assert allowed("10.0.0.1", networks) and allowed("10.1.2.3", networks) and not allowed("10.0.0.2", networks)


def test_either_side_gives_the_other_up_within_half_the_hang_timeout():
    from engine.nodes.coordinator import silence_limit
    assert silence_limit(120) == 10 and silence_limit(12) == 6 and silence_limit(1) == 3  # at least 3 pings
    import ipaddress

    from engine.nodes.address import network_of
    assert network_of("127.0.0.1") == ipaddress.ip_network("127.0.0.0/8")
    assert network_of("::1") in (None, ipaddress.ip_network("::1/128"))  # IPv6 masks become a prefix


def test_a_token_file_must_be_private_and_long_enough(tmp_path):
    path = new_token(tmp_path / "dir" / "token")
    assert len(read_token(path)) == 64 and (path.stat().st_mode & 0o777) == 0o600
    assert (path.parent.stat().st_mode & 0o777) == 0o700   # the folder it made for it: private too
    with pytest.raises(FileExistsError):
        new_token(path)  # never overwritten
    path.chmod(0o640)
    with pytest.raises(TokenError) as refused:
        read_token(path)
    assert str(refused.value) == (f"the token file {path} may be read or changed by other users (mode 0640); "
                                  f"allow only its owner: chmod 600 {path}")
    path.chmod(0o602)   # written by others is refused too: they could put in a token of their own
    with pytest.raises(TokenError, match="mode 0602"):
        read_token(path)
    path.chmod(0o600)
    short = tmp_path / "short"
    short.write_text("abc")
    short.chmod(0o600)
    with pytest.raises(TokenError, match="too short"):
        read_token(short)
    with pytest.raises(TokenError, match="--new-token"):
        read_token(tmp_path / "missing")
    fifo = tmp_path / "fifo"   # a pipe nobody writes: refused at once, not waited on
    os.mkfifo(fifo, 0o600)
    with pytest.raises(TokenError, match="not a regular file"):
        read_token(fifo)
    # The run options' help names the same default the agents read (engine/config.py imports no node code).
    from engine.nodes.token import DEFAULT_TEXT
    from engine.run_options import options
    assert DEFAULT_TEXT in next(o.help for o in options() if o.name == "token_file")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_token_file_of_another_user_is_refused(tmp_path):
    """Its owner may read it, or change it (to a token of theirs), whatever its mode: as ssh refuses such a key.
    Run as root (these machines, CI), which could read it anyway."""
    path = new_token(tmp_path / "token")
    os.chown(path, 65534, -1)   # nobody's
    with pytest.raises(TokenError, match=r"belongs to .*uid 65534.*, not to you \(uid 0\); .*chmod 600 NEW"):
        read_token(path)


def node_info(gpus: int, cores: list[int]) -> messages.Info:
    return messages.Info(protocol=1, hostname="h", address="10.0.0.1:1", interface="eth0", cores=cores, gpus=gpus,
                         torch="2.14.1", python="3.11", pid=1, time=0.0)


def test_node_messages_are_typed_and_a_garbled_one_is_refused():
    """What the coordinator and an agent say after the handshake: each message its dataclass, round-tripped
    through the JSON the wire carries; a known type with a field missing or of another type is refused
    naming it, an unknown type (a newer peer's) is ignored."""
    launch = messages.Launch(run_id="r", config={"devices": "cpu:2"}, devices=[{"name": "node0/cpu:0"}],
                             node_rank=1, nnodes=2, nproc=1, model_file=messages.SourceFile("m.py", "x = 1"),
                             telemetry_hz=10, silence_s=5.0)
    for message in (launch, messages.Ping(3), messages.Stop(), node_info(0, [0, 1]), messages.Ended([12]),
                    messages.TorchrunExit(1, failures={"0": 1}, error="boom", output=["a"], stopping=False),
                    messages.RankEvent(0, {"type": "done", "time": 1.0})):
        assert messages.decode(json.loads(json.dumps(messages.encode(message)))) == message
    assert isinstance(messages.decode({"type": "launch", **messages.encode(launch)}).telemetry_hz, float)
    assert messages.decode({"type": "from_the_future", "x": 1}) is None
    with pytest.raises(messages.MessageError, match="a pong message without time"):
        messages.decode({"type": "pong", "id": 1})
    with pytest.raises(messages.MessageError, match="rank_hello's pid is not int"):
        messages.decode({"type": "rank_hello", "rank": 0, "local_rank": 0, "pid": "12"})
    with pytest.raises(messages.MessageError, match="launch's model_file without text"):
        messages.decode(dict(messages.encode(launch), model_file={"name": "m.py"}))
    with pytest.raises(messages.MessageError, match=r"info's cores is not list\[int\]"):
        messages.decode(dict(messages.encode(node_info(0, [0])), cores=[0, "1"]))


def test_every_node_runs_the_devices_named_by_node():
    nodes = parse_nodes("10.0.0.1:1,10.0.0.2:1")
    devices = cluster_devices("cpu:2", nodes, [node_info(0, [4, 5]), node_info(0, [0, 1])])
    assert [d.name for d in devices] == ["node0/cpu:0", "node0/cpu:1", "node1/cpu:0", "node1/cpu:1"]
    assert [(d.node, d.index, d.core) for d in devices] == [("node0", 0, 4), ("node0", 1, 5), ("node1", 0, 0),
                                                             ("node1", 1, 1)]
    assert devices[2].local_name == "cpu:0" and devices[2].to_dict()["node"] == "node1"
    with pytest.raises(DeviceError, match="node1: 'cuda:1' does not exist"):
        node_devices("node1", "cuda:0,cuda:1", node_info(1, [0]))


def test_nodes_options_are_checked_before_anything_launches(tmp_path):
    token = tmp_path / "token"
    token.write_text("x" * 32)
    token.chmod(0o600)
    nodes = "10.0.0.1:29400,10.0.0.2:29400"
    ok = ExperimentConfig(strategy="ddp", devices="cpu:1", nodes=nodes, token_file=str(token))
    assert problems(ok) == []
    found = {p.option: p.message for p in problems(ok.replace(devices="auto", nodes="10.0.0.1:1",
                                                              token_file=str(tmp_path / "none")))}
    assert set(found) == {"nodes", "devices", "token_file"}
    assert "cpu:N or cuda:0,cuda:1" in found["devices"] and "at least two" in found["nodes"]
    assert {p.option for p in problems(ExperimentConfig(token_file=str(token)))} == {"token_file"}
    from engine.run.validate import check
    refused = check(ok.replace(strategy="data-parallel"))
    assert [p.option for p in refused] == ["strategy"] and "cannot span nodes" in refused[0].message
    assert "ddp" in refused[0].message and "fsdp" in refused[0].message
    assert check(ok.replace(strategy="pipeline")) == []


def test_the_node_command_writes_a_token_once_and_names_each_bad_option(tmp_path):
    from helpers import cli
    path = tmp_path / "token"
    made = cli("node", "--new-token", str(path))
    assert made.returncode == 0 and made.stdout.strip() == str(path) and (path.stat().st_mode & 0o777) == 0o600
    again = cli("node", "--new-token", str(path))
    assert again.returncode == 2 and "never overwritten" in again.stderr
    bad = cli("node", "--listen", "somehost:29400", "--token-file", str(path), "--allow", "everyone")
    assert bad.returncode == 2
    assert "--listen:" in bad.stderr and "IP address" in bad.stderr and "--allow: 'everyone'" in bad.stderr
    elsewhere = cli("node", "--listen", "203.0.113.9:29400", "--token-file", str(path))
    assert elsewhere.returncode == 2 and "no interface of this machine has the address" in elsewhere.stderr


def test_a_node_nobody_serves_is_named_before_anything_launches(tmp_path):
    from engine.nodes.coordinator import preflight
    token = tmp_path / "token"
    token.write_text("x" * 32)
    token.chmod(0o600)
    with socket.socket() as free:  # a port nobody listens on
        free.bind(("127.0.0.2", 0))
        port = free.getsockname()[1]
    found = preflight(ExperimentConfig(strategy="ddp", devices="cpu:1", token_file=str(token),
                                       nodes=f"127.0.0.2:{port},127.0.0.3:{port}"))
    assert [p.option for p in found] == ["nodes"]
    assert f"node0 (127.0.0.2:{port}): cannot connect" in found[0].message and "main.py node" in found[0].message
    # the app starts the worker without asking first: the worker says the same, and the run fails with it
    from engine.run.session import RunSession
    session = RunSession(ExperimentConfig(strategy="ddp", devices="cpu:1", token_file=str(token),
                                          nodes=f"127.0.0.2:{port},127.0.0.3:{port}"),
                         db_path=str(tmp_path / "runs.db"))
    session.start()
    result = session.wait(60)
    # its own words, not the worker's crash ("the worker exited with status 1; last output: ...NodeError: ...")
    assert result.status == "failed" and result.error.startswith(f"node0 (127.0.0.2:{port}): cannot connect"), result


def test_experiments_say_they_run_on_this_machine():
    from engine.experiments import ExperimentRunner
    from helpers import cli
    with pytest.raises(ValueError, match="experiments run on this machine; --nodes"):
        ExperimentRunner("schedules", ExperimentConfig(devices="cpu:1", nodes="10.0.0.1:1,10.0.0.2:1"))
    refused = cli("experiment", "schedules", "--nodes", "10.0.0.1:1,10.0.0.2:1")
    assert refused.returncode == 2 and "--nodes" in refused.stderr


def test_an_agent_without_allow_scripts_refuses_a_launch_that_carries_a_script():
    """The coordinator asks first (preflight), but the agent is what keeps a script off its machine: a launch
    carrying one is refused unless the agent was started with --allow-scripts, and nothing is started."""
    from engine.nodes.agent import CoordinatorSession, NodeAgent

    class Recorded:
        def __init__(self):
            self.lines = []

        def send(self, line):
            self.lines.append(line)
    launch = messages.Launch(run_id="r", config={"strategy": "script", "devices": "cpu:1"},
                             devices=[{"name": "node0/cpu:0"}], node_rank=0, nnodes=1, nproc=1,
                             script=messages.SourceFile("train.py", "import os; os.system('touch /tmp/x')"))
    agent = NodeAgent(parse_address("127.0.0.1:29400"), TOKEN)   # never bound: nothing listens
    assert not agent.allow_scripts
    channel = Recorded()
    session = CoordinatorSession(agent, channel, "127.0.0.1")
    session._launch(launch)
    session._launch(dataclasses.replace(launch, script=None))   # a script's run all the same: refused alike
    replies = [messages.decode(line) for line in channel.lines]
    assert len(replies) == 2 and all(isinstance(reply, messages.Failed) and "start it with --allow-scripts" in
                                     reply.message for reply in replies)
    assert session.node_run is None
    assert messages.decode(json.loads(json.dumps(messages.encode(launch)))) == launch   # it travels whole
