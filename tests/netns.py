"""Several "machines" on this one, for the node agents' tests: network namespaces joined by a bridge.

Each node is a network namespace with one interface (``eth0``, a veth whose
other end hangs on a bridge in this namespace), an address in a private /24 and
no route beyond it; the tests' coordinator speaks from the bridge's address. The
namespaces, the bridge and every agent are made here and removed at the end:
nothing is sent outside them. Needs root (CI and these machines run as root) and
iproute2. Each node's agent is pinned to its own core (``taskset``), so its CPU
virtual devices are that core, as a machine's would be its own.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from procs import ROOT, TAG

# Agents outlive single tests (they are a session's machines): their processes, and the ranks they start,
# carry a tag of their own, which the per-test leftover check does not look for; `node_processes` does.
NODE_TAG = f"{TAG}-nodes"
AGENT_PORT = 29400


def available() -> str | None:
    """Why namespace nodes cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "taskset", "unshare"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


def free_subnet(second: int, third: int) -> str:
    """10.second.third, or the next third octet no interface of this machine has an address in: a bridge a killed
    run left behind keeps its subnet, and a new one with the same would send the coordinator's connections there."""
    taken = _ip("-br", "addr").stdout
    for step in range(250):
        subnet = f"10.{second}.{(third + step) % 250}"
        if f" {subnet}." not in taken:
            return subnet
    raise RuntimeError(f"no free 10.{second}.x subnet for the test nodes")


def _ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    cmd = (["ip", "netns", "exec", ns, "ip"] if ns else ["ip"]) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def node_processes(what: str = "engine.run.rank") -> list[psutil.Process]:
    """Live processes of the node tag whose command line holds ``what`` (ranks by default), in any namespace."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("SPLITSCOPE_TEST_TAG") == NODE_TAG and what in " ".join(proc.cmdline()):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


class Agent:
    def __init__(self, cluster: Cluster, index: int, args: list[str], clock_offset_s: float):
        self.cluster, self.index, self.args, self.clock_offset_s = cluster, index, args, clock_offset_s
        self.proc: subprocess.Popen | None = None
        self.log_path = cluster.dir / f"agent{index}-{time.monotonic_ns()}.log"

    def start(self) -> Agent:
        ns = self.cluster.namespace(self.index)
        core = self.cluster.cores[self.index % len(self.cluster.cores)]
        prefix = ["ip", "netns", "exec", ns]
        if self.clock_offset_s:  # a machine whose clock reads differently: a time namespace of its own
            prefix += ["unshare", "--time", "--fork", f"--monotonic={self.clock_offset_s:g}"]
        command = prefix + ["taskset", "-c", str(core), sys.executable, str(ROOT / "main.py"), "node", *self.args]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                         env=dict(os.environ, SPLITSCOPE_TEST_TAG=NODE_TAG), start_new_session=True)
        deadline = time.monotonic() + 60
        while "listening" not in self.log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the agent of node {self.index} did not start:\n{self.log()}")
            time.sleep(0.1)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def python(self) -> psutil.Process:
        """The agent's own interpreter (under ip netns exec, unshare and taskset)."""
        proc = psutil.Process(self.proc.pid)
        for candidate in [proc] + proc.children(recursive=True):
            command = candidate.cmdline()
            if command and "python" in os.path.basename(command[0]) and "main.py" in " ".join(command):
                return candidate
        raise RuntimeError("no agent interpreter")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.python().send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class Cluster:
    """``n`` namespace nodes with their agents; ``close()`` removes every trace."""

    def __init__(self, n: int, directory: Path, clock_offsets: list[float], agent_options: tuple[str, ...] = ()):
        self.n = n
        self.agent_options = agent_options   # given to every agent (``--allow-scripts``)
        self.id = f"{os.getpid() % 100000}"
        # Under pytest-xdist each worker that needs nodes makes its own: a second octet per worker keeps their
        # subnets apart whatever their pids.
        worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0)
        self.subnet = free_subnet(231 + worker % 20, os.getpid() % 250)
        self.bridge = f"ssb{self.id}"
        self.dir = directory
        self.cores = sorted(os.sched_getaffinity(0))
        self.token_file = directory / "token"
        self.token_file.write_text("splitscope-test-token-" + os.urandom(16).hex() + "\n")
        self.token_file.chmod(0o600)
        self.clock_offsets = clock_offsets
        self.agents: list[Agent] = []

    # ---- addresses -------------------------------------------------------------------------------------
    @property
    def coordinator(self) -> str:
        return f"{self.subnet}.1"

    @property
    def stranger(self) -> str:
        """A second address of the coordinator's side, which an agent can be told not to serve."""
        return f"{self.subnet}.2"

    def address(self, index: int) -> str:
        return f"{self.subnet}.{11 + index}"

    def namespace(self, index: int) -> str:
        return f"ss{self.id}n{index}"

    def nodes_option(self, port: int = AGENT_PORT) -> str:
        return ",".join(f"{self.address(k)}:{port}" for k in range(self.n))

    # ---- making and removing ---------------------------------------------------------------------------
    def make(self) -> Cluster:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.coordinator}/24", "dev", self.bridge)
        _ip("addr", "add", f"{self.stranger}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for k in range(self.n):
            ns, veth = self.namespace(k), f"ssv{self.id}n{k}"
            subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True)
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", veth, "master", self.bridge)
            _ip("link", "set", veth, "up")
            _ip("link", "set", "lo", "up", ns=ns)
            _ip("addr", "add", f"{self.address(k)}/24", "dev", "eth0", ns=ns)
            _ip("link", "set", "eth0", "up", ns=ns)
        for k in range(self.n):
            self.agents.append(Agent(self, k, ["--listen", f"{self.address(k)}:{AGENT_PORT}",
                                              "--token-file", str(self.token_file), *self.agent_options],
                                     self.clock_offsets[k] if k < len(self.clock_offsets) else 0.0).start())
        return self

    def link(self, index: int, up: bool) -> None:
        """Cut (or mend) node ``index``'s network: its interface down, as a pulled cable."""
        _ip("link", "set", "eth0", "up" if up else "down", ns=self.namespace(index))

    def restart(self, index: int) -> None:
        agent = self.agents[index]
        agent.stop()
        self.agents[index] = Agent(self, index, agent.args, agent.clock_offset_s).start()

    def close(self) -> None:
        for agent in self.agents:
            try:
                agent.stop()
            except (OSError, psutil.Error):
                pass
        for proc in node_processes(""):
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        for k in range(self.n):
            subprocess.run(["ip", "netns", "del", self.namespace(k)], capture_output=True)
        _ip("link", "del", self.bridge, check=False)
